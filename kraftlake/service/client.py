"""Synchronous clients of a running service, usable from any process (Spark executors included).

`ObserverClient` fetches committed entries with Kafka's Fetch and FetchSnapshot, as an observer (replica id -1:
never counted towards the high watermark, never tracked); `QuorumClient` appends (the service's own append RPC)
and describes the quorum (Kafka's DescribeCluster and DescribeQuorum, what ``kafka-metadata-quorum`` sends).
Both speak Kafka's framing over plain blocking sockets (`kraftlake.wire.connection.KafkaConnection` for Kafka's
RPCs), need nothing but the bootstrap endpoints and the cluster id (and, for a secured quorum, Kafka's client
properties: ``security=load_client_properties(path)``, what ``--command-config`` gives), connect lazily, and
pickle without their sockets.
"""

from __future__ import annotations

import dataclasses
import random
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kraftlake.follow.observer import METADATA_TOPIC, METADATA_TOPIC_ID, ZERO_UUID, Send, for_version
from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.error_codes import Errors
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.raft.messages import Entry, OffsetAndEpoch
from kraftlake.service.append_rpc import (
    AppendRequest,
    AppendResponse,
    decode_append_response,
    encode_append_request,
    frame_length,
)
from kraftlake.service.config import Endpoint
from kraftlake.service.describe_quorum import CONTROLLER_ENDPOINT_TYPE, description_from_response
from kraftlake.service.entry_batches import decode_records
from kraftlake.service.errors import (
    AppendNotAuthorizedError,
    ClusterIdMismatchError,
    CodecError,
    FrameTooLargeError,
    NotLeaderError,
    RemoteError,
    RequestTimeoutError,
    ServiceError,
    SnapshotRequiredError,
    TransportError,
)
from kraftlake.service.messages import CommittedEntry, QuorumDescription
from kraftlake.service.rpc_common import DEFAULT_MAX_FRAME_BYTES
from kraftlake.wire.client_config import ClientSecurity
from kraftlake.wire.connection import KafkaConnection
from kraftlake.wire.errors import (
    AuthenticationError,
    ConnectError,
    PeerError,
    SecurityConfigError,
    TlsError,
    WireError,
)
from kraftlake.wire.errors import RequestTimeoutError as WireTimeoutError

OBSERVER_ID = -1
"""The replica id clients send: not a voter, so never counted for the high watermark (nor listed)."""
ANY_EPOCH = -1
"""The CurrentLeaderEpoch an `ObserverClient` sends: any voter answers with what it has committed (an epoch
>= 0 asks Kafka's question: the leader of that epoch only)."""


def parse_endpoint(text: str) -> Endpoint:
    """``host:port`` -> (host, port)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ServiceError(f"bad endpoint {text!r}: expected host:port")
    return host, int(port)


def _picklable(security: ClientSecurity | None) -> ClientSecurity | None:
    # its properties are a read-only mapping proxy, which does not pickle; a dict of them does
    return None if security is None else dataclasses.replace(security, properties=dict(security.properties))


class _KafkaClient:
    """One `KafkaConnection` at a time, rotating through the bootstrap list on failure."""

    def __init__(
        self,
        bootstrap: Sequence[Endpoint],
        timeout_s: float,
        max_frame_bytes: int,
        client_id: str,
        security: ClientSecurity | None = None,
    ) -> None:
        if not bootstrap:
            raise ServiceError("a client needs at least one bootstrap endpoint")
        self.bootstrap = [(h, int(p)) for h, p in bootstrap]
        self.security = _picklable(security)
        self.timeout_s = timeout_s
        self.max_frame_bytes = max_frame_bytes
        self.client_id = client_id
        self._conn: KafkaConnection | None = None
        self._next = random.randrange(len(self.bootstrap))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_conn"] = None
        return state

    @property
    def peer(self) -> str:
        return self._conn.peer if self._conn is not None else "?"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def open(self, endpoint: Endpoint) -> KafkaConnection:
        """A connection to `endpoint` (ApiVersions negotiated); raises `TransportError`."""
        conn = KafkaConnection(
            endpoint[0],
            endpoint[1],
            self.security,
            client_id=self.client_id,
            timeout_s=min(self.timeout_s, 5.0),
            max_frame_bytes=self.max_frame_bytes,
        )
        try:
            conn.open()
        except (AuthenticationError, TlsError, SecurityConfigError):
            raise  # a wrong password, certificate or config: another voter would refuse it too
        except (WireError, ProtocolError) as exc:
            raise TransportError(f"{endpoint[0]}:{endpoint[1]}: {exc}") from exc
        conn.timeout_s = self.timeout_s
        return conn

    def connection(self) -> KafkaConnection:
        """The open connection, or one to the next reachable bootstrap endpoint."""
        if self._conn is not None and self._conn.is_open:
            return self._conn
        errors = []
        for _ in range(len(self.bootstrap)):
            target = self.bootstrap[self._next % len(self.bootstrap)]
            try:
                self._conn = self.open(target)
                return self._conn
            except TransportError as exc:
                errors.append(str(exc))
                self._next += 1
        raise TransportError("no server reachable: " + "; ".join(errors))

    def request(self, api_key: int, message: Any, extra_wait_s: float = 0.0) -> Any:
        """Send `message` at the negotiated version and return the answer; on a failure the connection is
        closed, the next bootstrap endpoint is used next time, and the failure is raised."""
        conn = self.connection()
        try:
            version = conn.version(api_key)
        except KeyError:
            self.close()
            raise RemoteError(
                Errors.UNSUPPORTED_VERSION, f"{conn.peer} does not serve {rpc.api(api_key).name}"
            ) from None
        try:
            return conn.request(
                api_key,
                for_version(Send(None, api_key, message), version),  # type: ignore[arg-type]
                extra_wait_s=extra_wait_s,
            )
        except WireTimeoutError as exc:
            self._fail()
            raise RequestTimeoutError(str(exc)) from exc
        except (WireError, ProtocolError) as exc:
            self._fail()
            raise TransportError(str(exc)) from exc

    def _fail(self) -> None:
        self.close()
        self._next += 1


class ObserverClient:
    """Fetches committed entries from a running service (Kafka's Fetch, as an observer).

    Parameters
    ----------
    bootstrap
        Voters' (host, port); any voter answers with what it has committed (`ANY_EPOCH`).
    cluster_id
        Sent in every request (a service of another cluster refuses it: `ClusterIdMismatchError`).
    timeout_s
        Per-request socket timeout (on top of the fetch's max wait).
    security
        Kafka's client properties (``--command-config``) for a secured quorum; None is PLAINTEXT. A voter with
        an authorizer answers a principal without CLUSTER_ACTION with CLUSTER_AUTHORIZATION_FAILED
        (`RemoteError` code 31).
    """

    def __init__(
        self,
        bootstrap: Sequence[Endpoint],
        cluster_id: str,
        *,
        timeout_s: float = 10.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        security: ClientSecurity | None = None,
    ) -> None:
        self._conn = _KafkaClient(bootstrap, timeout_s, max_frame_bytes, "kraftlake-observer", security)
        self.cluster_id = cluster_id
        self.high_watermark = 0
        self.log_start_offset = 0
        self.leader_id: int | None = None

    def _fetch(self, from_offset: int, max_wait_ms: int, max_bytes: int) -> Any:
        """One Fetch (retried once per bootstrap server on a connection failure); its metadata partition."""
        f = rpc_messages.FetchRequest
        partition = f.FetchPartition(
            partition=0,
            current_leader_epoch=ANY_EPOCH,
            fetch_offset=from_offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=max_bytes,
            replica_directory_id=ZERO_UUID,
        )
        request = f(
            cluster_id=self.cluster_id,
            replica_state=f.ReplicaState(replica_id=OBSERVER_ID, replica_epoch=-1),
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[f.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[partition])],
        )
        last: Exception | None = None
        for _ in range(len(self._conn.bootstrap) + 1):
            try:
                body = self._conn.request(ApiKey.FETCH, request, max_wait_ms / 1000)
            except (TransportError, RequestTimeoutError) as exc:
                last = exc
                continue
            peer = self._conn.peer
            if body.error_code == Errors.INCONSISTENT_CLUSTER_ID:
                self._conn.close()
                raise ClusterIdMismatchError(
                    f"{peer} refused cluster id {self.cluster_id!r}: INCONSISTENT_CLUSTER_ID (104)"
                )
            if body.error_code:
                raise RemoteError(body.error_code, f"{peer} refused the fetch from {from_offset}")
            p = next((p for t in body.responses for p in t.partitions if p.partition_index == 0), None)
            if p is None:
                raise RemoteError(
                    Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{peer} answered without the metadata partition"
                )
            if p.high_watermark >= 0:
                self.high_watermark = p.high_watermark
            if p.log_start_offset >= 0:
                self.log_start_offset = p.log_start_offset
            leader = p.current_leader.leader_id
            self.leader_id = None if leader < 0 else leader
            return p
        raise TransportError(f"fetch failed on every bootstrap server: {last}")

    def fetch(
        self,
        from_offset: int,
        max_records: int = 1000,
        max_wait_ms: int = 500,
        max_bytes: int = 8 * 1024 * 1024,
    ) -> list[CommittedEntry]:
        """Committed entries from `from_offset` (at most `max_records`); waits up to `max_wait_ms` for new ones.

        Returns an empty list when nothing new is committed in time. A failed server is replaced by the next
        bootstrap endpoint (one retry round).

        Raises
        ------
        ServiceError
            `ClusterIdMismatchError`, `TransportError` (no server reachable), `SnapshotRequiredError` (the offset
            is below the log start offset), `RemoteError`, `RequestTimeoutError`.
        """
        return [
            CommittedEntry(e.offset, e.epoch, e.timestamp, e.is_control, e.value, e.control_type)
            for e in self.fetch_entries(from_offset, max_records, max_wait_ms, max_bytes)
        ]

    def fetch_entries(
        self,
        from_offset: int,
        max_records: int = 1000,
        max_wait_ms: int = 500,
        max_bytes: int = 8 * 1024 * 1024,
    ) -> list[Entry]:
        """As `fetch`, but the raft `Entry` tuples themselves (they also carry ``batch_base``, the first offset
        of the leader write holding each entry, which a reader needs to lay records out as in the log files).

        Only entries below the answer's HighWatermark are returned (a service sends no others to an observer;
        a Kafka controller would).
        """
        p = self._fetch(from_offset, max_wait_ms, max_bytes)
        snapshot = p.snapshot_id
        if snapshot.end_offset >= 0 and snapshot.epoch >= 0:
            snapshot_id = OffsetAndEpoch(snapshot.end_offset, snapshot.epoch)
            raise SnapshotRequiredError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"fetch from {from_offset}: log starts at {self.log_start_offset}; "
                f"load snapshot {snapshot_id} (fetch_snapshot) and fetch on from its end",
                snapshot_id,
            )
        if p.error_code:
            raise RemoteError(
                p.error_code, f"fetch from {from_offset}: log starts at {self.log_start_offset}"
            )
        end = min(p.high_watermark, from_offset + max(1, max_records))
        try:
            entries, _ = decode_records(p.records, from_offset, f"Fetch response from {self._conn.peer}", end)
        except CodecError:
            self._conn.close()
            raise
        return entries

    def log_range(self) -> tuple[int, int]:
        """``(log start offset, high watermark)`` of the answering voter, without waiting or raising on range.

        A fetch at the last high watermark seen, of at most one small batch and no wait: the cheapest
        question the protocol can ask. Voters may differ (a follower lags): callers that need a monotonic answer
        keep the maximum.
        """
        self._fetch(self.high_watermark, 0, 1)
        return self.log_start_offset, self.high_watermark

    def fetch_snapshot(self, snapshot_id: OffsetAndEpoch, chunk_bytes: int = 1024 * 1024) -> bytes:
        """Download a snapshot (the bytes of its ``.checkpoint`` file) in chunks (FetchSnapshot).

        `kraftlake.service.snapshots.checkpoint_values` gives its record values; fetching goes on from
        `snapshot_id.offset`.

        Raises
        ------
        RemoteError
            If the server does not hold the snapshot (SNAPSHOT_NOT_FOUND: fetch again for the latest id).
        """
        s = rpc_messages.FetchSnapshotRequest
        data = bytearray()
        while True:
            partition = s.PartitionSnapshot(
                partition=0,
                current_leader_epoch=ANY_EPOCH,
                snapshot_id=s.SnapshotId(end_offset=snapshot_id.offset, epoch=snapshot_id.epoch),
                position=len(data),
                replica_directory_id=ZERO_UUID,
            )
            request = s(
                cluster_id=self.cluster_id,
                replica_id=OBSERVER_ID,
                max_bytes=chunk_bytes,
                topics=[s.TopicSnapshot(name=METADATA_TOPIC, partitions=[partition])],
            )
            body = self._conn.request(ApiKey.FETCH_SNAPSHOT, request)
            if body.error_code == Errors.INCONSISTENT_CLUSTER_ID:
                raise ClusterIdMismatchError(f"{self._conn.peer} refused cluster id {self.cluster_id!r}")
            p = next((p for t in body.topics for p in t.partitions if p.index == 0), None)
            code = body.error_code or (p.error_code if p is not None else Errors.UNKNOWN_TOPIC_OR_PARTITION)
            if code or p is None:
                raise RemoteError(code, f"snapshot {snapshot_id} at position {len(data)}")
            chunk = p.unaligned_records or b""
            data.extend(chunk)
            if len(data) >= p.size or not chunk:
                return bytes(data)

    def close(self) -> None:
        """Close the socket (the client reconnects on the next fetch)."""
        self._conn.close()


class _AppendConnection:
    """Blocking append requests over one socket (Kafka framing, the service's API key 1000)."""

    def __init__(
        self,
        bootstrap: Sequence[Endpoint],
        cluster_id: str,
        timeout_s: float,
        max_frame_bytes: int,
        credential: str = "",
        security: ClientSecurity | None = None,
    ) -> None:
        if not bootstrap:
            raise ServiceError("a client needs at least one bootstrap endpoint")
        self.bootstrap = [(h, int(p)) for h, p in bootstrap]
        self.security = _picklable(security)
        self.cluster_id = cluster_id
        self.credential = credential
        self.timeout_s = timeout_s
        self.max_frame_bytes = max_frame_bytes
        self._sock: socket.socket | None = None
        self._target: Endpoint | None = None
        self._next = random.randrange(len(self.bootstrap))
        self._corr = random.randrange(1 << 30)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_sock"] = None
        state["_target"] = None
        return state

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._target = None

    def connect(self, endpoint: Endpoint | None = None) -> None:
        """Connect to `endpoint`, or to the next reachable bootstrap endpoint."""
        self.close()
        candidates = (
            [endpoint]
            if endpoint is not None
            else [self.bootstrap[(self._next + i) % len(self.bootstrap)] for i in range(len(self.bootstrap))]
        )
        errors = []
        for target in candidates:
            try:
                self._sock = self._open(target)
                self._target = target
                return
            except (OSError, ConnectError, PeerError, RequestTimeoutError, WireTimeoutError) as exc:
                errors.append(f"{target[0]}:{target[1]}: {exc}")
                self._next = (self._next + 1) % len(self.bootstrap)
        raise TransportError("no server reachable: " + "; ".join(errors))

    def _open(self, target: Endpoint) -> socket.socket:
        if self.security is None or self.security.protocol == "PLAINTEXT":
            sock = socket.create_connection(target, timeout=min(self.timeout_s, 5.0))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        # TLS and SASL as Kafka's clients open a connection (ApiVersions, SaslHandshake, SaslAuthenticate);
        # a wrong password or certificate is raised as it is (AuthenticationError, TlsError)
        conn = KafkaConnection(
            target[0],
            target[1],
            self.security,
            client_id="kraftlake-client",
            timeout_s=min(self.timeout_s, 5.0),
            max_frame_bytes=self.max_frame_bytes,
        )
        return conn.open().raw_socket

    def _recv_exact(self, n: int) -> bytes:
        assert self._sock is not None
        chunks = []
        while n:
            chunk = self._sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def append(self, values: tuple[bytes, ...], timeout_s: float | None = None) -> AppendResponse:
        """Send one append and return its answer (a refusal of the whole frame is raised as a typed error)."""
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        corr = self._corr
        frame = encode_append_request(
            AppendRequest(self.cluster_id, values, self.credential), corr, "kraftlake-client"
        )
        if len(frame) > self.max_frame_bytes:
            raise FrameTooLargeError(
                f"append frame of {len(frame)} bytes exceeds {self.max_frame_bytes}", len(frame)
            )
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        self._sock.settimeout(timeout_s if timeout_s is not None else self.timeout_s)
        try:
            self._sock.sendall(frame)
            while True:
                size = frame_length(self._recv_exact(4))
                if size < 4 or size > self.max_frame_bytes:
                    raise FrameTooLargeError(f"response of {size} bytes exceeds {self.max_frame_bytes}", size)
                got, reply = decode_append_response(self._recv_exact(size))
                if reply.refused:
                    # a refusal of the whole frame: the server closes the connection after it
                    self.close()
                    if reply.error == Errors.INCONSISTENT_CLUSTER_ID:
                        raise ClusterIdMismatchError(reply.message or "INCONSISTENT_CLUSTER_ID")
                    if reply.error == Errors.MESSAGE_TOO_LARGE:
                        raise FrameTooLargeError(reply.message or "MESSAGE_TOO_LARGE")
                    raise RemoteError(reply.error, reply.message or "")
                if got == corr:
                    return reply
        except TimeoutError as exc:
            self.close()
            raise RequestTimeoutError(f"no answer from {self._target} within the timeout") from exc
        except (OSError, ConnectionError, CodecError):
            self.close()
            raise


class QuorumClient:
    """Appends to and describes a running quorum, following the leader.

    Appends need the voters' credential: `append_secret` is the path of a voter's ``append.secret`` (written
    0600 in its data dir at its first start; `LocalQuorum.append_secret_path`). Without it only `describe`
    works: the voters refuse an append with CLUSTER_AUTHORIZATION_FAILED (`AppendNotAuthorizedError`). On a
    secured quorum `security` (Kafka's client properties) authenticates the client; with an authorizer, appends
    need ALTER and describe needs DESCRIBE on the cluster (`kraftlake.service.authorizer`).
    """

    def __init__(
        self,
        bootstrap: Sequence[Endpoint],
        cluster_id: str,
        *,
        timeout_s: float = 10.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        append_secret: str | Path | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        credential = "" if append_secret is None else Path(append_secret).read_text(encoding="ascii").strip()
        self._conn = _AppendConnection(
            bootstrap, cluster_id, timeout_s, max_frame_bytes, credential, security
        )
        self._admin = _KafkaClient(bootstrap, timeout_s, max_frame_bytes, "kraftlake-quorum-client", security)
        self.cluster_id = cluster_id

    def append(self, records: Sequence[bytes], timeout_s: float = 10.0) -> tuple[int, int]:
        """Append and wait until committed: (base offset, last offset).

        Raises
        ------
        NotLeaderError
            If the leader changed under the append (it may or may not be committed: the caller decides).
        """
        reply = self._conn.append(tuple(bytes(r) for r in records), timeout_s)
        if reply.error == Errors.NONE:
            return reply.base_offset, reply.last_offset
        if reply.error == Errors.NOT_LEADER_OR_FOLLOWER:
            if reply.leader_endpoint and reply.leader_id != reply.node_id:
                self._conn.connect(parse_endpoint(reply.leader_endpoint))
            elif not reply.leader_endpoint:
                self._conn.close()
            raise NotLeaderError(
                reply.node_id,
                reply.epoch,
                reply.leader_id,
                reply.leader_endpoint or None,
                reply.message or "",
            )
        if reply.error == Errors.INCONSISTENT_CLUSTER_ID:
            raise ClusterIdMismatchError(reply.message or "INCONSISTENT_CLUSTER_ID")
        if reply.error == Errors.CLUSTER_AUTHORIZATION_FAILED:
            raise AppendNotAuthorizedError(reply.error, reply.message or "append refused")
        raise RemoteError(reply.error, reply.message or "")

    def append_retrying(self, records: Sequence[bytes], deadline_s: float = 30.0) -> tuple[int, int]:
        """Append, retrying on NotLeader and connection failures until `deadline_s` passes.

        A retried append may be committed twice if the first attempt's answer was lost: callers that need
        exactly-once must check what was committed (as the multi-process test does).
        """
        end = time.monotonic() + deadline_s
        while True:
            try:
                return self.append(records, timeout_s=max(0.1, end - time.monotonic()))
            except (NotLeaderError, TransportError, RequestTimeoutError, OSError, ConnectionError):
                if time.monotonic() >= end:
                    raise
                time.sleep(0.05)

    def describe(self) -> tuple[QuorumDescription, bool]:
        """The status from the leader if it can be reached, else from whichever voter answers, asked as
        ``kafka-metadata-quorum --bootstrap-controller`` asks: DescribeCluster (the cluster id and the leader),
        then DescribeQuorum of the leader.

        Returns ``(description, from_leader)``.

        Raises
        ------
        ClusterIdMismatchError
            If the quorum's cluster id is not this client's.
        """
        cluster = self._admin.request(
            ApiKey.DESCRIBE_CLUSTER,
            rpc_messages.DescribeClusterRequest(
                include_cluster_authorized_operations=False,
                endpoint_type=CONTROLLER_ENDPOINT_TYPE,
            ),
        )
        if cluster.error_code:
            raise RemoteError(cluster.error_code, f"DescribeCluster: {cluster.error_message or ''}")
        if cluster.cluster_id != self.cluster_id:
            self._admin.close()
            raise ClusterIdMismatchError(
                f"the quorum at {self._admin.peer} is not cluster {self.cluster_id!r}"
            )
        request = rpc_messages.DescribeQuorumRequest(
            topics=[
                rpc_messages.DescribeQuorumRequest.TopicData(
                    topic_name=METADATA_TOPIC,
                    partitions=[rpc_messages.DescribeQuorumRequest.PartitionData(partition_index=0)],
                )
            ],
        )
        leader = next(
            ((b.host, b.port) for b in cluster.brokers if b.broker_id == cluster.controller_id), None
        )
        if leader is not None:
            try:
                conn = self._admin.open(leader)
                try:
                    body = conn.request(ApiKey.DESCRIBE_QUORUM, request)
                finally:
                    conn.close()
                description, error = description_from_response(cluster.cluster_id, body)
                if not error:
                    return description, True
            except (ServiceError, WireError, ProtocolError):
                pass
        body = self._admin.request(ApiKey.DESCRIBE_QUORUM, request)
        description, error = description_from_response(cluster.cluster_id, body)
        return description, not error

    def close(self) -> None:
        """Close the sockets."""
        self._conn.close()
        self._admin.close()
