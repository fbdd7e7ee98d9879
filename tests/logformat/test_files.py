"""Files: snapshots, quorum-state, checkpoint files, properties, the segmented log writer."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.logformat import (
    EpochEntry,
    MalformedFileError,
    MetadataLogDir,
    MetaProperties,
    QuorumStateFile,
    SegmentedLog,
    SegmentError,
    SnapshotId,
    build_data_batch,
    list_snapshots,
    parse_segment_filename,
    read_file_batches,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    read_quorum_state,
    read_snapshot,
    segment_filename,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
    write_quorum_state,
    write_snapshot,
)
from kraftlake.logformat.properties import parse_java_properties

FIXTURE = KAFKA_LOGS / "kafkademo-multi-epoch"


# ------------------------------------------------------------------------------------------------ snapshots
def test_snapshot_id_names() -> None:
    sid = SnapshotId(712, 6)
    assert sid.filename == "00000000000000000712-0000000006.checkpoint"
    assert SnapshotId.parse("/x/" + sid.filename) == sid
    assert SnapshotId.from_path("00000000000000000712-0000000006.checkpoint.part") is None
    assert SnapshotId.from_path("00000000000000000712.snapshot") is None
    with pytest.raises(MalformedFileError):
        SnapshotId.parse("712-6.checkpoint")
    assert SnapshotId(5, 9) < SnapshotId(6, 1)


def test_write_snapshot_atomically_and_list(tmp_path: Path) -> None:
    batches = [build_data_batch(0, 2, 10, [b"a", b"b"]), build_data_batch(2, 2, 10, [b"c"])]
    path = write_snapshot(tmp_path, SnapshotId(3, 2), batches)
    (tmp_path / "00000000000000000009-0000000002.checkpoint.part").write_bytes(b"junk")
    (tmp_path / "00000000000000000001-0000000001.checkpoint").write_bytes(b"")
    assert path.read_bytes() == b"".join(batches)
    assert [p.name for p in tmp_path.glob("*.part")] == ["00000000000000000009-0000000002.checkpoint.part"]
    assert [sid for sid, _ in list_snapshots(tmp_path)] == [SnapshotId(1, 1), SnapshotId(3, 2)]
    assert [r.value for b in read_snapshot(path) for r in b.records] == [b"a", b"b", b"c"]
    d = MetadataLogDir(tmp_path)
    latest = d.latest_snapshot()
    assert latest is not None and latest[0] == SnapshotId(3, 2)


# ------------------------------------------------------------------------------------------------ quorum-state
def test_quorum_state_v0_text_is_kafkas(tmp_path: Path) -> None:
    text = (FIXTURE / "__cluster_metadata-0" / "quorum-state").read_text()
    state = QuorumStateFile.from_json(text)
    assert state.to_json() == text
    write_quorum_state(tmp_path / "quorum-state", state)
    assert (tmp_path / "quorum-state").read_text() == text
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_quorum_state_v1_round_trip(tmp_path: Path) -> None:
    text = '{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'
    state = QuorumStateFile.from_json(text)
    assert (state.leader_id, state.leader_epoch, state.voted_id, state.voted_directory_id) == (
        -1,
        2,
        1,
        "J8aAPcfLQt2bqs1JT_rMgQ",
    )
    assert state.to_json() == text
    path = tmp_path / "quorum-state"
    assert read_quorum_state(path) is None
    write_quorum_state(path, QuorumStateFile(leader_id=3, leader_epoch=9), fsync=False)
    assert path.read_text() == (
        '{"leaderId":3,"leaderEpoch":9,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    )
    assert read_quorum_state(path) == QuorumStateFile(leader_id=3, leader_epoch=9)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nope",
        "[1]",
        '{"leaderId":1}',
        '{"data_version":2}',
        '{"data_version":1,"leaderId":"x","leaderEpoch":1,"votedId":1}',
        '{"leaderId":1,"leaderEpoch":1,"votedId":1,"data_version":0,"clusterId":"","appliedOffset":0}',
    ],
)
def test_quorum_state_malformed(text: str) -> None:
    with pytest.raises(MalformedFileError):
        QuorumStateFile.from_json(text, "qs")


# ------------------------------------------------------------------------------------------------ checkpoint files
def test_leader_epoch_checkpoint_round_trip(tmp_path: Path) -> None:
    src = FIXTURE / "__cluster_metadata-0" / "leader-epoch-checkpoint"
    entries = read_leader_epoch_checkpoint(src)
    out = tmp_path / "leader-epoch-checkpoint"
    write_leader_epoch_checkpoint(out, entries)
    assert out.read_bytes() == src.read_bytes()
    assert read_leader_epoch_checkpoint(out)[-1] == EpochEntry(6, 712)


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\n1 0\n", "0\n1\n1\n", "0\nx\n"])
def test_checkpoint_malformed(tmp_path: Path, text: str) -> None:
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_text(text)
    with pytest.raises(MalformedFileError):
        read_leader_epoch_checkpoint(p)


def test_offset_checkpoint(tmp_path: Path) -> None:
    assert read_offset_checkpoint(FIXTURE / "log-start-offset-checkpoint") == {}
    p = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(p, {("__cluster_metadata", 0): 3072})
    assert p.read_text() == "0\n1\n__cluster_metadata 0 3072\n"
    assert read_offset_checkpoint(p) == {("__cluster_metadata", 0): 3072}


# ------------------------------------------------------------------------------------------------ properties
def test_meta_properties_round_trip(tmp_path: Path) -> None:
    meta = read_meta_properties(FIXTURE / "meta.properties")
    assert meta == MetaProperties(cluster_id="hSCzevIQRUa-ojqTd_8C5w", node_id=1, version=1)
    p = tmp_path / "meta.properties"
    new = MetaProperties("c1", 3, 1, directory_id="J8aAPcfLQt2bqs1JT_rMgQ", extra=(("odd key=", "v:\u00e9"),))
    write_meta_properties(p, new)
    lines = p.read_text(encoding="latin-1").splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert lines[2:5] == ["node.id=3", "directory.id=J8aAPcfLQt2bqs1JT_rMgQ", "version=1"]
    assert read_meta_properties(p) == new


def test_java_properties_syntax() -> None:
    text = "# c\n! c\na=1\nb : 2\nc 3\nd=x\\\n   y\ne=\\u0041\\n\nf\n"
    assert parse_java_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "xy", "e": "A\n", "f": ""}


def test_partition_metadata(tmp_path: Path) -> None:
    src = FIXTURE / "__cluster_metadata-0" / "partition.metadata"
    out = tmp_path / "partition.metadata"
    write_partition_metadata(out)
    assert out.read_bytes() == src.read_bytes()
    assert read_partition_metadata(out) == (0, "AAAAAAAAAAAAAAAAAAAAAQ")
    out.write_text("version: 1\ntopic_id: x")
    with pytest.raises(MalformedFileError):
        read_partition_metadata(out)


# ------------------------------------------------------------------------------------------------ segmented log
def _batch(base: int, n: int = 2, epoch: int = 1) -> bytes:
    return build_data_batch(base, epoch, 1000 + base, [b"value-%04d" % (base + i) for i in range(n)])


def test_segment_names() -> None:
    assert segment_filename(712) == "00000000000000000712.log"
    assert parse_segment_filename("00000000000000000712.log") == 712
    assert parse_segment_filename("00000000000000000712.index") is None


def test_segmented_log_append_roll_read(tmp_path: Path) -> None:
    size = len(_batch(0))
    with SegmentedLog(tmp_path, segment_bytes=3 * size) as log:
        for base in range(0, 20, 2):
            log.append(_batch(base))
        assert log.end_offset == 20
        assert [s.base_offset for s in log.segments] == [0, 6, 12, 18]
        with pytest.raises(SegmentError):
            log.append(_batch(30))
        got = list(log.read(7))
        assert got[0].base_offset == 6 and got[-1].base_offset == 18
        assert [b.base_offset for b in log.read(7, max_bytes=2 * size)] == [6, 8]
        assert len(log.read_bytes(0, 1)) == size  # at least one batch
    assert sorted(p.name for p in tmp_path.iterdir()) == [segment_filename(b) for b in (0, 6, 12, 18)]
    d = MetadataLogDir(tmp_path)
    assert [b.base_offset for b in d.iter_batches()] == list(range(0, 20, 2))
    assert [b.base_offset for b in d.iter_batches(from_offset=13)] == [12, 14, 16, 18]


def test_segmented_log_truncate_and_delete(tmp_path: Path) -> None:
    size = len(_batch(0))
    log = SegmentedLog(tmp_path, segment_bytes=3 * size)
    for base in range(0, 20, 2):
        log.append(_batch(base))
    assert log.truncate_to(15) == 14  # the batch 14-15 holds offset 15: removed whole
    assert [s.base_offset for s in log.segments] == [0, 6, 12]
    assert log.truncate_to(12) == 12
    assert [s.base_offset for s in log.segments] == [0, 6, 12] and log.segments[-1].size == 0
    log.append(_batch(12, epoch=2))
    assert log.delete_segments_below(7) == [tmp_path / segment_filename(0)]
    assert log.log_start_offset == 6
    assert log.delete_segments_below(100) == [tmp_path / segment_filename(6)]
    assert [s.base_offset for s in log.segments] == [12]  # the active segment stays
    assert log.reset(50) == 50 and log.end_offset == 50
    log.append(_batch(50))
    log.close()
    assert [p.name for p in tmp_path.iterdir()] == [segment_filename(50)]


def test_segmented_log_recovers_torn_tail_on_open(tmp_path: Path) -> None:
    with SegmentedLog(tmp_path, fsync=True) as log:
        log.append(_batch(0))
        log.append(_batch(2))
    seg = tmp_path / segment_filename(0)
    whole = seg.read_bytes()
    seg.write_bytes(whole + _batch(4)[:-10])
    log = SegmentedLog(tmp_path)
    assert log.recovery is not None and log.recovery.truncated_bytes == len(_batch(4)) - 10
    assert seg.read_bytes() == whole and log.end_offset == 4
    log.append(_batch(4))
    log.flush()
    assert [b.base_offset for b in read_file_batches(seg)] == [0, 2, 4]
    last = log.last_batch()
    assert last is not None and last.last_offset == 5
    log.close()
