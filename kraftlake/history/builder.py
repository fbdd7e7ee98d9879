"""Entity versions from committed records: a :class:`HistoryBuilder` replays them with the image.

A :class:`HistoryBuilder` holds the image at the last record it was fed (the oracle, ``kraftlake.image``) and
turns each further record into the entity versions it creates or ends. A version of an entity is valid on
``[from_offset, to_offset)``: it starts at the record that made it visible (state at N includes the record at
N) and ends at the record that changed or removed it. The builder is incremental: feeding a log in slices gives
the same versions as feeding it whole, which is what lets the batch import and the streaming pipeline share it.

Why replay with the image instead of grouping records by entity: a partition's state depends on more than its
own records (metadata transactions make records visible at EndTransaction or never, RemoveTopicRecord ends
every partition and topic config of the topic, ClearElrRecord touches every partition). Re-deriving those
rules per entity would be a second implementation of the replay; this one *is* the oracle. ``replay`` costs
what a record touches, so the cost is linear in records, and only the changed entities are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kraftlake.history.changes import TOPIC_RESOURCE, changes
from kraftlake.history.entities import ENTITIES
from kraftlake.history.rows import (
    EntityKey,
    Row,
    broker_row,
    config_key,
    config_row,
    keyed_rows,
    partition_row,
    topic_row,
)
from kraftlake.image import EMPTY, MetadataDelta, MetadataImage, Provenance, replay
from kraftlake.image.errors import ImageError, ReplayError
from kraftlake.protocol import messages as m
from kraftlake.records.envelope import MetadataRecord

Event = tuple[int, str, EntityKey, "Row | None", bool]
"""(offset, table, entity key, new row or None, whether the entity existed before the record)."""


@dataclass
class HistoryBatch:
    """What one slice of records adds to the history tables.

    ``versions[table]`` are new rows with ``from_offset`` and ``to_offset`` (None while current);
    ``closes[table]`` end versions begun before this slice: key columns and ``to_offset``, applied to the
    version of that key that is still open and began before ``to_offset`` (so re-applying is a no-op).
    """

    first_offset: int = -1
    last_offset: int = -1
    versions: dict[str, list[Row]] = field(default_factory=dict)
    closes: dict[str, list[Row]] = field(default_factory=dict)
    offsets: list[tuple[int, int, int]] = field(default_factory=list)
    jumps: list[tuple[int, MetadataImage]] = field(default_factory=list)
    """Gaps the slice crossed (``on_gap``): the first missing offset and the snapshot image the history goes on
    from; no state is known from that offset up to the snapshot's."""

    def tables(self) -> list[str]:
        """The tables this slice changes."""
        return sorted(set(self.versions) | set(self.closes))


class HistoryReplayError(ReplayError):
    """Raised by :meth:`HistoryBuilder.feed` when a record cannot be applied to the image it follows (a record
    about an entity the image does not hold: a log fed with records missing before it); names the offset."""


class HistoryBuilder:
    """Feeds committed records through the image and returns the entity versions each slice creates."""

    def __init__(
        self, image: MetadataImage = EMPTY, on_gap: Callable[[int, int], MetadataImage] | None = None
    ) -> None:
        self.image = image
        #: Called when the records fed skip offsets: ``on_gap(first_missing, next_offset)`` returns the state at
        #: ``next_offset - 1`` (the snapshot that covers the hole) or raises; None: records are taken as they come.
        self.on_gap = on_gap
        self._at: list[int | str] = [-1, ""]  # the offset and type of the record being fed

    def seed(self) -> HistoryBatch:
        """Versions for every entity of the starting image (a snapshot), valid from its offset."""
        batch = HistoryBatch(self.image.offset, self.image.offset)
        events: list[Event] = [
            (self.image.offset, t, k, row, False)
            for t, rows in keyed_rows(self.image).items()
            for k, row in rows
        ]
        _versions(events, batch, closes=False)
        return batch

    def feed(self, records: Iterable[MetadataRecord]) -> HistoryBatch:
        """Replay ``records`` (``MetadataRecord`` s in log order, following the current image).

        Runs of topic, partition, config and broker records outside transactions (the bulk of a log: ISR and
        leader changes, fencing, configs, topics created and deleted) go into one ``MetadataDelta`` (the
        image's own replay), which is read back per record for the entity's new state and becomes an image
        once when the run ends: a persistent-map update per touched topic and run instead of per record. Every
        other record (transactions, features, ACLs, ...) is replayed on its own and compared with ``changes``.

        Raises
        ------
        HistoryReplayError
            A record the image's replay refuses (naming its offset and type); the builder keeps the image it
            had before this call.
        """
        try:
            return self._feed(records)
        except ImageError as exc:
            if exc.offset is not None:
                raise
            at = self._at
            err = HistoryReplayError(f"record at offset {at[0]} ({at[1]}): {exc}")
            err.offset = int(at[0])
            raise err from exc

    def jump(self, image: MetadataImage) -> HistoryBatch:
        """The versions that take the history from the current image to ``image``, a snapshot past a gap in the
        log (records missing between the current image's offset and the snapshot's): every entity that differs
        is closed and (if it still exists) reopened at the snapshot's offset; the builder goes on from
        ``image``. The states between the two offsets are unknown: the caller records the gap.
        """
        at = image.offset
        batch = HistoryBatch(at, at)
        _versions(_jump_events(self.image, image), batch)
        self.image = image
        return batch

    def _feed(self, records: Iterable[MetadataRecord]) -> HistoryBatch:
        batch = HistoryBatch()
        events: list[Event] = []
        add = events.append
        image = self.image
        offsets = batch.offsets
        delta: MetadataDelta | None = None
        last: MetadataRecord | None = None  # the last record of the delta's run
        at = self._at = [-1, ""]
        on_gap = self.on_gap
        for mr in records:
            if (
                on_gap is not None
                and mr.offset > (prev := last.offset if last is not None else image.offset) + 1
            ):
                if last is not None:
                    image = _end_run(image, delta, last)
                    delta, last = None, None
                at[0], at[1] = mr.offset, mr.type
                snapshot = on_gap(prev + 1, mr.offset)
                events.extend(_jump_events(image, snapshot))
                batch.jumps.append((prev + 1, snapshot))
                image = snapshot
            offsets.append((mr.offset, mr.epoch, mr.timestamp))
            kind = mr.type
            at[0], at[1] = mr.offset, kind
            if not image.in_transaction and (mr.is_control or kind in _RUN):
                run = None if mr.is_control else _RUN[kind]
                if run is not None:  # None: the record changes nothing but the provenance
                    if delta is None:
                        delta = MetadataDelta(image)
                    run(delta, mr.record, kind, mr.offset, add)
                last = mr
                continue
            if last is not None:
                at[0], at[1] = last.offset, last.type
                image = _end_run(image, delta, last)
                delta, last = None, None
                at[0], at[1] = mr.offset, kind
            new = replay(image, mr)
            if not mr.is_control and not new.in_transaction:
                if kind == "EndTransactionRecord":
                    txn = image.transaction
                    recs = txn.records if txn else ()
                else:
                    recs = (mr.record,) if mr.record is not None else ()
                if recs:
                    events.extend((mr.offset, *c) for c in changes(image, new, recs))
            image = new
        if last is not None:
            at[0], at[1] = last.offset, last.type
            image = _end_run(image, delta, last)
        if offsets:
            batch.first_offset = offsets[0][0]
            batch.last_offset = offsets[-1][0]
        self.image = image
        _versions(events, batch)
        return batch


def without_written(batch: HistoryBatch, written: dict[str, int]) -> HistoryBatch:
    """``batch`` less the versions a killed run already appended (``from_offset <= written[table]``).

    A left-out version that this slice also ends becomes a close; of several closes of one key, the one with the
    highest ``to_offset`` is the one that ends the key's open version in the table (the others were applied).
    """
    out = HistoryBatch(batch.first_offset, batch.last_offset, offsets=batch.offsets)
    for table in batch.tables():
        floor = written.get(table, -1)
        key = ENTITIES[table].key
        closes = {tuple(c[k] for k in key): c for c in batch.closes.get(table, ())}
        versions = []
        for v in batch.versions.get(table, ()):
            if v["from_offset"] > floor:
                versions.append(v)
                continue
            if v["to_offset"] is not None:
                k = tuple(v[c] for c in key)
                prev = closes.get(k)
                if prev is None or prev["to_offset"] < v["to_offset"]:
                    closes[k] = {**{c: v[c] for c in key}, "to_offset": v["to_offset"]}
        if versions:
            out.versions[table] = versions
        if closes:
            out.closes[table] = list(closes.values())
    return out


def _jump_events(old: MetadataImage, new: MetadataImage) -> list[Event]:
    """The events at ``new``'s offset of every entity that differs between the two images."""
    at = new.offset
    before_rows, after_rows = keyed_rows(old), keyed_rows(new)
    events: list[Event] = []
    for table in ENTITIES:
        before = dict(before_rows.get(table, ()))
        after = dict(after_rows.get(table, ()))
        for key in sorted(before.keys() | after.keys(), key=repr):
            a, b = before.get(key), after.get(key)
            if a != b:
                events.append((at, table, key, b, a is not None))
    return events


def _end_run(image: MetadataImage, delta: MetadataDelta | None, last: MetadataRecord) -> MetadataImage:
    """The image at the end of a run whose last record is ``last``."""
    prov = Provenance(last.offset, last.epoch, last.timestamp)
    return delta.apply(prov) if delta is not None else image.with_provenance(prov)


AddEvent = Callable[[Event], None]


def _run_partition(
    delta: MetadataDelta,
    rec: m.PartitionRecord | m.PartitionChangeRecord,
    kind: str,
    offset: int,
    add: AddEvent,
) -> None:
    tid, pid = rec.topic_id, rec.partition_id
    p0 = delta.partition(tid, pid)
    delta.replay(rec, kind)  # raises as the image's replay does for an unknown topic or partition
    p1 = delta.partition(tid, pid)
    name = delta.topic_name(tid)
    if p1 is not None and name is not None and (p0 is None or p0 != p1):
        add((offset, "partitions", (tid, pid), partition_row(name, tid, pid, p1), p0 is not None))


def _run_config(delta: MetadataDelta, rec: m.ConfigRecord, kind: str, offset: int, add: AddEvent) -> None:
    # a ConfigRecord sets (or with a null value deletes) one name of one resource
    old = delta.config(rec.resource_type, rec.resource_name, rec.name)
    delta.replay(rec, kind)
    new = rec.value
    if old != new:
        key = config_key(rec.resource_type, rec.resource_name, rec.name)
        add((offset, "configs", key, None if new is None else config_row(key, new), old is not None))


def _run_broker(
    delta: MetadataDelta,
    rec: m.BrokerRegistrationChangeRecord | m.RegisterBrokerRecord | m.UnregisterBrokerRecord,
    kind: str,
    offset: int,
    add: AddEvent,
) -> None:
    _broker_event(delta, rec.broker_id, rec, kind, offset, add)


def _run_fencing(
    delta: MetadataDelta,
    rec: m.FenceBrokerRecord | m.UnfenceBrokerRecord,
    kind: str,
    offset: int,
    add: AddEvent,
) -> None:
    _broker_event(delta, rec.id, rec, kind, offset, add)


def _broker_event(
    delta: MetadataDelta, bid: int, rec: m.Record, kind: str, offset: int, add: AddEvent
) -> None:
    b0 = delta.broker(bid)
    delta.replay(rec, kind)
    b1 = delta.broker(bid)
    if b0 is not b1 and (b0 is None or b1 is None or b0 != b1):
        add((offset, "brokers", (bid,), None if b1 is None else broker_row(b1), b0 is not None))


def _run_topic(delta: MetadataDelta, rec: m.TopicRecord, kind: str, offset: int, add: AddEvent) -> None:
    name0 = delta.topic_name(rec.topic_id)
    _topic_events(delta, rec, kind, offset, add, name0, name0 if name0 is not None else rec.name)


def _run_remove_topic(
    delta: MetadataDelta, rec: m.RemoveTopicRecord, kind: str, offset: int, add: AddEvent
) -> None:
    name0 = delta.topic_name(rec.topic_id)
    if name0 is None:
        delta.replay(rec, kind)  # a RemoveTopicRecord of a topic not held: the replay's ReplayError
        return
    _topic_events(delta, rec, kind, offset, add, name0, name0)


def _topic_events(
    delta: MetadataDelta,
    rec: m.TopicRecord | m.RemoveTopicRecord,
    kind: str,
    offset: int,
    add: AddEvent,
    name0: str | None,
    config_name: str,
) -> None:
    # what ``changes`` compares for a topic record (the topic, its partitions, the configs of its name), read
    # from the delta: a run no longer ends at each topic created or deleted (a few hundred per 250k records of
    # churn), where every topic the run touched had its partitions copied into a new image
    tid = rec.topic_id
    resource = (TOPIC_RESOURCE, config_name)
    parts0, configs0 = delta.partitions(tid), delta.configs(*resource)
    delta.replay(rec, kind)
    name1 = delta.topic_name(tid)
    parts1, configs1 = delta.partitions(tid), delta.configs(*resource)
    if name0 != name1:
        add((offset, "topics", (tid,), None if name1 is None else topic_row(name1, tid), name0 is not None))
    for pid in parts0.keys() | parts1.keys():
        a, b = parts0.get(pid), parts1.get(pid)
        if a is b or (a is not None and b is not None and a == b):
            continue
        row = None if b is None or name1 is None else partition_row(name1, tid, pid, b)
        add((offset, "partitions", (tid, pid), row, a is not None))
    if configs0 != configs1:
        for name in configs0.keys() | configs1.keys():
            v0, v1 = configs0.get(name), configs1.get(name)
            if v0 != v1:
                key = config_key(*resource, name)
                add((offset, "configs", key, None if v1 is None else config_row(key, v1), v0 is not None))


# each run takes the record class its type names (the keys of ``_RUN``); a Callable type cannot tie the key to
# the parameter, so the record is Any here and precise in each function
Run = Callable[[MetadataDelta, Any, str, int, AddEvent], None]

#: The records a run of the delta takes (outside transactions), each with what turns it into its events (None:
#: the record only advances the provenance).
_RUN: dict[str, Run | None] = {
    "PartitionChangeRecord": _run_partition,
    "PartitionRecord": _run_partition,
    "ConfigRecord": _run_config,
    "BrokerRegistrationChangeRecord": _run_broker,
    "FenceBrokerRecord": _run_fencing,
    "UnfenceBrokerRecord": _run_fencing,
    "RegisterBrokerRecord": _run_broker,
    "UnregisterBrokerRecord": _run_broker,
    "TopicRecord": _run_topic,
    "RemoveTopicRecord": _run_remove_topic,
    "NoOpRecord": None,
}


def _versions(events: list[Event], batch: HistoryBatch, closes: bool = True) -> None:
    open_: dict[tuple[str, EntityKey], Row] = {}
    seen: set[tuple[str, EntityKey]] = set()  # keys whose version from before the slice is closed
    for offset, table, key, row, existed in events:
        prev = open_.pop((table, key), None)
        if prev is not None:
            prev["to_offset"] = offset
        elif closes and existed and (table, key) not in seen:
            # the key's first change in the slice ends a version begun before it, unless the entity is new
            close = dict(zip(ENTITIES[table].key, key, strict=True))
            close["to_offset"] = offset
            batch.closes.setdefault(table, []).append(close)
        seen.add((table, key))
        if row is not None:
            # rows are built fresh for each event: the version is the row itself, no copy
            row["from_offset"] = offset
            row["to_offset"] = None
            batch.versions.setdefault(table, []).append(row)
            open_[(table, key)] = row
