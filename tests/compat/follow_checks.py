"""The checks of a single-node case, shared by the static and the dynamic modules.

Per case (release, static or dynamic quorum): that release's ``StorageTool`` formats, its ``TopicCommand``
creates, alters and deletes topics (static: formatted at the oldest ``metadata.version`` it takes, with a rack
and the ``StandardAuthorizer``; its ``kafka-features`` upgrades ``metadata.version`` (and enables ELR from 4.0),
its ``ConfigCommand`` and ``AclCommand`` write topic and default broker configs, a client quota, SCRAM
credentials from 3.5 and an ACL; from 3.6 its ``kafka-delegation-tokens`` creates a token through a SCRAM
listener); a fresh follower, started after the controller's first snapshot, installs
that snapshot (from 3.6; the whole log from 0 before) and mirrors the rest (``kraftlake follow
--bootstrap-controller 127.0.0.1:PORT``, the plain address a user types); the mirror equals the controller's
log byte for byte; ``kraftlake decode`` of the mirror equals that release's ``kafka-dump-log``; the image of the
mirror at a snapshot the controller wrote later equals that snapshot's own image and, where 4.3.1's
``kafka-metadata-shell`` can load it (`compat.matrix.shell_witness`), the shell's ``tree /image``.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat.matrix import (
    assert_mirror_equals,
    jars_of,
    require,
    shell_witness,
    single_node_cases,
    without_provenance,
)
from peers.kafka_release import Release, ReleaseCluster

from kraftlake import kafka_tools
from kraftlake.cli import main
from kraftlake.commands import decode
from kraftlake.follow.follower import Follower
from kraftlake.follow.mirror import MetadataMirror
from kraftlake.follow.observer import parse_endpoints
from kraftlake.image import image_at, load_snapshot, shell_tree

SNAPSHOT_AT_ZERO = (3, 6)
"""The first release line whose raft leader answers a fetch at offset 0 with its latest snapshot's id while the
log still starts at 0 (KAFKA-15078, in 3.6.0; 3.3.2-3.5.2 send the log from 0, observed)."""


@contextlib.contextmanager
def started(release: Release, quorum: str, workdir: Path) -> Iterator[ReleaseCluster]:
    """A single node of `release` (static or dynamic quorum) after the workload (static: with every entity kind)
    and its first snapshot."""
    require(release)
    static = quorum == "static"
    with ReleaseCluster(
        release, workdir, nodes=1, dynamic=not static, snapshot_bytes=1024, entities=static
    ) as c:
        c.workload()
        if static:
            c.entity_workload()
        c.wait_for_snapshot(1, after_offset=0, timeout=90)
        yield c


def _decode(path: Path) -> list[dict[str, Any]]:
    import argparse

    parser = argparse.ArgumentParser()
    decode.add_arguments(parser)
    out = io.StringIO()
    assert decode.run(parser.parse_args([str(path)]), out=out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def assert_decode_equals_dump_log(release: Release, segments: list[Path]) -> int:
    """``kraftlake decode`` of `segments` equals `release`'s ``kafka-dump-log`` of the same files on every record
    (offset, type, data); returns how many records were compared."""
    dumped = release.dump_log(segments)
    theirs = [r for f in dumped for r in f.records]
    ours = [row for seg in segments for row in _decode(seg)]
    assert len(ours) == len(theirs) > 0
    for mine, kafka in zip(ours, theirs, strict=True):
        if kafka.control and kafka.data is None:
            # 3.x before 3.5 prints a control record's type only (``controlType: LEADER_CHANGE(2)``)
            assert mine["control"] and mine["offset"] == kafka.offset
            assert str(kafka.type).replace("_", "").lower() in mine["type"].lower()
            continue
        assert (mine["offset"], mine["type"], mine["data"]) == (kafka.offset, kafka.type, kafka.data)
    return len(ours)


def follow_until_idle(controller: str, mirror: Path) -> int:
    """`kraftlake follow` of `controller` into `mirror` from scratch, until a second passes without records
    (giving up after 30 s without progress); its exit code."""
    return main(
        [
            "follow",
            "--bootstrap-controller",
            controller,
            "--data-dir",
            str(mirror),
            "--idle-stop",
            "1",
            "--give-up",
            "30",
            "--quiet",
            "--no-fsync",
        ]
    )


def check_follow(cluster: ReleaseCluster, tmp_path: Path) -> None:
    """Follow `cluster` from scratch with `kraftlake follow` and check the mirror, its decoding and its image."""
    node = cluster.node(1)
    mirror = tmp_path / "mirror"
    started = time.monotonic()
    code = follow_until_idle(node.controller, mirror)
    assert code == 0
    assert time.monotonic() - started < 30
    mdir = mirror / "__cluster_metadata-0"
    # a late follower: the controller had snapshotted, so the mirror starts from its snapshot, where the
    # release's leader offers it to a fetch at offset 0 (before SNAPSHOT_AT_ZERO it sends its log from 0)
    snapshots = sorted(mdir.glob("*.checkpoint"))
    if cluster.release.key >= SNAPSHOT_AT_ZERO:
        assert snapshots, "the follower installed no snapshot"
    else:
        assert not snapshots and (mdir / f"{0:020d}.log").exists(), "expected the whole log from offset 0"
    compared = assert_mirror_equals(mdir, node.metadata_dir)
    assert compared > 0

    # kraftlake decode of the mirror's segments equals this release's kafka-dump-log of the same files
    assert_decode_equals_dump_log(cluster.release, sorted(mdir.glob("*.log")))

    # the image of the mirror at a later snapshot of the controller equals the metadata shell's reading of it
    # a snapshot past what the first follow mirrored: past the whole workload
    with MetadataMirror(mirror, fsync=False) as m:
        first_end = m.position.log_end
    later = cluster.wait_for_snapshot(1, after_offset=first_end, timeout=90)
    with MetadataMirror(mirror, fsync=False) as m:
        Follower(parse_endpoints(node.controller), m, give_up_s=30).run(until_offset=later)
    (found,) = node.metadata_dir.glob(f"{later:020d}-*.checkpoint")
    checkpoint = tmp_path / found.name  # the shell locks a live log dir's parent: read a copy
    shutil.copyfile(found, checkpoint)
    image = image_at(mdir, later - 1)
    # the release's own snapshot at that offset holds the same image
    assert image == load_snapshot(checkpoint)
    ours_tree = shell_tree(image)
    assert "t-orders" in ours_tree and "t-scratch" not in ours_tree
    if cluster.entities:
        # every entity kind the release wrote is in the image (and so compared with the shell below)
        for text in (
            "rack=Optional[rack-1]",
            "consumer_byte_rate",
            "retention.ms",
            "log.retention.ms",
            "User:alice",
        ):
            assert text in ours_tree, text
        assert {user for _, user in image.scram} == ({"alice"} if cluster.release.scram_in_kraft else set())
        # a delegation token of alice's, created through the SCRAM listener (from 3.6)
        owners = [t.owner for t in image.delegation_tokens.values()]
        assert owners == (["User:alice"] if cluster.release.delegation_tokens_in_kraft else [])
        # metadata.version went up from the oldest the release formats (and ELR was enabled from 4.0)
        levels = [
            r.data["featureLevel"]
            for f in cluster.release.dump_log(sorted(node.metadata_dir.glob("*.log")))
            for r in f.records
            if r.type == "FEATURE_LEVEL_RECORD" and r.data and r.data["name"] == "metadata.version"
        ]
        assert len(levels) >= 2 and levels[-1] > levels[0], levels
        elr = image.features.get("eligible.leader.replicas.version", 0)
        assert elr == (1 if cluster.release.elr_feature else 0)
    witness = shell_witness(cluster.release)
    if Release(witness).key >= cluster.release.key:
        with jars_of(witness):
            shell = kafka_tools.metadata_shell(checkpoint, "tree /image")
        assert without_provenance(ours_tree) == without_provenance(shell)
    # else: the newest shell on Maven Central (4.3.1) loads nothing of a newer metadata.version (4.4.0's 33)


def single_node_fixture(quorum: str) -> Any:
    """The module-scoped ``cluster`` fixture of a single-node case module: one started cluster per release of
    ``single_node_cases(quorum)`` (``static`` or ``dynamic``)."""

    @pytest.fixture(scope="module", params=single_node_cases(quorum))
    def cluster(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[ReleaseCluster]:
        release, kind = request.param
        with started(release, kind, Path(tmp_path_factory.mktemp(f"kafka-{release.version}-{kind}"))) as c:
            yield c

    return cluster
