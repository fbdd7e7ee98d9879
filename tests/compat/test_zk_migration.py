"""A log that went through a ZooKeeper migration (KIP-866), written by each release of the matrix that can migrate
(3.4 through 3.9; the subset: 3.9.1 only): `peers.zk_migration.ZkMigrationCluster` migrates a ZooKeeper-mode
broker's topics, topic config and client quota into a KRaft controller, then creates, alters and deletes topics in
dual-write mode. The controller's log then holds the migration's records (``ZkMigrationStateRecord``s, the
metadata transaction from 3.6, a migrating broker's registration with ``metadata.version`` of one version).

Checked on the controller's log: ``kraftlake decode`` equals the release's ``kafka-dump-log`` on every record;
the image at the controller's snapshot equals that snapshot's own image and 4.3.1's ``kafka-metadata-shell``
(which, as kraftlake's image, leaves the migration state out: 4.x dropped it from ``FeaturesImage``), while the
release's own shell shows the migration as done; the log ingested into a warehouse equals the image at sampled
offsets.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat.follow_checks import assert_decode_equals_dump_log
from compat.matrix import (
    RELEASES_ENV,
    jars_of,
    releases,
    require,
    shell_witness,
    without_provenance,
)
from compat.warehouse_checks import check_warehouse
from peers.kafka_release import Release
from peers.zk_migration import BROKER_ID, CONTROLLER_ID, MIGRATION, ZkMigrationCluster

from kraftlake import kafka_tools
from kraftlake.image import image_at, load_snapshot, shell_tree

pytestmark = [pytest.mark.kafka, pytest.mark.compat, pytest.mark.slow]

MAKE_TEST_RELEASE = "3.9.1"


QUOTA_ENTITY_FIXED = (3, 5)
"""3.4's migration writes a client quota's entity type as ZooKeeper names its node (``clients``, not
``client-id``): Kafka's image keeps it, its shell refuses to print it (observed: 3.4.1 against 4.3.1's shell;
3.5.2 writes ``client-id``)."""


def top_level(tree: str) -> dict[str, list[str]]:
    """A shell tree's top-level nodes -> the lines below each, one indent level less (what ``tree /image/<node>``
    prints)."""
    out: dict[str, list[str]] = {}
    for line in tree.splitlines():
        if line and not line.startswith(" "):
            out[line.rstrip(":")] = []
        elif line:
            out[list(out)[-1]].append(line[2:])
    return out


def migration_cases() -> list[Any]:
    """Every release of the matrix that can migrate; without ``$KRAFTLAKE_COMPAT_RELEASES`` (the subset)
    3.9.1 only."""
    chosen = [r for r in releases() if r.zk_migration]
    if not os.environ.get(RELEASES_ENV):
        chosen = [r for r in chosen if r.version == MAKE_TEST_RELEASE]
    return [pytest.param(r, id=f"{r.version}-static") for r in chosen]  # the controller's voters are static


@pytest.fixture(scope="module", params=migration_cases())
def migrated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ZkMigrationCluster, Path]]:
    """The migrated cluster after the dual-write workload, and a copy of its controller's metadata directory
    up to a snapshot that covers the whole workload."""
    release: Release = require(request.param)
    workdir = Path(tmp_path_factory.mktemp(f"zk-migration-{release.version}"))
    with ZkMigrationCluster(release, workdir / "cluster") as cluster:
        cluster.dual_write_workload()
        end = cluster.log_end()
        cluster.wait_for_snapshot(CONTROLLER_ID, after_offset=end - 1, timeout=90)
        copy = workdir / "controller-copy"
        shutil.copytree(cluster.controller.metadata_dir, copy)
        yield cluster, copy


def test_the_migration_log_reads_as_kafka_reads_it(migrated: tuple[ZkMigrationCluster, Path]) -> None:
    cluster, log = migrated
    release = cluster.release
    states = [state for _, state in cluster.migration_states()]
    assert MIGRATION in states, states

    compared = assert_decode_equals_dump_log(release, sorted(log.glob("*.log")))
    assert compared > 10

    snapshot = max(log.glob("*.checkpoint"))
    end = int(snapshot.name.split("-")[0])
    image = image_at(log, end - 1)
    assert image == load_snapshot(snapshot)
    # what ZooKeeper held (migrated) and what the dual-write mode wrote
    assert set(image.topics_by_name) == {"zk-orders", "kr-events"}
    assert len(image.topics_by_name["zk-orders"].partitions) == 3
    assert len(image.topics_by_name["kr-events"].partitions) == 3
    assert image.brokers[BROKER_ID].is_migrating_zk_broker
    if release.key >= (3, 7):  # controllers register in the log (RegisterControllerRecord, KIP-919) from 3.7
        assert image.controllers[CONTROLLER_ID].zk_migration_ready

    ours = shell_tree(image)
    with jars_of(shell_witness(release)):
        witness = kafka_tools.metadata_shell(snapshot, "tree /image")
        if release.key < QUOTA_ENTITY_FIXED:
            # the shell stops at the quota (``Invalid entity type clients``): every other node compared
            assert witness == ""
            sections = {k: v for k, v in top_level(ours).items() if k not in ("clientQuotas", "provenance")}
            witness = kafka_tools.metadata_shell(snapshot, ["tree", *(f"/image/{k}" for k in sections)])
            ours = "".join(line + "\n" for lines in sections.values() for line in lines)
    assert without_provenance(ours) == without_provenance(witness)
    assert "zkMigrationState" not in witness
    if release.has_shell and release.key >= (3, 6):
        # the release's own shell keeps the migration state in its features (3.6-3.9; 3.5's shell has no
        # /image/provenance, which `metadata_shell` waits on)
        with jars_of(release.version):
            own = kafka_tools.metadata_shell(snapshot, "tree /image/features")
        assert "zkMigrationState:\n  MIGRATION" in own, own


def test_the_migration_log_in_the_warehouse(
    migrated: tuple[ZkMigrationCluster, Path], warehouse_spark: object, tmp_path: Path
) -> None:
    _cluster, log = migrated
    offsets = check_warehouse(warehouse_spark, log, tmp_path)
    assert len(offsets) >= 3
