"""The service's own messages beside the raft RPCs: client appends, observer fetches, DescribeQuorum, errors.

A raft `Entry` travels with the leader's append timestamp, the base offset of the leader's batch and its
control type, so that every replica writes the same batches with the same timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

from kraftlake.raft.messages import Entry, Message, OffsetAndEpoch


class ErrorCode(IntEnum):
    """Error codes of the service RPCs (Kafka's numbers where Kafka has one)."""

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    INCONSISTENT_CLUSTER_ID = 104
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_SERVER_ERROR = -1


class CommittedEntry(NamedTuple):
    """A committed entry as the service hands it out."""

    offset: int
    epoch: int
    timestamp: int
    is_control: bool
    value: bytes
    control_type: int = -1
    """Kafka's `ControlRecordType` of a control entry (LeaderChange 2, ...); -1 for data or unknown."""


@dataclass(frozen=True, slots=True)
class AppendRequest(Message):
    """A client asks the leader to append values; answered once they are committed."""

    values: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class AppendResponse(Message):
    """Where the values landed (committed), or an error with the leader the node knows of."""

    error: ErrorCode
    leader_id: int | None
    leader_endpoint: str
    epoch: int
    base_offset: int = -1
    last_offset: int = -1
    message: str = ""


@dataclass(frozen=True, slots=True)
class ObserverFetchRequest(Message):
    """An observer fetches committed entries from `fetch_offset`; it never counts towards the high watermark."""

    fetch_offset: int
    max_records: int
    max_wait_ms: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class ObserverFetchResponse(Message):
    """Committed entries from the requested offset (only below the answering node's high watermark)."""

    error: ErrorCode
    leader_id: int | None
    epoch: int
    high_watermark: int
    log_start_offset: int
    entries: tuple[Entry, ...] = ()
    snapshot_id: OffsetAndEpoch | None = None
    """With OFFSET_OUT_OF_RANGE: the latest snapshot, to download with `ObserverFetchSnapshotRequest`."""


@dataclass(frozen=True, slots=True)
class ObserverFetchSnapshotRequest(Message):
    """An observer downloads a snapshot in chunks (FetchSnapshot), from any voter that holds it."""

    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class ObserverFetchSnapshotResponse(Message):
    """One chunk of a snapshot (`size` is the whole snapshot's); SNAPSHOT_NOT_FOUND if the node lacks it."""

    error: ErrorCode
    snapshot_id: OffsetAndEpoch
    size: int
    position: int
    chunk: bytes


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest(Message):
    """Asks for the quorum's status (kafka-metadata-quorum describe)."""


@dataclass(frozen=True, slots=True)
class VoterInfo:
    """A voter as `describe --status` lists it."""

    node_id: int
    directory_id: str
    endpoint: str


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """A row of `describe --replication`."""

    node_id: int
    directory_id: str
    log_end_offset: int
    lag: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    status: str


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The fields of `kafka-metadata-quorum describe --status` and `--replication`.

    Timestamps are wall-clock milliseconds; -1 when unknown. Only the leader knows the replication rows and
    the follower lag; another node answers with what it knows and `leader_id`.
    """

    cluster_id: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    max_follower_lag: int
    max_follower_lag_time_ms: int
    voters: tuple[VoterInfo, ...]
    observers: tuple[int, ...]
    replicas: tuple[ReplicaInfo, ...] = field(default=())

    def status_lines(self) -> list[str]:
        """The `describe --status` text, as kafka-metadata-quorum prints it."""
        voters = ", ".join(
            f'{{"id": {v.node_id}, "directoryId": "{v.directory_id}", "endpoints": ["CONTROLLER://{v.endpoint}"]}}'
            for v in self.voters)
        observers = ", ".join(f'{{"id": {o}}}' for o in self.observers)
        rows = [
            ("ClusterId", self.cluster_id),
            ("LeaderId", str(self.leader_id)),
            ("LeaderEpoch", str(self.leader_epoch)),
            ("HighWatermark", str(self.high_watermark)),
            ("MaxFollowerLag", str(self.max_follower_lag)),
            ("MaxFollowerLagTimeMs", str(self.max_follower_lag_time_ms)),
            ("CurrentVoters", f"[{voters}]"),
            ("CurrentObservers", f"[{observers}]"),
        ]
        return [f"{name + ':':<24}{value}" for name, value in rows]

    def replication_lines(self) -> list[str]:
        """The `describe --replication` table."""
        header = ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                  "LastCaughtUpTimestamp", "Status")
        rows = [header] + [
            (str(r.node_id), r.directory_id, str(r.log_end_offset), str(r.lag), str(r.last_fetch_timestamp),
             str(r.last_caught_up_timestamp), r.status)
            for r in self.replicas
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse(Message):
    """The quorum's status as the answering node knows it."""

    error: ErrorCode
    leader_endpoint: str
    description: QuorumDescription


@dataclass(frozen=True, slots=True)
class ErrorResponse(Message):
    """A refusal of a whole frame: another cluster id, an oversized frame, an undecodable request."""

    error: ErrorCode
    message: str
