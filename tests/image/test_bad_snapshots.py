"""Snapshots Kafka would not load are skipped, never answered from; offsets outside the log are refused; replay
errors name their file and offset.

The issue's case: a ``.checkpoint`` holding only its header batch (or empty, or without a header) was loaded as
an empty image, and ``kraftlake image`` printed 0 topics where the log holds dozens, exit 0.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.cli import main
from kraftlake.errors import KraftlakeError
from kraftlake.image import EMPTY, image_at, load_path, load_snapshot, write_snapshot
from kraftlake.image.errors import ImageError, ReplayError, SkippedSnapshotWarning
from kraftlake.image.snapshot import snapshot_bytes
from kraftlake.image.source import partition_dir
from kraftlake.logformat import SnapshotFormatError, build_data_batch
from kraftlake.logformat.segment import segment_filename
from kraftlake.protocol import messages as m
from kraftlake.records import encode_metadata_record
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator
from kraftlake.sim.cluster_log import LocalMetadataLog

MULTI_EPOCH = KAFKA_LOGS / "kafkademo-multi-epoch"


@pytest.fixture(scope="module")
def sim_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated cluster's log (~58 topics) with snapshots along it, and no other file: copy before changing."""
    data = tmp_path_factory.mktemp("sim") / "data"
    log = LocalMetadataLog(data, cluster_id="bad-snapshots-0000000", snapshot_bytes=20_000)
    sim = ClusterSimulator(
        ClusterSimConfig(brokers=5, topics=50, partitions_per_topic=3, events=300, seed=16, check_every=0),
        log,
    )
    sim.after_event = lambda s: log.maybe_snapshot(s.active.committed_image)
    sim.run()
    log.close()
    return data


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return partition_dir(dst)


def _newest(d: Path) -> Path:
    return sorted(d.glob("*.checkpoint"))[-1]


def _bad(kind: str, good: bytes) -> bytes:
    # the batches of a good snapshot: header control batch first, footer control batch last
    from kraftlake.logformat import read_batches

    batches = [b.raw for b in read_batches(good)]
    return {
        "empty": b"",
        "header only": batches[0],
        "no header": b"".join(batches[1:]),
        "no footer": b"".join(batches[:-1]),
    }[kind]


@pytest.mark.parametrize("kind", ["empty", "header only", "no header", "no footer"])
def test_a_bad_newest_snapshot_is_skipped_for_an_older_one(tmp_path: Path, sim_log: Path, kind: str) -> None:
    d = _copy(sim_log, tmp_path / "data")
    snaps = sorted(d.glob("*.checkpoint"))
    assert len(snaps) >= 2
    end = image_at(d)
    truth = {n: image_at(d, n) for n in (end.offset, int(snaps[-1].name[:20]) - 1)}
    newest = snaps[-1]
    newest.write_bytes(_bad(kind, newest.read_bytes()))
    with pytest.raises(SnapshotFormatError) as info:
        load_snapshot(newest)
    assert info.value.source == str(newest)
    skipped: list[Path] = []
    for n, want in truth.items():
        got = image_at(d, n, on_skip=lambda p, e: skipped.append(p))
        assert got.state_equals(want) and got.offset == want.offset and len(got.topics_by_id) > 40
    assert skipped == [newest, newest]
    with pytest.warns(SkippedSnapshotWarning, match=newest.name):
        assert image_at(d).state_equals(end)


def test_only_bad_snapshots_fall_back_to_the_log_from_its_start(tmp_path: Path, sim_log: Path) -> None:
    d = _copy(sim_log, tmp_path / "data")
    end = image_at(d)
    for snap in d.glob("*.checkpoint"):
        snap.write_bytes(_bad("header only", snap.read_bytes()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert image_at(d).state_equals(end)
    assert len(caught) == len(list(d.glob("*.checkpoint")))


def test_kraftlake_image_prints_the_right_state_and_warns(
    tmp_path: Path, sim_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _copy(sim_log, tmp_path / "data")
    assert main(["image", str(d)]) == 0
    right = json.loads(capsys.readouterr().out)
    newest = _newest(d)
    newest.write_bytes(_bad("header only", newest.read_bytes()))
    assert main(["image", str(d)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == right and len(right["topics"]) > 40
    assert (
        err.count("\n") == 1 and f"warning: skipped snapshot {newest.name}" in err and "SnapshotFooter" in err
    )


def test_a_bad_snapshot_below_a_trimmed_log_leaves_no_answer(tmp_path: Path) -> None:
    # the log starts at 712: only a snapshot can give the state before it, and it is bad
    d = _copy(MULTI_EPOCH, tmp_path / "data")
    good = image_at(d, 711)
    snap = write_snapshot(good, d)
    assert image_at(d, 900) == image_at(MULTI_EPOCH, 900)
    log = d / segment_filename(0)
    from kraftlake.logformat import read_file_batches

    tail = b"".join(b.raw for b in read_file_batches(log) if b.base_offset >= 712)
    log.unlink()
    (d / segment_filename(712)).write_bytes(tail)
    assert image_at(d, 900) == image_at(MULTI_EPOCH, 900)
    snap.write_bytes(_bad("no footer", snap.read_bytes()))
    with (
        pytest.raises(ImageError, match=f"starts at offset 712 and no usable snapshot.*{snap.name}"),
        pytest.warns(SkippedSnapshotWarning),
    ):
        image_at(d, 900)


def test_offsets_outside_the_log_are_refused(tmp_path: Path) -> None:
    d = partition_dir(MULTI_EPOCH)
    last = image_at(d).offset
    assert image_at(d, 0).offset == 0 and image_at(d, last).offset == last
    with pytest.raises(ImageError, match="offset -1 is negative"):
        image_at(d, -1)
    with pytest.raises(ImageError, match=f"offset {last + 1} is past the end of the log .*{last}"):
        image_at(d, last + 1)
    with pytest.raises(ImageError, match="past the end of the segment"):
        load_path(d / segment_filename(0), last + 5)
    with pytest.raises(ImageError, match="negative"):
        load_path(d / segment_filename(0), -3)


def test_a_hole_between_segments_is_refused(tmp_path: Path) -> None:
    d = _copy(MULTI_EPOCH, tmp_path / "data")
    from kraftlake.logformat import read_file_batches

    batches = read_file_batches(d / segment_filename(0))
    (d / segment_filename(0)).write_bytes(b"".join(b.raw for b in batches if b.base_offset < 1000))
    (d / segment_filename(2000)).write_bytes(b"".join(b.raw for b in batches if b.base_offset >= 2000))
    assert image_at(d, 999) == image_at(MULTI_EPOCH, 999)
    with pytest.raises(ImageError, match=r"starts at offset 2000: records 1000\.\.1999 are missing"):
        image_at(d, 2500)
    # a lone segment that does not start at 0 holds no state by itself
    with pytest.raises(ImageError, match=r"records 0\.\.1999 are missing"):
        load_path(d / segment_filename(2000))


def test_replay_errors_name_the_file_and_offset(tmp_path: Path) -> None:
    values = [
        encode_metadata_record(m.FeatureLevelRecord(name="metadata.version", feature_level=21), 0),
        encode_metadata_record(m.PartitionChangeRecord(partition_id=0, topic_id="hSCzevIQRUa-ojqTd_8C5w"), 0),
    ]
    seg = tmp_path / segment_filename(0)
    seg.write_bytes(build_data_batch(0, 1, 5, values))
    with pytest.raises(ReplayError) as info:
        load_path(seg)
    assert info.value.source == str(seg) and info.value.offset == 1
    assert str(info.value).startswith(f"{seg} (offset 1): ")
    d = tmp_path / "dir"
    d.mkdir()
    (d / seg.name).write_bytes(seg.read_bytes())
    with pytest.raises(ReplayError, match=rf"{d / seg.name} \(offset 1\)"):
        image_at(d)
    # in a snapshot too
    from kraftlake.image import EMPTY

    snap = tmp_path / "00000000000000000002-0000000001.checkpoint"
    good = snapshot_bytes(EMPTY)
    from kraftlake.logformat import read_batches

    head, *_, foot = [b.raw for b in read_batches(good)]
    snap.write_bytes(head + build_data_batch(1, 1, 5, values) + foot)
    with pytest.raises(ReplayError, match=rf"{snap} \(offset 2\)"):
        load_snapshot(snap)


@pytest.mark.parametrize(
    "make", ["missing checkpoint", "dir named log", "segment dir", "empty dir", "other file"]
)
def test_kraftlake_image_refuses_bad_paths_in_one_line(
    tmp_path: Path, make: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = {
        "missing checkpoint": tmp_path / "00000000000000000005-0000000001.checkpoint",
        "dir named log": tmp_path / "x.log",
        "segment dir": tmp_path / "p",
        "empty dir": tmp_path / "e",
        "other file": tmp_path / "notes.txt",
    }[make]
    if make in ("dir named log", "empty dir"):
        target.mkdir()
    elif make == "segment dir":
        (target / segment_filename(0)).mkdir(parents=True)
    elif make == "other file":
        target.write_text("hello")
    assert main(["image", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("kraftlake image: error: ")


def test_kraftlake_image_offsets(capsys: pytest.CaptureFixture[str]) -> None:
    last = image_at(MULTI_EPOCH).offset
    for argv, code, text in (
        (["--offset", "-1"], 2, "-1 is negative"),
        (["--offset", str(last + 1)], 2, f"past the end of the log (its last offset is {last})"),
        (["--offset", str(last)], 0, ""),
    ):
        with pytest.raises(SystemExit) if code == 2 and argv[1] == "-1" else _nothing() as exit_info:
            assert main(["image", str(MULTI_EPOCH), *argv]) == code
        if exit_info is not None:
            assert exit_info.value.code == 2
        out, err = capsys.readouterr()
        assert text in err and (code == 0) == bool(out)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_errors_are_kraftlake_errors() -> None:
    assert issubclass(SnapshotFormatError, KraftlakeError) and issubclass(ImageError, KraftlakeError)


def test_ingest_starts_from_the_oldest_usable_snapshot(tmp_path: Path) -> None:
    from pipelines.commit import starting_point  # pure: no session is started

    d = _copy(MULTI_EPOCH, tmp_path / "data")
    first, second = write_snapshot(image_at(d, 711), d), write_snapshot(image_at(d, 1499), d)
    from kraftlake.logformat import read_file_batches

    log = d / segment_filename(0)
    tail = b"".join(b.raw for b in read_file_batches(log) if b.base_offset >= 712)
    log.unlink()
    (d / segment_filename(712)).write_bytes(tail)
    image, start = starting_point(d)
    assert (image.offset, start) == (711, 712)
    first.write_bytes(_bad("header only", first.read_bytes()))
    with pytest.warns(SkippedSnapshotWarning, match=first.name):
        image, start = starting_point(d)
    assert (image.offset, start) == (1499, 1500) and image.state_equals(image_at(MULTI_EPOCH, 1499))
    second.write_bytes(b"")
    with (
        pytest.raises(KraftlakeError, match="no usable snapshot covers it"),
        pytest.warns(SkippedSnapshotWarning),
    ):
        starting_point(d)


def test_ingest_starts_an_empty_log_with_a_snapshot_from_the_snapshot(tmp_path: Path) -> None:
    # a fresh mirror as a follower reports a snapshot installed: its empty segment 0 still there, or gone
    # before the segment at the snapshot's end is made
    from pipelines.commit import starting_point

    d = tmp_path / "__cluster_metadata-0"
    d.mkdir()
    (d / segment_filename(0)).write_bytes(b"")
    assert starting_point(d) == (EMPTY, 0)
    write_snapshot(image_at(MULTI_EPOCH, 711), d)
    image, start = starting_point(d)
    assert (image.offset, start) == (711, 712) and image.state_equals(image_at(MULTI_EPOCH, 711))
    (d / segment_filename(0)).unlink()
    image, start = starting_point(d)
    assert (image.offset, start) == (711, 712)
