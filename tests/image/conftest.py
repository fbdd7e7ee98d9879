from __future__ import annotations

from typing import Any

from kraftlake.records.reader import MetadataRecord


def mr(record: Any, offset: int, epoch: int = 1, timestamp: int = 1000) -> MetadataRecord:
    """A committed record envelope around ``record`` (raw bytes are not needed by replay)."""
    return MetadataRecord(
        offset,
        epoch,
        timestamp + offset,
        offset,
        False,
        type(record).__name__,
        getattr(record, "_api_key", -1),
        0,
        record,
        b"",
    )


def ctrl(record: Any, offset: int, epoch: int = 1, timestamp: int = 1000) -> MetadataRecord:
    return MetadataRecord(
        offset,
        epoch,
        timestamp + offset,
        offset,
        True,
        type(record).__name__,
        getattr(record, "_api_key", -1),
        0,
        record,
        b"",
    )


def envelopes(records: list[Any], start: int = 0) -> list[MetadataRecord]:
    return [mr(r, start + i) for i, r in enumerate(records)]
