"""The exceptions of the controller layer."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class ControllerError(KraftlakeError):
    """Raised for any failure of the controller layer that is not a Kafka error response."""


class NotActiveError(ControllerError):
    """Raised when a command is executed on a controller that is not the active (leader) controller."""


class AppendError(ControllerError):
    """Raised when the metadata log refuses an append (not the leader, closed, ...)."""
