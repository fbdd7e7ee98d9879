"""An in-memory `RaftLog` that models durability: a crash loses what was not flushed."""

from __future__ import annotations

import bisect
import functools
import operator
from collections.abc import Iterable, Sequence
from typing import cast

from kraftlake.raft.errors import LogTruncationError, RaftStorageError
from kraftlake.raft.messages import Entry, OffsetAndEpoch, SnapshotId

# Rough per-entry overhead of a record in a v2 batch, so that byte limits behave like Kafka's.
RECORD_OVERHEAD = 21
_OFFSET = operator.itemgetter(0)
_EPOCH = operator.itemgetter(1)
_VALUE = operator.itemgetter(3)
# stored entries are plain tuples: CPython stops tracking a plain tuple of atoms (ints, bools, bytes) at the
# first collection it survives, but never a tuple subclass such as `Entry`. A log of Entry objects made every
# full collection scan every record, a pause that grows with the log and lands in the append tail;
# reads rebuild the few Entry objects they return.
_AS_ENTRY = functools.partial(tuple.__new__, Entry)
_Stored = tuple[int, int, bool, bytes, int, int, int]


class MemoryRaftLog:
    """A `RaftLog` in memory, for the simulation and the unit tests.

    Snapshots and truncations are durable at once (as a file rename or truncation is); appends become durable
    only at `flush`. `crash()` throws away the unflushed tail as a power loss would.
    """

    def __init__(self) -> None:
        self._start = 0
        self._entries: list[_Stored] = []
        self._flushed = 0
        # leader-epoch cache: (epoch, start offset), ascending in both
        self._epochs: list[tuple[int, int]] = []
        # None: the data lives only in the driver's storage (see `forget_snapshot_data`)
        self._snapshots: dict[SnapshotId, bytes | None] = {}

    # -- offsets -----------------------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed

    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1][1]
        snap = self.latest_snapshot()
        return snap.epoch if snap is not None else 0

    # -- writes --------------------------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        n = len(entries)
        if not n:
            return
        first, last = entries[0], entries[-1]
        end = self.end_offset
        if (
            n > 2
            and first.offset == end
            and last.offset == end + n - 1
            and first.epoch == last.epoch
            and first.epoch >= self.last_epoch()
        ):
            # one leader write (the common case): check the offsets in one pass, then extend in bulk
            if (
                list(map(_OFFSET, entries)) != list(range(end, end + n))
                or list(map(_EPOCH, entries)).count(first.epoch) != n
            ):
                raise RaftStorageError(f"append of non-contiguous entries at offset {end}")
            if not self._epochs or self._epochs[-1][0] != first.epoch:
                self._epochs.append((first.epoch, first.offset))
            self._entries.extend(cast("Iterable[_Stored]", map(tuple, entries)))
            return
        for entry in entries:
            if entry.offset != self.end_offset:
                raise RaftStorageError(f"append at offset {entry.offset}, expected {self.end_offset}")
            if entry.epoch < self.last_epoch():
                raise RaftStorageError(f"append of epoch {entry.epoch} after epoch {self.last_epoch()}")
            if not self._epochs or self._epochs[-1][0] != entry.epoch:
                self._epochs.append((entry.epoch, entry.offset))
            self._entries.append(cast("_Stored", tuple(entry)))

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise LogTruncationError(f"truncate to {offset} below the log start offset {self._start}")
        if offset >= self.end_offset:
            return
        del self._entries[offset - self._start :]
        self._flushed = min(self._flushed, offset)
        # keep the first cache entry: it may describe the snapshot the log starts from
        self._epochs = [e for i, e in enumerate(self._epochs) if e[1] < offset or i == 0]
        if (
            self._epochs
            and self._epochs[0][1] >= offset
            and not self._entries
            and self.latest_snapshot() is None
        ):
            self._epochs = []

    def flush(self, end_offset: int | None = None) -> None:
        if end_offset is None:
            self._flushed = self.end_offset
        else:
            self._flushed = max(self._flushed, min(end_offset, self.end_offset))

    def crash(self) -> int:
        """Lose every unflushed entry, as a power loss would; returns how many were lost."""
        lost = self.end_offset - self._flushed
        if lost:
            self.truncate_to(max(self._flushed, self._start))
        return lost

    # -- reads ---------------------------------------------------------------------------------------------
    def read(
        self, start: int, end: int, max_bytes: int | None = None, whole_batches: bool = False
    ) -> list[Entry]:
        """Entries in [start, end), at least one if any, stopping once ``max_bytes`` of values are read;
        ``whole_batches``: the cut steps back to the start of the leader batch it falls in, so a follower copies
        whole batches, and a first batch larger than ``max_bytes`` is returned whole (Kafka's rule, so that a
        reader always gets past it)."""
        if start < self._start or end > self.end_offset:
            raise RaftStorageError(f"read [{start}, {end}) outside [{self._start}, {self.end_offset})")
        entries, first = self._entries, start - self._start
        last = end - self._start
        if max_bytes is not None and first < last:
            # cut on the stored tuples (value at 3, batch base at 5), without copying the range first: only
            # what is returned becomes an Entry
            cut = last
            size = 0
            for i in range(first, last):
                size += len(entries[i][3]) + RECORD_OVERHEAD
                if i > first and size > max_bytes:
                    cut = i
                    break
            if whole_batches and cut < last and entries[cut][5] >= 0:
                base = entries[cut][5]
                boundary = cut
                while boundary > first and entries[boundary - 1][5] == base:
                    boundary -= 1
                if boundary > first:
                    cut = boundary
                else:  # the first batch alone is over the limit: all of it
                    while cut < last and entries[cut][5] == base:
                        cut += 1
            last = cut
        return list(map(_AS_ENTRY, entries[first:last]))

    def value_bytes(self, start: int, end: int) -> int:
        """The size of the entries in [start, end) as the byte limits count it (values plus record overhead)."""
        stored = self._entries[max(start - self._start, 0) : max(end - self._start, 0)]
        return sum(map(len, map(_VALUE, stored))) + RECORD_OVERHEAD * len(stored)

    def epoch_at(self, offset: int) -> int:
        if offset == self._start - 1:
            snap = self.latest_snapshot()
            if snap is not None and snap.offset == self._start:
                return snap.epoch
        if offset < self._start or offset >= self.end_offset:
            raise RaftStorageError(f"no entry at offset {offset} in [{self._start}, {self.end_offset})")
        return self._entries[offset - self._start][1]

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        index = bisect.bisect_right([e for e, _ in self._epochs], epoch) - 1
        if index < 0:
            snap = self.latest_snapshot()
            if snap is not None and snap.epoch <= epoch:
                return OffsetAndEpoch(snap.offset, snap.epoch)
            return OffsetAndEpoch(-1, -1)
        found = self._epochs[index][0]
        end = self._epochs[index + 1][1] if index + 1 < len(self._epochs) else self.end_offset
        return OffsetAndEpoch(end, found)

    # -- snapshots -----------------------------------------------------------------------------------------
    def latest_snapshot(self) -> SnapshotId | None:
        return max(self._snapshots) if self._snapshots else None

    def snapshot_ids(self) -> list[SnapshotId]:
        """Every stored snapshot id, oldest first."""
        return sorted(self._snapshots)

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        if snapshot_id.offset > self.end_offset:
            raise RaftStorageError(f"snapshot {snapshot_id} beyond the log end {self.end_offset}")
        if snapshot_id.offset < self._start:
            raise RaftStorageError(f"snapshot {snapshot_id} below the log start {self._start}")
        if snapshot_id.offset > self._start and self.epoch_at(snapshot_id.offset - 1) != snapshot_id.epoch:
            raise RaftStorageError(f"snapshot {snapshot_id} does not match the log's epoch")
        self._snapshots[snapshot_id] = bytes(data)

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes:
        data = self.snapshot_data(snapshot_id)
        if data is None:
            raise RaftStorageError(f"snapshot {snapshot_id} is kept on disk only")
        return data

    def snapshot_data(self, snapshot_id: SnapshotId) -> bytes | None:
        """A stored snapshot's bytes, or None once `forget_snapshot_data` let them go."""
        try:
            return self._snapshots[snapshot_id]
        except KeyError:
            raise RaftStorageError(f"no snapshot {snapshot_id}") from None

    def forget_snapshot_data(self, snapshot_id: SnapshotId) -> None:
        """Keep the snapshot's id but not its bytes (a file-backed log reads retained older snapshots from disk:
        a full image of a large cluster is hundreds of MB)."""
        if snapshot_id in self._snapshots:
            self._snapshots[snapshot_id] = None

    def delete_before_snapshot(self, retention_bytes: int = 0) -> None:
        """Advance the log start offset to the oldest snapshot still kept; older snapshots and entries go.

        Snapshots are let go oldest first while the log from the current start holds more than
        ``retention_bytes`` (Kafka's ``metadata.max.retention.bytes``); the latest is always kept, and 0 keeps
        only the latest. What is retained stays readable by a consumer that is behind the latest snapshot.
        """
        offsets = sorted({s.offset for s in self._snapshots if s.offset > self._start})
        target = self._start
        for offset in offsets:
            if retention_bytes > 0 and self.value_bytes(target, self.end_offset) <= retention_bytes:
                break
            target = offset
        if target <= self._start:
            return
        del self._entries[: target - self._start]
        self._start = target
        self._flushed = max(self._flushed, self._start)
        kept = [e for e in self._epochs if e[1] >= self._start]
        older = [e for e in self._epochs if e[1] < self._start]
        if older and (not kept or kept[0][1] > self._start):
            kept.insert(0, (older[-1][0], self._start))
        self._epochs = kept
        self._snapshots = {s: d for s, d in self._snapshots.items() if s.offset >= target}

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._snapshots = {s: d for s, d in self._snapshots.items() if s > snapshot_id}
        self._snapshots[snapshot_id] = bytes(data)
        self._snapshots = {snapshot_id: self._snapshots[snapshot_id]}
        self._entries = []
        self._start = snapshot_id.offset
        self._flushed = snapshot_id.offset
        self._epochs = [(snapshot_id.epoch, snapshot_id.offset)]

    def wipe(self) -> None:
        """Lose everything (a disk failure); used by the committed-data-loss scenario."""
        self.__init__()  # type: ignore[misc]
