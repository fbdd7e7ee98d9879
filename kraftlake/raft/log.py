"""The storage interface of a raft node: the log, its leader-epoch cache and its snapshots."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, overload

from kraftlake.raft.messages import Entry, OffsetAndEpoch, SnapshotId


class RaftLog(Protocol):
    """A replicated log as the raft step machine needs it.

    Offsets are contiguous from `log_start_offset` to `end_offset` (exclusive). Appends land in memory or the
    page cache first; `flush` makes them durable and `flushed_end_offset` says up to where. Below the log start
    offset the log is represented by the latest snapshot, whose end offset equals the log start offset.
    """

    @property
    def log_start_offset(self) -> int:
        """The first offset held in the log (the latest snapshot's end offset, or 0)."""
        ...

    @property
    def end_offset(self) -> int:
        """One past the last offset appended (flushed or not)."""
        ...

    @property
    def flushed_end_offset(self) -> int:
        """One past the last offset known to be durable."""
        ...

    def last_epoch(self) -> int:
        """The epoch of the last entry, else of the latest snapshot, else 0."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries that start at `end_offset` (not yet durable)."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every entry at `offset` and above."""
        ...

    def flush(self, end_offset: int | None = None) -> None:
        """Make every appended entry durable; with `end_offset`, only record that the driver has already made
        the entries below it durable (an fsync it ran off its event loop; nothing else is written)."""
        ...

    def read(self, start: int, end: int, max_bytes: int | None = None) -> list[Entry]:
        """The entries in [start, end), at least one if any, stopping once `max_bytes` of values are read."""
        ...

    def epoch_at(self, offset: int) -> int:
        """The epoch of the entry at `offset` (the snapshot's epoch for `log_start_offset - 1`)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` the log knows and the end offset of that epoch (leader-epoch cache)."""
        ...

    def latest_snapshot(self) -> SnapshotId | None:
        """The id of the newest snapshot, if any."""
        ...

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a snapshot of the state up to `snapshot_id.offset` (exclusive)."""
        ...

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes:
        """The bytes of a stored snapshot."""
        ...

    def delete_before_snapshot(self, retention_bytes: int = 0) -> None:
        """Advance the log start offset to the oldest snapshot still kept, dropping older snapshots and entries:
        snapshots go oldest first while the log holds more than `retention_bytes` (0: keep only the latest)."""
        ...

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Replace the whole log by a snapshot fetched from the leader: start = end = its end offset."""
        ...


def snapshot_floor(log: RaftLog) -> int:
    """The offset a new snapshot must pass: the latest snapshot's end offset, else the log start offset (the log
    may retain entries before the latest snapshot)."""
    latest = log.latest_snapshot()
    return max(log.log_start_offset, latest.offset if latest is not None else 0)


class CommittedEntries(Sequence[Entry]):
    """The committed entries [`start`, `end`) of a log, read from it when first used.

    A driver without a state machine (a voter that only replicates) needs no more than the range, so it
    should not pay for an `Entry` per committed record (a large share of a follower's CPU). Committed entries are
    never truncated, so reading later gives what reading at once would, as long as the driver uses them before
    it next moves the log start (a snapshot's `delete_before_snapshot`).
    """

    __slots__ = ("_entries", "_log", "end", "start")

    def __init__(self, log: RaftLog, start: int, end: int) -> None:
        self.start = start
        self.end = end
        self._log: RaftLog | None = log
        self._entries: tuple[Entry, ...] | None = None

    def _load(self) -> tuple[Entry, ...]:
        if self._entries is None:
            assert self._log is not None
            self._entries = tuple(self._log.read(self.start, self.end))
            self._log = None
        return self._entries

    def __len__(self) -> int:
        return self.end - self.start

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        return self._load()[index]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._load())

    def __repr__(self) -> str:
        return f"CommittedEntries([{self.start}, {self.end}))"
