"""MetadataDelta's per-record reads (``partition``, ``topic_name``, ``config``, ``broker``): after each record they
answer what the image the delta applies to would hold, which is what the history builder reads back."""

from __future__ import annotations

from typing import Any

from kraftlake.image import EMPTY, MetadataDelta, MetadataImage, Provenance, replay_all
from kraftlake.protocol import messages as m
from tests.image.conftest import envelopes

T1 = "hSCzevIQRUa-ojqTd_8C5w"
T2 = "v9meXjI1RVKB-NSvF0GXDA"


def _image(*records: Any) -> MetadataImage:
    return replay_all(EMPTY, envelopes(list(records), 0))


def _partition(topic_id: str, pid: int, leader: int = 1) -> Any:
    return m.PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=(1, 2), isr=(1, 2), leader=leader)


def _reads(delta: MetadataDelta, image: MetadataImage) -> None:
    """Every read of the delta equals the same read of ``image`` (the delta applied)."""
    for tid in (T1, T2, "AAAAAAAAAAAAAAAAAAAAAA"):
        t = image.topics_by_id.get(tid)
        assert delta.topic_name(tid) == (None if t is None else t.name)
        for pid in range(3):
            assert delta.partition(tid, pid) == (None if t is None else t.partitions.get(pid))
    for name in ("retention.ms", "cleanup.policy"):
        for resource in ("a", "b"):
            assert delta.config(2, resource, name) == (image.configs.get((2, resource)) or {}).get(name)
    for bid in (1, 2):
        assert delta.broker(bid) == image.brokers.get(bid)


def test_reads_follow_every_record() -> None:
    base = _image(
        m.TopicRecord(name="a", topic_id=T1),
        _partition(T1, 0),
        _partition(T1, 1),
        m.ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value="1000"),
    )
    records = [
        m.PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1,), leader=1),
        m.ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value="2000"),
        m.ConfigRecord(resource_type=2, resource_name="a", name="cleanup.policy", value="compact"),
        m.TopicRecord(name="b", topic_id=T2),
        _partition(T2, 0, leader=2),
        m.PartitionChangeRecord(partition_id=0, topic_id=T2, leader=1),
        m.ConfigRecord(resource_type=2, resource_name="b", name="retention.ms", value="5"),
        m.ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value=None),
        m.RemoveTopicRecord(topic_id=T1),
        m.RemoveTopicRecord(topic_id=T2),
    ]
    delta = MetadataDelta(base)
    _reads(delta, base)
    for i, rec in enumerate(records):
        delta.replay(rec)
        _reads(delta, delta.apply(Provenance(i, 1, 0)))
