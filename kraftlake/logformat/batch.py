"""Kafka's record batch v2 (``DefaultRecordBatch`` / ``DefaultRecord``): value objects, decoding and encoding.

Batch layout (big-endian), 61-byte header then the records::

    0  baseOffset int64          8  batchLength int32 (bytes after this field)
    12 partitionLeaderEpoch int32 16 magic int8 (= 2)         17 crc uint32 (CRC32C of bytes 21..end)
    21 attributes int16          23 lastOffsetDelta int32     27 baseTimestamp int64
    35 maxTimestamp int64        43 producerId int64          51 producerEpoch int16
    53 baseSequence int32        57 recordsCount int32        61 records

Record layout: varint length | int8 attributes | varlong timestampDelta | varint offsetDelta |
varint keyLength (-1 = null) | key | varint valueLength (-1 = null) | value | varint headerCount |
headers (varint keyLength | utf-8 key | varint valueLength | value). Varints are zigzag-encoded.

Records are parsed lazily, on first access to `RecordBatch.records`, and cached.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import crc32c

from kraftlake.logformat.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    Compression,
    DecompressError,
    DecompressLimitError,
    compress,
    decompress,
)
from kraftlake.logformat.errors import (
    BadMagicError,
    CompressionError,
    CorruptBatchError,
    CorruptRecordError,
    CrcMismatchError,
    DecompressionLimitError,
    RecordCountMismatchError,
    TruncatedBatchError,
)
from kraftlake.logformat.varint import encode_varint, encode_varlong

MAGIC = 2
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes before a batch's length counts."""
HEADER_SIZE = 61
"""The fixed size of a v2 batch header."""
CRC_START = 21
"""CRC32C covers the bytes from the attributes to the end of the batch."""

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_AT = struct.Struct(">I")


class TimestampType(enum.IntEnum):
    """Bit 3 of the attributes."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(enum.IntEnum):
    """The type in a control record's 4-byte key (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class Record(NamedTuple):
    """One record of a batch, with its absolute offset and timestamp (an immutable named tuple).

    Attributes
    ----------
    offset : int
        batch base offset + offset delta.
    timestamp : int
        batch base timestamp + timestamp delta (milliseconds).
    key, value : bytes or None
    headers : tuple of (str, bytes or None)
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def control_record_type(key: bytes | None) -> int:
    """The control type held in a control record's key (version int16, type int16).

    Raises
    ------
    ValueError
        If the key is shorter than 4 bytes.
    """
    if key is None or len(key) < 4:
        raise ValueError(f"a control record key has 4 bytes, got {key!r}")
    return int.from_bytes(key[2:4], "big", signed=True)


def control_record_key(control_type: int, version: int = 0) -> bytes:
    """The 4-byte key of a control record of `control_type`."""
    return struct.pack(">hh", version, control_type)


class RecordBatch:
    """A v2 record batch read from bytes (or about to be written), with its header fields.

    `raw` holds the batch's exact bytes, so a batch can be copied to another log without re-encoding.
    `position` is the byte position of the batch in `source`.
    """

    __slots__ = (
        "_records",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_decompressed_bytes",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "raw",
        "record_count",
        "source",
    )
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    def __init__(
        self,
        raw: bytes,
        *,
        position: int = 0,
        source: str = "<bytes>",
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = _HEADER.unpack_from(raw, 0)
        self.raw = raw
        self.position = position
        self.source = source
        self.max_decompressed_bytes = max_decompressed_bytes
        self._records: list[Record] | None = None

    # header-derived properties
    @property
    def size(self) -> int:
        """The batch's size in bytes (batchLength + 12)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> Compression:
        """The codec of the records area.

        Raises
        ------
        CompressionError
            If the attributes name a codec id Kafka does not know (5-7), as Kafka's ``CompressionType.forId``
            refuses it.
        """
        codec = self.attributes & COMPRESSION_MASK
        try:
            return Compression(codec)
        except ValueError:
            raise CompressionError(
                f"unknown compression codec id {codec}",
                source=self.source,
                position=self.position,
                offset=self.base_offset,
            ) from None

    @property
    def timestamp_type(self) -> TimestampType:
        """CreateTime or LogAppendTime."""
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        """The transactional bit."""
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        """The control bit: the records are control records (4-byte key: version, type)."""
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Whether the base timestamp holds the delete horizon (set by log compaction)."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon, or None (Kafka prints it as ``OptionalLong.empty``)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_offset(self) -> int:
        """baseOffset + lastOffsetDelta."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch."""
        return self.base_offset + self.last_offset_delta + 1

    def is_crc_valid(self) -> bool:
        """Whether the stored CRC matches the bytes."""
        return crc32c.crc32c(memoryview(self.raw)[CRC_START:]) == self.crc

    @property
    def records(self) -> list[Record]:
        """The records, decompressed and parsed on first access.

        Raises
        ------
        CorruptRecordError, RecordCountMismatchError, CompressionError
            If the records area is malformed.
        """
        records = self._records
        if records is None:
            records = self._records = list(_parse_records(self))
        return records

    def iter_records(self) -> Iterator[Record]:
        """The records one by one as they are decompressed and parsed, none kept (`records` keeps them all).

        A batch's memory is then its decompressed records area (capped by `max_decompressed_bytes`, which
        also caps any one record) and the record in hand, whatever the number of records: a small compressed
        batch of millions of tiny records costs no more than its decompressed size. A malformed record raises
        when reached, after the records before it.

        Raises
        ------
        CorruptRecordError, RecordCountMismatchError, CompressionError, DecompressionLimitError
        """
        if self._records is not None:
            return iter(self._records)
        return _parse_records(self)

    def check_records(self) -> None:
        """Parse every record, keeping none: raises what `records` would raise.

        Raises
        ------
        CorruptRecordError, RecordCountMismatchError, CompressionError, DecompressionLimitError
        """
        if self._records is None:
            for _ in _parse_records(self):
                pass

    def kraft_values(self) -> list[bytes] | None:
        """The values of a data batch whose records are all shaped as KRaft writes them, else None.

        KRaft's shape: attributes 0, timestamp delta 0, offset delta = index, null key, a value, no headers;
        value ``i`` is then the record at offset ``base_offset + i`` with timestamp ``base_timestamp``. None for
        a control batch, for records of another shape and for malformed records (`records` then parses the
        batch, or raises the typed error). Only values are built, and bytes are not tracked by the garbage
        collector: a reader that decodes them one by one (``kraftlake.records.iter_records``) creates no
        per-record container before its consumer takes the record.

        Raises
        ------
        CompressionError, DecompressionLimitError
        """
        if self.attributes & CONTROL_MASK:
            return None
        data = _records_area(self)
        pos = HEADER_SIZE if data is self.raw else 0
        if (
            type(data) is not bytes
        ):  # a batch built over a bytearray or memoryview: values are bytes all the same
            data = bytes(data)
        return _kraft_values(self.record_count, data, pos)

    def __iter__(self) -> Any:
        return iter(self.records)

    def __len__(self) -> int:
        return self.record_count

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.record_count}, epoch={self.partition_leader_epoch}, position={self.position}, "
            f"size={self.size}, compression={_codec_name(self.attributes)}, control={self.is_control})"
        )


def _codec_name(attributes: int) -> str:
    codec = attributes & COMPRESSION_MASK
    return Compression(codec).name if codec <= max(Compression) else f"UNKNOWN({codec})"


def decode_batch(
    buf: bytes,
    pos: int = 0,
    *,
    source: str = "<bytes>",
    base_position: int = 0,
    verify_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> RecordBatch:
    """Decode the batch starting at `pos` in `buf` (bytes, bytearray, memoryview or mmap).

    The header, length, magic and CRC are checked here; records are parsed when first accessed.
    `base_position` is added to `pos` in reported positions (for buffers that are a window of a file).

    Raises
    ------
    TruncatedBatchError
        Fewer than 12 bytes remain, or the batch length runs past the end of `buf`.
    CorruptBatchError
        The batch length is smaller than a header.
    BadMagicError, CrcMismatchError
    """
    end = len(buf)
    where = base_position + pos
    if end - pos < LOG_OVERHEAD:
        raise TruncatedBatchError(
            f"only {end - pos} bytes left, fewer than a batch's 12-byte offset and length",
            source=source,
            position=where,
        )
    base_offset, length = struct.unpack_from(">qi", buf, pos)
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatchError(
            f"batch length {length} is smaller than the {HEADER_SIZE - LOG_OVERHEAD} bytes of a v2 header",
            source=source,
            position=where,
            offset=base_offset,
        )
    if length > end - pos - LOG_OVERHEAD:
        raise TruncatedBatchError(
            f"batch length {length} runs past the end of the data ({end - pos - LOG_OVERHEAD} bytes left)",
            source=source,
            position=where,
            offset=base_offset,
        )
    magic = buf[pos + 16]
    if magic != MAGIC:
        raise BadMagicError(
            f"magic byte is {magic}, expected {MAGIC} (only record batch v2 is supported)",
            source=source,
            position=where,
            offset=base_offset,
        )
    raw = bytes(buf[pos : pos + LOG_OVERHEAD + length])
    if verify_crc:
        stored = _CRC_AT.unpack_from(raw, 17)[0]
        actual = crc32c.crc32c(memoryview(raw)[CRC_START:])
        if stored != actual:
            raise CrcMismatchError(
                f"stored CRC {stored} differs from computed CRC32C {actual}",
                source=source,
                position=where,
                offset=base_offset,
            )
    batch = RecordBatch(raw, position=where, source=source, max_decompressed_bytes=max_decompressed_bytes)
    if batch.record_count < 0:
        raise RecordCountMismatchError(
            f"negative record count {batch.record_count}", source=source, position=where, offset=base_offset
        )
    return batch


def _records_area(batch: RecordBatch) -> bytes:
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


# Record i of a KRaft data batch starts (after its length) with attributes 0, timestamp delta 0, offset delta i
# and a null key: these exact bytes (4 of them below i = 64, 5 below 8192). Batches hold at most a few thousand
# records; longer ones use the general loop. `bytes.startswith(prefix, pos)` compares them in place: no slice.
_KRAFT_PREFIXES: tuple[bytes, ...] = tuple(b"\x00\x00" + encode_varint(i) + b"\x01" for i in range(8192))
# The same with their lengths, for the framing loop to iterate instead of indexing and testing i < 64.
_KRAFT_PREFIX_PAIRS: tuple[tuple[bytes, int], ...] = tuple((p, len(p)) for p in _KRAFT_PREFIXES)
_SMALL_VARINTS: tuple[bytes, ...] = tuple(encode_varint(n) for n in range(8192))


# The smallest record v2: one byte each for its length, attributes, timestamp delta, offset delta, key length,
# value length and header count.
MIN_RECORD_SIZE = 7


def _kraft_values(count: int, data: bytes, pos: int) -> list[bytes] | None:
    """The values of `count` records from `pos`, all shaped as KRaft writes them and filling `data` exactly,
    or None as soon as one is not (the caller then parses the batch with the general loop, which also reports
    any error)."""
    if count > len(_KRAFT_PREFIXES):
        return None
    end = len(data)
    startswith = data.startswith
    out: list[bytes] = []
    append = out.append
    # An index past the end (a cut batch) raises IndexError: the general loop then reports it.
    try:
        for prefix, plen in _KRAFT_PREFIX_PAIRS[:count]:
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


def _parse_records(batch: RecordBatch) -> Iterator[Record]:
    """The batch's records, parsed as they are asked for (a generator: nothing runs before the first `next`).

    A malformed batch raises before any of its records is yielded. Memory: the decompressed records area (at
    most `max_decompressed_bytes`) and at most `STREAMED_RECORD_COUNT` records at a time: a batch of more
    records is framed once without keeping them, then parsed again one by one.
    """
    data = _records_area(batch)
    compressed = data is not batch.raw
    pos = 0 if compressed else HEADER_SIZE
    if not batch.attributes & CONTROL_MASK:
        values = _kraft_values(batch.record_count, data, pos)
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


def _scan_records(batch: RecordBatch, data: bytes, pos: int, compressed: bool) -> Iterator[Record]:
    """The records of the general (not KRaft-shaped) records area `data` from `pos`, each built as it is
    yielded; a malformed record raises when reached. A hand-inlined hot loop."""
    # (kraftlake/bench/bench_decode.py) KRaft-shaped batches take the fast path above; otherwise varints of one
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


# --------------------------------------------------------------------------------------------- encoding


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    """Encode one record (with its leading length varint)."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        parts.append(b"\x01")
    else:
        parts.append(encode_varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts.append(encode_varint(len(value)))
        parts.append(value)
    parts.append(encode_varint(len(headers)))
    for hkey, hval in headers:
        kb = hkey.encode("utf-8")
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hval is None:
            parts.append(b"\x01")
        else:
            parts.append(encode_varint(len(hval)))
            parts.append(hval)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def encode_batch(
    records: Iterable[Record],
    *,
    base_offset: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode a v2 batch of `records` (absolute offsets and timestamps) as Kafka's MemoryRecordsBuilder does.

    Defaults follow Kafka: the base offset is the first record's offset, the base timestamp is the first
    record's timestamp (or the delete horizon when set), the max timestamp is the largest record timestamp,
    and the last offset delta is the last record's offset minus the base offset.
    """
    recs = list(records)
    if base_offset is None:
        if not recs:
            raise ValueError("an empty batch needs an explicit base_offset")
        base_offset = recs[0].offset
    if base_timestamp is None:
        if delete_horizon_ms is not None:
            base_timestamp = delete_horizon_ms
        else:
            base_timestamp = recs[0].timestamp if recs else -1
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in recs), default=-1)
    if last_offset_delta is None:
        last_offset_delta = (recs[-1].offset - base_offset) if recs else 0
    body = b"".join(
        encode_record(r.offset - base_offset, r.timestamp - base_timestamp, r.key, r.value, r.headers)
        for r in recs
    )
    return _assemble(
        body,
        len(recs),
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=_attributes(compression, timestamp_type, is_transactional, is_control, delete_horizon_ms),
        compression=compression,
        compression_level=compression_level,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def _attributes(
    compression: Compression,
    timestamp_type: TimestampType,
    is_transactional: bool,
    is_control: bool,
    delete_horizon_ms: int | None,
) -> int:
    attrs = int(compression) & COMPRESSION_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_MASK
    if is_control:
        attrs |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attrs |= DELETE_HORIZON_MASK
    return attrs


def _assemble(
    body: bytes,
    count: int,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    compression: Compression,
    compression_level: int | None,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    if compression != Compression.NONE:
        body = compress(compression, body, compression_level)
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    head = bytearray(
        _HEADER.pack(
            base_offset,
            length,
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = crc32c.crc32c(body, crc32c.crc32c(memoryview(head)[CRC_START:]))
    _CRC_AT.pack_into(head, 17, crc)
    return bytes(head) + body


def reencode(batch: RecordBatch) -> bytes:
    """Encode `batch`'s records again with all of its header fields (byte-identical for uncompressed batches)."""
    return encode_batch(
        batch.records,
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        compression=batch.compression,
        timestamp_type=batch.timestamp_type,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        delete_horizon_ms=batch.delete_horizon_ms,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        base_timestamp=batch.base_timestamp,
        max_timestamp=batch.max_timestamp,
        last_offset_delta=batch.last_offset_delta,
    )


# --------------------------------------------------------------------------------------------- KRaft helpers


def build_data_batch(
    base_offset: int,
    epoch: int,
    timestamp_ms: int,
    values: Sequence[bytes],
    *,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
) -> bytes:
    """A batch of metadata record values as KRaft's BatchBuilder writes it.

    CreateTime, base timestamp = max timestamp = `timestamp_ms`, producer id/epoch and base sequence -1,
    null keys, no headers, timestamp deltas 0; `epoch` is the partition leader epoch.
    """
    if not values:
        raise ValueError("a KRaft batch holds at least one record")
    # Record i: length | attrs 0, tsDelta 0, offsetDelta i, key null (the prefix) | value length | value |
    # headers 0. Varints of small numbers come from tables: this is the writer of every KRaft batch (and of the
    # bench's 1M-record segment), so it must not cost three varint encodings per record.
    prefixes = _KRAFT_PREFIXES
    small = _SMALL_VARINTS
    limit = len(small)
    parts: list[bytes] = []
    extend = parts.extend
    for i, value in enumerate(values):
        n = len(value)
        vl = small[n] if n < limit else encode_varint(n)
        prefix = prefixes[i] if i < 8192 else b"\x00\x00" + encode_varint(i) + b"\x01"
        size = len(prefix) + len(vl) + n + 1
        extend((small[size] if size < limit else encode_varint(size), prefix, vl, value, b"\x00"))
    return _assemble(
        b"".join(parts),
        len(values),
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        attributes=int(compression),
        compression=compression,
        compression_level=compression_level,
        last_offset_delta=len(values) - 1,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
    )


def build_control_batch(
    base_offset: int,
    epoch: int,
    timestamp_ms: int,
    records: Sequence[tuple[int, bytes]],
    *,
    key_version: int = 0,
) -> bytes:
    """A control batch as KRaft writes it: ``records`` are ``(control type, value body)`` pairs.

    Each record gets the 4-byte key (`key_version`, type); the batch has the control bit, CreateTime,
    base = max timestamp = `timestamp_ms`, producer id/epoch and base sequence -1, no compression.
    """
    if not records:
        raise ValueError("a control batch holds at least one record")
    recs = [
        Record(base_offset + i, timestamp_ms, control_record_key(ctype, key_version), value)
        for i, (ctype, value) in enumerate(records)
    ]
    return encode_batch(
        recs,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        is_control=True,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
    )
