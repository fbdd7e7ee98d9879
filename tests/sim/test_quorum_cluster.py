"""The cluster simulator through quorum controllers on a 3-voter raft quorum: real logs on every voter."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kraftlake.image import image_at, load_snapshot
from kraftlake.logformat import list_snapshots
from kraftlake.raft.config import QuorumConfig
from kraftlake.sim.cluster import DEFAULT_WEIGHTS, ClusterSimConfig
from kraftlake.sim.quorum_cluster import QuorumSimResult, simulate_on_quorum

FAST = QuorumConfig(
    voters=frozenset({1, 2, 3}),
    election_timeout_ms=300,
    fetch_timeout_ms=600,
    election_backoff_max_ms=300,
    request_timeout_ms=1000,
    max_fetch_wait_ms=200,
    append_linger_ms=5,
)


def _run(tmp_path: Path, events: int = 400, seed: int = 3) -> QuorumSimResult:
    weights = dict(DEFAULT_WEIGHTS, failover=1.5)
    config = ClusterSimConfig(
        brokers=6, topics=6, partitions_per_topic=3, events=events, seed=seed, check_every=1, weights=weights
    )
    config = replace(config)
    return simulate_on_quorum(
        config,
        tmp_path / "sim",
        fsync=False,
        quorum=FAST,
        snapshot_bytes=16 * 1024,
        segment_bytes=32 * 1024,
        events_per_call=10,
    )


@pytest.mark.slow
def test_simulation_through_the_quorum_writes_the_same_log_on_every_voter(tmp_path: Path) -> None:
    """Slow (about 7 s): 400 cluster events through a three-voter quorum, the invariants checked after each."""
    result = _run(tmp_path)
    summary = result.summary
    assert summary.events == 400 and summary.invariant_checks >= 400
    assert summary.failovers >= 1 and len(result.failover_seconds) == summary.failovers
    assert summary.event_counts["isr_shrink"] and summary.event_counts["create_topic"]
    assert result.records_by_type["PartitionChangeRecord"] > 0
    for node_id, node_dir in result.node_dirs.items():
        # every voter's log (snapshot + tail) replays to the image the active controller ended with
        assert image_at(node_dir).state_equals(result.image), f"node {node_id}"
        snaps = list_snapshots(node_dir / "__cluster_metadata-0")
        assert snaps, f"node {node_id} wrote no snapshot"
        sid, path = snaps[-1]
        assert load_snapshot(path).state_equals(image_at(node_dir, sid.end_offset - 1))


@pytest.mark.kafka
def test_kafka_dump_log_reads_the_quorum_log(tmp_path: Path) -> None:
    from kraftlake.kafka_tools import dump_log

    result = _run(tmp_path, events=300, seed=5)
    files = [*result.segments[result.leader_id], *result.snapshots[result.leader_id]]
    text = dump_log(files)
    assert "Error at" not in text and "Exception" not in text
    assert "isvalid: false" not in text
    assert text.count("payload:") > 100
    assert "LeaderChange" in text and "SnapshotHeader" in text


def test_a_wait_for_commits_follows_leadership_when_the_records_are_lost(tmp_path: Path) -> None:
    """Records a controller appended but the quorum never committed are gone once another voter leads; a wait
    for them must follow the new active controller instead of waiting out its timeout."""
    import time

    from kraftlake.service.controller_host import ControllerQuorum
    from kraftlake.sim.quorum_cluster import QuorumClusterSimulator

    config = ClusterSimConfig(brokers=3, topics=2, partitions_per_topic=2, events=0, seed=5, check_every=0)
    with ControllerQuorum(
        3, tmp_path / "q", "c", config=config.controller, seed=5, fsync=False, quorum=FAST
    ) as cq:
        sim = QuorumClusterSimulator(config, cq, timeout=20.0)
        sim.run()
        old = sim._host
        followers = [h.node_id for h in cq.running() if h is not old]
        for node_id in followers:
            cq.kill(node_id)
        sim._on_loop(lambda: sim._create_topic(4))  # appended by the old leader, which no voter will fetch
        lost_end = old.controller.next_offset - 1
        assert old.applied_offset < lost_end
        cq.kill(old.node_id)
        for node_id in followers:
            cq.restart(node_id)
        new = cq.wait_active(20, exclude=old.node_id)
        cq.restart(old.node_id)  # it truncates what it appended alone
        started = time.monotonic()
        sim._wait_committed()
        assert time.monotonic() - started < 10
        assert sim._host is new and sim.active is new.controller
        cq.wait_applied(new.controller.next_offset - 1, 20)
        assert image_at(cq.node_dir(old.node_id)).state_equals(new.controller.image)
