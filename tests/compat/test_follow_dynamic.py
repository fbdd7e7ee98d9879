"""`kraftlake follow` against a single-node KRaft Kafka of each release in the matrix with a dynamic (``--standalone``, 3.9 and later) quorum, from
that release's own jars: the checks of `compat.follow_checks.check_follow`."""

from __future__ import annotations

from pathlib import Path

import pytest
from compat.follow_checks import check_follow, single_node_fixture
from peers.kafka_release import ReleaseCluster

pytestmark = [pytest.mark.kafka, pytest.mark.compat, pytest.mark.slow]

cluster = single_node_fixture("dynamic")


def test_follow_installs_the_snapshot_and_mirrors_the_log(cluster: ReleaseCluster, tmp_path: Path) -> None:
    check_follow(cluster, tmp_path)
