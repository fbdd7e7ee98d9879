"""On the real Kafka peer's log: our image equals kafka-metadata-shell's, and snapshots equal the log.

The shell is Kafka 4.3.1's (4.4.0 published no ``kafka-shell``): it reads the peer formatted at
``SHELL_RELEASE_VERSION`` (``kafka_shell_metadata_log``). Kafka 4.4.0's own snapshots witness our replay of
its default log (metadata.version 4.4-IV2), which that shell cannot load.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kraftlake.image import image_at, load_snapshot, shell_tree
from kraftlake.image.source import log_records, segments, snapshots

pytestmark = pytest.mark.kafka


@pytest.mark.slow
def test_shell_tree_matches_kafka_metadata_shell(kafka_shell_metadata_log: Any, tmp_path: Path) -> None:
    """Our image's tree equals kafka-metadata-shell's, for the log's first segment and three snapshots.
    Slow: needs the Kafka peer's log formatted for the shell (the first test of the run to ask starts a Kafka
    broker and runs eleven admin tools, each a JVM); then kafka-metadata-shell run four times, each a JVM."""
    from kraftlake.kafka_tools import metadata_shell

    work = tmp_path / "log"
    shutil.copytree(kafka_shell_metadata_log.log_dir, work)
    d = work / "__cluster_metadata-0"
    # the shell replays one file from an empty image: only the first segment has the whole history
    base, seg = segments(d)[0]
    assert base == 0
    assert shell_tree(image_at(d, _last_offset(seg))) == metadata_shell(seg, "tree /image")
    # the zero checkpoint (from Kafka 4.4 it holds the bootstrap features): the shell never reports it loaded,
    # it waits forever for an image, so skip it
    snaps = [s for s in snapshots(d) if s.end_offset > 0]
    for snap in (snaps[0], snaps[len(snaps) // 2], snaps[-1]):
        # the shell stamps a snapshot with the offset and time of the last batch inside the file; ours is the
        # snapshot id (end offset - 1), so that it equals the log's image at that offset
        ours = _without_provenance(shell_tree(load_snapshot(snap.path)))
        assert ours == _without_provenance(metadata_shell(snap.path, "tree /image"))


@pytest.mark.parametrize("peer", ["kafka_metadata_log", "kafka_shell_metadata_log"])
def test_kafka_snapshots_equal_the_log(peer: str, request: pytest.FixtureRequest) -> None:
    d = request.getfixturevalue(peer).metadata_dir
    first = segments(d)[0][0]
    for snap in snapshots(d):
        if snap.end_offset - 1 < first:
            continue
        log_only = _replay_log_to(d, snap.end_offset - 1)
        assert load_snapshot(snap.path) == log_only


def test_the_default_peer_is_at_kafka_4_4s_metadata_version(kafka_metadata_log: Any) -> None:
    # 4.4.0 formats at its MetadataVersion.LATEST_PRODUCTION, 4.4-IV2 (feature level 33), which 4.3.1 lacks
    image = image_at(kafka_metadata_log.metadata_dir)
    assert image.metadata_version == 33
    assert "metadataVersion:\n    Optional[4.4-IV2]" in shell_tree(image)


def test_the_bootstrap_snapshot_is_not_the_state_before_the_log(kafka_metadata_log: Any) -> None:
    # Kafka 4.4 writes the bootstrap features into the snapshot at offset 0 and, in its bootstrap transaction,
    # into the log: the state at an offset is the log's, as a broker (which has no such snapshot) sees it
    from kraftlake.image import EMPTY, load_records

    d = kafka_metadata_log.metadata_dir
    assert load_snapshot(d / f"{0:020d}-{0:010d}.checkpoint").metadata_version == 33
    end = next(r.offset for r in log_records(d) if r.type == "EndTransactionRecord")
    for n in (0, end - 1, end):
        assert image_at(d, n) == load_records((r for r in log_records(d) if r.offset <= n), EMPTY), n
    assert image_at(d, end - 1).features == {} and image_at(d, end).metadata_version == 33


def _without_provenance(tree: str) -> list[str]:
    lines = tree.splitlines()
    i = lines.index("provenance:")
    return lines[:i] + lines[i + 2 :]


def _last_offset(seg: Path) -> int:
    from kraftlake.image.source import file_records

    last = -1
    for r in file_records(seg):
        last = r.offset
    return last


def _replay_log_to(d: Path, offset: int) -> Any:
    from kraftlake.image import EMPTY, load_records

    return load_records((r for r in log_records(d) if r.offset <= offset), EMPTY)
