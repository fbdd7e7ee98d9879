"""Exceptions of the image layer."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class ImageError(KraftlakeError):
    """Raised when the metadata image cannot be built or rendered."""


class ReplayError(ImageError):
    """Raised when a record cannot be applied to an image (Kafka's loader reports the same as a fault)."""


class TransactionError(ReplayError):
    """Raised when Begin/End/AbortTransaction records are out of order."""


class SnapshotWriteError(ImageError):
    """Raised when an image cannot be written as a snapshot (e.g. inside an open metadata transaction)."""
