"""Committed records: ``kraftlake.logformat`` batches turned into typed :class:`MetadataRecord` envelopes
(built by `kraftlake.records.envelope`; the KRaft-shaped fast path builds the same envelopes inline)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from kraftlake.logformat.batch import RecordBatch
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.control import decode_control_key
from kraftlake.protocol.errors import ProtocolError
from kraftlake.records.envelope import (
    MetadataRecord,
    control_envelope,
    decode_data_envelope,
    decode_error,
)
from kraftlake.records.errors import RecordDecodeError
from kraftlake.records.serde import decode_metadata_record, fast_decoder, metadata_spec

__all__ = ["MetadataRecord", "decode_values", "iter_records"]


def iter_records(batches: Iterable[Any], source: str | None = None) -> Iterator[MetadataRecord]:
    """The records of ``batches`` (``kraftlake.logformat.RecordBatch``) as :class:`MetadataRecord` s.

    Control batches give control records (LeaderChange, SnapshotHeader, ...), other batches metadata
    records. A value that cannot be decoded raises :class:`RecordDecodeError` naming the source (``source`` or
    the batch's own), the batch's byte position, the record's offset and the position within the value.
    """
    memo: dict[bytes, tuple[str, int, int, Record]] = {}
    memo_get = memo.get
    dispatch = _DISPATCH
    tnew = tuple.__new__
    envelope = MetadataRecord
    memo_max = _MEMO_MAX_VALUE
    for batch in batches:
        epoch = batch.partition_leader_epoch
        base = batch.base_offset
        name = source if source is not None else getattr(batch, "source", "<bytes>")
        if batch.is_control:
            for r in batch.iter_records() if type(batch) is RecordBatch else batch.records:
                try:
                    ctype = decode_control_key(r.key)
                except ProtocolError as exc:
                    raise decode_error(exc, name, batch.position, r.offset, "control record key") from exc
                yield control_envelope(
                    int(ctype),
                    r.value or b"",
                    r.offset,
                    epoch,
                    r.timestamp,
                    base,
                    source=name,
                    position=batch.position,
                )
            continue
        # Batches as KRaft writes them (every record: null key, no headers, deltas = index and 0) come as bare
        # values, already framed and checked, and are decoded one by one as the consumer asks. A record is built
        # only when it is yielded: a batch's worth of live records would wake the cyclic garbage collector
        # every few hundred records (measured: 1,700 collections and 20% of the time on the bench segment).
        values = batch.kraft_values() if type(batch) is RecordBatch else None
        if values is None:
            # Any other shape, or a malformed batch (raises before any of its records is yielded).
            yield from _other_records(batch, name, memo)
            continue
        ts = batch.base_timestamp
        offset = base - 1
        for value in values:
            offset += 1
            n = len(value)
            # Equal small values (NoOpRecord above all, most of a quiet log; heartbeats) share one decoded
            # record: records are immutable. Only short values are looked up, so hashing stays cheap.
            if n <= memo_max:
                hit = memo_get(value)
                if hit is not None:
                    t, a, v, r = hit
                    yield tnew(envelope, (offset, epoch, ts, base, False, t, a, v, r, value))
                    continue
            # Fast path: frame 1 and one-byte apiKey and version (every record Kafka writes today), decoded by
            # the compiled body decoder; anything else, or any failure, gives r None and the checked path.
            # (The try holds no yield: an exception thrown into the generator must not be swallowed.)
            r = None
            try:
                if value[0] == 1:
                    key = value[1] << 8 | value[2]
                    fn, t, a, v = dispatch[key] or _dispatch_entry(key)
                    r, stop = fn(value, 3, n)
                    if stop != n:
                        r = None
            except Exception:
                r = None
            if r is None:
                yield _checked_record(value, offset, ts, batch, name)
                continue
            if n <= memo_max:
                if len(memo) >= _MEMO_MAX_ENTRIES:
                    memo.clear()
                memo[value] = (t, a, v, r)
            yield tnew(envelope, (offset, epoch, ts, base, False, t, a, v, r, value))


def _other_records(
    batch: Any,
    name: str,
    memo: dict[bytes, tuple[str, int, int, Record]],
) -> Iterator[MetadataRecord]:
    """The records of a data batch not shaped as KRaft writes them, through ``batch.iter_records()`` (parsed
    as they are taken, none kept)."""
    records = batch.iter_records() if type(batch) is RecordBatch else batch.records
    for offset, timestamp, _key, value, _headers in records:
        if value is None:
            raise RecordDecodeError(
                "metadata record has a null value", source=name, position=batch.position, offset=offset
            )
        hit = memo.get(value)
        if hit is not None:
            t, a, v, r = hit
            yield MetadataRecord(
                offset, batch.partition_leader_epoch, timestamp, batch.base_offset, False, t, a, v, r, value
            )
            continue
        yield _checked_record(value, offset, timestamp, batch, name)


def _checked_record(value: bytes, offset: int, timestamp: int, batch: Any, name: str) -> MetadataRecord:
    """Decode one value with the checked decoder, raising :class:`RecordDecodeError` on any fault."""
    return decode_data_envelope(
        value,
        offset,
        batch.partition_leader_epoch,
        timestamp,
        batch.base_offset,
        source=name,
        position=batch.position,
    )


_MEMO_MAX_VALUE = 24
_MEMO_MAX_ENTRIES = 4096

# Dispatch by the value's two header bytes (apiKey << 8 | version, both one-byte varints below 128):
# (decoder, class name, apiKey, version), filled on first use. A list index is cheaper than a dict lookup of a
# tuple key; other byte pairs (multi-byte varints, unknown apiKeys or versions) map to an entry without a
# decoder and take the checked path.
_Entry = tuple[Any, str, int, int]
_DISPATCH: list[_Entry | None] = [None] * 65536


def _no_decoder(value: bytes, pos: int, end: int) -> Any:
    raise ValueError(
        "no compiled decoder"
    )  # sends the record to the checked path, which raises the typed error


_NO_DECODER: _Entry = (_no_decoder, "", 0, 0)


def _dispatch_entry(key: int) -> _Entry:
    api_key, version = key >> 8, key & 0xFF
    entry = _NO_DECODER
    if api_key < 128 and version < 128:
        fn = fast_decoder(api_key, version)
        if fn is not None:
            entry = (fn, metadata_spec(api_key).name, api_key, version)
    _DISPATCH[key] = entry
    return entry


def decode_values(
    values: Sequence[bytes], first_offset: int, source: str, position: int | None = None
) -> list[Record]:
    """The typed records of metadata record values at consecutive offsets from ``first_offset`` (a KRaft data
    batch's values, no envelopes built): :func:`iter_records`' fast path, and the checked decoder for a value it
    cannot take, whose :class:`RecordDecodeError` names ``source``, the batch ``position`` and the offset."""
    out: list[Record] = []
    add = out.append
    dispatch = _DISPATCH
    offset = first_offset - 1
    for value in values:
        offset += 1
        n = len(value)
        r = None
        try:
            if value[0] == 1:
                key = value[1] << 8 | value[2]
                r, stop = (dispatch[key] or _dispatch_entry(key))[0](value, 3, n)
                if stop != n:
                    r = None
        except Exception:
            r = None
        if r is None:
            try:
                r = decode_metadata_record(value)[0]
            except ProtocolError as exc:
                raise decode_error(exc, source, position, offset, "metadata record") from exc
        add(r)
    return out
