"""The records layer's exceptions."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class RecordsError(KraftlakeError):
    """Raised when a metadata or control record cannot be read or written."""


class RecordDecodeError(RecordsError):
    """Raised when a record value in a log cannot be decoded; names the source, byte position and offset."""

    def __init__(
        self,
        message: str,
        *,
        source: str,
        position: int | None,
        offset: int | None,
        cause: Exception | None = None,
    ) -> None:
        where = f"{source}"
        if position is not None:
            where += f" at byte {position}"
        if offset is not None:
            where += f" (offset {offset})"
        super().__init__(f"{where}: {message}")
        self.source = source
        self.position = position
        self.offset = offset
        self.cause = cause
