"""The report's error."""

from __future__ import annotations

from kraftlake.errors import KraftlakeError


class ReportError(KraftlakeError):
    """A report that cannot be made as asked: a window without records, bounds outside what the source holds,
    an output format it cannot write."""
