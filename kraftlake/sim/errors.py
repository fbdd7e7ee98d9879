"""The exceptions of the simulation layer."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class SimError(KraftlakeError):
    """Raised for any failure of the simulation layer."""


class InvariantViolation(SimError):
    """Raised when a simulated quorum breaks a safety invariant or fails to make progress in time."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail
