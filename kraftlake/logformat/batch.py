"""Kafka's record batch v2 (``DefaultRecordBatch``): `RecordBatch`, a batch read from bytes, `decode_batch`, and
`reencode`, a batch's records encoded again with its header fields.

The header layout and the scanner of headers are in `kraftlake.logformat.framing`, records in `record`, the
records' decoding in `record_decoding`, encoding in `batch_encoding`; their public names are importable from
here too. Records are parsed lazily, on first access to `RecordBatch.records`, and cached.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import crc32c

from kraftlake.logformat.batch_encoding import (
    build_control_batch,
    build_data_batch,
    encode_batch,
    encode_record,
)
from kraftlake.logformat.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression
from kraftlake.logformat.errors import CompressionError, RecordCountMismatchError
from kraftlake.logformat.framing import (
    COMPRESSION_MASK,
    CONTROL_MASK,
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
    crc_error,
    frame_error,
)
from kraftlake.logformat.record import (
    ControlRecordType,
    Record,
    TimestampType,
    control_record_key,
    control_record_type,
)
from kraftlake.logformat.record_decoding import kraft_values, parse_records, records_area

_LENGTH = struct.Struct(">i")

__all__ = [
    "COMPRESSION_MASK",
    "CONTROL_MASK",
    "CRC_START",
    "DELETE_HORIZON_MASK",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "ControlRecordType",
    "Record",
    "RecordBatch",
    "TimestampType",
    "build_control_batch",
    "build_data_batch",
    "control_record_key",
    "control_record_type",
    "decode_batch",
    "encode_batch",
    "encode_record",
    "reencode",
]


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
        ) = HEADER.unpack_from(raw, 0)
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
            records = self._records = list(parse_records(self))
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
        return parse_records(self)

    def check_records(self) -> None:
        """Parse every record, keeping none: raises what `records` would raise.

        Raises
        ------
        CorruptRecordError, RecordCountMismatchError, CompressionError, DecompressionLimitError
        """
        if self._records is None:
            for _ in parse_records(self):
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
        data = records_area(self)
        pos = HEADER_SIZE if data is self.raw else 0
        if (
            type(data) is not bytes
        ):  # a batch built over a bytearray or memoryview: values are bytes all the same
            data = bytes(data)
        return kraft_values(self.record_count, data, pos)

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
    where = base_position + pos
    error = frame_error(buf, pos, len(buf) - pos, source=source, position=where)
    if error is not None:
        raise error
    raw = bytes(buf[pos : pos + LOG_OVERHEAD + _LENGTH.unpack_from(buf, pos + 8)[0]])
    if verify_crc:
        error = crc_error(raw, 0, len(raw), source=source, position=where)
        if error is not None:
            raise error
    batch = RecordBatch(raw, position=where, source=source, max_decompressed_bytes=max_decompressed_bytes)
    if batch.record_count < 0:
        raise RecordCountMismatchError(
            f"negative record count {batch.record_count}",
            source=source,
            position=where,
            offset=batch.base_offset,
        )
    return batch


# Here, not in batch_encoding: it reads a RecordBatch, and this module imports batch_encoding.
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
