"""Log entries and the KRaft RPCs as frozen, slotted value objects.

Every message names its source and destination node and carries a correlation id that the response echoes,
so a node can tell the answer to its outstanding request from a late duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kraftlake.protocol.error_codes import Errors as Errors

NO_CONTROL_TYPE = -1
"""`Entry.control_type` of a data entry."""


class Entry(NamedTuple):
    """One log entry: an opaque value at an offset, written in a leader epoch.

    A named tuple (immutable, and the cheapest object CPython builds: the log holds one per record, so the
    hot paths create them with ``tuple.__new__(Entry, (...))``).

    Parameters
    ----------
    offset, epoch
        Where the entry sits and the leader epoch that wrote it.
    is_control
        Whether the value is a control record body (the raft layer's own entries).
    value
        The record value bytes (a control record's body for a control entry).
    timestamp
        The leader's append time (ms since the Unix epoch; -1 unknown); it becomes the batch timestamp.
    batch_base
        The offset of the first entry of the leader's write (batch) this entry belongs to (-1 unknown), so that
        every replica writes exactly the batches the leader wrote.
    control_type
        Kafka's `ControlRecordType` of a control entry (LeaderChange 2, SnapshotHeader 3, ...); -1 for data.
    """

    offset: int
    epoch: int
    is_control: bool
    value: bytes
    timestamp: int = -1
    batch_base: int = -1
    control_type: int = NO_CONTROL_TYPE


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """An (end offset, epoch) pair: a DivergingEpoch or a snapshot id (Kafka's `OffsetAndEpoch`)."""

    offset: int
    epoch: int


SnapshotId = OffsetAndEpoch
"""A snapshot is named by its end offset (exclusive) and the epoch of its last entry."""


@dataclass(frozen=True, slots=True)
class Message:
    """Base of every RPC: sender, receiver and correlation id."""

    src: int
    dst: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class VoteRequest(Message):
    """Asks for a vote (or a pre-vote, which changes no state) for `candidate_epoch`."""

    candidate_epoch: int
    candidate_id: int
    last_epoch: int
    last_epoch_end_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse(Message):
    """Grants or refuses a vote; `epoch` and `leader_id` are what the voter knows."""

    epoch: int
    leader_id: int | None
    vote_granted: bool
    pre_vote: bool
    candidate_epoch: int
    error: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest(Message):
    """A new leader announces itself to the voters."""

    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse(Message):
    """Acknowledges a BeginQuorumEpoch."""

    epoch: int
    leader_id: int | None
    error: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest(Message):
    """A resigning leader asks the voters to elect a successor, preferred ones first."""

    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse(Message):
    """Acknowledges an EndQuorumEpoch."""

    epoch: int
    leader_id: int | None
    error: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class FetchRequest(Message):
    """Pulls entries from `fetch_offset`; also the follower's heartbeat and its acknowledgement."""

    epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int
    replica_directory_id: str = ""


@dataclass(frozen=True, slots=True)
class FetchResponse(Message):
    """Entries, or a DivergingEpoch to truncate to, or a SnapshotId to download; always the HW and leader."""

    epoch: int
    leader_id: int | None
    high_watermark: int
    entries: tuple[Entry, ...] = ()
    diverging_epoch: OffsetAndEpoch | None = None
    snapshot_id: SnapshotId | None = None
    error: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest(Message):
    """Asks for the bytes of a snapshot from `position`."""

    epoch: int
    replica_id: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse(Message):
    """One chunk of a snapshot."""

    epoch: int
    leader_id: int | None
    snapshot_id: SnapshotId
    size: int
    position: int
    chunk: bytes
    error: Errors = Errors.NONE


Request = VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
Response = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | FetchSnapshotResponse
)
