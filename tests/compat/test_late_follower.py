"""A late follower of each release in the matrix: the controller has snapshotted and deleted the segments
below its snapshot (``metadata.max.retention.ms``) before ``kraftlake follow`` starts, so the follower's fetch
from offset 0 lies before the leader's log start and it must install the snapshot. The mirror's snapshot equals
the controller's file of the same name, and the log from there on equals the controller's byte for byte."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat.follow_checks import follow_until_idle
from compat.matrix import RELEASES_ENV, SUBSET, assert_mirror_equals, releases, require
from peers.kafka_release import Release, ReleaseCluster

from kraftlake.image import image_at, load_snapshot

pytestmark = [pytest.mark.kafka, pytest.mark.compat, pytest.mark.slow]

RETENTION_MS = 1000
"""``metadata.max.retention.ms``: a segment below the latest snapshot is deleted a second after its last write."""


@pytest.fixture(params=[pytest.param(r, id=f"{r.version}-static") for r in releases()])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReleaseCluster]:
    release: Release = require(request.param)
    # each case waits about a minute for the controller's cleaner (it runs once a minute, whatever the retention):
    # the subset runs the newest, make compat every release
    if not os.environ.get(RELEASES_ENV) and release.version != SUBSET[-1]:
        pytest.skip(f"the subset follows {SUBSET[-1]} late; make compat every release")
    with ReleaseCluster(release, tmp_path / "kafka", snapshot_bytes=1024, retention_ms=RETENTION_MS) as c:
        c.workload()
        snapshot = c.wait_for_snapshot(1, after_offset=0, timeout=90)
        c.workload(prefix="u")  # more appends: segments roll past the snapshot and the older ones age out
        c.wait_for_log_start(1, past=0, timeout=90)
        assert c.snapshot_offsets(1)[-1] >= snapshot
        yield c


def test_late_follower_installs_the_snapshot(cluster: ReleaseCluster, tmp_path: Path) -> None:
    node = cluster.node(1)
    log_start = cluster.log_start(1)
    mirror = tmp_path / "mirror"
    code = follow_until_idle(node.controller, mirror)
    assert code == 0
    mdir = mirror / "__cluster_metadata-0"
    snapshots = sorted(mdir.glob("*.checkpoint"))
    assert snapshots, "the follower installed no snapshot"
    installed = int(snapshots[-1].name.split("-")[0])
    assert installed >= log_start > 0  # the log below it was gone from the controller
    assert not (mdir / f"{0:020d}.log").exists()
    assert assert_mirror_equals(mdir, node.metadata_dir) > 0
    # the image from the snapshot on: the mirror's end equals the snapshot's image replayed with the tail
    end = image_at(mdir)
    assert end.offset >= installed - 1
    assert end == image_at(node.metadata_dir, end.offset)  # the controller's own snapshot and tail
    assert load_snapshot(snapshots[-1]).offset == installed - 1
    assert {t.name for t in end.topics_by_id.values()} >= {"t-orders", "u-orders"}
