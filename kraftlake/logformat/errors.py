"""The exceptions of `kraftlake.logformat`: every decoding failure names its source, byte position and offset."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class LogFormatError(KraftlakeError):
    """Raised when bytes or files do not follow Kafka's on-disk formats.

    Attributes
    ----------
    source : str
        The file path, or the name given to an in-memory buffer.
    position : int or None
        The byte position in `source` of the batch (or line) at fault.
    offset : int or None
        The base offset of the batch at fault, when its header could be read.
    line : int or None
        In a text file, the line at fault (1-based).
    reason : str
        The failure without the location.
    """

    def __init__(
        self,
        reason: str,
        *,
        source: str = "<bytes>",
        position: int | None = None,
        offset: int | None = None,
        line: int | None = None,
    ) -> None:
        self.reason = reason
        self.source = source
        self.position = position
        self.offset = offset
        self.line = line
        where = source
        if line is not None:
            where += f" line {line}"
        if position is not None:
            where += f" at byte position {position}"
        if offset is not None:
            where += f" (base offset {offset})"
        super().__init__(f"{where}: {reason}")


class TruncatedBatchError(LogFormatError):
    """Raised when a batch's length runs past the end of the data (a torn or truncated write)."""


class CorruptBatchError(LogFormatError):
    """Raised when a whole batch is present but its bytes are invalid."""


class BadMagicError(CorruptBatchError):
    """Raised when a batch's magic byte is not 2 (record batch v2)."""


class CrcMismatchError(CorruptBatchError):
    """Raised when a batch's stored CRC32C differs from the CRC32C of its bytes."""


class CorruptRecordError(CorruptBatchError):
    """Raised when a record inside a batch is malformed (bad varint, length past its batch, bad header)."""


class RecordCountMismatchError(CorruptBatchError):
    """Raised when a batch holds fewer or more records than its header's record count."""


class CompressionError(CorruptBatchError):
    """Raised when a batch's records cannot be decompressed, or use an unknown codec."""


class DecompressionLimitError(CompressionError):
    """Raised when a batch would decompress to more bytes than the allowed maximum (a decompression bomb)."""


class MalformedFileError(LogFormatError):
    """Raised when a text or JSON file (quorum-state, checkpoint, properties) or a file name is malformed: not
    UTF-8 where Kafka reads UTF-8, a missing or extra field, a number Java's parsers refuse; ``line`` names the
    line when there is one."""


class FileAccessError(LogFormatError):
    """Raised when a file cannot be read at all: missing, a directory, no permission (wraps the ``OSError``)."""


class SnapshotFormatError(LogFormatError):
    """Raised when a ``.checkpoint`` file's batches are not a snapshot: its first batch is not a control batch
    whose first record is a SnapshotHeader (Kafka's ``RecordsSnapshotReader`` refuses it), or its last batch
    does not end with a SnapshotFooter (a file cut short; empty files included). ``position`` is the byte
    position of the batch at fault."""


class SegmentError(LogFormatError):
    """Raised when a segment append or truncation would break the log (non-contiguous offsets, bad target)."""
