"""`kraftlake follow` against a single-node KRaft Kafka of each release in the matrix with a dynamic (``--standalone``, 3.9 and later) quorum, from
that release's own jars: the checks of `compat.follow_checks.check_follow`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from compat.follow_checks import check_follow, started
from compat.matrix import single_node_cases
from peers.kafka_release import ReleaseCluster

pytestmark = [pytest.mark.kafka, pytest.mark.compat, pytest.mark.slow]


@pytest.fixture(scope="module", params=single_node_cases("dynamic"))
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReleaseCluster]:
    release, quorum = request.param
    with started(release, quorum, Path(tmp_path_factory.mktemp(f"kafka-{release.version}-{quorum}"))) as c:
        yield c


def test_follow_installs_the_snapshot_and_mirrors_the_log(cluster: ReleaseCluster, tmp_path: Path) -> None:
    check_follow(cluster, tmp_path)
