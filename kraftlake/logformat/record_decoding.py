"""Decoding the records area of a v2 batch: decompression (capped), the KRaft-shaped fast path and the general
record parser. Holds hand-inlined hot loops (`bench/bench_decode.py` measures them).

Malformed records raise `CorruptRecordError` / `RecordCountMismatchError` naming the batch's source, byte
position and base offset, and where in the records the bad record starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kraftlake.logformat.compression import (
    Compression,
    DecompressError,
    DecompressLimitError,
    decompress,
)
from kraftlake.logformat.errors import (
    CompressionError,
    CorruptRecordError,
    DecompressionLimitError,
    RecordCountMismatchError,
)
from kraftlake.logformat.framing import COMPRESSION_MASK, CONTROL_MASK, HEADER_SIZE
from kraftlake.logformat.record import KRAFT_PREFIX_PAIRS, KRAFT_PREFIXES, MIN_RECORD_SIZE, Record


class RawBatch(Protocol):
    """A v2 batch as the records' decoder reads it: its bytes, the header fields its records area needs, its
    decompression cap, and where it was read (for the errors). `kraftlake.logformat.batch.RecordBatch` is one."""

    # A protocol, not RecordBatch itself: RecordBatch parses its records with this module, so naming it here
    # would make the two modules import each other.
    raw: bytes
    attributes: int
    record_count: int
    base_offset: int
    base_timestamp: int
    max_decompressed_bytes: int
    source: str
    position: int


def records_area(batch: RawBatch) -> bytes:
    raw = batch.raw
    codec = batch.attributes & COMPRESSION_MASK
    if codec == 0:
        return raw
    try:
        compression = Compression(codec)
    except ValueError:
        raise CompressionError(
            f"unknown compression codec id {codec}",
            source=batch.source,
            position=batch.position,
            offset=batch.base_offset,
        ) from None
    try:
        return decompress(compression, raw[HEADER_SIZE:], batch.max_decompressed_bytes)
    except DecompressLimitError as exc:
        raise DecompressionLimitError(
            str(exc), source=batch.source, position=batch.position, offset=batch.base_offset
        ) from exc
    except DecompressError as exc:
        raise CompressionError(
            str(exc), source=batch.source, position=batch.position, offset=batch.base_offset
        ) from exc


def _slow_uvarint(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    # varints of 3+ bytes; one- and two-byte varints are decoded inline in the record loop
    value = 0
    shift = 0
    for _ in range(max_bytes):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise _BadVarint


class _BadVarint(Exception):
    pass


_EMPTY: tuple[tuple[str, bytes | None], ...] = ()


def kraft_values(count: int, data: bytes, pos: int) -> list[bytes] | None:
    """The values of `count` records from `pos`, all shaped as KRaft writes them and filling `data` exactly,
    or None as soon as one is not (the caller then parses the batch with the general loop, which also reports
    any error)."""
    if count > len(KRAFT_PREFIXES):
        return None
    end = len(data)
    startswith = data.startswith
    out: list[bytes] = []
    append = out.append
    # An index past the end (a cut batch) raises IndexError: the general loop then reports it.
    try:
        for prefix, plen in KRAFT_PREFIX_PAIRS[:count]:
            v = data[pos]
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (v & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                return None
            rend = pos + (v >> 1)
            if v & 1 or not startswith(prefix, pos):
                return None
            s = pos + plen
            w = data[s]
            if w < 0x80:
                s += 1
            elif data[s + 1] < 0x80:
                w = (w & 0x7F) | (data[s + 1] << 7)
                s += 2
            else:
                return None
            # The value must end exactly one byte (headers count 0) before the record does; a record running
            # past the end of the data fails here too, reading that byte (IndexError).
            vend = s + (w >> 1)
            if w & 1 or vend + 1 != rend or data[vend]:
                return None
            append(data[s:vend])
            pos = rend
    except IndexError:
        return None
    if pos != end:
        return None
    return out


STREAMED_RECORD_COUNT = 8192
"""Above this many records (more than KRaft ever writes in a batch) a batch's records are checked in a first
pass that keeps none, then parsed again as they are taken; up to it they are parsed into a list at once."""


def parse_records(batch: RawBatch) -> Iterator[Record]:
    """The batch's records, parsed as they are asked for (a generator: nothing runs before the first `next`).

    A malformed batch raises before any of its records is yielded. Memory: the decompressed records area (at
    most `max_decompressed_bytes`) and at most `STREAMED_RECORD_COUNT` records at a time: a batch of more
    records is framed once without keeping them, then parsed again one by one.
    """
    data = records_area(batch)
    compressed = data is not batch.raw
    pos = 0 if compressed else HEADER_SIZE
    if not batch.attributes & CONTROL_MASK:
        values = kraft_values(batch.record_count, data, pos)
        if values is not None:
            base_offset = batch.base_offset
            ts = batch.base_timestamp
            tnew = tuple.__new__
            for i, kraft_value in enumerate(values):
                yield tnew(Record, (base_offset + i, ts, None, kraft_value, _EMPTY))
            return
    if batch.record_count <= STREAMED_RECORD_COUNT:
        yield from list(_scan_records(batch, data, pos, compressed))
        return
    for _ in _scan_records(batch, data, pos, compressed):
        pass
    yield from _scan_records(batch, data, pos, compressed)


def _scan_records(batch: RawBatch, data: bytes, pos: int, compressed: bool) -> Iterator[Record]:
    """The records of the general (not KRaft-shaped) records area `data` from `pos`, each built as it is
    yielded; a malformed record raises when reached. A hand-inlined hot loop."""
    # (bench/bench_decode.py) KRaft-shaped batches take the fast path above; otherwise varints of one
    # or two bytes are decoded inline, records are built with tuple.__new__, and bounds are checked once per
    # field, not per byte.
    end = len(data)
    count = batch.record_count
    base_offset = batch.base_offset
    # A count the bytes cannot hold is refused before any record is built: otherwise a small compressed batch
    # declaring 2**31-1 records makes the loop below build millions of them before it finds the lie.
    if count * MIN_RECORD_SIZE > end - pos:
        raise RecordCountMismatchError(
            f"header says {count} records but its {end - pos} bytes of records hold at most "
            f"{(end - pos) // MIN_RECORD_SIZE}",
            source=batch.source,
            position=batch.position,
            offset=base_offset,
        )
    base_ts = batch.base_timestamp
    tnew = tuple.__new__
    rec = Record
    slow = _slow_uvarint
    empty = _EMPTY
    i = 0
    rstart = pos
    try:
        while i < count:
            if pos >= end:
                raise RecordCountMismatchError(
                    f"header says {count} records but the data holds only {i}",
                    source=batch.source,
                    position=batch.position,
                    offset=base_offset,
                )
            rstart = pos
            v = data[pos]
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (v & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                v, pos = slow(data, pos, 5)
            length = (v >> 1) ^ -(v & 1)
            rend = pos + length
            if length < 1 or rend > end:
                raise CorruptRecordError(
                    f"record {i} has length {length}, past the end of its batch",
                    source=batch.source,
                    position=batch.position,
                    offset=base_offset,
                )
            pos += 1  # record attributes: unused by Kafka
            v = data[pos]
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (v & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                v, pos = slow(data, pos, 10)
            ts = base_ts + ((v >> 1) ^ -(v & 1))
            v = data[pos]
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (v & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                v, pos = slow(data, pos, 5)
            offset = base_offset + ((v >> 1) ^ -(v & 1))
            v = data[pos]
            if v == 1:
                pos += 1
                key = None
            else:
                if v < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    v = (v & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    v, pos = slow(data, pos, 5)
                n = (v >> 1) ^ -(v & 1)
                if n < 0 or pos + n > rend:
                    raise _BadVarint
                key = data[pos : pos + n]
                pos += n
            v = data[pos]
            if v == 1:
                pos += 1
                value = None
            else:
                if v < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    v = (v & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    v, pos = slow(data, pos, 5)
                n = (v >> 1) ^ -(v & 1)
                if n < 0 or pos + n > rend:
                    raise _BadVarint
                value = data[pos : pos + n]
                pos += n
            if data[pos] == 0:
                pos += 1
                headers = empty
            else:
                headers, pos = _parse_headers(data, pos, rend)
            if pos != rend:
                raise _BadVarint
            # (the try holds this yield: an exception thrown into the generator is the consumer's and
            # propagates as it is, since only _BadVarint, IndexError and UnicodeDecodeError are caught)
            yield tnew(rec, (offset, ts, key, value, headers))
            i += 1
    except (_BadVarint, IndexError, UnicodeDecodeError):
        where = (
            f"byte {rstart} of the decompressed records"
            if compressed
            else f"byte position {batch.position + rstart}"
        )
        raise CorruptRecordError(
            f"record {i} is malformed (bad varint or field length; the record starts at {where})",
            source=batch.source,
            position=batch.position,
            offset=base_offset,
        ) from None
    if pos != end:
        raise RecordCountMismatchError(
            f"{end - pos} bytes remain after the {count} records the header declares",
            source=batch.source,
            position=batch.position,
            offset=base_offset,
        )


def _parse_headers(data: bytes, pos: int, rend: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    v, pos = _slow_uvarint(data, pos, 5)
    count = (v >> 1) ^ -(v & 1)
    if count < 0:
        raise _BadVarint
    headers = []
    for _ in range(count):
        if pos >= rend:
            raise _BadVarint
        v, pos = _slow_uvarint(data, pos, 5)
        n = (v >> 1) ^ -(v & 1)
        if n < 0 or pos + n > rend:
            raise _BadVarint
        hkey = bytes(data[pos : pos + n]).decode("utf-8")
        pos += n
        v, pos = _slow_uvarint(data, pos, 5)
        n = (v >> 1) ^ -(v & 1)
        if n == -1:
            hval = None
        elif n < 0 or pos + n > rend:
            raise _BadVarint
        else:
            hval = data[pos : pos + n]
            pos += n
        headers.append((hkey, hval))
    return tuple(headers), pos
