"""``HistoryRules``: what the history a controller writes must hold, checked on every command's records.

The image invariants (`kraftlake.sim.cluster.check_image`) look at one state; these look across states, as the
warehouse's validation suites do on the history tables (`kraftlake.spark.validate`):

- a TopicRecord never names a topic id the log has held before (live or deleted): Kafka draws a new random id
  for every topic, and a history keyed by topic id would mix the two topics' partitions;
- a partition's epoch grows with each change (`partition_epochs_increase`), and its leader epoch never goes back;
- the other values a controller hands out from its state never repeat: a broker's epoch grows with each of its
  registrations, and each producer id block starts past the previous one.

The simulators call ``check`` after each command the active controller executes, with the image that follows
it, and ``rebase`` at each new controller epoch (what an earlier term appended and did not commit is gone; the
image the new term starts from is the history from then on).
"""

from __future__ import annotations

from collections.abc import Iterable

from kraftlake.image import MetadataImage
from kraftlake.protocol import messages as m
from kraftlake.sim.errors import InvariantViolation

_TOPIC = m.TopicRecord
_PARTITION = m.PartitionRecord
_PARTITION_CHANGE = m.PartitionChangeRecord
_REGISTER_BROKER = m.RegisterBrokerRecord
_PRODUCER_IDS = m.ProducerIdsRecord


class HistoryRules:
    """The topic ids and partition epochs a log has written so far, and the rules new records must keep."""

    def __init__(self, image: MetadataImage) -> None:
        self._topic_names: dict[str, str] = {}  # topic id -> the name of the topic first created under it
        self._epochs: dict[tuple[str, int], tuple[int, int]] = {}  # -> (partition epoch, leader epoch)
        self._broker_epochs: dict[int, int] = {}  # broker id -> the epoch of its last registration
        self._next_producer_id = -1
        self.checked = 0
        self.rebase(image)

    def rebase(self, image: MetadataImage) -> None:
        """``image`` is the history's state now (a controller became active with it)."""
        for t in image.topics_by_id.values():
            self._topic_names.setdefault(t.id, t.name)
            for pid, p in t.partitions.items():
                self._epochs[(t.id, pid)] = (p.partition_epoch, p.leader_epoch)
        for b in image.brokers.values():
            self._broker_epochs[b.id] = b.epoch
        self._next_producer_id = image.next_producer_id

    def check(self, records: Iterable[object], image: MetadataImage) -> None:
        """Raise ``InvariantViolation`` if ``records`` (one command's, in order), leading to ``image``, break a
        rule."""
        touched: set[tuple[str, int]] = set()
        for rec in records:
            kind = type(rec)
            if kind is _TOPIC:
                topic_id, name = rec.topic_id, rec.name  # type: ignore[attr-defined]
                first = self._topic_names.get(topic_id)
                if first is not None:
                    raise InvariantViolation(
                        "topic_id_unique", f"TopicRecord {name!r} reuses the topic id {topic_id} of {first!r}"
                    )
                self._topic_names[topic_id] = name
            elif kind is _PARTITION or kind is _PARTITION_CHANGE:
                touched.add((rec.topic_id, rec.partition_id))  # type: ignore[attr-defined]
            elif kind is _REGISTER_BROKER:
                broker, epoch = rec.broker_id, rec.broker_epoch  # type: ignore[attr-defined]
                last = self._broker_epochs.get(broker)
                if last is not None and epoch <= last:
                    raise InvariantViolation(
                        "broker_epochs_increase",
                        f"broker {broker} registered with epoch {epoch} after {last}",
                    )
                self._broker_epochs[broker] = epoch
            elif kind is _PRODUCER_IDS:
                block_end = rec.next_producer_id  # type: ignore[attr-defined]
                if block_end <= self._next_producer_id:
                    raise InvariantViolation(
                        "producer_id_blocks_disjoint",
                        f"a producer id block ending at {block_end} after one ending at {self._next_producer_id}",
                    )
                self._next_producer_id = block_end
        topics = image.topics_by_id
        for key in touched:
            t = topics.get(key[0])
            p = t.partitions.get(key[1]) if t is not None else None
            if p is None:  # deleted by the same command
                continue
            before = self._epochs.get(key)
            if before is not None:
                where = f"{t.name}-{key[1]} ({key[0]})"  # type: ignore[union-attr]
                if p.partition_epoch <= before[0]:
                    raise InvariantViolation(
                        "partition_epochs_increase",
                        f"{where}: partition epoch {p.partition_epoch} after {before[0]}",
                    )
                if p.leader_epoch < before[1]:
                    raise InvariantViolation(
                        "leader_epochs_never_decrease",
                        f"{where}: leader epoch {p.leader_epoch} after {before[1]}",
                    )
            self._epochs[key] = (p.partition_epoch, p.leader_epoch)
        self.checked += 1
