"""What the service hands its listeners (KRaft's `RaftClient.Listener`): committed batches, snapshots, leaders.

Listeners are called on the service's event-loop thread, in log order; they must return quickly (hand work to
another thread) and never call back into the service synchronously.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kraftlake.logformat import RecordBatch, read_batches
from kraftlake.raft.messages import SnapshotId
from kraftlake.service.messages import CommittedEntry


@dataclass(frozen=True, slots=True)
class Batch:
    """Committed entries written together by one leader (Kafka's `Batch`)."""

    base_offset: int
    epoch: int
    append_timestamp: int
    entries: tuple[CommittedEntry, ...]

    @property
    def last_offset(self) -> int:
        """The offset of the batch's last entry."""
        return self.entries[-1].offset


@dataclass(frozen=True, slots=True)
class SnapshotReader:
    """A snapshot to load: the state up to `snapshot_id.offset` (exclusive)."""

    snapshot_id: SnapshotId
    data: bytes

    def batches(self) -> list[RecordBatch]:
        """The snapshot's record batches (the data of a Kafka ``.checkpoint`` file)."""
        return read_batches(self.data, f"<snapshot {self.snapshot_id}>")


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    """The leader of an epoch (None while an election runs)."""

    leader_id: int | None
    epoch: int


class Listener(Protocol):
    """Receives what a service node commits, in order (see the module docstring for the threading rules)."""

    def handle_commit(self, batch: Batch) -> None:
        """Called with each committed batch, in offset order."""

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        """Called when the node's state must be replaced by a snapshot (on start or after a download)."""

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        """Called when the node learns of a new leader or epoch."""


def group_batches(entries: list[CommittedEntry], bases: list[int]) -> list[Batch]:
    """Group consecutive entries by their batch base offset (`bases[i]` belongs to `entries[i]`)."""
    out: list[Batch] = []
    start = 0
    for i in range(1, len(entries) + 1):
        if i == len(entries) or bases[i] != bases[start] or entries[i].epoch != entries[start].epoch:
            group = tuple(entries[start:i])
            out.append(Batch(group[0].offset, group[0].epoch, group[0].timestamp, group))
            start = i
    return out
