"""Cluster simulator: determinism, invariants after every event, standby agreement, real logs vs Kafka's tools."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from kraftlake.image import image_at, load_snapshot, shell_tree
from kraftlake.image.model import PartitionRegistration
from kraftlake.logformat import list_snapshots
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator, check_image
from kraftlake.sim.cluster_log import LocalMetadataLog
from kraftlake.sim.errors import InvariantViolation


def _small(seed: int, events: int = 1500) -> ClusterSimConfig:
    return ClusterSimConfig(
        brokers=6, topics=8, partitions_per_topic=4, events=events, seed=seed, check_every=1
    )


@pytest.mark.parametrize("seed", range(5))
def test_invariants_hold_after_every_event(seed: int) -> None:
    sim = ClusterSimulator(_small(seed))
    summary = sim.run()
    assert summary.events == 1500
    assert summary.invariant_checks >= 1500
    counts = summary.event_counts
    assert counts["isr_shrink"] and counts["isr_expand"] and counts["create_topic"]
    types = {r.type for r in sim.log.records}
    assert {
        "PartitionChangeRecord",
        "RegisterBrokerRecord",
        "BrokerRegistrationChangeRecord",
        "RemoveTopicRecord",
        "ConfigRecord",
        "ProducerIdsRecord",
    } <= types


def test_same_seed_same_log() -> None:
    a = ClusterSimulator(_small(3, 800))
    b = ClusterSimulator(_small(3, 800))
    a.run()
    b.run()
    assert [r.record for r in a.log.records] == [r.record for r in b.log.records]
    c = ClusterSimulator(_small(4, 800))
    c.run()
    assert [r.record for r in a.log.records] != [r.record for r in c.log.records]


def test_crashes_and_failovers_happen_and_standby_agrees() -> None:
    cfg = ClusterSimConfig(
        brokers=5,
        topics=5,
        partitions_per_topic=3,
        events=3000,
        seed=11,
        max_down_fraction=0.4,
        weights={
            "isr_shrink": 5,
            "isr_expand": 5,
            "crash": 2,
            "restart": 2,
            "controlled_shutdown": 2,
            "failover": 1,
            "rolling_restart": 0.2,
            "idle": 5,
        },
    )
    sim = ClusterSimulator(cfg)
    summary = sim.run()
    assert summary.failovers > 0
    assert summary.event_counts["crash"] and summary.event_counts["controlled_shutdown"]
    types = [r.record for r in sim.log.records if r.type == "BrokerRegistrationChangeRecord"]
    assert any(r.fenced == 1 for r in types) and any(r.in_controlled_shutdown == 1 for r in types)
    sim.check_standby()


def test_invariant_checker_catches_a_broken_image() -> None:
    sim = ClusterSimulator(_small(0, 10))
    sim.run()
    img = sim.image
    t = next(iter(img.topics_by_id.values()))
    p = t.partitions[0]
    bad = PartitionRegistration(
        p.replicas,
        p.directories,
        (*p.isr, 99),
        (),
        (),
        p.leader,
        0,
        p.leader_epoch,
        p.partition_epoch,
        (),
        (),
    )
    t.partitions[0] = bad  # a private copy is not worth it: the image is thrown away
    with pytest.raises(InvariantViolation, match="isr"):
        check_image(img, elr_enabled=True)


def _write_log(tmp_path: Path, events: int = 600) -> tuple[ClusterSimulator, LocalMetadataLog]:
    log = LocalMetadataLog(tmp_path / "data", cluster_id="test-cluster-id-0000", snapshot_bytes=30_000)
    sim = ClusterSimulator(
        ClusterSimConfig(brokers=5, topics=6, partitions_per_topic=3, events=events, seed=5, check_every=10),
        log,
    )
    sim.after_event = lambda s: log.maybe_snapshot(s.active.committed_image)
    sim.run()
    log.maybe_snapshot(sim.active.committed_image, force=True)
    log.close()
    return sim, log


def test_real_log_reloads_to_the_same_image(tmp_path: Path) -> None:
    sim, log = _write_log(tmp_path)
    part = log.partition_dir
    img = sim.active.committed_image
    assert image_at(part).state_equals(img)
    snaps = list_snapshots(part)
    assert len(snaps) >= 2
    for sid, path in snaps:
        # every snapshot equals the log replayed up to its end offset (exclusive)
        assert load_snapshot(path).state_equals(image_at(part, sid.end_offset - 1))


@pytest.mark.kafka
def test_kafka_tools_read_the_simulated_log(tmp_path: Path) -> None:
    from kraftlake.kafka_tools import dump_log, metadata_shell

    sim, log = _write_log(tmp_path, events=400)
    part = log.partition_dir
    snaps = list_snapshots(part)
    files = [*log.segments(), *(p for _, p in snaps)]
    text = dump_log(files)
    assert "Error at" not in text and "isvalid: false" not in text.replace("isvalid: true", "")
    assert text.count("payload:") >= sum(
        v for k, v in log.records_by_type.items() if k != "LeaderChangeMessage"
    )
    last = snaps[-1][1]
    ours = shell_tree(load_snapshot(last)).splitlines()
    theirs = metadata_shell(last, "tree /image").splitlines()

    # the provenance line differs: the shell counts offsets inside the .checkpoint file (they start at 0),
    # our loader uses the snapshot's end offset; everything else must be identical
    def strip(lines: list[str]) -> list[str]:
        return [ln for ln in lines if not ln.strip().startswith("offset ")]

    assert len(ours) == len(theirs) and strip(ours) == strip(theirs)
    topics = metadata_shell(last, "ls /image/topics/byName").split()
    assert sorted(topics) == sorted(sim.active.committed_image.topics_by_name)


def _under_replicated(sim: ClusterSimulator, broker: int | None = None) -> int:
    return sum(
        1
        for t in sim.image.topics_by_id.values()
        for p in t.partitions.values()
        if len(p.isr) < len(p.replicas) and (broker is None or broker not in p.isr)
    )


def test_isr_churn_keeps_the_isrs_nearly_full() -> None:
    """Lagging replicas catch up (the ISR expansions bring back replicas that fell out), so churn without
    broker failures does not drift towards an under-replicated cluster."""
    weights = {"isr_shrink": 25.0, "isr_expand": 35.0, "config_change": 3.0, "idle": 5.0}
    cfg = ClusterSimConfig(
        brokers=10, topics=20, partitions_per_topic=5, events=4000, seed=7, check_every=0, weights=weights
    )
    sim = ClusterSimulator(cfg)
    seen: list[int] = []
    sim.after_event = lambda s: seen.append(_under_replicated(s)) if s.summary.events % 200 == 0 else None
    summary = sim.run()
    assert summary.event_counts["isr_shrink"] > 1000
    shrinks = [r for r in sim.log.records if r.type == "PartitionChangeRecord" and r.record.isr is not None]
    assert len(shrinks) > 2000  # shrinks and expansions both happened, many times
    assert max(seen) <= 20 and seen[-1] <= 10, seen  # of 100 partitions


def test_a_restarted_broker_rejoins_every_isr() -> None:
    cfg = ClusterSimConfig(
        brokers=6, topics=30, partitions_per_topic=10, events=0, seed=3, check_every=0, catch_up_per_tick=50
    )
    sim = ClusterSimulator(cfg)
    sim.run()
    assert _under_replicated(sim) == 0
    b = sim.brokers[2]
    b.alive = False  # crashed: no heartbeats until it restarts
    b.last_clean_epoch = -1
    b.restart_at_ms = sim.now_ms + cfg.controller.session_timeout_ms + 2_000
    sim._settle(cfg.controller.session_timeout_ms + 1_000)
    out = _under_replicated(sim, broker=2)
    assert sim.image.brokers[2].fenced and out > 100  # fencing took it out of every ISR (~150 partitions)
    counts = []
    for _ in range(200):  # it restarts, registers, is unfenced, then catches up
        sim._tick()
        counts.append(_under_replicated(sim, broker=2))
    catching_up = [c for c in counts if 0 < c < out]
    assert len(catching_up) >= 2  # 50 partitions a tick, not all at once
    assert all(a - b <= 50 for a, b in pairwise(counts))
    assert _under_replicated(sim) == 0
    check_image(sim.image, elr_enabled=sim.active.elr_enabled())
