"""Exceptions of the image layer."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class ImageError(KraftlakeError):
    """Raised when the metadata image cannot be built or rendered.

    Attributes
    ----------
    source : str or None
        The file (or log directory) whose records were being applied, when known.
    offset : int or None
        The offset of the record at fault, when known.
    """

    source: str | None = None
    offset: int | None = None


class ReplayError(ImageError):
    """Raised when a record cannot be applied to an image (Kafka's loader reports the same as a fault)."""


class TopicIdReusedError(ReplayError):
    """Raised when a TopicRecord names a topic id that is live under another name: Kafka's controller draws a
    new random id for every topic, so a log holding it was not written by Kafka's rules."""


class TransactionError(ReplayError):
    """Raised when Begin/End/AbortTransaction records are out of order."""


class SnapshotWriteError(ImageError):
    """Raised when an image cannot be written as a snapshot (e.g. inside an open metadata transaction)."""


class SkippedSnapshotWarning(UserWarning):
    """Warned when ``image_at`` skips a snapshot it cannot load (malformed, cut short, unreadable) and answers
    from an older one, or from the log."""


def located(exc: ImageError, source: str, offset: int | None) -> ImageError:
    """``exc`` as the same class, its message prefixed with the file and offset of the record at fault."""
    if exc.source is not None:
        return exc
    message = str(exc)
    if exc.offset is not None:  # named by `at_offset`: said once, beside the file
        offset = exc.offset
        message = message.removeprefix(f"offset {offset}: ")
    where = source if offset is None else f"{source} (offset {offset})"
    out = type(exc)(f"{where}: {message}")
    out.source, out.offset = source, offset
    return out


def at_offset(exc: ImageError, offset: int) -> ImageError:
    """``exc`` as the same class, its message prefixed with the offset of the record at fault (where the
    record's source is not known)."""
    if exc.offset is not None or exc.source is not None:
        return exc
    out = type(exc)(f"offset {offset}: {exc}")
    out.offset = offset
    return out
