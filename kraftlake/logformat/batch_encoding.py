"""Encoding v2 batches: any batch as Kafka's ``MemoryRecordsBuilder`` writes it, and batches as KRaft writes
them (`build_data_batch`, `build_control_batch`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import crc32c

from kraftlake.logformat.compression import Compression, compress
from kraftlake.logformat.framing import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC,
    CRC_START,
    DELETE_HORIZON_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from kraftlake.logformat.record import (
    KRAFT_PREFIXES,
    SMALL_VARINTS,
    Record,
    TimestampType,
    control_record_key,
)
from kraftlake.logformat.varint import encode_varint, encode_varlong


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
    return assemble_batch(
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


def assemble_batch(
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
        HEADER.pack(
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
    CRC.pack_into(head, 17, crc)
    return bytes(head) + body


# --------------------------------------------------------------------------------------------- as KRaft writes


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
    prefixes = KRAFT_PREFIXES
    small = SMALL_VARINTS
    limit = len(small)
    parts: list[bytes] = []
    extend = parts.extend
    for i, value in enumerate(values):
        n = len(value)
        vl = small[n] if n < limit else encode_varint(n)
        prefix = prefixes[i] if i < 8192 else b"\x00\x00" + encode_varint(i) + b"\x01"
        size = len(prefix) + len(vl) + n + 1
        extend((small[size] if size < limit else encode_varint(size), prefix, vl, value, b"\x00"))
    return assemble_batch(
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
