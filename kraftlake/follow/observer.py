"""`MetadataObserver`: a KRaft observer of a controller quorum as a deterministic step machine.

It does what a Kafka broker's raft client does as an observer, minus the disk and the sockets: it asks a
bootstrap controller for the leader (a Fetch at epoch 0 is fenced, and the answer names the leader and its
endpoint), fetches ``__cluster_metadata`` from the leader, follows leader changes and epoch bumps, truncates
on a DivergingEpoch, and downloads a snapshot in chunks when the leader says its log starts past ours.

Only committed batches leave the machine. Fetched batches wait in memory until the leader's high watermark
passes them (the leader returns records past it, and those may still be truncated); then they are handed out
as `AppendBatches`, in order, exactly once. So what a caller writes is append-only: no committed batch is
ever truncated. Inputs are responses and failures; outputs are the next request (`Send`), a pause (`Wait`),
and effects. No clock, thread or socket inside: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kraftlake.follow.errors import (
    AuthorizationError,
    ClusterIdMismatchError,
    MirrorDivergedError,
    NotAControllerError,
    ObserverProtocolError,
)
from kraftlake.logformat.errors import LogFormatError
from kraftlake.logformat.framing import scan_batch_headers
from kraftlake.protocol import rpc_messages
from kraftlake.protocol.error_codes import Errors
from kraftlake.protocol.rpc import ApiKey

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
"""Kafka's ``Topic.CLUSTER_METADATA_TOPIC_ID``: the Uuid with least significant bits 1."""
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""KafkaRaftClient's MAX_FETCH_SIZE_BYTES."""


@dataclass(frozen=True, order=True)
class Endpoint:
    """A controller listener's host and port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_endpoints(text: str) -> list[Endpoint]:
    """``HOST:PORT[,HOST:PORT...]`` (IPv6 hosts in brackets) as endpoints.

    Raises
    ------
    ValueError
        Naming the item that is not ``HOST:PORT``.
    """
    out = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not HOST:PORT")
        out.append(Endpoint(host.strip("[]"), int(port)))
    if not out:
        raise ValueError(f"no HOST:PORT in {text!r}")
    return out


class FetchedBatch(NamedTuple):
    """One record batch as the leader sent it (its bytes are written unchanged).

    A named tuple, not a frozen dataclass: a catch-up makes one per batch (~180k per million records), and
    a frozen dataclass's ``__init__`` was the largest part of `split_batches`'s time per batch.
    """

    base_offset: int
    last_offset: int
    epoch: int
    data: bytes


@dataclass(frozen=True)
class Send:
    """Send `message` (a request of `api_key`) to `endpoint`; `wait_ms` is how long the peer may hold it."""

    endpoint: Endpoint
    api_key: int
    message: Any
    wait_ms: int = 0


@dataclass(frozen=True)
class Wait:
    """Nothing to send before `until_ms` (a backoff after a failure or an unknown leader)."""

    until_ms: int


@dataclass(frozen=True)
class AppendBatches:
    """Committed batches to append, in offset order, following the previous ones without a gap."""

    batches: tuple[FetchedBatch, ...]


@dataclass(frozen=True)
class InstallSnapshot:
    """A whole snapshot (the ``.checkpoint`` file's bytes); the log goes on from `end_offset`."""

    end_offset: int
    epoch: int
    data: bytes


Effect = AppendBatches | InstallSnapshot


@dataclass(frozen=True)
class LeaderInfo:
    """The leader as the observer knows it."""

    leader_id: int
    epoch: int
    endpoint: Endpoint | None


@dataclass
class _Download:
    end_offset: int
    epoch: int
    size: int = -1
    chunks: list[bytes] = field(default_factory=list)
    position: int = 0


ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def for_version(send: Send, version: int) -> Any:
    """`send`'s message as `version` carries it: the replica id moved into ReplicaState in Fetch v15, the
    directory id arrived in Fetch v17 and FetchSnapshot v1."""
    message = send.message
    if send.api_key == ApiKey.FETCH:
        if version < 15:
            message = message._replace(
                replica_id=message.replica_state.replica_id, replica_state=type(message.replica_state)()
            )
        if version < 17:
            topics = [
                t._replace(partitions=[p._replace(replica_directory_id=ZERO_UUID) for p in t.partitions])
                for t in message.topics
            ]
            message = message._replace(topics=topics)
    elif send.api_key == ApiKey.FETCH_SNAPSHOT and version < 1:
        topics = [
            t._replace(partitions=[p._replace(replica_directory_id=ZERO_UUID) for p in t.partitions])
            for t in message.topics
        ]
        message = message._replace(topics=topics)
    return message


def split_batches(records: bytes, source: str) -> list[FetchedBatch]:
    """The whole batches of a Fetch response's records, CRC-checked (a trailing partial batch is dropped, as
    Kafka's clients drop one cut by the fetch size).

    Raises
    ------
    ObserverProtocolError
        On a batch with a bad length, magic or CRC (naming `source` and the byte position).
    """
    out: list[FetchedBatch] = []
    add = out.append
    data = records if isinstance(records, bytes) else bytes(records)  # slices of bytes are bytes
    new_batch = tuple.__new__  # FetchedBatch(...) without its keyword-handling __new__
    try:
        for h in scan_batch_headers(records, source=source, verify_crc=True, stop_at="partial"):
            pos = h.position
            base = h.base_offset
            end = pos + h.batch_length + 12
            add(
                new_batch(
                    FetchedBatch, (base, base + h.last_offset_delta, h.partition_leader_epoch, data[pos:end])
                )
            )
    except LogFormatError as exc:
        raise ObserverProtocolError(str(exc)) from exc
    return out


class MetadataObserver:
    """Follows ``__cluster_metadata`` of a controller quorum from `log_end` (the committed end already held).

    Parameters
    ----------
    bootstrap
        Controller listeners to ask for the leader (``controller.quorum.bootstrap.servers``).
    observer_id
        The replica id sent in fetches: an id the cluster does not know makes Kafka track the observer
        (``kafka-metadata-quorum describe --replication`` lists it); -1 is served but not tracked.
    directory_id
        The observer's directory id (base64 Uuid), sent from Fetch v17.
    cluster_id
        Sent in every request (a wrong one is refused: INCONSISTENT_CLUSTER_ID); None to learn nothing and send
        none.
    log_end, last_epoch
        The next offset to mirror and the epoch of the last mirrored batch (0, 0 for an empty mirror).
    voters
        Voter ids known to listen at an endpoint (Kafka's ``controller.quorum.voters``). Without them, a leader
        named without its endpoint (releases before 3.9 send no ``NodeEndpoints``) is found by asking the
        bootstrap controllers in turn at the leader's epoch: only the leader answers a Fetch there.

    `stall_reason` says, after each answer that did not move the mirror, why not (for a follower's error).
    """

    def __init__(
        self,
        bootstrap: list[Endpoint],
        observer_id: int,
        *,
        directory_id: str = "AAAAAAAAAAAAAAAAAAAAAA",
        cluster_id: str | None = None,
        log_end: int = 0,
        last_epoch: int = 0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_wait_ms: int = 500,
        retry_backoff_ms: int = 100,
        max_backoff_ms: int = 2000,
        voters: Mapping[int, Endpoint] | None = None,
    ) -> None:
        if not bootstrap:
            raise ValueError("no bootstrap controllers")
        self.bootstrap = list(bootstrap)
        self.observer_id = observer_id
        self.directory_id = directory_id
        self.cluster_id = cluster_id
        self.log_end = log_end
        self.last_epoch = last_epoch
        self.max_bytes = max_bytes
        self.max_wait_ms = max_wait_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.leader: LeaderInfo | None = None
        self.epoch = 0
        self.high_watermark = -1
        self.log_start_offset = -1
        self.pending: list[FetchedBatch] = []
        self.endpoints: dict[int, Endpoint] = dict(voters or {})
        self.stall_reason = ""
        self.download: _Download | None = None
        self._next_bootstrap = 0
        self._retry_at = 0
        self._failures = 0
        self.fetches = 0
        self.snapshots_installed = 0
        self.divergences = 0
        """DivergingEpoch answers so far (a follower that gets only these makes no progress)."""
        self.last_divergence: tuple[int, int] | None = None

    # -- what to send ----------------------------------------------------------------------------------

    @property
    def fetch_offset(self) -> int:
        """Where the next fetch starts: after the pending batches, else at the committed end."""
        return self.pending[-1].last_offset + 1 if self.pending else self.log_end

    @property
    def fetch_epoch(self) -> int:
        """The epoch of the last batch held (pending or committed)."""
        return self.pending[-1].epoch if self.pending else self.last_epoch

    @property
    def lag(self) -> int:
        """Committed records the leader has and the mirror does not (0 when unknown)."""
        return max(0, self.high_watermark - self.log_end)

    def poll(self, now_ms: int) -> Send | Wait:
        """The next request to send, or how long to wait first."""
        if now_ms < self._retry_at:
            return Wait(self._retry_at)
        leader = self.leader
        target = leader.endpoint if leader is not None and leader.endpoint is not None else None
        if target is None:
            target = self.bootstrap[self._next_bootstrap % len(self.bootstrap)]
        if self.download is not None and leader is not None and target == leader.endpoint:
            return Send(target, ApiKey.FETCH_SNAPSHOT, self._fetch_snapshot_request())
        wait = self.max_wait_ms if leader is not None and target == leader.endpoint else 0
        return Send(target, ApiKey.FETCH, self._fetch_request(wait), wait)

    def _fetch_request(self, wait_ms: int) -> Any:
        f = rpc_messages.FetchRequest
        # Kafka refuses (INVALID_REQUEST) a LastFetchedEpoch above CurrentLeaderEpoch: before the leader's epoch
        # is known (a resumed mirror asks at epoch 0 to be told the leader) the fetch is only a question
        partition = f.FetchPartition(
            partition=0,
            current_leader_epoch=self.epoch,
            fetch_offset=self.fetch_offset,
            last_fetched_epoch=min(self.fetch_epoch, self.epoch),
            log_start_offset=-1,
            partition_max_bytes=self.max_bytes,
            replica_directory_id=self.directory_id,
        )
        return f(
            cluster_id=self.cluster_id,
            replica_state=f.ReplicaState(replica_id=self.observer_id, replica_epoch=-1),
            max_wait_ms=wait_ms,
            min_bytes=0,
            max_bytes=self.max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[f.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[partition])],
        )

    def _fetch_snapshot_request(self) -> Any:
        d = self.download
        assert d is not None
        f = rpc_messages.FetchSnapshotRequest
        partition = f.PartitionSnapshot(
            partition=0,
            current_leader_epoch=self.epoch,
            snapshot_id=f.SnapshotId(end_offset=d.end_offset, epoch=d.epoch),
            position=d.position,
            replica_directory_id=self.directory_id,
        )
        return f(
            cluster_id=self.cluster_id,
            replica_id=self.observer_id,
            max_bytes=self.max_bytes,
            topics=[f.TopicSnapshot(name=METADATA_TOPIC, partitions=[partition])],
        )

    # -- what came back ---------------------------------------------------------------------------------

    def on_failure(self, send: Send, now_ms: int) -> None:
        """The request could not be sent or was not answered: forget that peer as leader and back off."""
        if self.leader is not None and self.leader.endpoint == send.endpoint:
            self.leader = None
        self._next_bootstrap += 1
        self._back_off(now_ms)

    def _back_off(self, now_ms: int) -> None:
        self._failures += 1
        delay = min(self.max_backoff_ms, self.retry_backoff_ms * (1 << min(self._failures - 1, 5)))
        self._retry_at = now_ms + delay

    def on_response(self, send: Send, response: Any, now_ms: int) -> list[Effect]:
        """Act on the answer to `send`; returns the committed effects, in order."""
        if send.api_key == ApiKey.FETCH:
            return self._on_fetch(send, response, now_ms)
        if send.api_key == ApiKey.FETCH_SNAPSHOT:
            return self._on_fetch_snapshot(send, response, now_ms)
        raise ObserverProtocolError(f"no handler for API key {send.api_key}")

    def _learn_endpoints(self, node_endpoints: Any) -> None:
        for node in node_endpoints or ():
            self.endpoints[node.node_id] = Endpoint(node.host, node.port)

    def _top_level(self, error: int, send: Send, what: str) -> None:
        if error == Errors.CLUSTER_AUTHORIZATION_FAILED:
            raise AuthorizationError(
                f"{send.endpoint} refused {what}: CLUSTER_AUTHORIZATION_FAILED (31): the principal needs the "
                f"CLUSTER_ACTION operation on the cluster resource (kafka-acls --add --allow-principal "
                f"User:<name> --operation ClusterAction --cluster)"
            )
        if error == Errors.INCONSISTENT_CLUSTER_ID:
            raise ClusterIdMismatchError(
                f"{send.endpoint} refused {what}: INCONSISTENT_CLUSTER_ID (104): the quorum's cluster id is not "
                f"{self.cluster_id!r}"
            )
        if error == Errors.UNKNOWN_TOPIC_ID:
            raise NotAControllerError(
                f"{send.endpoint} does not know the metadata topic (UNKNOWN_TOPIC_ID 100): that is not a "
                f"controller listener (use a controller.quorum.bootstrap.servers address)"
            )
        if error in (Errors.INVALID_REQUEST, Errors.UNSUPPORTED_VERSION):
            raise ObserverProtocolError(f"{send.endpoint} refused {what} with error {error}")

    def _leader_hint(self, leader_id: int, leader_epoch: int, send: Send) -> bool:
        """Adopt a leader (or a newer epoch without one) the answer names; True if the leader is known."""
        if leader_epoch > self.epoch or (leader_epoch == self.epoch and self.leader is None):
            self.epoch = max(self.epoch, leader_epoch)
            if leader_id >= 0:
                self.leader = LeaderInfo(leader_id, leader_epoch, self.endpoints.get(leader_id))
                return self.leader.endpoint is not None
            self.leader = None
        return self.leader is not None and self.leader.endpoint is not None

    def _on_fetch(self, send: Send, response: Any, now_ms: int) -> list[Effect]:
        self._learn_endpoints(response.node_endpoints)
        self._top_level(response.error_code, send, "Fetch")
        partition = self._partition(response, send)
        self._top_level(partition.error_code, send, "Fetch")
        leader = partition.current_leader
        if partition.error_code in (Errors.FENCED_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER):
            known = self._leader_hint(leader.leader_id, leader.leader_epoch, send)
            current = self.leader
            wrong_endpoint = ""
            if (
                known
                and current is not None
                and current.endpoint == send.endpoint
                and partition.error_code == Errors.NOT_LEADER_OR_FOLLOWER
                and current.epoch == leader.leader_epoch
            ):
                # the controller we took for the leader says it is not: the id -> endpoint map is wrong
                wrong_endpoint = (
                    f"{send.endpoint}, given as voter {current.leader_id}, answers that voter "
                    f"{leader.leader_id} of epoch {leader.leader_epoch} leads elsewhere (NOT_LEADER_OR_FOLLOWER)"
                )
                self.endpoints.pop(current.leader_id, None)
                self.leader = LeaderInfo(current.leader_id, current.epoch, None)
                known = False
            if not known:
                if wrong_endpoint:
                    self.stall_reason = wrong_endpoint
                elif self.leader is not None:
                    # a leader named without its endpoint (no NodeEndpoints before 3.9): ask the bootstrap
                    # controllers in turn at its epoch; the one that answers is the leader
                    self.stall_reason = (
                        f"leader {self.leader.leader_id} (epoch {self.epoch}) named by {send.endpoint} without "
                        f"its endpoint (no NodeEndpoints in the answer), and no bootstrap controller answered "
                        f"as the leader at that epoch yet"
                    )
                else:
                    self.stall_reason = f"{send.endpoint} knows no leader of epoch {leader.leader_epoch} yet"
                # ask the next controller after a pause
                self._next_bootstrap += 1
                self._back_off(now_ms)
            else:
                self._failures = 0
            return []
        if partition.error_code == Errors.UNKNOWN_LEADER_EPOCH:
            # that controller is behind the epoch we know: ask another
            if self.leader is not None and send.endpoint == self.leader.endpoint:
                self.leader = None
            self.stall_reason = f"{send.endpoint} answered Fetch at epoch {self.epoch} UNKNOWN_LEADER_EPOCH"
            self._next_bootstrap += 1
            self._back_off(now_ms)
            return []
        if partition.error_code != Errors.NONE:
            self.stall_reason = (
                f"{send.endpoint} answered Fetch with error {Errors.of(partition.error_code).name} "
                f"({partition.error_code})"
            )
            self._next_bootstrap += 1
            self._back_off(now_ms)
            return []
        if self.leader is None or self.leader.endpoint != send.endpoint:
            # only the leader answers a Fetch at its epoch without an error: the controller we asked is it
            # (how the endpoint of a leader named by id only, before Kafka 3.9, is found)
            if leader.leader_id < 0 or leader.leader_epoch < self.epoch:
                self.stall_reason = (
                    f"{send.endpoint} answered Fetch without naming a leader of epoch {self.epoch} or later"
                )
                return []
            self.epoch = leader.leader_epoch
            self.endpoints[leader.leader_id] = send.endpoint
            self.leader = LeaderInfo(leader.leader_id, leader.leader_epoch, send.endpoint)
        self._failures = 0
        self.fetches += 1
        self.stall_reason = ""
        if partition.log_start_offset >= 0:
            self.log_start_offset = partition.log_start_offset
        snapshot = partition.snapshot_id
        if snapshot.end_offset > 0 and snapshot.epoch >= 0:
            self.pending.clear()
            self.download = _Download(snapshot.end_offset, snapshot.epoch)
            return []
        diverging = partition.diverging_epoch
        if diverging.end_offset >= 0:
            self._truncate(diverging.end_offset, diverging.epoch)
            return []
        if send.message.topics[0].partitions[0].fetch_offset != self.fetch_offset:
            return []  # an answer to a position we have since left
        records = partition.records or b""
        if records:
            batches = split_batches(records, f"Fetch response from {send.endpoint}")
            expected = self.fetch_offset
            for batch in batches:
                if batch.last_offset < expected:
                    continue  # the leader's batch started below the fetch offset; already held
                if batch.base_offset != expected:
                    raise ObserverProtocolError(
                        f"Fetch response from {send.endpoint} starts a batch at offset {batch.base_offset}, "
                        f"expected {expected}"
                    )
                self.pending.append(batch)
                expected = batch.last_offset + 1
        if partition.high_watermark > self.high_watermark or self.leader is not None:
            self.high_watermark = max(self.high_watermark, partition.high_watermark)
        return self._commit()

    def _commit(self) -> list[Effect]:
        hw = self.high_watermark
        pending = self.pending
        if pending and pending[-1].last_offset < hw:
            k = len(pending)  # all of it (a catch-up's fetches are below the high watermark)
        else:
            k = 0
            while k < len(pending) and pending[k].last_offset < hw:
                k += 1
        if not k:
            return []
        done = tuple(self.pending[:k])
        del self.pending[:k]
        self.log_end = done[-1].last_offset + 1
        self.last_epoch = done[-1].epoch
        return [AppendBatches(done)]

    def _truncate(self, end_offset: int, epoch: int) -> None:
        self.divergences += 1
        self.last_divergence = (epoch, end_offset)
        if end_offset < self.log_end:
            raise MirrorDivergedError(
                f"the leader's log diverges at offset {end_offset} (epoch {epoch}) below the committed end "
                f"{self.log_end} of the mirror: it is not a mirror of this quorum"
            )
        # Kafka's follower truncates to min(end offset, where its first epoch above `epoch` starts): the batches
        # of a later epoch than the leader's for those offsets go too
        while self.pending and (self.pending[-1].last_offset >= end_offset or self.pending[-1].epoch > epoch):
            self.pending.pop()
        if not self.pending and self.last_epoch > epoch:
            # the committed end is within the leader's epoch `epoch`: fetch on from there as that epoch (the
            # leader says DivergingEpoch again, below the committed end, if the mirror's batches are not its own)
            self.last_epoch = epoch

    def _partition(self, response: Any, send: Send) -> Any:
        for topic in response.responses:
            for partition in topic.partitions:
                if partition.partition_index == 0:
                    return partition
        if response.error_code == Errors.NONE:
            raise ObserverProtocolError(
                f"{send.endpoint} answered Fetch without partition 0 of {METADATA_TOPIC}"
            )
        return rpc_messages.FetchResponse.PartitionData(error_code=response.error_code)

    def _on_fetch_snapshot(self, send: Send, response: Any, now_ms: int) -> list[Effect]:
        self._learn_endpoints(response.node_endpoints)
        self._top_level(response.error_code, send, "FetchSnapshot")
        d = self.download
        partition = None
        for topic in response.topics:
            for p in topic.partitions:
                if p.index == 0:
                    partition = p
        if partition is None or d is None:
            raise ObserverProtocolError(f"{send.endpoint} answered FetchSnapshot without partition 0")
        self._top_level(partition.error_code, send, "FetchSnapshot")
        if partition.error_code in (Errors.FENCED_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER):
            leader = partition.current_leader
            if not self._leader_hint(leader.leader_id, leader.leader_epoch, send):
                self._back_off(now_ms)
            return []
        if partition.error_code in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
            # the snapshot went away (a newer one replaced it): fetch again to learn the current one
            self.download = None
            return []
        if partition.error_code != Errors.NONE:
            self._back_off(now_ms)
            return []
        if partition.position != d.position:
            self.download = None  # not the chunk we asked for: start over
            return []
        chunk = partition.unaligned_records or b""
        d.size = partition.size
        d.chunks.append(chunk)
        d.position += len(chunk)
        self._failures = 0
        if d.position < d.size and chunk:
            return []
        if d.position != d.size:
            raise ObserverProtocolError(
                f"{send.endpoint} sent a snapshot of {d.position} bytes, announced {d.size}"
            )
        self.download = None
        self.pending.clear()
        self.log_end = d.end_offset
        self.last_epoch = d.epoch
        self.high_watermark = max(self.high_watermark, d.end_offset)
        self.snapshots_installed += 1
        return [InstallSnapshot(d.end_offset, d.epoch, b"".join(d.chunks))]
