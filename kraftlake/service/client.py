"""Synchronous clients of a running service, usable from any process (Spark executors included).

`ObserverClient` fetches committed entries (as an observer: it never counts towards the high watermark);
`QuorumClient` appends and describes. Both speak the service's framed protocol over plain blocking sockets,
need nothing but the bootstrap endpoints and the cluster id, connect lazily, and pickle without their socket.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Sequence
from typing import Any

from kraftlake.raft.messages import Entry, Message, OffsetAndEpoch
from kraftlake.service.codec import DEFAULT_MAX_FRAME_BYTES, decode_frame, encode_frame, frame_length
from kraftlake.service.config import Endpoint
from kraftlake.service.errors import (
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
from kraftlake.service.messages import (
    AppendRequest,
    AppendResponse,
    CommittedEntry,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ErrorCode,
    ErrorResponse,
    ObserverFetchRequest,
    ObserverFetchResponse,
    ObserverFetchSnapshotRequest,
    ObserverFetchSnapshotResponse,
    QuorumDescription,
)

OBSERVER_ID = -1
"""The replica id clients send: not a voter, so never counted for the high watermark."""


def parse_endpoint(text: str) -> Endpoint:
    """``host:port`` -> (host, port)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ServiceError(f"bad endpoint {text!r}: expected host:port")
    return host, int(port)


class _Connection:
    """Blocking request/response over one socket, rotating through the bootstrap list on failure."""

    def __init__(self, bootstrap: Sequence[Endpoint], cluster_id: str, timeout_s: float,
                 max_frame_bytes: int) -> None:
        if not bootstrap:
            raise ServiceError("a client needs at least one bootstrap endpoint")
        self.bootstrap = [(h, int(p)) for h, p in bootstrap]
        self.cluster_id = cluster_id
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

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._target = None

    def connect(self, endpoint: Endpoint | None = None) -> None:
        """Connect to `endpoint`, or to the next reachable bootstrap endpoint."""
        self.close()
        candidates = [endpoint] if endpoint is not None else [
            self.bootstrap[(self._next + i) % len(self.bootstrap)] for i in range(len(self.bootstrap))]
        errors = []
        for target in candidates:
            try:
                self._sock = socket.create_connection(target, timeout=min(self.timeout_s, 5.0))
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._target = target
                return
            except OSError as exc:
                errors.append(f"{target[0]}:{target[1]}: {exc}")
                self._next = (self._next + 1) % len(self.bootstrap)
        raise TransportError("no server reachable: " + "; ".join(errors))

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

    def request(self, message: Message, timeout_s: float | None = None) -> Message:
        """Send one request and return its answer (an `ErrorResponse` is raised as a typed error)."""
        frame = encode_frame(message, self.cluster_id, self.max_frame_bytes)
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        self._sock.settimeout(timeout_s if timeout_s is not None else self.timeout_s)
        try:
            self._sock.sendall(frame)
            while True:
                size = frame_length(self._recv_exact(4))
                if size > self.max_frame_bytes:
                    raise FrameTooLargeError(f"response of {size} bytes exceeds {self.max_frame_bytes}")
                _, reply = decode_frame(self._recv_exact(size))
                if isinstance(reply, ErrorResponse):
                    self.close()
                    if reply.error is ErrorCode.INCONSISTENT_CLUSTER_ID:
                        raise ClusterIdMismatchError(reply.message)
                    if reply.error is ErrorCode.MESSAGE_TOO_LARGE:
                        raise FrameTooLargeError(reply.message)
                    raise RemoteError(int(reply.error), reply.message)
                if reply.correlation_id == message.correlation_id:
                    return reply
        except TimeoutError as exc:
            self.close()
            raise RequestTimeoutError(f"no answer from {self._target} within the timeout") from exc
        except (OSError, ConnectionError, CodecError):
            self.close()
            raise


class ObserverClient:
    """Fetches committed entries from a running service.

    Parameters
    ----------
    bootstrap
        Voters' (host, port); any voter answers with what it has committed.
    cluster_id
        Must match the service's.
    timeout_s
        Per-request socket timeout (on top of the fetch's max wait).
    """

    def __init__(self, bootstrap: Sequence[Endpoint], cluster_id: str, *, timeout_s: float = 10.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._conn = _Connection(bootstrap, cluster_id, timeout_s, max_frame_bytes)
        self.high_watermark = 0
        self.log_start_offset = 0
        self.leader_id: int | None = None

    def fetch(self, from_offset: int, max_records: int = 1000, max_wait_ms: int = 500,
              max_bytes: int = 8 * 1024 * 1024) -> list[CommittedEntry]:
        """Committed entries from `from_offset` (at most `max_records`); waits up to `max_wait_ms` for new ones.

        Returns an empty list when nothing new is committed in time. A failed server is replaced by the next
        bootstrap endpoint (one retry round).

        Raises
        ------
        ServiceError
            `ClusterIdMismatchError`, `TransportError` (no server reachable), `RemoteError` (e.g. the offset
            is below the log start offset), `RequestTimeoutError`.
        """
        return [CommittedEntry(e.offset, e.epoch, e.timestamp, e.is_control, e.value, e.control_type)
                for e in self.fetch_entries(from_offset, max_records, max_wait_ms, max_bytes)]

    def fetch_entries(self, from_offset: int, max_records: int = 1000, max_wait_ms: int = 500,
                      max_bytes: int = 8 * 1024 * 1024) -> list[Entry]:
        """As `fetch`, but the raft `Entry` tuples themselves (they also carry ``batch_base``, the first offset
        of the leader write holding each entry, which a reader needs to lay records out as in the log files)."""
        last: Exception | None = None
        for _ in range(len(self._conn.bootstrap) + 1):
            request = ObserverFetchRequest(OBSERVER_ID, -1, self._conn.next_corr(), from_offset, max_records,
                                           max_wait_ms, max_bytes)
            try:
                reply = self._conn.request(request, self._conn.timeout_s + max_wait_ms / 1000)
            except (OSError, ConnectionError, RequestTimeoutError, TransportError) as exc:
                last = exc
                continue
            assert isinstance(reply, ObserverFetchResponse)
            self.high_watermark = reply.high_watermark
            self.log_start_offset = reply.log_start_offset
            self.leader_id = reply.leader_id
            if reply.error is ErrorCode.OFFSET_OUT_OF_RANGE and reply.snapshot_id is not None:
                raise SnapshotRequiredError(
                    int(reply.error), f"fetch from {from_offset}: log starts at {reply.log_start_offset}; "
                    f"load snapshot {reply.snapshot_id} (fetch_snapshot) and fetch on from its end",
                    reply.snapshot_id)
            if reply.error is not ErrorCode.NONE:
                raise RemoteError(int(reply.error),
                                  f"fetch from {from_offset}: log starts at {reply.log_start_offset}")
            return list(reply.entries)
        raise TransportError(f"fetch failed on every bootstrap server: {last}")

    def log_range(self) -> tuple[int, int]:
        """``(log start offset, high watermark)`` of the answering voter, without waiting or raising on range.

        A fetch at the last high watermark seen, of at most one small entry and no wait: the cheapest
        question the observer protocol can ask. Voters may differ (a follower lags): callers that need a
        monotonic answer keep the maximum.
        """
        last: Exception | None = None
        for _ in range(len(self._conn.bootstrap) + 1):
            request = ObserverFetchRequest(OBSERVER_ID, -1, self._conn.next_corr(), self.high_watermark, 1, 0, 1)
            try:
                reply = self._conn.request(request)
            except (OSError, ConnectionError, RequestTimeoutError, TransportError) as exc:
                last = exc
                continue
            assert isinstance(reply, ObserverFetchResponse)
            self.high_watermark = reply.high_watermark
            self.log_start_offset = reply.log_start_offset
            self.leader_id = reply.leader_id
            return reply.log_start_offset, reply.high_watermark
        raise TransportError(f"log_range failed on every bootstrap server: {last}")

    def fetch_snapshot(self, snapshot_id: OffsetAndEpoch, chunk_bytes: int = 1024 * 1024) -> bytes:
        """Download a snapshot (the bytes of its ``.checkpoint`` file) in chunks (FetchSnapshot).

        `kraftlake.service.snapshots.checkpoint_values` gives its record values; fetching goes on from
        `snapshot_id.offset`.

        Raises
        ------
        RemoteError
            If the server does not hold the snapshot (SNAPSHOT_NOT_FOUND: fetch again for the latest id).
        """
        data = bytearray()
        while True:
            request = ObserverFetchSnapshotRequest(OBSERVER_ID, -1, self._conn.next_corr(), snapshot_id, len(data),
                                                   chunk_bytes)
            reply = self._conn.request(request)
            assert isinstance(reply, ObserverFetchSnapshotResponse)
            if reply.error is not ErrorCode.NONE:
                raise RemoteError(int(reply.error), f"snapshot {snapshot_id} at position {len(data)}")
            data.extend(reply.chunk)
            if len(data) >= reply.size or not reply.chunk:
                return bytes(data)

    def close(self) -> None:
        """Close the socket (the client reconnects on the next fetch)."""
        self._conn.close()


class QuorumClient:
    """Appends to and describes a running quorum, following the leader."""

    def __init__(self, bootstrap: Sequence[Endpoint], cluster_id: str, *, timeout_s: float = 10.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._conn = _Connection(bootstrap, cluster_id, timeout_s, max_frame_bytes)

    def append(self, records: Sequence[bytes], timeout_s: float = 10.0) -> tuple[int, int]:
        """Append and wait until committed: (base offset, last offset).

        Raises
        ------
        NotLeaderError
            If the leader changed under the append (it may or may not be committed: the caller decides).
        """
        request = AppendRequest(OBSERVER_ID, -1, self._conn.next_corr(), tuple(bytes(r) for r in records))
        reply = self._conn.request(request, timeout_s)
        assert isinstance(reply, AppendResponse)
        if reply.error is ErrorCode.NONE:
            return reply.base_offset, reply.last_offset
        if reply.error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
            if reply.leader_endpoint and reply.leader_id != reply.src:
                self._conn.connect(parse_endpoint(reply.leader_endpoint))
            elif not reply.leader_endpoint:
                self._conn.close()
            raise NotLeaderError(reply.src, reply.epoch, reply.leader_id, reply.leader_endpoint or None,
                                 reply.message)
        raise RemoteError(int(reply.error), reply.message)

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
        """The status from the leader if it can be reached, else from whichever voter answers.

        Returns ``(description, from_leader)``.
        """
        request = DescribeQuorumRequest(OBSERVER_ID, -1, self._conn.next_corr())
        reply = self._conn.request(request)
        assert isinstance(reply, DescribeQuorumResponse)
        if reply.error is ErrorCode.NONE:
            return reply.description, True
        if reply.leader_endpoint:
            try:
                self._conn.connect(parse_endpoint(reply.leader_endpoint))
                again = self._conn.request(DescribeQuorumRequest(OBSERVER_ID, -1, self._conn.next_corr()))
                assert isinstance(again, DescribeQuorumResponse)
                if again.error is ErrorCode.NONE:
                    return again.description, True
            except (OSError, ConnectionError, ServiceError):
                pass
        return reply.description, False

    def close(self) -> None:
        """Close the socket."""
        self._conn.close()



