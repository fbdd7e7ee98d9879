"""Three controllers of a release: the follower survives a kill -9 of the leader and its restart, and says why
when the quorum cannot commit.

Per case: 3 combined nodes of the release (static ``controller.quorum.voters``, followed through Kafka's own voter
string ``1@host:port,...``; or dynamic, formatted with ``--initial-controllers`` and followed through plain
``host:port``s); a follower runs while the leader is SIGKILLed, a new one elected, a topic created, the old
leader restarted and another topic created; its mirror must then equal the new leader's log byte for byte and
hold every topic. Then two nodes are killed: the follower, given 6 s, must stop with an error naming why.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat.matrix import assert_mirror_equals, batches_by_offset, kill_cases, require
from peers.kafka_release import ReleaseCluster
from waiting import wait_until

from kraftlake.follow.bootstrap import parse_bootstrap
from kraftlake.follow.errors import NoProgressError
from kraftlake.follow.follower import Follower
from kraftlake.follow.mirror import MetadataMirror
from kraftlake.image import image_at

pytestmark = [pytest.mark.kafka, pytest.mark.compat, pytest.mark.slow]


@pytest.fixture(scope="module", params=kill_cases())
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReleaseCluster]:
    release, quorum = request.param
    require(release)
    workdir = Path(tmp_path_factory.mktemp(f"kafka3-{release.version}-{quorum}"))
    with ReleaseCluster(release, workdir, nodes=3, dynamic=quorum == "dynamic", heap="256m") as c:
        c.create_topic("before", 2)
        yield c


def _log_end(metadata_dir: Path) -> int:
    batches = batches_by_offset(metadata_dir)
    base = max(batches)
    return base + int.from_bytes(batches[base][23:27], "big") + 1


def test_follow_through_a_leader_kill_and_restart(cluster: ReleaseCluster, tmp_path: Path) -> None:
    bootstrap = parse_bootstrap(cluster.controllers if cluster.dynamic else cluster.voters)
    errors: list[BaseException] = []
    stop = threading.Event()
    with MetadataMirror(tmp_path, fsync=False) as mirror:
        follower = Follower(bootstrap, mirror, give_up_s=60)

        def run() -> None:
            try:
                follower.run(stop)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            wait_until(
                lambda: follower.progress.log_end > 0 or errors,
                60,
                "the first records in the mirror",
                0.2,
                seen=follower.progress.line,
            )
            leader = cluster.leader()
            cluster.kill(leader)
            new = cluster.leader(not_in=[leader])
            cluster.create_topic("during", 1)
            cluster.restart(leader)
            cluster.create_topic("after", 1)
            target = _log_end(cluster.node(new).metadata_dir)
            wait_until(
                lambda: follower.progress.log_end >= target or errors,
                60,
                f"the mirror at {target}",
                0.2,
                seen=follower.progress.line,
            )
        finally:
            stop.set()
            thread.join(30)
        assert not errors, errors
        assert follower.progress.epoch > 1  # it followed the new leader's epoch
    mdir = tmp_path / "__cluster_metadata-0"
    others = [n.metadata_dir for i, n in cluster.nodes.items() if i != new]
    assert assert_mirror_equals(mdir, cluster.node(new).metadata_dir, *others) > 0
    topics = set(image_at(mdir).topics_by_name)
    assert {"before", "during", "after"} <= topics

    # a quorum that cannot commit: the follower says why within its give-up time and stops
    survivor = 1 if leader != 1 else 2
    for node_id in cluster.nodes:
        if node_id != survivor:
            cluster.kill(node_id)
    started = time.monotonic()
    with MetadataMirror(tmp_path, fsync=False) as mirror, pytest.raises(NoProgressError) as err:
        Follower(bootstrap, mirror, give_up_s=6, timeout_s=3).run()
    assert time.monotonic() - started < 30
    text = str(err.value)
    assert "no progress for 6s" in text and "negotiated:" in text and "Fetch v" in text
