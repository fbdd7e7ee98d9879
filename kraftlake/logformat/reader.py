"""Reading sequences of batches from bytes or files, strictly or with Kafka-style recovery.

Strict reading raises the first `LogFormatError`. Recovery (``recover=True``) does what Kafka's log recovery
does on an unclean shutdown: keep every whole, valid batch up to the first one that is truncated or invalid,
drop the rest, and say what was dropped in a `RecoveryReport`. In recovery every batch's records are parsed
too, so a kept batch is fully readable.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlake.logformat.batch import RecordBatch, decode_batch
from kraftlake.logformat.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from kraftlake.logformat.errors import FileAccessError, LogFormatError


@dataclass(frozen=True)
class RecoveryReport:
    """What recovery kept and dropped.

    Attributes
    ----------
    source : str
    valid_bytes : int
        Bytes of whole, valid batches from the start (the size a file is truncated to).
    truncated_bytes : int
        Bytes dropped after them (0 when everything was valid).
    valid_batches : int
    first_bad_position : int or None
        Byte position of the first dropped batch, None when nothing was dropped.
    reason : str or None
        Why that batch was dropped (the error message), None when nothing was dropped.
    error : LogFormatError or None
        The error itself.
    """

    source: str
    valid_bytes: int
    truncated_bytes: int
    valid_batches: int
    first_bad_position: int | None = None
    reason: str | None = None
    error: LogFormatError | None = None

    @property
    def clean(self) -> bool:
        """True when nothing was dropped."""
        return self.truncated_bytes == 0


class BatchReader:
    """Iterate the batches of a buffer (bytes, bytearray, memoryview or mmap).

    Parameters
    ----------
    data : buffer
        The bytes of a segment or snapshot (or a window of one: see `base_position`).
    source : str
        The file name or a name for the buffer, reported in errors.
    recover : bool
        Stop quietly at the first bad batch and fill `report` instead of raising.
    verify_crc : bool
        Check each batch's CRC32C (on by default).
    base_position : int
        The file position of ``data[0]``.
    max_decompressed_bytes : int
        Cap on one batch's decompressed records.

    After a full iteration, `report` holds a `RecoveryReport` (also in strict mode, where it is clean), and
    `valid_bytes` the bytes of whole batches read.
    """

    def __init__(
        self,
        data: Any,
        source: str = "<bytes>",
        *,
        recover: bool = False,
        verify_crc: bool = True,
        base_position: int = 0,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ) -> None:
        self.data = data
        self.source = source
        self.recover = recover
        self.verify_crc = verify_crc
        self.base_position = base_position
        self.max_decompressed_bytes = max_decompressed_bytes
        self.report: RecoveryReport | None = None
        self.valid_bytes = 0

    def __iter__(self) -> Iterator[RecordBatch]:
        data = self.data
        end = len(data)
        pos = 0
        count = 0
        while pos < end:
            try:
                batch = decode_batch(
                    data,
                    pos,
                    source=self.source,
                    base_position=self.base_position,
                    verify_crc=self.verify_crc,
                    max_decompressed_bytes=self.max_decompressed_bytes,
                )
                if self.recover:
                    batch.check_records()  # a kept batch must be readable (its records are not kept)
            except LogFormatError as exc:
                if not self.recover:
                    raise
                self.valid_bytes = pos
                self.report = RecoveryReport(
                    source=self.source,
                    valid_bytes=pos,
                    truncated_bytes=end - pos,
                    valid_batches=count,
                    first_bad_position=self.base_position + pos,
                    reason=exc.reason,
                    error=exc,
                )
                return
            pos += batch.size
            count += 1
            self.valid_bytes = pos
            yield batch
        self.report = RecoveryReport(
            source=self.source, valid_bytes=pos, truncated_bytes=0, valid_batches=count
        )


def read_batches(data: Any, source: str = "<bytes>", **options: Any) -> list[RecordBatch]:
    """All batches of `data`, strictly (raises the first `LogFormatError`). Options as `BatchReader`."""
    return list(BatchReader(data, source, **options))


def recover_batches(
    data: Any, source: str = "<bytes>", **options: Any
) -> tuple[list[RecordBatch], RecoveryReport]:
    """The whole, valid batches of `data` up to the first bad one, and the `RecoveryReport`."""
    reader = BatchReader(data, source, recover=True, **options)
    batches = list(reader)
    assert reader.report is not None
    return batches, reader.report


def iter_file_batches(
    path: str | os.PathLike[str], *, recover: bool = False, **options: Any
) -> Iterator[RecordBatch]:
    """Iterate the batches of a segment or ``.checkpoint`` file (memory-mapped; each batch is copied out).

    Raises `FileAccessError` when the file cannot be opened (missing, a directory), else as `BatchReader`.
    """
    with _open_buffer(path) as buf:
        yield from BatchReader(buf, str(path), recover=recover, **options)


def read_file_batches(path: str | os.PathLike[str], **options: Any) -> list[RecordBatch]:
    """All batches of a file, strictly."""
    return list(iter_file_batches(path, **options))


def recover_file_batches(
    path: str | os.PathLike[str], **options: Any
) -> tuple[list[RecordBatch], RecoveryReport]:
    """The valid batches of a file up to the first bad one, and the `RecoveryReport`."""
    with _open_buffer(path) as buf:
        return recover_batches(buf, str(path), **options)


def truncate_to_valid(path: str | os.PathLike[str], *, fsync: bool = True, **options: Any) -> RecoveryReport:
    """Truncate a segment file after its last whole, valid batch (Kafka's recovery); return the report."""
    _, report = recover_file_batches(path, **options)
    if report.truncated_bytes:
        with open(path, "r+b") as f:
            f.truncate(report.valid_bytes)
            if fsync:
                os.fsync(f.fileno())
    return report


class _open_buffer:
    """An mmap of a file (an empty bytes object for an empty file), closed on exit."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: Any = None
        self._map: mmap.mmap | None = None

    def __enter__(self) -> Any:
        try:
            self._file = open(self.path, "rb")
        except OSError as exc:  # missing, a directory, no permission: a typed error naming the file
            raise FileAccessError(f"cannot read: {exc.strerror or exc}", source=str(self.path)) from exc
        size = os.fstat(self._file.fileno()).st_size
        if size == 0:
            return b""
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        return self._map

    def __exit__(self, *exc: object) -> None:
        if self._map is not None:
            self._map.close()
        self._file.close()
