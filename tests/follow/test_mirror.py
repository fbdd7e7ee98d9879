"""MetadataMirror on its own: layout, resume after a torn tail, snapshots past the end, retention."""

from __future__ import annotations

from pathlib import Path

from kraftlake.follow.mirror import MetadataMirror, MirrorRetention
from kraftlake.follow.observer import FetchedBatch, split_batches
from kraftlake.logformat import (
    ControlRecordType,
    build_control_batch,
    build_data_batch,
    read_leader_epoch_checkpoint,
)
from kraftlake.logformat.checkpoint_file import LEADER_EPOCH_CHECKPOINT_FILE
from kraftlake.logformat.properties import read_meta_properties
from kraftlake.protocol.control import encode_control_body


def batches(first: int, count: int, epoch: int, size: int = 1) -> list[FetchedBatch]:
    data = b"".join(
        build_data_batch(first + i * size, epoch, 1_700_000_000_000, [b"x" * 200] * size)
        for i in range(count)
    )
    return split_batches(data, "test")


def snapshot(end: int, epoch: int) -> bytes:
    from kraftlake.protocol.messages import MESSAGE_CLASSES

    header = MESSAGE_CLASSES["SnapshotHeaderRecord"](version=0, last_contained_log_timestamp=1)
    footer = MESSAGE_CLASSES["SnapshotFooterRecord"](version=0)
    return (
        build_control_batch(0, epoch, 1, [(ControlRecordType.SNAPSHOT_HEADER, encode_control_body(header))])
        + build_data_batch(1, epoch, 1, [b"state"])
        + build_control_batch(2, epoch, 1, [(ControlRecordType.SNAPSHOT_FOOTER, encode_control_body(footer))])
    )


def test_layout_resume_and_torn_tail(tmp_path: Path) -> None:
    with MetadataMirror(tmp_path, cluster_id="c1", observer_id=2_000_000_007, fsync=False) as m:
        m.append(batches(0, 3, 1))
        m.append(batches(3, 2, 2))
        assert m.position.log_end == 5 and m.position.last_epoch == 2
    meta = read_meta_properties(tmp_path / "meta.properties")
    assert (meta.cluster_id, meta.node_id) == ("c1", 2_000_000_007) and meta.directory_id
    epochs = read_leader_epoch_checkpoint(tmp_path / "__cluster_metadata-0" / LEADER_EPOCH_CHECKPOINT_FILE)
    assert [(e.epoch, e.start_offset) for e in epochs] == [(1, 0), (2, 3)]
    seg = tmp_path / "__cluster_metadata-0" / f"{0:020d}.log"
    with open(seg, "ab") as f:
        f.write(batches(5, 1, 2)[0].data[:-7])  # a torn append
    with MetadataMirror(tmp_path, fsync=False) as m:
        assert m.recovered_bytes > 0 and m.position.log_end == 5
        assert m.observer_id == 2_000_000_007
        m.append(batches(5, 1, 2))


def test_snapshot_past_the_end_keeps_the_history(tmp_path: Path) -> None:
    with MetadataMirror(tmp_path, fsync=False) as m:
        m.append(batches(0, 2, 1))
        m.install_snapshot(50, 3, snapshot(50, 3))
        assert m.position.log_end == 50
        m.append(batches(50, 1, 3))
    names = sorted(p.name for p in (tmp_path / "__cluster_metadata-0").iterdir())
    assert (
        f"{0:020d}.log" in names and f"{50:020d}.log" in names and f"{50:020d}-{3:010d}.checkpoint" in names
    )
    with MetadataMirror(tmp_path, fsync=False) as m:
        assert m.position.log_end == 51


def test_a_fresh_mirror_starts_at_the_snapshot(tmp_path: Path) -> None:
    with MetadataMirror(tmp_path, fsync=False) as m:
        m.install_snapshot(40, 2, snapshot(40, 2))
    logs = sorted(p.name for p in (tmp_path / "__cluster_metadata-0").glob("*.log"))
    assert logs == [f"{40:020d}.log"]


def test_retention_deletes_only_below_a_snapshot(tmp_path: Path) -> None:
    keep_all = MetadataMirror(tmp_path / "all", segment_bytes=1000, fsync=False)
    bounded = MetadataMirror(
        tmp_path / "bounded", segment_bytes=1000, fsync=False, retention=MirrorRetention(max_bytes=2000)
    )
    for m in (keep_all, bounded):
        for i in range(20):
            m.append(batches(i, 1, 1))
        assert len(m.log.segments) > 3
        # no snapshot yet: nothing can go, whatever the size
        assert m.enforce_retention() == []
        m.install_snapshot(10, 1, snapshot(10, 1))
        m.install_snapshot(15, 1, snapshot(15, 1))
        for i in range(20, 30):
            m.append(batches(i, 1, 1))
    assert keep_all.log.log_start_offset == 0 and len(keep_all.snapshots()) == 2
    # the bounded one went down to the newest snapshot (15) and no further, though still above 2000 bytes: the
    # state past a snapshot needs every segment after it; the older snapshot went with its segments
    assert bounded.log.log_start_offset == 15 and bounded.log.size_bytes > 2000
    assert [s.end_offset for s in bounded.snapshots()] == [15]
    assert bounded.position.log_end == 30
    keep_all.close()
    bounded.close()
