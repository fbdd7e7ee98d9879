"""The compatibility matrix: which releases and quorum kinds run, and the checks every case shares.

``$KRAFTLAKE_COMPAT_RELEASES`` (what ``make compat`` sets: every release fetched by ``make compat-jars``) names
the releases; without it (pytest run on tests/compat by hand) the subset, one release per wire generation: 3.3
(Fetch v13, no snapshots by time), 3.7 (Fetch v16 without NodeEndpoints from the raft leader), 3.9 (KIP-853:
NodeEndpoints, dynamic quorums) and 4.4 (the newest).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peers.kafka_release import Release

from kraftlake import kafka_tools
from kraftlake.logformat.reader import read_file_batches

SUBSET = ("3.3.2", "3.7.2", "3.9.1", "4.4.0")
RELEASES_ENV = "KRAFTLAKE_COMPAT_RELEASES"
NEWEST_SHELL = "4.3.1"
"""The newest release whose ``kafka-shell`` is on Maven Central (4.4.0's and 4.2.2's are not)."""


def releases() -> list[Release]:
    names = os.environ.get(RELEASES_ENV, "").split() or list(SUBSET)
    return [Release(v) for v in names]


def require(release: Release) -> Release:
    if not release.available:
        pytest.fail(
            f"no jars for Kafka {release.version} in {release.jars}: run `make setup` (the subset) or "
            f"`make compat-jars` (every release)"
        )
    return release


def single_node_cases(quorum: str) -> list[Any]:
    """(release, quorum) for a single-node module: static for every release, dynamic from 3.9."""
    return [
        pytest.param((r, quorum), id=f"{r.version}-{quorum}")
        for r in releases()
        if quorum == "static" or r.dynamic_quorums
    ]


def kill_cases() -> list[Any]:
    """(release, quorum) for the 3-controller module: the oldest release with a static quorum and the newest
    with a dynamic one (static where it has none); under ``make compat`` every release, each with the newest
    quorum kind it has."""
    rs = releases()
    if os.environ.get(RELEASES_ENV):
        chosen = [(r, "dynamic" if r.dynamic_quorums else "static") for r in rs]
    else:
        oldest, newest = min(rs, key=lambda r: r.key), max(rs, key=lambda r: r.key)
        chosen = [(oldest, "static"), (newest, "dynamic" if newest.dynamic_quorums else "static")]
    return [pytest.param(c, id=f"{c[0].version}-{c[1]}") for c in chosen]


def batches_by_offset(metadata_dir: Path) -> dict[int, bytes]:
    """Every batch of the ``.log`` segments in `metadata_dir`: base offset -> its exact bytes."""
    out: dict[int, bytes] = {}
    for seg in sorted(metadata_dir.glob("*.log")):
        for batch in read_file_batches(seg):
            out[batch.base_offset] = bytes(batch.raw)
    return out


def assert_mirror_equals(mirror_dir: Path, controller_dir: Path, *others: Path) -> int:
    """The mirror's batches equal the controller's byte for byte over the offsets both hold, and the mirror's
    are contiguous; each of its snapshots equals the file of the same name of the controller or one of
    `others` (each node writes its own snapshots: the mirror's is the one of the leader that served it).
    Returns how many batches were compared."""
    ours = batches_by_offset(mirror_dir)
    theirs = batches_by_offset(controller_dir)
    common = sorted(set(ours) & set(theirs))
    assert common, f"no batch in common: mirror {sorted(ours)[:3]}..., controller {sorted(theirs)[:3]}..."
    for base in common:
        assert ours[base] == theirs[base], f"batch at offset {base} differs"
    # contiguous: each batch starts where the previous one ended, or where a snapshot the mirror installed
    # ends (a snapshot installed past the log's end leaves a hole below it, by design of the mirror)
    snapshot_ends = {int(p.name.split("-")[0]) for p in mirror_dir.glob("*.checkpoint")}
    bases = sorted(ours)
    for a, b in itertools.pairwise(bases):
        last = a + int.from_bytes(ours[a][23:27], "big")  # base offset + last offset delta
        assert b == last + 1 or (b > last + 1 and b in snapshot_ends), (
            f"gap or overlap in the mirror between offsets {last} and {b} (snapshots end at {sorted(snapshot_ends)})"
        )
    for snap in mirror_dir.glob("*.checkpoint"):
        twins = [d / snap.name for d in (controller_dir, *others) if (d / snap.name).exists()]
        if twins:
            data = snap.read_bytes()
            assert any(t.read_bytes() == data for t in twins), (
                f"snapshot {snap.name} differs from every node's"
            )
    return len(common)


@contextlib.contextmanager
def jars_of(release_version: str) -> Iterator[None]:
    """Point `kraftlake.kafka_tools` (dump-log, metadata shell: `kafka_jars_dir`, `shell_jars_dir`) at one
    release's jars for the block."""
    jars = Release(release_version).jars
    with tempfile.TemporaryDirectory(prefix="kraftlake-jars-") as root:
        (Path(root) / "kafka").symlink_to(jars)
        (Path(root) / "kafka-shell").symlink_to(jars)  # the release's own shell, where Maven Central has it
        old = os.environ.get(kafka_tools.JARS_ENV)
        os.environ[kafka_tools.JARS_ENV] = root
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(kafka_tools.JARS_ENV, None)
            else:
                os.environ[kafka_tools.JARS_ENV] = old


def shell_witness(release: Release) -> str:
    """The release whose ``kafka-metadata-shell`` reads `release`'s files: the newest on Maven Central.

    kraftlake renders the shell's ``tree /image`` as 4.3.1's shell prints it. Older shells print the same image
    with other text (3.7.2's: no ``acls/byId``, ``metadataVersion`` without ``Optional[...]``, a
    ``zkMigrationState`` node, BrokerRegistration without ``cordonedDirectories``), 3.3 and 3.4's have no
    ``/image`` tree at all, 4.2.2's and 4.4.0's are not on Maven Central.
    """
    return NEWEST_SHELL


def without_provenance(tree: str) -> list[str]:
    lines = tree.splitlines()
    if "provenance:" not in lines:
        return lines
    i = lines.index("provenance:")
    return lines[:i] + lines[i + 2 :]
