"""The root of kraftlake's exceptions; each layer derives its own hierarchy from it."""

from __future__ import annotations


class KraftlakeError(Exception):
    """Raised for any failure kraftlake reports on purpose (bad input, protocol errors, misuse)."""
