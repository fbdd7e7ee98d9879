"""An in-memory metadata log: the fast appender for tests and in-process simulations.

It gives every appended batch offsets, stores committed-record envelopes (``kraftlake.records.MetadataRecord``)
and commits either at once (``auto_commit``) or when told, handing committed records to listeners (the
standby controllers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kraftlake.controller.result import RecordAndVersion
from kraftlake.records.envelope import MetadataRecord, data_envelope

CommitListener = Callable[[Sequence[MetadataRecord]], None]


def envelope(
    offset: int, epoch: int, timestamp: int, batch_offset: int, rv: RecordAndVersion
) -> MetadataRecord:
    """A committed-record envelope for ``rv`` (no raw bytes: the in-memory log does not encode)."""
    return data_envelope(offset, epoch, timestamp, batch_offset, rv[0], rv[1])


class MemoryMetadataLog:
    """Batches of ``(record, version)`` with offsets; ``end_offset`` is the next offset to assign."""

    def __init__(self, *, auto_commit: bool = True, clock: Callable[[], int] | None = None) -> None:
        self.records: list[MetadataRecord] = []
        self.batches: list[tuple[int, int]] = []  # (base offset, count)
        self.committed_offset = -1
        self.auto_commit = auto_commit
        self.listeners: list[CommitListener] = []
        self._clock = clock or (lambda: 0)

    def end_offset(self) -> int:
        return len(self.records)

    def append(self, epoch: int, records: Sequence[RecordAndVersion]) -> int:
        """Append one batch; return its base offset."""
        base = len(self.records)
        ts = self._clock()
        self.records.extend(envelope(base + i, epoch, ts, base, rv) for i, rv in enumerate(records))
        self.batches.append((base, len(records)))
        if self.auto_commit:
            self.commit(len(self.records) - 1)
        return base

    def commit(self, offset: int) -> None:
        """Mark everything up to ``offset`` committed and hand the new records to the listeners."""
        offset = min(offset, len(self.records) - 1)
        if offset <= self.committed_offset:
            return
        new = self.records[self.committed_offset + 1 : offset + 1]
        self.committed_offset = offset
        for listener in self.listeners:
            listener(new)
