"""``BrokerPartitions``: which partitions each broker holds a replica of (after Kafka's ``BrokersToIsrs``).

Fencing, unfencing and controlled shutdown must touch only the partitions of one broker: a scan of every
partition for each of them would grow with the whole cluster. The controller feeds this index every
record it replays (its own appends and, as a standby, committed records), so it is hot after a failover.

Kafka indexes ISR membership in a timeline structure that is rolled back with uncommitted state. This index
is simpler and needs no rollback: it keys on *replicas* (ISR, leader, ELR and last known ELR are subsets of
them, so it answers every question the controller asks) and it is a *superset*: it only ever adds
``(topic, partition)`` entries. Stale entries (a deleted topic, a replica moved away, records an aborted
transaction or a lost leadership never made visible) are filtered out against the images at lookup and
pruned when no image still needs them. Entries are packed as 64-bit ints in one ``array`` per broker: about
8 bytes per replica.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any

from kraftlake.image import MetadataImage
from kraftlake.image.model import PartitionRegistration, TopicImage
from kraftlake.protocol import messages as m

_PARTITION = m.PartitionRecord
_PARTITION_CHANGE = m.PartitionChangeRecord
_PID_BITS = 32
_PID_MASK = (1 << _PID_BITS) - 1


class BrokerPartitions:
    """Broker id -> the partitions it is (or may have been) a replica of."""

    __slots__ = ("_by_broker", "_topic_ids", "_topic_nums")

    def __init__(self, image: MetadataImage | None = None) -> None:
        self._topic_nums: dict[str, int] = {}
        self._topic_ids: list[str] = []
        self._by_broker: dict[int, array[int]] = {}
        if image is not None:
            self.add_image(image)

    def _key(self, topic_id: str, partition_id: int) -> int:
        num = self._topic_nums.get(topic_id)
        if num is None:
            num = self._topic_nums[topic_id] = len(self._topic_ids)
            self._topic_ids.append(topic_id)
        return (num << _PID_BITS) | partition_id

    def add(self, topic_id: str, partition_id: int, replicas: Sequence[int]) -> None:
        """Record that ``replicas`` hold ``topic_id``-``partition_id``."""
        key = self._key(topic_id, partition_id)
        by_broker = self._by_broker
        for b in replicas:
            arr = by_broker.get(b)
            if arr is None:
                arr = by_broker[b] = array("q")
            arr.append(key)

    def add_image(self, image: MetadataImage) -> None:
        """Index every partition of ``image`` (a controller starting from a snapshot)."""
        for t in image.topics_by_id.values():
            for pid, p in t.partitions.items():
                self.add(t.id, pid, p.replicas)

    def observe(self, kind: str, record: Any) -> None:
        """A metadata record being replayed: PartitionRecords and replica changes add entries."""
        if kind == "PartitionRecord" or (kind == "PartitionChangeRecord" and record.replicas is not None):
            self.add(record.topic_id, record.partition_id, record.replicas)

    def observe_all(self, records: Sequence[Any]) -> None:
        """``observe`` each of ``records`` (typed metadata records, in replay order)."""
        add = self.add
        for r in records:
            kind = type(r)
            if kind is _PARTITION_CHANGE:
                if r.replicas is not None:
                    add(r.topic_id, r.partition_id, r.replicas)
            elif kind is _PARTITION:
                add(r.topic_id, r.partition_id, r.replicas)

    def partitions(
        self, broker_id: int, image: MetadataImage, keep_for: Sequence[MetadataImage] = ()
    ) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
        """The partitions of ``image`` that ``broker_id`` is a replica of, each once, in index order.

        Entries that neither ``image`` nor any of ``keep_for`` (e.g. the committed image, to which a
        controller falls back when it loses leadership) holds with this broker as a replica are pruned.
        """
        arr = self._by_broker.get(broker_id)
        if arr is None:
            return
        topic_ids = self._topic_ids
        topics = image.topics_by_id
        seen: set[int] = set()
        stale = 0
        for key in arr:
            if key in seen:
                stale += 1
                continue
            seen.add(key)
            pid = key & _PID_MASK
            topic_id = topic_ids[key >> _PID_BITS]
            t = topics.get(topic_id)
            p = t.partitions.get(pid) if t is not None else None
            if t is not None and p is not None and broker_id in p.replicas:
                yield t, pid, p
            elif not any(_holds(other, topic_id, pid, broker_id) for other in keep_for):
                seen.discard(key)
                stale += 1
        if stale > len(arr) // 4:
            kept = array("q", [k for k in dict.fromkeys(arr) if k in seen])
            self._by_broker[broker_id] = kept

    def size(self) -> int:
        """How many entries the index holds (stale ones included)."""
        return sum(len(a) for a in self._by_broker.values())


def _holds(image: MetadataImage, topic_id: str, pid: int, broker_id: int) -> bool:
    t = image.topics_by_id.get(topic_id)
    p = t.partitions.get(pid) if t is not None else None
    return p is not None and broker_id in p.replicas
