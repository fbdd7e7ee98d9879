"""The framing of Kafka's record batch v2: its header layout, and a scanner of batch headers that decodes no record.

Batch layout (big-endian), 61-byte header then the records::

    0  baseOffset int64          8  batchLength int32 (bytes after this field)
    12 partitionLeaderEpoch int32 16 magic int8 (= 2)         17 crc uint32 (CRC32C of bytes 21..end)
    21 attributes int16          23 lastOffsetDelta int32     27 baseTimestamp int64
    35 maxTimestamp int64        43 producerId int64          51 producerEpoch int16
    53 baseSequence int32        57 recordsCount int32        61 records

Whoever needs a batch's offsets, epoch, size or attributes without its records (a log's end, the holes of a log
directory, a Fetch response cut into batches, a checkpoint's data batches) scans headers here:
`scan_batch_headers` over a buffer, `scan_file_headers` over a file (reading the headers alone). Both check
what a header can tell (the length, the magic, optionally the CRC) and raise `LogFormatError` subclasses naming
the source, the byte position and the base offset.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple

import crc32c

from kraftlake.logformat.errors import (
    BadMagicError,
    CorruptBatchError,
    CrcMismatchError,
    FileAccessError,
    LogFormatError,
    TruncatedBatchError,
)

MAGIC = 2
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes before a batch's length counts."""
HEADER_SIZE = 61
"""The fixed size of a v2 batch header."""
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
"""The smallest batch length: a header without records."""
CRC_START = 21
"""CRC32C covers the bytes from the attributes to the end of the batch."""
CRC_AT = 17
"""Where the stored CRC sits."""

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

HEADER = struct.Struct(">qiibIhiqqqhii")
"""The 13 fields of a v2 batch header, in order."""
CRC = struct.Struct(">I")
_BASE_AND_LENGTH = struct.Struct(">qi")

StopAt = Literal["nothing", "partial", "invalid"]
"""Where a scan ends quietly instead of raising: ``"nothing"`` (a batch cut short raises
`TruncatedBatchError`), ``"partial"`` (a last batch cut short ends the scan: a Fetch response cut by its size,
a file being appended to; an invalid batch raises), ``"invalid"`` (the first batch that is cut short or invalid
ends the scan: the whole, valid batches a reader can trust)."""


class BatchHeader(NamedTuple):
    """The header of one batch and its byte `position` in its source (an immutable named tuple)."""

    position: int
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

    @property
    def size(self) -> int:
        """The batch's size in bytes (batchLength + 12)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        """The byte position after the batch."""
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """baseOffset + lastOffsetDelta."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_control(self) -> bool:
        """The control bit of the attributes."""
        return bool(self.attributes & CONTROL_MASK)


def batch_header(buf: Any, pos: int = 0, *, position: int | None = None) -> BatchHeader:
    """The header fields of the batch at `pos` in `buf`, unchecked (for bytes already framed, e.g. a batch this
    process wrote); `position` (default `pos`) is the position reported. `buf` holds at least 61 bytes there."""
    return tuple.__new__(BatchHeader, (pos if position is None else position, *HEADER.unpack_from(buf, pos)))


def frame_error(buf: Any, pos: int, available: int, *, source: str, position: int) -> LogFormatError | None:
    """What is wrong with the framing of the batch at `pos` in `buf`, or None when its length and magic are
    sound. `available` is the number of bytes the source holds from there (`buf` may hold the header alone);
    `position` is the batch's byte position in `source`, reported in the error."""
    if available < LOG_OVERHEAD:
        return TruncatedBatchError(
            f"only {available} bytes left, fewer than a batch's 12-byte offset and length",
            source=source,
            position=position,
        )
    base_offset, length = _BASE_AND_LENGTH.unpack_from(buf, pos)
    if length < MIN_BATCH_LENGTH:
        return CorruptBatchError(
            f"batch length {length} is smaller than the {MIN_BATCH_LENGTH} bytes of a v2 header",
            source=source,
            position=position,
            offset=base_offset,
        )
    if length > available - LOG_OVERHEAD:
        return TruncatedBatchError(
            f"batch length {length} runs past the end of the data ({available - LOG_OVERHEAD} bytes left)",
            source=source,
            position=position,
            offset=base_offset,
        )
    magic = buf[pos + 16]
    if magic != MAGIC:
        return BadMagicError(
            f"magic byte is {magic}, expected {MAGIC} (only record batch v2 is supported)",
            source=source,
            position=position,
            offset=base_offset,
        )
    return None


def crc_error(buf: Any, pos: int, size: int, *, source: str, position: int) -> CrcMismatchError | None:
    """A `CrcMismatchError` when the stored CRC of the whole batch of `size` bytes at `pos` differs from the
    CRC32C of its bytes, else None."""
    stored = CRC.unpack_from(buf, pos + CRC_AT)[0]
    actual = crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])
    if stored == actual:
        return None
    return CrcMismatchError(
        f"stored CRC {stored} differs from computed CRC32C {actual}",
        source=source,
        position=position,
        offset=_BASE_AND_LENGTH.unpack_from(buf, pos)[0],
    )


def _stops(error: LogFormatError, stop_at: StopAt) -> bool:
    if stop_at == "invalid":
        return True
    return stop_at == "partial" and isinstance(error, TruncatedBatchError)


def scan_batch_headers(
    buf: Any,
    pos: int = 0,
    *,
    source: str = "<bytes>",
    base_position: int = 0,
    verify_crc: bool = False,
    stop_at: StopAt = "nothing",
) -> Iterator[BatchHeader]:
    """The headers of the batches of `buf` (bytes, bytearray, memoryview or mmap) from `pos` to its end.

    Each header's `position` is its byte position in `source` (`base_position` + its index in `buf`). Lengths
    and magic bytes are checked, and with `verify_crc` each batch's CRC32C; records are not read. `stop_at`
    says which faults end the scan quietly (`StopAt`); the others raise.

    Raises
    ------
    TruncatedBatchError, CorruptBatchError, BadMagicError, CrcMismatchError
        Naming `source`, the byte position and the base offset of the batch at fault.
    """
    end = len(buf)
    unpack = HEADER.unpack_from
    new = tuple.__new__
    crc_of = crc32c.crc32c
    view = memoryview(buf) if verify_crc else None
    header_size, overhead, min_length, magic = HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, MAGIC
    # one unpack per batch, the checks inline and the constants local: a catch-up's Fetch responses hold
    # thousands of batches each
    while pos < end:
        if end - pos >= header_size:
            fields = unpack(buf, pos)
            size = fields[1] + overhead
            sound = fields[1] >= min_length and size <= end - pos and fields[3] == magic
        else:
            sound = False
        if not sound:
            error = frame_error(buf, pos, end - pos, source=source, position=base_position + pos)
            assert error is not None
            if _stops(error, stop_at):
                return
            raise error
        if view is not None and crc_of(view[pos + CRC_START : pos + size]) != fields[4]:
            error = crc_error(buf, pos, size, source=source, position=base_position + pos)
            assert error is not None
            if stop_at == "invalid":
                return
            raise error
        yield new(BatchHeader, (base_position + pos, *fields))
        pos += size


def scan_file_headers(
    path: str | os.PathLike[str], pos: int = 0, *, stop_at: StopAt = "nothing"
) -> Iterator[BatchHeader]:
    """The headers of the batches of a segment or ``.checkpoint`` file from byte `pos`, reading the headers
    alone (no CRC: that needs the whole batch). Checks and `stop_at` as `scan_batch_headers`; a file that
    cannot be opened raises `FileAccessError`."""
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:  # missing, a directory, no permission: a typed error naming the file
        raise FileAccessError(f"cannot read: {exc.strerror or exc}", source=source) from exc
    try:
        # One pread per header, not a map: a segment truncated while it is scanned (a follower's log after a
        # divergence) must end the scan, not fault on a page past the new end.
        size = os.fstat(fd).st_size
        pread = os.pread
        unpack = HEADER.unpack_from
        new = tuple.__new__
        while pos < size:
            head = pread(fd, HEADER_SIZE, pos)
            left = size - pos
            if len(head) == HEADER_SIZE:
                fields = unpack(head, 0)
                length = fields[1]
                sound = length >= MIN_BATCH_LENGTH and length + LOG_OVERHEAD <= left and fields[3] == MAGIC
            else:
                sound = False
            if not sound:
                # a read shorter than the size said: the file was cut meanwhile, and ends where the read did
                available = left if len(head) == HEADER_SIZE else len(head)
                error = frame_error(head, 0, available, source=source, position=pos)
                assert error is not None
                if _stops(error, stop_at):
                    return
                raise error
            yield new(BatchHeader, (pos, *fields))
            pos += length + LOG_OVERHEAD
    finally:
        os.close(fd)
