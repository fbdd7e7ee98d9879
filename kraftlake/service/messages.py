"""What the service hands out besides the raft messages: committed entries and the quorum's description (its
voters, replicas and the observers a node serves).

The RPCs themselves are Kafka's (`kraftlake.service.kafka_rpc`). A raft `Entry` travels in Kafka's record batches,
with the leader's append timestamp, the base offset of the leader's batch and its control type, so that every
replica writes the same batches with the same timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class CommittedEntry(NamedTuple):
    """A committed entry as the service hands it out."""

    offset: int
    epoch: int
    timestamp: int
    is_control: bool
    value: bytes
    control_type: int = -1
    """Kafka's `ControlRecordType` of a control entry (LeaderChange 2, ...); -1 for data or unknown."""


STUCK_PREFIX = "stuck: "
"""How a voter's DescribeQuorum error message starts when it can never elect again."""


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
class TrackedObserver:
    """An observer as the node that serves it knows it (a row of DescribeQuorum's Observers):
    `kraftlake.service.observer_server.ObserverServer` tracks them, `RaftDriver.describe` lists them."""

    directory_id: str
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int | None


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The fields of `kafka-metadata-quorum describe --status` and `--replication`.

    Timestamps are wall-clock milliseconds; -1 when unknown. Only the leader knows the replication rows and
    the follower lag; another node answers with what it knows and `leader_id`. `stuck` is non-empty when the
    answering voter can never elect again (`RaftNode.stuck`, starting with `STUCK_PREFIX`).
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
    stuck: str = ""

    def status_lines(self) -> list[str]:
        """The `describe --status` text, as kafka-metadata-quorum prints it."""
        voters = ", ".join(_node_text(v.node_id, v.directory_id, v.endpoint) for v in self.voters)
        directories = {r.node_id: r.directory_id for r in self.replicas}
        observers = ", ".join(_node_text(o, directories.get(o, ""), "") for o in self.observers)
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
        if self.stuck:
            rows.append(("Stuck", self.stuck[len(STUCK_PREFIX) :]))
        return [f"{name + ':':<24}{value}" for name, value in rows]

    def replication_lines(self) -> list[str]:
        """The `describe --replication` table."""
        header = (
            "NodeId",
            "DirectoryId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
        )
        rows = [header] + [
            (
                str(r.node_id),
                r.directory_id,
                str(r.log_end_offset),
                str(r.lag),
                str(r.last_fetch_timestamp),
                str(r.last_caught_up_timestamp),
                r.status,
            )
            for r in self.replicas
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        return [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
        ]


def _node_text(node_id: int, directory_id: str, endpoint: str) -> str:
    """A node as ``kafka-metadata-quorum describe --status`` prints it (no unknown directory id or endpoint)."""
    text = f'{{"id": {node_id}'
    if directory_id and directory_id != "AAAAAAAAAAAAAAAAAAAAAA":
        text += f', "directoryId": "{directory_id}"'
    if endpoint:
        text += f', "endpoints": ["CONTROLLER://{endpoint}"]'
    return text + "}"


def follower_lag(replicas: tuple[ReplicaInfo, ...] | list[ReplicaInfo]) -> tuple[int, int]:
    """``(MaxFollowerLag, MaxFollowerLagTimeMs)`` as ``kafka-metadata-quorum describe --status`` derives them
    from the voters' rows: the leader's log end minus the furthest-behind voter's, and the difference of their
    last caught-up times (0 if the leader is that voter, -1 if a time is unknown); (0, 0) without a leader row."""
    voters = [r for r in replicas if r.status in ("Leader", "Follower")]
    leader = next((r for r in voters if r.status == "Leader"), None)
    if leader is None:
        return 0, 0
    worst = min(voters, key=lambda r: r.log_end_offset)
    if worst is leader:
        return 0, 0
    if leader.last_caught_up_timestamp >= 0 and worst.last_caught_up_timestamp >= 0:
        return (
            leader.log_end_offset - worst.log_end_offset,
            leader.last_caught_up_timestamp - worst.last_caught_up_timestamp,
        )
    return leader.log_end_offset - worst.log_end_offset, -1
