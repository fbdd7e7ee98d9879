"""The data-at-risk oracle: the offsets at which a partition could lose acknowledged writes, found by replaying
the log through the image one offset at a time.

A *risk window* is a range of offsets ``[from_offset, to_offset)`` of one partition (topic, topic id, index)
in which a condition held with the same attributes (leader, ISR, and for ``under_min_isr`` the effective
``min.insync.replicas`` and where it came from); a change of an attribute ends one window and opens the next.
``to_offset`` is None for a window still open at the end of the log. The kinds:

- ``under_min_isr``: as Kafka's ``kafka-topics --under-min-isr-partitions`` (``TopicCommand``): the partition
  has no leader, or its ISR is smaller than its effective ``min.insync.replicas``: the topic's config, else the
  leader's dynamic per-broker config (BROKER resource named by the leader's id; none without a leader), else
  the cluster default (BROKER resource with the empty name), else Kafka's default, 1, each as it is at that
  offset. A value that is not an integer is passed over for the next one.
- ``isr_leader_only``: the ISR is the leader alone and the partition has more than one replica (Jepsen's
  finding: acknowledged writes are lost when that leader fails).
- ``offline``: as ``kafka-topics --unavailable-partitions``: no leader (-1), or a leader that is not a live
  broker (not registered, or fenced).
- ``recovering``: the leader's recovery state is RECOVERING (1), as after an unclean election until the new
  leader reports RECOVERED.
- ``unclean_election`` (one offset, ``[o, o + 1)``): a new leader that was neither in the previous ISR nor in
  its eligible or last known eligible leader replicas, or a leader recovery state that became RECOVERING.
- ``elr_election`` (one offset): a new leader from outside the previous ISR taken from the eligible leader
  replicas or the last known ones (KIP-966).

The elections carry the previous leader and ISR. ``from_timestamp`` and ``to_timestamp`` are the timestamps
of the records at ``from_offset`` and ``to_offset`` (a one-offset event: both its own record's; ``None`` where
the warehouse's ``offsets`` table no longer holds the offset). Inside a
metadata transaction the image shows the state before it, so a transaction's changes start and end windows at
its ``EndTransactionRecord``, as in the history tables. A topic deleted ends its partitions' windows at the
``RemoveTopicRecord``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kraftlake.image import EMPTY, MetadataImage, replay
from kraftlake.image.image import ConfigKey
from kraftlake.image.model import NO_LEADER, PartitionRegistration
from kraftlake.records.envelope import MetadataRecord

MIN_ISR = "min.insync.replicas"
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
KAFKA_DEFAULT_MIN_ISR = 1
RECOVERING = 1

WINDOW_KINDS = ("under_min_isr", "isr_leader_only", "offline", "recovering")
EVENT_KINDS = ("unclean_election", "elr_election")
KINDS = (*WINDOW_KINDS, *EVENT_KINDS)


@dataclass(frozen=True, slots=True)
class RiskWindow:
    """One window of one kind for one partition (see the module's docstring)."""

    kind: str
    topic: str
    topic_id: str
    partition: int
    from_offset: int
    to_offset: int | None
    from_timestamp: int | None
    to_timestamp: int | None
    leader: int
    isr: tuple[int, ...]
    min_isr: int | None = None
    min_isr_source: str | None = None
    previous_leader: int | None = None
    previous_isr: tuple[int, ...] | None = None

    def sort_key(self) -> tuple[str, int, str, int]:
        return (self.topic_id, self.partition, self.kind, self.from_offset)


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def effective_min_isr(image: MetadataImage, topic: str, leader: int) -> tuple[int, str]:
    """``(min.insync.replicas, source)`` of ``topic`` led by ``leader`` in ``image``; source is ``topic``,
    ``broker``, ``cluster`` or ``default``."""
    levels: list[tuple[ConfigKey, str]] = [((TOPIC_RESOURCE, topic), "topic")]
    if leader != NO_LEADER:
        levels.append(((BROKER_RESOURCE, str(leader)), "broker"))
    levels.append(((BROKER_RESOURCE, ""), "cluster"))
    for key, source in levels:
        configs = image.configs.get(key)
        value = _int(configs.get(MIN_ISR)) if configs else None
        if value is not None:
            return value, source
    return KAFKA_DEFAULT_MIN_ISR, "default"


# what a window carries besides its range: leader, isr, min ISR, its source
_Attrs = tuple[int, tuple[int, ...], "int | None", "str | None"]


def partition_conditions(
    image: MetadataImage, topic: str, p: PartitionRegistration
) -> Iterator[tuple[str, _Attrs]]:
    """The window kinds that hold for partition ``p`` of ``topic`` in ``image``, with their attributes."""
    leader, isr = p.leader, p.isr
    min_isr, source = effective_min_isr(image, topic, leader)
    if leader == NO_LEADER or len(isr) < min_isr:
        yield "under_min_isr", (leader, isr, min_isr, source)
    if len(p.replicas) > 1 and leader != NO_LEADER and isr == (leader,):
        yield "isr_leader_only", (leader, isr, None, None)
    if leader == NO_LEADER:
        yield "offline", (leader, isr, None, None)
    else:
        broker = image.brokers.get(leader)
        if broker is None or broker.fenced:
            yield "offline", (leader, isr, None, None)
    if p.leader_recovery_state == RECOVERING:
        yield "recovering", (leader, isr, None, None)


def election_kind(before: PartitionRegistration, after: PartitionRegistration) -> str | None:
    """``unclean_election``, ``elr_election`` or None for a partition changing from ``before`` to ``after``."""
    elected = after.leader != before.leader and after.leader != NO_LEADER
    became_recovering = after.leader_recovery_state == RECOVERING and (
        before.leader_recovery_state != RECOVERING or elected
    )
    if became_recovering:
        return "unclean_election"
    if not elected or after.leader in before.isr:
        return None
    if after.leader in before.elr or after.leader in before.last_known_elr:
        return "elr_election"
    return "unclean_election"


@dataclass
class _Open:
    topic: str
    attrs: _Attrs
    from_offset: int
    from_timestamp: int


def risk_windows(records: Iterable[MetadataRecord], image: MetadataImage = EMPTY) -> list[RiskWindow]:
    """Every risk window of the log ``records`` (in offset order, replayed onto ``image``), sorted by topic id,
    partition, kind and start.

    The conditions of every partition are evaluated after each record that changed topics, configs or brokers:
    the oracle that the SQL function ``risk_windows`` and the history-based computations are checked against.
    """
    out: list[RiskWindow] = []
    opened: dict[tuple[str, int, str], _Open] = {}

    def close(key: tuple[str, int, str], w: _Open, to: int | None, to_ts: int | None) -> None:
        leader, isr, min_isr, source = w.attrs
        out.append(
            RiskWindow(
                key[2],
                w.topic,
                key[0],
                key[1],
                w.from_offset,
                to,
                w.from_timestamp,
                to_ts,
                leader,
                isr,
                min_isr,
                source,
            )
        )

    for mr in records:
        new = replay(image, mr)
        if (
            new.topics_by_id is image.topics_by_id
            and new.configs is image.configs
            and new.brokers is image.brokers
        ):
            image = new
            continue
        offset, ts = mr.offset, mr.timestamp
        now: dict[tuple[str, int, str], tuple[str, _Attrs]] = {}
        for tid, t in new.topics_by_id.items():
            old_topic = image.topics_by_id.get(tid)
            for pid, p in t.partitions.items():
                for kind, attrs in partition_conditions(new, t.name, p):
                    now[(tid, pid, kind)] = (t.name, attrs)
                before = old_topic.partitions.get(pid) if old_topic is not None else None
                if before is None or before is p:
                    continue
                event = election_kind(before, p)
                if event is not None:
                    out.append(
                        RiskWindow(
                            event,
                            t.name,
                            tid,
                            pid,
                            offset,
                            offset + 1,
                            ts,
                            ts,
                            p.leader,
                            p.isr,
                            previous_leader=before.leader,
                            previous_isr=before.isr,
                        )
                    )
        for key, w in list(opened.items()):
            current = now.get(key)
            if current is None or current[1] != w.attrs:
                close(key, w, offset, ts)
                del opened[key]
        for key, (topic, attrs) in now.items():
            if key not in opened:
                opened[key] = _Open(topic, attrs, offset, ts)
        image = new
    for key, w in opened.items():
        close(key, w, None, None)
    out.sort(key=RiskWindow.sort_key)
    return out
