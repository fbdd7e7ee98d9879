"""Replaying committed records into images, with Kafka's metadata transaction semantics.

Two ways that always agree (a property test checks it):

- ``replay(image, record) -> image``: pure, one record at a time; costs what the record touches.
- ``ImageLoader``: feeds records into one ``MetadataDelta`` and applies it only when an image is asked for
  (Kafka's ``MetadataBatchLoader``); this is the fast path for logs and snapshots.

Metadata transactions (KIP-868): records between BeginTransactionRecord and EndTransactionRecord become
visible together at EndTransaction; an AbortTransactionRecord discards them. The image at an offset inside an
open transaction shows the state before BeginTransaction (Kafka's loader publishes only at transaction
boundaries), carries the provenance of the record at that offset, and describes the open transaction in
``MetadataImage.transaction``. Control records (LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters) and
NoOp/ZkMigrationState records only advance the provenance.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, cast

from kraftlake.image.delta import (
    _HANDLERS,
    IGNORED_RECORDS,
    MetadataDelta,
    merge_partition,
    partition_from_record,
)
from kraftlake.image.errors import ReplayError, TransactionError, at_offset
from kraftlake.image.image import EMPTY, MetadataImage, _Chain
from kraftlake.image.model import Provenance, TopicImage
from kraftlake.protocol import messages as m
from kraftlake.records.envelope import MetadataRecord

BEGIN = "BeginTransactionRecord"
END = "EndTransactionRecord"
ABORT = "AbortTransactionRecord"


def _provenance(mr: Committed) -> Provenance:
    return Provenance(mr.offset, mr.epoch, mr.timestamp)


def _replay_partition(image: MetadataImage, mr: Committed) -> MetadataImage | None:
    """Fast path of ``replay`` for a PartitionChangeRecord or PartitionRecord of an existing topic, outside a
    transaction: no delta, one new topic and one persistent-map update. None when the general path must run
    (it also raises the errors)."""
    r = cast("m.PartitionChangeRecord | m.PartitionRecord", mr.record)  # by ``mr.type``, as replay checked
    topics = image.topics_by_id
    t = topics.get(r.topic_id)
    if t is None:
        return None
    pid = r.partition_id
    if mr.type == "PartitionChangeRecord":
        p = t.partitions.get(pid)
        if p is None:
            return None
        new = merge_partition(p, cast(m.PartitionChangeRecord, r))
    else:
        new = partition_from_record(cast(m.PartitionRecord, r))
    parts = dict(t.partitions)
    parts[pid] = new
    prov = Provenance(mr.offset, mr.epoch, mr.timestamp)
    return image._with_topics(prov, topics.set(t.id, TopicImage(t.name, t.id, parts)))


_PARTITION_RECORDS = frozenset({"PartitionChangeRecord", "PartitionRecord"})


def replay(image: MetadataImage, mr: Committed) -> MetadataImage:
    """The image after the committed record ``mr`` (a ``kraftlake.records.MetadataRecord``)."""
    if mr.type in _PARTITION_RECORDS and image._txn is None and not mr.is_control:
        fast = _replay_partition(image, mr)
        if fast is not None:
            return fast
    prov = _provenance(mr)
    if mr.is_control:
        return image.with_provenance(prov)
    kind = mr.type
    txn = image._txn
    if kind == BEGIN:
        if txn is not None:
            raise TransactionError(
                f"offset {mr.offset}: BeginTransactionRecord while already in a transaction"
            )
        begin = cast(m.BeginTransactionRecord, mr.record)
        return image._replace(provenance=prov, txn=(begin.name, mr.offset, None))
    if kind in (END, ABORT):
        if txn is None:
            raise TransactionError(f"offset {mr.offset}: {kind} without a BeginTransactionRecord")
        if kind == ABORT:
            return image._replace(provenance=prov, txn=None)
        pending: list[m.Record] = []
        chain = txn[2]
        while chain is not None:
            pending.append(chain[0])
            chain = chain[1]
        delta = MetadataDelta(image)
        for rec in reversed(pending):
            delta.replay(rec)
        return delta.apply(prov)
    if txn is not None:
        return image._replace(provenance=prov, txn=(txn[0], txn[1], (mr.record, txn[2])))
    delta = MetadataDelta(image)
    try:
        # a data record's envelope always holds the decoded record (None is for control types only)
        delta.replay(cast(m.Record, mr.record), kind)
    except ReplayError as exc:
        raise at_offset(exc, mr.offset) from exc
    return delta.apply(prov)


def replay_all(image: MetadataImage, records: Iterable[Committed]) -> MetadataImage:
    """``replay`` over many records, one by one (use ``ImageLoader`` for speed)."""
    for mr in records:
        image = replay(image, mr)
    return image


class ImageLoader:
    """Builds images from a stream of committed records, applying changes in batches.

    ``feed`` records in log order, then ask for ``image()``: the delta gathered since the last image is
    applied once. Equivalent to ``replay`` record by record.
    """

    def __init__(self, image: MetadataImage = EMPTY) -> None:
        self._prov = image.provenance
        self._last: Committed | Provenance | None = (
            None  # the last record fed, whose provenance ``_prov`` does not hold yet
        )
        self._txn_name: str | None = None
        self._txn_begin = -1
        self._txn_records: list[m.Record] | None = None
        self._chain: tuple[_Chain, int, list[m.Record] | None] = (
            None,
            0,
            None,
        )  # (chain, records in it, of which list)
        txn = image.transaction
        if txn is None:
            self._base = image
            self._delta = MetadataDelta(image)
            self._dirty = False
        else:
            self._base = image._replace(txn=None)
            self._delta = MetadataDelta(self._base)
            self._txn_name, self._txn_begin, self._txn_records = txn.name, txn.begin_offset, []
            for rec in txn.records:
                self._delta.replay(rec)
                self._txn_records.append(rec)
            self._dirty = True

    @property
    def provenance(self) -> Provenance:
        last = self._last
        if last is not None:
            self._prov = Provenance(last.offset, last.epoch, last.timestamp)
            self._last = None
        return self._prov

    @property
    def in_transaction(self) -> bool:
        return self._txn_records is not None

    def feed(self, mr: Committed) -> None:
        """Take one committed record (a ``kraftlake.records.MetadataRecord``)."""
        self._last = mr
        if mr.is_control:
            return
        kind = mr.type
        handler = _HANDLERS.get(kind)
        if handler is not None:
            try:
                handler(self._delta, mr.record)
            except ReplayError as exc:
                raise at_offset(exc, mr.offset) from exc
            self._dirty = True
            if self._txn_records is not None:
                self._txn_records.append(cast(m.Record, mr.record))  # a data record: decoded
            return
        if kind in IGNORED_RECORDS:
            self._dirty = True
            if self._txn_records is not None:
                self._txn_records.append(cast(m.Record, mr.record))  # a data record: decoded
            return
        if kind == BEGIN:
            if self._txn_records is not None:
                raise TransactionError(
                    f"offset {mr.offset}: BeginTransactionRecord while already in a transaction"
                )
            # the transaction's delta starts from the committed state at its beginning
            if self._dirty:
                self._base = self._delta.apply(self.provenance)
                self._delta = MetadataDelta(self._base)
                self._dirty = False
            begin = cast(m.BeginTransactionRecord, mr.record)
            self._txn_name, self._txn_begin, self._txn_records = begin.name, mr.offset, []
            return
        if kind in (END, ABORT):
            if self._txn_records is None:
                raise TransactionError(f"offset {mr.offset}: {kind} without a BeginTransactionRecord")
            if kind == ABORT:
                self._delta = MetadataDelta(self._base)
                self._dirty = False
            self._txn_records = None
            return
        raise ReplayError(f"Unknown metadata record type {kind}")

    def feed_batch(
        self, records: Sequence[m.Record], base_offset: int, epoch: int, timestamps: int | Sequence[int] = -1
    ) -> None:
        """Take typed metadata records (no envelopes, no control records) committed at consecutive offsets
        from ``base_offset`` in ``epoch``: what ``feed`` of their envelopes does, without building them (a
        controller replays 60k records of a controlled shutdown on each voter). ``timestamps``: one for all,
        or one per record."""
        n = len(records)
        if not n:
            return
        stamps: Sequence[int] = [timestamps] * n if isinstance(timestamps, int) else timestamps
        handlers = _HANDLERS
        delta = self._delta
        txn = self._txn_records
        fed = False
        for i, rec in enumerate(records):
            handler = handlers.get(type(rec).__name__)
            if handler is not None:
                try:
                    handler(delta, rec)
                except ReplayError as exc:
                    raise at_offset(exc, base_offset + i) from exc
                fed = True
                if txn is not None:
                    txn.append(rec)
                continue
            # transaction markers and ignored records: the general path (a BeginTransaction applies the delta
            # so far, at its own provenance, as feed does for any record)
            if fed:
                self._dirty = True
                fed = False
            self.feed(_Envelope(base_offset + i, epoch, stamps[i], False, type(rec).__name__, rec))
            delta = self._delta
            txn = self._txn_records
        if fed:
            self._dirty = True
        self._last = Provenance(base_offset + n - 1, epoch, stamps[n - 1])

    def feed_all(self, records: Iterable[Committed]) -> None:
        feed = self.feed
        for mr in records:
            feed(mr)

    def image(self) -> MetadataImage:
        """The image at the last record fed (see the module doc for offsets inside a transaction)."""
        prov = self.provenance
        if self._txn_records is not None:
            # the chain of the transaction's records (newest first), extended by what was fed since the last
            # image: an active controller asks for one per appended batch of a 60k-record transaction
            records = self._txn_records
            chain, done, of = self._chain
            if of is not records:
                chain, done = None, 0
            for i in range(done, len(records)):
                chain = (records[i], chain)
            self._chain = (chain, len(records), records)
            txn = (self._txn_name, self._txn_begin, chain)
            return self._base._replace(provenance=prov, txn=txn)
        if self._dirty:
            self._base = self._delta.apply(prov)
            self._delta = MetadataDelta(self._base)
            self._dirty = False
        elif self._base.provenance != prov:
            self._base = self._base.with_provenance(prov)
            self._delta = MetadataDelta(self._base)
        return self._base


class _Envelope(NamedTuple):
    """The fields of a ``MetadataRecord`` that ``feed`` reads."""

    offset: int
    epoch: int
    timestamp: int
    is_control: bool
    type: str
    record: m.Record


Committed = MetadataRecord | _Envelope
"""A committed record as the replay reads it (``type`` names ``record``'s class)."""


def load_records(records: Iterable[Committed], image: MetadataImage = EMPTY) -> MetadataImage:
    """The image after all ``records`` on top of ``image``."""
    loader = ImageLoader(image)
    loader.feed_all(records)
    return loader.image()
