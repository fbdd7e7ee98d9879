"""Raft entries as Kafka record batches v2 on the wire: the batches a leader sends (its own bytes where it has
them) and the entries and whole batches a follower reads back from a Fetch response."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kraftlake.follow.errors import ObserverProtocolError
from kraftlake.follow.observer import split_batches
from kraftlake.logformat import RecordBatch, build_control_batch, control_record_type
from kraftlake.logformat.batch import CONTROL_MASK
from kraftlake.logformat.errors import LogFormatError
from kraftlake.logformat.framing import batch_header
from kraftlake.raft.messages import NO_CONTROL_TYPE, Entry
from kraftlake.service.batch_writer import kraft_data_batch, uniform_values
from kraftlake.service.errors import CodecError


def build_batch(group: Sequence[Entry]) -> bytes:
    """The batch of one leader write (entries of one batch base, epoch, timestamp and kind) at its first offset."""
    first = group[0]
    if first.is_control:
        return build_control_batch(
            first.offset, first.epoch, first.timestamp, [(e.control_type, e.value) for e in group]
        )
    return kraft_data_batch(first.offset, first.epoch, first.timestamp, [e.value for e in group])


def encode_entries(entries: Sequence[Entry], raw_batch: Callable[[int], bytes | None] | None = None) -> bytes:
    """`entries` (consecutive offsets) as the record batches of a Fetch response.

    Each leader batch goes as the bytes `raw_batch(batch_base)` returns when they hold exactly that batch's
    entries up to the last one sent (its first entries may be below ``entries[0]``: the batch goes whole); other
    runs are built (`build_batch`, at the run's first offset).
    """
    n = len(entries)
    if not n:
        return b""
    parts: list[bytes] = []
    first_offset = entries[0].offset
    i = 0
    while i < n:
        e = entries[i]
        base = e.batch_base
        raw = raw_batch(base) if raw_batch is not None and base >= 0 else None
        if raw is not None:
            header = batch_header(raw)
            j = header.last_offset - first_offset + 1
            if (
                i < j <= n
                and entries[j - 1].batch_base == base
                and entries[j - 1].epoch == e.epoch
                and header.partition_leader_epoch == e.epoch
            ):
                parts.append(raw)
                i = j
                continue
        key = (base, e.epoch, e.is_control, e.timestamp)
        j = i + 1
        while j < n:
            f = entries[j]
            if (f.batch_base, f.epoch, f.is_control, f.timestamp) != key or base < 0:
                break
            j += 1
        parts.append(build_batch(entries[i:j]))
        i = j
    return b"".join(parts)


def decode_records(
    records: bytes | None, from_offset: int, source: str, end_offset: int | None = None
) -> tuple[list[Entry], list[bytes]]:
    """The entries at or above `from_offset` (and below `end_offset`, if given: batches past it are not even
    decoded) in a Fetch response's records, and the whole batches that start at or above it (to be written
    unchanged).

    Raises
    ------
    CodecError
        On a batch with a bad length, magic or CRC, or records that are not KRaft's.
    """
    if not records:
        return [], []
    try:
        batches = split_batches(records, source)
    except ObserverProtocolError as exc:
        raise CodecError(str(exc)) from exc
    entries: list[Entry] = []
    raws: list[bytes] = []
    new = tuple.__new__
    add = entries.append
    for fetched in batches:
        if fetched.last_offset < from_offset:
            continue
        if end_offset is not None and fetched.base_offset >= end_offset:
            break
        raw = fetched.data
        batch = RecordBatch(raw, source=source)
        base, epoch, ts = batch.base_offset, batch.partition_leader_epoch, batch.base_timestamp
        try:
            if batch.attributes & CONTROL_MASK:
                for rec in batch.records:
                    if rec.offset >= from_offset:
                        add(
                            new(
                                Entry,
                                (
                                    rec.offset,
                                    epoch,
                                    True,
                                    rec.value or b"",
                                    ts,
                                    base,
                                    control_record_type(rec.key),
                                ),
                            )
                        )
            else:
                values = uniform_values(raw, batch.record_count) if not batch.attributes else None
                if values is None:
                    values = batch.kraft_values()
                if values is None:
                    values = [rec.value or b"" for rec in batch.records]
                skip = max(0, from_offset - base)
                for k in range(skip, len(values)):
                    add(new(Entry, (base + k, epoch, False, values[k], ts, base, NO_CONTROL_TYPE)))
        except LogFormatError as exc:
            raise CodecError(f"{source}: {exc}") from exc
        if base >= from_offset:
            raws.append(raw)
    if end_offset is not None and entries and entries[-1].offset >= end_offset:
        entries = [e for e in entries if e.offset < end_offset]
    return entries, raws
