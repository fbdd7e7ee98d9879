"""The broker -> partitions index agrees with a full scan of the image, through reassignments, topic deletion,
failovers (the standby's index is hot) and restarts from a snapshot image."""

from __future__ import annotations

from kraftlake.controller import QuorumController
from kraftlake.controller.broker_index import BrokerPartitions
from kraftlake.image import MetadataImage
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator

WEIGHTS = {
    "isr_shrink": 5,
    "isr_expand": 5,
    "crash": 2,
    "restart": 3,
    "controlled_shutdown": 2,
    "create_topic": 2,
    "delete_topic": 2,
    "create_partitions": 1,
    "reassign": 4,
    "failover": 1,
    "idle": 2,
}


def _scan(img: MetadataImage, broker: int) -> set[tuple[str, int]]:
    return {
        (t.id, pid)
        for t in img.topics_by_id.values()
        for pid, p in t.partitions.items()
        if broker in p.replicas
    }


def _indexed(index: BrokerPartitions, img: MetadataImage, broker: int) -> list[tuple[str, int]]:
    return [(t.id, pid) for t, pid, _ in index.partitions(broker, img)]


def _check(c: QuorumController, brokers: int) -> None:
    img = c.image
    for b in range(brokers):
        got = _indexed(c.broker_partitions, img, b)
        assert len(got) == len(set(got)), "a partition listed twice"
        assert set(got) == _scan(img, b)


def test_index_matches_full_scan_during_a_simulation() -> None:
    cfg = ClusterSimConfig(
        brokers=7,
        topics=6,
        partitions_per_topic=5,
        events=1500,
        seed=5,
        check_every=1,
        max_down_fraction=0.4,
        weights=WEIGHTS,
    )
    sim = ClusterSimulator(cfg)
    checked = [0]

    def after(s: ClusterSimulator) -> None:
        if s.summary.events % 50 == 0:
            for c in s.controllers:
                _check(c, cfg.brokers)
            checked[0] += 1

    sim.after_event = after
    summary = sim.run()
    assert summary.failovers > 0 and summary.event_counts["reassign"] and summary.event_counts["delete_topic"]
    assert checked[0] >= 20
    # an index built from a snapshot image answers the same
    img = sim.active.committed_image
    fresh = QuorumController(image=img)
    _check(fresh, cfg.brokers)


def test_stale_entries_are_pruned_but_kept_while_the_committed_image_needs_them() -> None:
    cfg = ClusterSimConfig(brokers=4, topics=3, partitions_per_topic=4, events=0, seed=1, standby=False)
    sim = ClusterSimulator(cfg)
    sim.run()
    c = sim.active
    before = c.image
    index = c.broker_partitions
    size = index.size()
    victim = next(iter(before.topics_by_name))
    c.execute(c.handle_delete_topics([victim]))
    after = c.image
    gone = {pid for pid in before.topics_by_name[victim].partitions}
    # the committed image (kept) still has the topic: entries stay; then without it they are pruned
    for b in range(cfg.brokers):
        list(index.partitions(b, after, (before,)))
    assert index.size() == size
    for b in range(cfg.brokers):
        assert all(t.name != victim for t, _, _ in index.partitions(b, after))
    assert index.size() == size - 3 * len(gone)
