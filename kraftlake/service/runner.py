"""`NodeRunner`: drives one `RaftNode` on an asyncio loop (timers, network, disk, commits).

The runner is the etcd-style driver of the step machine: every input (a received frame, a due timer, a
completed flush, a client append) goes into the node, and the returned `Ready` is carried out in the order
the node requires: store ``quorum-state`` (fsync) before anything is sent, send, flush the log, load a
snapshot, apply committed entries (listeners, append futures, parked observer fetches). Everything here runs
on the loop's thread except the log's fsync: it runs on the runner's flush thread, one at a time, each
covering every append written before it began (appends arriving meanwhile share the next one), while the
loop goes on serving fetches, acks and appends; entries count (high watermark, follower fetch offset) only
once their fsync has returned.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hmac
import ipaddress
import logging
import os
import random
import secrets
import socket
import struct
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlake.follow.observer import METADATA_TOPIC
from kraftlake.logformat import (
    METADATA_PARTITION_DIR,
    MetaProperties,
    QuorumStateFile,
    read_meta_properties,
    read_quorum_state,
    write_meta_properties,
    write_quorum_state,
)
from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.raft.errors import NotLeaderError as RaftNotLeaderError
from kraftlake.raft.errors import RaftStorageError
from kraftlake.raft.log import CommittedEntries, snapshot_floor
from kraftlake.raft.messages import Entry, Errors, Message, OffsetAndEpoch, SnapshotId
from kraftlake.raft.node import AppendResult, RaftNode, Ready
from kraftlake.raft.states import ElectionState
from kraftlake.service.authenticator import SASL_SERVED, SaslHandshake
from kraftlake.service.authorizer import REFUSAL
from kraftlake.service.config import NodeConfig, format_endpoint
from kraftlake.service.errors import (
    CodecError,
    FrameTooLargeError,
    NotLeaderError,
    ServiceError,
    ServiceStoppedError,
)
from kraftlake.service.file_log import FileRaftLog, FlushTicket
from kraftlake.service.kafka_rpc import (
    APPEND_API_KEY,
    CONTROLLER_ENDPOINT_TYPE,
    SERVED,
    ZERO_UUID,
    AppendRequest,
    AppendResponse,
    RequestRefused,
    WireContext,
    check_cluster_id,
    decode_append_request,
    decode_raft_response,
    describe_quorum_response,
    encode_append_response,
    encode_entries,
    encode_raft_request,
    encode_refusal,
    encode_response,
    error_response,
    fetch_replica_id,
    fetch_response,
    fetch_snapshot_response,
    is_response,
    kafka_response,
    metadata_partition,
    raft_request,
    sender_directory_id,
    warm_up,
)
from kraftlake.service.listener import LeaderAndEpoch, Listener, SnapshotReader, group_batches
from kraftlake.service.messages import CommittedEntry, QuorumDescription, ReplicaInfo, VoterInfo, follower_lag
from kraftlake.service.peer_login import client_tls, sasl_login
from kraftlake.service.snapshots import SnapshotJob, SnapshotPolicy, SnapshotProvider
from kraftlake.service.transport import InboundConnection, Login, PeerChannel, read_frame, serve
from kraftlake.wire.listener_config import ANONYMOUS, principal_of_certificate

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


APPEND_SECRET_FILE = "append.secret"
"""The append credential in each voter's data dir (0600): what `QuorumClient` must send with an append."""


def ensure_append_secret(data_dir: Path, secret: str | None = None) -> str:
    """The voter's append credential, created (`secret`, or random; mode 0600) at its first start."""
    path = data_dir / APPEND_SECRET_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="ascii").strip()
    secret = secret or secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secret + "\n")
        f.flush()
        os.fsync(f.fileno())
    return secret


def ensure_directory_id(data_dir: Path, cluster_id: str, node_id: int) -> str:
    """The voter's directory id from ``meta.properties`` in `data_dir`, which is written (with a new random id)
    when absent.

    Raises
    ------
    ServiceError
        If the file belongs to another cluster or node.
    """
    meta_path = data_dir / "meta.properties"
    if meta_path.exists():
        meta = read_meta_properties(meta_path)
        if meta.cluster_id != cluster_id or meta.node_id != node_id:
            raise ServiceError(
                f"{meta_path} belongs to cluster {meta.cluster_id} node {meta.node_id}, not "
                f"{cluster_id} node {node_id}"
            )
        return meta.directory_id or ""
    data_dir.mkdir(parents=True, exist_ok=True)
    directory_id = new_uuid()
    write_meta_properties(meta_path, MetaProperties(cluster_id, node_id, directory_id=directory_id))
    return directory_id


def is_loopback(host: str) -> bool:
    """Whether every address `host` resolves to is a loopback one (an unresolvable host is not)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos
    )


def _mono_ms() -> int:
    return int(time.monotonic() * 1000)


def new_uuid() -> str:
    """A random uuid in Kafka's base64url form (22 characters)."""
    return urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


SASL_MAX_RECEIVE_BYTES = 512 * 1024
"""Kafka's ``sasl.server.max.receive.size``: the largest frame read before a connection has authenticated."""
_BUDGET_POLL_S = 0.01
"""How often a reply held back by the unsent-reply budget looks again (and how stale the recount may be)."""
LOG_INTERVAL_MS = 60_000
"""Refusals and other lines a peer can cause are logged once per cause in this interval."""
OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""Kafka's OBSERVER_SESSION_TIMEOUT_MS: an observer leaves DescribeQuorum this long after its last fetch."""
_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id: the start of every request header
_RAFT_FLOW_ERRORS = frozenset(
    {
        Errors.FENCED_LEADER_EPOCH,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.UNKNOWN_LEADER_EPOCH,
        Errors.SNAPSHOT_NOT_FOUND,
        Errors.POSITION_OUT_OF_RANGE,
    }
)
"""Errors that are part of the raft protocol's course (leader changes, snapshots); others are logged."""


@dataclass(frozen=True, slots=True)
class _Observer:
    """An observer as the node that serves it knows it (a row of DescribeQuorum's Observers)."""

    directory_id: str
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int | None


@dataclass
class _PendingAppend:
    last_offset: int
    epoch: int
    base_offset: int
    resolve: Callable[[tuple[int, int] | BaseException], None]


class NodeRunner:
    """One voter on the running asyncio loop: its server, peer channels, log files and raft node."""

    def __init__(
        self,
        config: NodeConfig,
        listeners: list[Listener] | None = None,
        snapshot_provider: SnapshotProvider | None = None,
    ) -> None:
        self.config = config
        self.snapshot_provider = snapshot_provider
        self.snapshot_policy = SnapshotPolicy(config.snapshot_max_bytes, config.snapshot_interval_ms)
        self.node_id = config.node_id
        self.listeners: list[Listener] = list(listeners or [])
        self.partition_dir = config.data_dir / METADATA_PARTITION_DIR
        self.directory_id = ""
        self._append_secret = "\0"  # until the data dir is prepared: no credential matches
        self.node: RaftNode | None = None
        self.log_store: FileRaftLog | None = None
        self.server: asyncio.Server | None = None
        self.port = config.voters[config.node_id][1]
        self._peers: dict[int, PeerChannel] = {}
        self._connections: set[InboundConnection] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._flush_scheduled = False  # a flush is queued or its fsync is running
        self._flusher: concurrent.futures.ThreadPoolExecutor | None = None
        self._kick_scheduled = False
        self._appends: list[_PendingAppend] = []
        self._hw_waiters: list[asyncio.Future[None]] = []
        self._leader_seen: tuple[int | None, int] | None = None
        self._running = False
        self._snapshot_job: SnapshotJob | None = None
        self.voters = dict(config.voters)
        self._ready: asyncio.Event | None = None
        self._routes: dict[tuple[int, int], tuple[InboundConnection, int, int]] = {}
        self._observers: dict[int, _Observer] = {}
        self._observers_swept = 0
        self._peer_errors: dict[int, Errors] = {}
        self._log_times: dict[object, tuple[int | None, int]] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._unsent: tuple[float, int] = (0.0, 0)
        self._voter_principals = config.voter_principals
        self._voter_directories = {
            v: d for v, d in config.voter_directory_ids.items() if v in config.voters and d
        }
        self._stuck: str | None = None
        self._ctx = WireContext(config.cluster_id, self.node_id, "", self.voters)
        self._authorizer = config.authorizer
        self._server_tls = (
            config.listener_security.ssl_context()
        )  # a store that cannot be loaded fails here, at once
        self._peer_tls = client_tls(config.peer_security)

    # -- life cycle ----------------------------------------------------------------------------------------
    async def bind(self) -> int:
        """Start listening (before `start`, so a local quorum can learn the ports); return the port. Requests
        that arrive before `start` has finished wait for it."""
        host = self.voters[self.node_id][0]
        listener = self.config.listener_security
        if not listener.secured and not self.config.allow_plaintext and not is_loopback(host):
            raise ServiceError(
                f"node {self.node_id} would listen on {host} in PLAINTEXT: anyone who reaches it could vote in a "
                f"voter's name; secure the listener (--listener-config) or allow it (--allow-plaintext)"
            )
        self._ready = asyncio.Event()
        self.server = await serve(
            host,
            self.port,
            self._handle_connection,
            self._server_tls,
            self.config.quorum_config.request_timeout_ms / 1000,
        )
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def start(self, voters: dict[int, tuple[str, int]] | None = None) -> None:
        """Open the log and quorum-state, build the node, connect to the peers."""
        if voters is not None:
            self.voters = dict(voters)
        if self.server is None:
            await self.bind()
        self._prepare_log_dir()
        warm_up()
        self.log_store = FileRaftLog(
            self.partition_dir, fsync=self.config.fsync, segment_bytes=self.config.segment_bytes
        )
        self._flusher = concurrent.futures.ThreadPoolExecutor(1, f"kraftlake-fsync-{self.node_id}")
        if self.log_store.recovery is not None and self.log_store.recovery.truncated_bytes:
            log.warning("node %d: recovered log tail: %s", self.node_id, self.log_store.recovery)
        stored = read_quorum_state(self.partition_dir / "quorum-state")
        election = None
        if stored is not None and stored.leader_epoch >= 0:
            election = ElectionState(
                stored.leader_epoch,
                stored.leader_id if stored.leader_id >= 0 else None,
                stored.voted_id if stored.voted_id >= 0 else None,
            )
        rng = random.Random(self.config.seed)
        now = _mono_ms()
        self.node = RaftNode(
            self.node_id,
            self.config.quorum_config,
            self.log_store,
            election,
            rng,
            now,
            timestamp_base_ms=int(time.time() * 1000) - now,
            directory_id=self.directory_id,
        )
        self._ctx = WireContext(self.config.cluster_id, self.node_id, self.directory_id, self.voters)
        for peer, endpoint in self.voters.items():
            if peer != self.node_id:
                channel = PeerChannel(
                    endpoint,
                    self._on_peer_frame,
                    self.config.max_frame_bytes,
                    self.config.quorum_config.request_timeout_ms,
                    self.config.reconnect_backoff_ms,
                    tls=self._peer_tls,
                    login=self._peer_login(endpoint),
                )
                channel.start()
                self._peers[peer] = channel
        self._running = True
        snapshot = self.log_store.latest_snapshot()
        if snapshot is not None:
            reader = SnapshotReader(snapshot, self.log_store.read_snapshot(snapshot))
            for listener in self.listeners:
                self._call(listener.handle_load_snapshot, reader)
        self._process(Ready(), _mono_ms())
        if self._ready is not None:
            self._ready.set()

    def _log_limited(
        self, cause: object, level: int, fmt: str, *args: object, now: int | None = None
    ) -> None:
        """Log once per `cause` per minute; the next line says how many were left out meanwhile."""
        now = _mono_ms() if now is None else now
        last, skipped = self._log_times.get(cause, (None, 0))
        if last is not None and now - last < LOG_INTERVAL_MS:
            self._log_times[cause] = (last, skipped + 1)
            return
        if len(self._log_times) > 10_000:
            self._log_times.clear()
        self._log_times[cause] = (now, 0)
        suffix = f" ({skipped} more like it in the last minute)" if skipped else ""
        log.log(level, fmt + suffix, *args)

    def _peer_login(self, endpoint: tuple[str, int]) -> Login | None:
        security = self.config.peer_security
        if security is None or not security.uses_sasl:
            return None
        return functools.partial(
            sasl_login, security=security, peer=format_endpoint(endpoint), client_id=self._ctx.client_id()
        )

    def _prepare_log_dir(self) -> None:
        self.partition_dir.mkdir(parents=True, exist_ok=True)
        self._append_secret = ensure_append_secret(self.config.data_dir)
        self.directory_id = ensure_directory_id(self.config.data_dir, self.config.cluster_id, self.node_id)

    async def stop(self) -> None:
        """Stop serving, close the log; pending appends fail with `ServiceStoppedError`."""
        self._running = False
        if self._ready is not None:
            self._ready.set()
        if self._timer is not None:
            self._timer.cancel()
        if self._sweep is not None:
            self._sweep.cancel()
        if self.server is not None:
            self.server.close()
        for conn in list(self._connections):
            conn.close()
        for channel in self._peers.values():
            await channel.stop()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1.0)
        for pending in self._appends:
            pending.resolve(ServiceStoppedError(f"node {self.node_id} stopped"))
        self._appends.clear()
        for waiter in self._hw_waiters:
            if not waiter.done():
                waiter.set_result(None)
        if self.log_store is not None:
            self.log_store.close()
        if self._flusher is not None:
            self._flusher.shutdown(wait=False)

    # -- the Ready loop ------------------------------------------------------------------------------------
    def _process(self, ready: Ready, now: int) -> None:
        if not self._running:
            return
        node = self.node
        assert node is not None and self.log_store is not None
        if ready.quorum_state is not None:
            self._persist_election(ready.quorum_state)
        for message in ready.messages:
            self._send(message)
        if ready.flush_needed and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        if ready.load_snapshot is not None:
            reader = SnapshotReader(ready.load_snapshot, self.log_store.read_snapshot(ready.load_snapshot))
            for listener in self.listeners:
                self._call(listener.handle_load_snapshot, reader)
        committed = ready.committed
        if isinstance(committed, CommittedEntries):
            self._apply(committed)
            self.snapshot_policy.committed(self.log_store.value_bytes(committed.start, committed.end), now)
            if self.snapshot_policy.due(now):
                self._start_snapshot(now)
        for refusal in ready.refused:
            self._log_limited(
                ("epoch", refusal.message, refusal.sender), logging.WARNING, "%s", refusal, now=now
            )
        stuck = node.stuck
        if stuck != self._stuck:
            self._stuck = stuck
            if stuck is not None:
                log.error("%s", stuck)
        leader = (node.leader_id, node.epoch)
        if leader != self._leader_seen:
            self._leader_seen = leader
            for listener in self.listeners:
                self._call(listener.handle_leader_change, LeaderAndEpoch(*leader))
            if not node.is_leader:
                self._fail_unwritten_appends()
        self._arm_timer(now)

    def snapshot_now(self) -> SnapshotId | None:
        """Write a snapshot of everything applied now, synchronously (None if nothing is past the log start)."""
        if not self._running:
            raise ServiceStoppedError(f"node {self.node_id} is not running")
        job = self._prepare_snapshot()
        if job is None:
            return None
        job.build_and_write()
        return self._install_snapshot(job, _mono_ms())

    def _start_snapshot(self, now: int) -> None:
        """Kafka writes snapshots off the raft thread: here the values are taken on the loop, the file is
        encoded and written (fsync) by a worker thread, and the log start advances back on the loop."""
        if self._snapshot_job is not None:
            return
        job = self._prepare_snapshot()
        if job is None:
            return
        self._snapshot_job = job
        self.snapshot_policy.written(now)
        loop = asyncio.get_running_loop()

        def done(_: object) -> None:
            self._snapshot_job = None
            if self._running and job.error is None:
                self._install_snapshot(job, _mono_ms())
            elif job.error is not None:
                log.error("node %d: writing snapshot %s failed: %s", self.node_id, job.snapshot_id, job.error)

        loop.run_in_executor(None, job.build_and_write).add_done_callback(
            lambda f: loop.call_soon_threadsafe(done, f)
        )

    def _prepare_snapshot(self) -> SnapshotJob | None:
        node, store = self.node, self.log_store
        assert node is not None and store is not None
        end = min(node.applied_end, node.high_watermark)
        floor = snapshot_floor(store)
        if end <= floor:
            return None
        snapshot_id = SnapshotId(end, store.epoch_at(end - 1))
        last_ts = store.read_all(end - 1, end)[0].timestamp
        if self.snapshot_provider is not None:
            values = self.snapshot_provider(snapshot_id)
            if values is None:  # the state machine cannot give this state now (e.g. inside a transaction)
                return None
            return SnapshotJob(store, snapshot_id, values, last_ts)
        # without a provider: the latest snapshot's data batches (copied as they are) + the committed tail
        latest = store.latest_snapshot()
        previous = store.read_snapshot(latest) if latest is not None else b""
        tail = [e.value for e in store.read_all(floor, end) if not e.is_control]
        return SnapshotJob(store, snapshot_id, tail, last_ts, previous)

    def _install_snapshot(self, job: SnapshotJob, now: int) -> SnapshotId | None:
        node, store = self.node, self.log_store
        assert node is not None and store is not None and job.data is not None
        try:
            node.create_snapshot(job.snapshot_id.offset, job.data, self.config.retention_bytes)
        except Exception:
            log.exception("node %d: installing snapshot %s failed", self.node_id, job.snapshot_id)
            return None
        self.snapshot_policy.written(now)
        log.info(
            "node %d: snapshot %s written (%d bytes); log starts at %d",
            self.node_id,
            job.snapshot_id,
            len(job.data),
            store.log_start_offset,
        )
        return job.snapshot_id

    def _persist_election(self, election: ElectionState) -> None:
        state = QuorumStateFile(
            leader_id=-1 if election.leader_id is None else election.leader_id,
            leader_epoch=election.epoch,
            voted_id=-1 if election.voted_id is None else election.voted_id,
            data_version=0,
            current_voters=tuple(sorted(self.voters)),
        )
        write_quorum_state(self.partition_dir / "quorum-state", state, fsync=True)

    def _arm_timer(self, now: int) -> None:
        assert self.node is not None
        deadline = self.node.next_deadline_ms()
        if self._timer is not None:
            self._timer.cancel()
        delay = 0.1 if deadline is None else max(0.0, min(0.1, (deadline - now) / 1000))
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        if self._running and self.node is not None:
            now = _mono_ms()
            self._process(self.node.tick(now), now)

    def _kick(self) -> None:
        self._kick_scheduled = False
        self._on_timer()

    def _flush(self) -> None:
        node, store = self.node, self.log_store
        if not self._running or node is None or store is None or self._flusher is None:
            self._flush_scheduled = False
            return
        ticket = store.begin_flush()
        if ticket is None:  # no fsync: writing out is cheap, do it here
            self._flush_scheduled = False
            now = _mono_ms()
            self._process(node.flush(now), now)
            return
        future = asyncio.get_running_loop().run_in_executor(self._flusher, ticket.sync)
        future.add_done_callback(lambda f: self._flush_done(ticket, f))

    def _flush_done(self, ticket: FlushTicket, future: asyncio.Future[None]) -> None:
        self._flush_scheduled = False
        node, store = self.node, self.log_store
        if not self._running or node is None or store is None:
            return
        now = _mono_ms()
        error = future.exception()
        if error is not None:
            # as before the fsync moved off the loop: the synchronous flush raises if the disk still fails
            log.error("node %d: fsync of the log failed: %s", self.node_id, error)
            self._process(node.flush(now), now)
        elif store.flush_still_valid(ticket):
            self._process(node.flush(now, ticket.end_offset), now)
        else:  # truncated meanwhile: what is there now needs a new fsync (the Ready asks for it)
            self._process(node.tick(now), now)

    def _call(self, fn: Callable[..., None], arg: object) -> None:
        try:
            fn(arg)
        except Exception:
            log.exception("node %d: listener %r failed", self.node_id, fn)

    def _apply(self, committed: CommittedEntries) -> None:
        if self.listeners:
            entries = [_committed(e) for e in committed]
            bases = [e.batch_base if e.batch_base >= 0 else e.offset for e in committed]
            for batch in group_batches(entries, bases):
                for listener in self.listeners:
                    self._call(listener.handle_commit, batch)
        end = committed.end - 1
        remaining = []
        for pending in self._appends:
            if pending.last_offset > end:
                remaining.append(pending)
                continue
            epoch = (
                self.log_store.epoch_at(pending.last_offset)
                if self.log_store and pending.last_offset >= self.log_store.log_start_offset
                else pending.epoch
            )
            if epoch == pending.epoch:
                pending.resolve((pending.base_offset, pending.last_offset))
            else:
                pending.resolve(self._not_leader(f"entries of epoch {pending.epoch} were replaced"))
        self._appends = remaining
        waiters, self._hw_waiters = self._hw_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _fail_unwritten_appends(self) -> None:
        """Appends beyond the log end were never written (the leader lost its epoch before the linger ran)."""
        assert self.log_store is not None
        keep = []
        for pending in self._appends:
            if pending.last_offset >= self.log_store.end_offset:
                pending.resolve(self._not_leader("leadership lost before the append was written"))
            else:
                keep.append(pending)
        self._appends = keep

    def _not_leader(self, reason: str = "") -> NotLeaderError:
        assert self.node is not None
        leader = self.node.leader_id
        endpoint = format_endpoint(self.voters[leader]) if leader in self.voters else None
        return NotLeaderError(self.node_id, self.node.epoch, leader, endpoint, reason)

    # -- API (on the loop) ---------------------------------------------------------------------------------
    def append(self, values: list[bytes], resolve: Callable[[tuple[int, int] | BaseException], None]) -> None:
        """Append on the leader; `resolve` gets (base offset, last offset) once committed, or an exception."""
        try:
            self.append_assigned(values, resolve)
        except Exception as exc:
            resolve(exc)

    def append_assigned(
        self, values: list[bytes], resolve: Callable[[tuple[int, int] | BaseException], None]
    ) -> AppendResult:
        """Append on the leader and return where the values will land (base, last offset, epoch) at once.

        `resolve` gets (base offset, last offset) once they are committed in that epoch, or `NotLeaderError`
        if they never are (leadership lost before they were written, or replaced by another leader's
        entries). A state machine that replays its own uncommitted records (the quorum controller) needs the
        offsets now, not at commit time.

        Raises
        ------
        NotLeaderError, ServiceStoppedError
            Nothing was appended (`resolve` is not called).
        """
        node = self.node
        if not self._running or node is None:
            raise ServiceStoppedError(f"node {self.node_id} is not running")
        now = _mono_ms()
        try:
            result = node.append(values, now)
        except RaftNotLeaderError:
            raise self._not_leader() from None
        self._appends.append(_PendingAppend(result.last_offset, result.epoch, result.base_offset, resolve))
        if not self._kick_scheduled:
            # the node may have written the batch at once (group commit) and completed parked follower
            # fetches: that work comes out of the next step/tick only, so drain it in this loop iteration
            # (after the other appends already queued in it) rather than at the next timer
            self._kick_scheduled = True
            asyncio.get_running_loop().call_soon(self._kick)
        return result

    def read_committed(self, from_offset: int, max_records: int) -> list[CommittedEntry]:
        """Committed entries from `from_offset` (at most `max_records`)."""
        node, store = self.node, self.log_store
        if node is None or store is None:
            raise ServiceStoppedError(f"node {self.node_id} is not running")
        start = max(from_offset, store.log_start_offset)
        end = min(node.applied_end, store.end_offset, start + max_records)
        return [_committed(e) for e in store.read_all(start, end)]

    def describe(self) -> QuorumDescription:
        """The status as this node knows it (replication rows only on the leader)."""
        node, store = self.node, self.log_store
        if node is None or store is None:
            raise ServiceStoppedError(f"node {self.node_id} is not running")
        now_mono, now_wall = _mono_ms(), int(time.time() * 1000)

        def wall(mono: int | None) -> int:
            return -1 if mono is None else now_wall - (now_mono - mono)

        statuses = node.replica_states(now_mono)
        dir_ids = {rep.node_id: rep.directory_id for rep in statuses}
        dir_ids[self.node_id] = self.directory_id
        voters = tuple(
            VoterInfo(v, dir_ids.get(v, ""), format_endpoint(e)) for v, e in sorted(self.voters.items())
        )
        replicas: list[ReplicaInfo] = []
        observers: list[int] = []
        leo = store.end_offset
        for rep in statuses:
            is_self = rep.node_id == self.node_id
            status = "Leader" if is_self else ("Follower" if rep.is_voter else "Observer")
            if not rep.is_voter:
                observers.append(rep.node_id)
            caught_up = rep.last_caught_up_ms if rep.log_end_offset < leo else rep.last_fetch_ms
            replicas.append(
                ReplicaInfo(
                    rep.node_id,
                    rep.directory_id,
                    rep.log_end_offset,
                    leo - rep.log_end_offset,
                    wall(rep.last_fetch_ms),
                    wall(caught_up),
                    status,
                )
            )
        if node.is_leader:
            # the observers this node served (the service answers observers itself, not through the node)
            self._sweep_observers(now_mono)
            for rid, obs in sorted(self._observers.items()):
                if rid in observers or rid in self.voters:
                    continue
                observers.append(rid)
                replicas.append(
                    ReplicaInfo(
                        rid,
                        "" if obs.directory_id == ZERO_UUID else obs.directory_id,
                        obs.log_end_offset,
                        leo - obs.log_end_offset,
                        wall(obs.last_fetch_ms),
                        wall(obs.last_caught_up_ms),
                        "Observer",
                    )
                )
        max_lag, max_lag_ms = follower_lag(replicas)
        return QuorumDescription(
            self.config.cluster_id,
            -1 if node.leader_id is None else node.leader_id,
            node.epoch,
            node.high_watermark,
            max_lag,
            max_lag_ms,
            voters,
            tuple(observers),
            tuple(replicas),
            node.stuck or "",
        )

    # -- network: raft peers -------------------------------------------------------------------------------
    def _send(self, message: Message) -> None:
        store = self.log_store
        assert store is not None
        if is_response(message):
            route = self._routes.pop((message.dst, message.correlation_id), None)
            if route is None:
                return
            conn, api_key, version = route
            body = kafka_response(message, version, self._ctx, store.raw_batch, store.log_start_offset)
            frame = encode_response(body, api_key, version, message.correlation_id)
            if len(frame) > self.config.max_frame_bytes:
                log.error(
                    "node %d: dropping a %d-byte %s (limit %d)",
                    self.node_id,
                    len(frame),
                    type(message).__name__,
                    self.config.max_frame_bytes,
                )
                return
            conn.send(frame)
            return
        channel = self._peers.get(message.dst)
        if channel is None:
            return
        corr = channel.next_correlation_id()
        api_key, version, frame = encode_raft_request(message, corr, self._ctx)
        channel.send(frame, corr, (api_key, version, message))

    def _on_peer_frame(self, payload: bytes, context: tuple[int, int, Message] | None) -> None:
        node, store = self.node, self.log_store
        if context is None or node is None or store is None or not self._running:
            return
        api_key, version, request = context
        try:
            message, raws = decode_raft_response(payload, api_key, version, request)
        except CodecError as exc:
            log.warning("node %d: undecodable response of node %d: %s", self.node_id, request.dst, exc)
            return
        error = message.error  # type: ignore[attr-defined]
        if error is not Errors.NONE and error not in _RAFT_FLOW_ERRORS:
            if self._peer_errors.get(request.dst) != error:
                log.warning(
                    "node %d: node %d refused a %s: %s",
                    self.node_id,
                    request.dst,
                    type(request).__name__,
                    error.name,
                )
            self._peer_errors[request.dst] = error
        elif request.dst in self._peer_errors:
            del self._peer_errors[request.dst]
        now = _mono_ms()
        if raws:
            store.offer_batches(raws)
        try:
            self._process(node.step(message, now), now)
        finally:
            if raws:
                store.offer_batches(())

    # -- network: inbound ----------------------------------------------------------------------------------
    async def _handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = InboundConnection(writer)
        listener = self.config.listener_security
        if listener.uses_sasl:  # no principal until the SASL exchange completes
            peer = writer.get_extra_info("peername")
            conn.handshake = SaslHandshake(
                listener, self._api_versions, f"{peer[0]}:{peer[1]}" if peer else "?"
            )
        elif listener.uses_tls:
            conn.principal = principal_of_certificate(writer.get_extra_info("peercert"))
            conn.proven = conn.principal != ANONYMOUS
        else:
            conn.principal = ANONYMOUS
        if not self._admit(conn):
            conn.close()
            return
        self._connections.add(conn)
        self._arm_sweep()
        # backpressure: no next request is read while the replies not yet taken exceed the bound
        writer.transport.set_write_buffer_limits(high=self.config.max_unsent_bytes)
        body_timeout_s = self.config.quorum_config.request_timeout_ms / 1000
        try:
            if self._ready is not None and not self._ready.is_set():
                await (
                    self._ready.wait()
                )  # bound early (a local quorum learns its ports), serving once started
            while self._running:
                if conn.pending is not None:
                    await conn.pending
                    conn.pending = None
                await writer.drain()
                await self._within_share(conn)
                # before authentication a frame is a SASL token: Kafka's sasl.server.max.receive.size bounds it
                limit = self.config.max_frame_bytes if conn.principal is not None else SASL_MAX_RECEIVE_BYTES
                try:
                    payload = await read_frame(reader, limit, body_timeout_s)
                except FrameTooLargeError as exc:
                    head = b""
                    if exc.size >= 8:
                        with contextlib.suppress(Exception):
                            head = await asyncio.wait_for(reader.readexactly(8), 1.0)
                    api_key, _, corr = _HEAD.unpack(head) if len(head) == 8 else (-1, -1, -1)
                    self._refuse(
                        conn,
                        api_key,
                        corr,
                        Errors.MESSAGE_TOO_LARGE,
                        f"request frame of {exc.size} bytes exceeds the maximum of {limit}",
                    )
                    await writer.drain()
                    return
                conn.last_active = time.monotonic()
                if not self._on_request(payload, conn):
                    await writer.drain()
                    return
        except (asyncio.IncompleteReadError, ConnectionError, OSError, TimeoutError):
            pass
        finally:
            if conn.pending is not None:
                conn.pending.cancel()
            self._connections.discard(conn)
            conn.close()

    def _unsent_total(self) -> int:
        """The replies written but not yet taken by their clients, over all connections (recounted at most
        every `_BUDGET_POLL_S`)."""
        now = time.monotonic()
        at, total = self._unsent
        if now - at >= _BUDGET_POLL_S:
            total = 0
            for c in self._connections:
                transport = c.writer.transport
                if transport is not None:
                    total += transport.get_write_buffer_size()
            self._unsent = (now, total)
        return total

    async def _within_share(self, conn: InboundConnection) -> None:
        """Wait while the voter's unsent replies exceed its budget and this connection holds more than its
        share of them (the budget over the connections open): its next request is not read meanwhile. Proven
        connections (the other voters among them) are read on: what they are sent is bounded by the raft
        protocol (one Fetch in flight per follower) and by the budget observer answers wait for."""
        budget = self.config.max_unsent_total_bytes
        transport = conn.writer.transport
        while (
            self._running
            and not conn.proven
            and not conn.closed
            and transport is not None
            and transport.get_write_buffer_size() > budget // max(1, len(self._connections))
            and self._unsent_total() >= budget
        ):
            await asyncio.sleep(_BUDGET_POLL_S)

    def _admit(self, conn: InboundConnection) -> bool:
        """Whether a new connection may stay: past `max_connections`, or past the unproven connections' share
        (all but `reserved_connections`), the oldest unproven connection is closed for it; with none to close,
        it is refused. Each cause is logged once a minute."""
        config = self.config
        unproven = [c for c in self._connections if not c.proven]
        if len(self._connections) < config.max_connections and (
            conn.proven or len(unproven) < config.max_connections - config.reserved_connections
        ):
            return True
        if not unproven:
            self._log_limited(
                "connections-full",
                logging.WARNING,
                "node %d: %d proven connections open (max_connections), closing a new one",
                self.node_id,
                len(self._connections),
            )
            return False
        oldest = min(unproven, key=lambda c: c.last_active)
        self._log_limited(
            "connections-evicted",
            logging.WARNING,
            "node %d: %d connections open (%d unproven), closing the oldest unproven one for a new one",
            self.node_id,
            len(self._connections),
            len(unproven),
        )
        self._connections.discard(oldest)
        oldest.close()
        return True

    def _arm_sweep(self) -> None:
        if self._sweep is None:
            interval = min(
                1.0, self.config.sasl_handshake_timeout_ms / 4000, self.config.connections_max_idle_ms / 4000
            )
            self._sweep = asyncio.get_running_loop().call_later(interval, self._sweep_connections, interval)

    def _sweep_connections(self, interval: float) -> None:
        """Close connections idle past `connections_max_idle_ms` and SASL connections not authenticated within
        `sasl_handshake_timeout_ms` (one log line per cause a minute)."""
        self._sweep = None
        now = time.monotonic()
        idle_s = self.config.connections_max_idle_ms / 1000
        sasl_s = self.config.sasl_handshake_timeout_ms / 1000
        for conn in list(self._connections):
            if conn.principal is None and now - conn.opened > sasl_s:
                cause, what = "sasl-timeout", f"not authenticated within {sasl_s:g} s"
            elif now - conn.last_active > idle_s and conn.pending is None:
                cause, what = "idle", f"idle for {idle_s:g} s (connections.max.idle.ms)"
            else:
                continue
            self._log_limited(cause, logging.INFO, "node %d: closing a connection %s", self.node_id, what)
            self._connections.discard(conn)
            conn.close()
        if self._connections:
            self._sweep = asyncio.get_running_loop().call_later(interval, self._sweep_connections, interval)

    def _refuse(self, conn: InboundConnection, api_key: int, corr: int, code: int, text: str) -> bool:
        """Answer a request that cannot be read or served with a refusal frame; the connection is then closed."""
        log.warning(
            "node %d: refusing a request (API key %d, correlation id %d) and closing the connection: "
            "error %d: %s",
            self.node_id,
            api_key,
            corr,
            code,
            text,
        )
        conn.send(encode_refusal(corr, code, text, header_v1=api_key == APPEND_API_KEY))
        return False

    def _on_request(self, payload: bytes, conn: InboundConnection) -> bool:
        """Serve one request frame; False if the connection must be closed (after the refusal sent)."""
        try:
            api_key, version, corr, _client, body_start = rpc.peek_request(payload)
        except ProtocolError as exc:
            return self._refuse(conn, -1, -1, Errors.INVALID_REQUEST, f"not a Kafka request: {exc}")
        node = self.node
        if node is None or not self._running:
            return False
        principal = conn.principal
        if principal is None:
            return self._authenticate(payload, conn)
        if api_key == ApiKey.API_VERSIONS:
            conn.send(self._api_versions(version, corr))
            return True
        if api_key == APPEND_API_KEY:
            if version != 0:
                return self._refuse(
                    conn,
                    api_key,
                    corr,
                    Errors.UNSUPPORTED_VERSION,
                    f"append v{version} is not supported (v0 is)",
                )
            if not self._authorizer.allows(principal, api_key):
                self._log_denied(principal, api_key)
                conn.send(
                    encode_append_response(
                        AppendResponse(Errors.CLUSTER_AUTHORIZATION_FAILED, REFUSAL, self.node_id), corr
                    )
                )
                return True
            try:
                request = decode_append_request(payload, body_start)
            except CodecError as exc:
                return self._refuse(conn, api_key, corr, Errors.INVALID_REQUEST, f"malformed append: {exc}")
            self._serve_append(request, corr, conn)
            return True
        versions = SERVED.get(api_key)
        if versions is None:
            return self._refuse(
                conn,
                api_key,
                corr,
                Errors.UNSUPPORTED_VERSION,
                f"API key {api_key} is not served by a kraftlake voter (see ApiVersions)",
            )
        name = rpc.api(api_key).name
        if version not in versions:
            return self._refuse(
                conn,
                api_key,
                corr,
                Errors.UNSUPPORTED_VERSION,
                f"{name} v{version} is not supported (kraftlake serves v{versions})",
            )
        try:
            _, body = rpc.decode_request(payload)
        except ProtocolError as exc:
            return self._refuse(
                conn,
                api_key,
                corr,
                Errors.INVALID_REQUEST,
                f"malformed {name} v{version} request: {exc}",
            )
        try:
            if not self._authorizer.allows(principal, api_key):
                self._log_denied(principal, api_key)
                raise RequestRefused(Errors.CLUSTER_AUTHORIZATION_FAILED, REFUSAL)
            self._dispatch(api_key, version, corr, body, conn)
        except RequestRefused as exc:
            conn.send(
                encode_response(error_response(api_key, version, exc.code, str(exc)), api_key, version, corr)
            )
        return True

    def _authenticate(self, payload: bytes, conn: InboundConnection) -> bool:
        """A request before the SASL exchange completed: only the exchange itself is served."""
        handshake = conn.handshake
        assert handshake is not None
        frame, keep_open = handshake.handle(payload)
        if frame is not None:
            conn.send(frame)
        conn.principal = handshake.principal
        if conn.principal is not None:
            conn.proven = True
        return keep_open

    def _log_denied(self, principal: str, api_key: int) -> None:
        name = "append" if api_key == APPEND_API_KEY else rpc.api(api_key).name
        log.warning("node %d: %s refused to %s: no ACL allows it", self.node_id, name, principal)

    def _dispatch(self, api_key: int, version: int, corr: int, body: Any, conn: InboundConnection) -> None:
        node = self.node
        assert node is not None
        if api_key == ApiKey.DESCRIBE_QUORUM:
            conn.send(encode_response(self._describe_quorum(version, body), api_key, version, corr))
            return
        if api_key == ApiKey.DESCRIBE_CLUSTER:
            conn.send(encode_response(self._describe_cluster(version, body), api_key, version, corr))
            return
        if api_key == ApiKey.FETCH:
            replica = fetch_replica_id(body, version)
            if replica == self.node_id:
                raise RequestRefused(Errors.INVALID_REQUEST, f"Fetch from replica {replica}: this node's id")
            if replica not in self.voters:
                check_cluster_id(body.cluster_id, self.config.cluster_id)
                self._serve_observer_fetch(version, corr, body, conn)
                return
        elif api_key == ApiKey.FETCH_SNAPSHOT and body.replica_id not in self.voters:
            check_cluster_id(body.cluster_id, self.config.cluster_id)
            self._serve_observer_snapshot(version, corr, body, conn)
            return
        message = raft_request(api_key, version, corr, body, self.node_id, self.config.cluster_id)
        if message.src not in self.voters or message.src == self.node_id:
            raise RequestRefused(
                Errors.INCONSISTENT_VOTER_SET,
                f"{rpc.api(api_key).name} from node {message.src}, not a voter of this quorum",
            )
        self._check_voter_identity(api_key, version, body, conn, message.src)
        conn.proven = True
        self._routes[(message.src, corr)] = (conn, api_key, version)
        if len(self._routes) > 10_000:  # answers that never came: forget the oldest
            for key in list(self._routes)[:1000]:
                del self._routes[key]
        now = _mono_ms()
        self._process(node.step(message, now), now)

    def _check_voter_identity(
        self, api_key: int, version: int, body: Any, conn: InboundConnection, voter: int
    ) -> None:
        """A voter-only request is taken only from the voter it names: its principal on a secured listener
        (`VoterPrincipals`), and its directory id wherever the request carries one (the one configured, else
        the first seen in its name). BeginQuorumEpoch and EndQuorumEpoch carry none: in PLAINTEXT nothing
        tells their sender from anyone else's.

        Raises
        ------
        RequestRefused
            31 for a principal not bound to `voter`; INCONSISTENT_VOTER_SET for another directory id;
            INVALID_REQUEST for a Vote, Fetch or FetchSnapshot without one (a version before Kafka's KIP-853).
        """
        name = rpc.api(api_key).name
        principal = conn.principal or ANONYMOUS
        if self.config.listener_security.secured and not self._voter_principals.may_speak_for(
            principal, voter
        ):
            self._log_limited(
                ("voter-principal", principal, voter),
                logging.WARNING,
                "node %d: %s in voter %d's name refused to %s: not a principal of that voter",
                self.node_id,
                name,
                voter,
                principal,
            )
            raise RequestRefused(Errors.CLUSTER_AUTHORIZATION_FAILED, REFUSAL)
        directory = sender_directory_id(api_key, version, body)
        if directory is None and api_key in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
            return
        if not directory:
            raise RequestRefused(
                Errors.INVALID_REQUEST,
                f"{name} v{version} in voter {voter}'s name without its directory id",
            )
        known = self._voter_directories.get(voter)
        if known is None:
            self._voter_directories[voter] = directory
            log.info("node %d: voter %d has directory id %s (first seen)", self.node_id, voter, directory)
        elif directory != known:
            self._log_limited(
                ("voter-directory", voter, directory),
                logging.WARNING,
                "node %d: %s in voter %d's name refused: directory id %s, not the voter's %s",
                self.node_id,
                name,
                voter,
                directory,
                known,
            )
            raise RequestRefused(
                Errors.INCONSISTENT_VOTER_SET,
                f"{name} in voter {voter}'s name from another directory than the voter's",
            )

    def _api_versions(self, version: int, corr: int) -> bytes:
        served = {**SERVED, **SASL_SERVED} if self.config.listener_security.uses_sasl else SERVED
        keys = [
            rpc_messages.ApiVersionsResponse.ApiVersion(
                api_key=k, min_version=v.lowest, max_version=v.highest
            )
            for k, v in sorted(served.items())
        ]
        if version not in SERVED[ApiKey.API_VERSIONS]:
            # Kafka's answer to a version it lacks: UNSUPPORTED_VERSION in a v0 body listing its ranges
            body = rpc_messages.ApiVersionsResponse(error_code=Errors.UNSUPPORTED_VERSION, api_keys=keys)
            return encode_response(body, ApiKey.API_VERSIONS, 0, corr)
        body = rpc_messages.ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)
        return encode_response(body, ApiKey.API_VERSIONS, version, corr)

    def _describe_cluster(self, version: int, body: Any) -> Any:
        node = self.node
        assert node is not None
        cls = rpc_messages.DescribeClusterResponse
        if version >= 1 and body.endpoint_type != CONTROLLER_ENDPOINT_TYPE:
            return cls(
                error_code=Errors.MISMATCHED_ENDPOINT_TYPE,
                error_message="kraftlake voters are controllers: ask with EndpointType 2 "
                "(--bootstrap-controller)",
                endpoint_type=body.endpoint_type,
                cluster_id="",
            )
        brokers = [
            cls.DescribeClusterBroker(broker_id=v, host=host, port=port, rack=None)
            for v, (host, port) in sorted(self.voters.items())
        ]
        extra = {"endpoint_type": CONTROLLER_ENDPOINT_TYPE} if version >= 1 else {}
        return cls(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            cluster_id=self.config.cluster_id,
            controller_id=-1 if node.leader_id is None else node.leader_id,
            brokers=brokers,
            **extra,
        )

    def _describe_quorum(self, version: int, body: Any) -> Any:
        node = self.node
        assert node is not None
        cls = rpc_messages.DescribeQuorumResponse
        check = [(t.topic_name, [p.partition_index for p in t.partitions]) for t in body.topics]
        if check != [(METADATA_TOPIC, [0])]:
            return cls(
                error_code=Errors.INVALID_REQUEST,
                error_message=f"DescribeQuorum of {check}: only {METADATA_TOPIC} partition 0 has a quorum"
                if version >= 2
                else None,
            )
        return describe_quorum_response(self.describe(), version, node.is_leader, self.node_id)

    # -- observers (Kafka's Fetch and FetchSnapshot from a replica id that is not a voter) -------------------
    def _observer_check(self, epoch: int) -> int:
        """Kafka's leader-only validation for an observer that names an epoch (-1: any voter answers)."""
        node = self.node
        assert node is not None
        if epoch < 0:
            return Errors.NONE
        if epoch < node.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if epoch > node.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return Errors.NONE if node.is_leader else Errors.NOT_LEADER_OR_FOLLOWER

    def _voter_endpoints(self, cls: Any) -> list[Any]:
        return [
            cls.NodeEndpoint(node_id=v, host=host, port=port)
            for v, (host, port) in sorted(self.voters.items())
        ]

    def _serve_observer_fetch(self, version: int, corr: int, body: Any, conn: InboundConnection) -> None:
        node, store = self.node, self.log_store
        assert node is not None and store is not None
        p = metadata_partition(body.topics, "topic_id", "Fetch")
        replica = fetch_replica_id(body, version)
        endpoints = self._voter_endpoints(rpc_messages.FetchResponse) if version >= 16 else []
        error = self._observer_check(p.current_leader_epoch)
        if error:
            conn.send(
                encode_response(
                    fetch_response(
                        error=error,
                        leader_id=node.leader_id,
                        epoch=node.epoch,
                        high_watermark=node.applied_end,
                        log_start_offset=store.log_start_offset,
                        records=None,
                        node_endpoints=endpoints,
                    ),
                    ApiKey.FETCH,
                    version,
                    corr,
                )
            )
            return
        now = _mono_ms()
        if replica >= 0:
            tracked = self._observers.get(replica)
            caught_up = (
                now
                if p.fetch_offset >= node.applied_end
                else (tracked.last_caught_up_ms if tracked else None)
            )
            directory = p.replica_directory_id if version >= 17 else ZERO_UUID
            self._observers[replica] = _Observer(directory, p.fetch_offset, now, caught_up)
            if len(self._observers) > 1000 or now - self._observers_swept > 10_000:
                self._sweep_observers(now)
        max_bytes = max(
            1, min(p.partition_max_bytes, body.max_bytes, self.config.quorum_config.max_fetch_bytes)
        )
        conn.pending = asyncio.get_running_loop().create_task(
            self._answer_observer_fetch(version, corr, p, max_bytes, body.max_wait_ms, endpoints, conn)
        )

    def _sweep_observers(self, now: int) -> None:
        self._observers_swept = now
        for rid in [
            r for r, o in self._observers.items() if now - o.last_fetch_ms > OBSERVER_SESSION_TIMEOUT_MS
        ]:
            del self._observers[rid]

    async def _answer_observer_fetch(
        self,
        version: int,
        corr: int,
        p: Any,
        max_bytes: int,
        max_wait_ms: int,
        endpoints: list[Any],
        conn: InboundConnection,
    ) -> None:
        node, store = self.node, self.log_store
        assert node is not None and store is not None
        offset = p.fetch_offset
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000
        while (
            self._running
            and node.applied_end <= offset
            and time.monotonic() < deadline
            and offset >= store.log_start_offset
        ):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._hw_waiters.append(waiter)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(waiter, max(0.0, deadline - time.monotonic()))
        # the answer is built only within the voter's budget for unsent replies (no await from here to send)
        while (
            self._running and not conn.closed and self._unsent_total() >= self.config.max_unsent_total_bytes
        ):
            await asyncio.sleep(_BUDGET_POLL_S)
        if not self._running or conn.closed:
            return
        hw, start = node.applied_end, store.log_start_offset
        error, records, diverging, snapshot = Errors.NONE, None, None, None
        last_epoch = p.last_fetched_epoch
        if offset < start:
            snapshot = store.latest_snapshot()
            if snapshot is None:
                error = Errors.OFFSET_OUT_OF_RANGE
        elif (
            last_epoch >= 0
            and offset > 0
            and offset <= store.end_offset
            and (
                (found := store.end_offset_for_epoch(last_epoch)).epoch != last_epoch or found.offset < offset
            )
        ):
            if found.epoch < 0 or found.offset < start:
                snapshot = store.latest_snapshot()
                diverging = None if snapshot is not None else OffsetAndEpoch(0, 0)
            else:
                diverging = found
        else:
            end = min(hw, store.end_offset)
            if offset < end:
                # whole batches, as Kafka sends them: from the start of the batch holding the fetch offset
                base = store.read_all(offset, offset + 1)[0].batch_base
                begin = base if start <= base <= offset else offset
                records = encode_entries(store.read(begin, end, max_bytes), store.raw_batch)
        body = fetch_response(
            error=error,
            leader_id=node.leader_id,
            epoch=node.epoch,
            high_watermark=hw,
            log_start_offset=start,
            records=records,
            diverging_epoch=diverging,
            snapshot_id=snapshot,
            node_endpoints=endpoints,
        )
        conn.send(encode_response(body, ApiKey.FETCH, version, corr))

    def _serve_observer_snapshot(self, version: int, corr: int, body: Any, conn: InboundConnection) -> None:
        node, store = self.node, self.log_store
        assert node is not None and store is not None
        p = metadata_partition(body.topics, "name", "FetchSnapshot")
        sid = SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        endpoints = self._voter_endpoints(rpc_messages.FetchSnapshotResponse) if version >= 1 else []
        error = self._observer_check(p.current_leader_epoch)
        size, chunk = 0, b""
        if not error:
            try:
                data = store.read_snapshot(sid)
            except (RaftStorageError, OSError):
                data = None
            if data is None:
                error = Errors.SNAPSHOT_NOT_FOUND
            elif p.position < 0 or p.position > len(data):
                error, size = Errors.POSITION_OUT_OF_RANGE, len(data)
            else:
                limit = max(1, min(body.max_bytes, self.config.quorum_config.snapshot_chunk_bytes))
                size, chunk = len(data), data[p.position : p.position + limit]
        response = fetch_snapshot_response(
            error, node.leader_id, node.epoch, sid, size, p.position, chunk, endpoints
        )
        conn.send(encode_response(response, ApiKey.FETCH_SNAPSHOT, version, corr))

    # -- the append RPC ------------------------------------------------------------------------------------
    def _serve_append(self, request: AppendRequest, corr: int, conn: InboundConnection) -> None:
        def reply(outcome: tuple[int, int] | BaseException) -> None:
            node = self.node
            assert node is not None
            me = self.node_id
            if isinstance(outcome, NotLeaderError):
                response = AppendResponse(
                    Errors.NOT_LEADER_OR_FOLLOWER,
                    str(outcome),
                    me,
                    outcome.leader_id,
                    outcome.leader_endpoint or "",
                    outcome.epoch,
                )
            elif isinstance(outcome, BaseException):
                response = AppendResponse(
                    Errors.UNKNOWN_SERVER_ERROR, str(outcome), me, node.leader_id, "", node.epoch
                )
            else:
                response = AppendResponse(Errors.NONE, None, me, me, "", node.epoch, outcome[0], outcome[1])
            conn.send(encode_append_response(response, corr))

        if not hmac.compare_digest(request.credential.encode(), self._append_secret.encode()):
            # says nothing a stranger could use: not the secret, not the cluster id
            conn.send(
                encode_append_response(
                    AppendResponse(
                        Errors.CLUSTER_AUTHORIZATION_FAILED,
                        "append refused: no valid append credential",
                        self.node_id,
                    ),
                    corr,
                )
            )
            return
        conn.proven = True
        try:
            check_cluster_id(request.cluster_id, self.config.cluster_id)
        except RequestRefused as exc:
            conn.send(encode_append_response(AppendResponse(exc.code, str(exc), self.node_id), corr))
            return
        if not request.values:
            reply(ServiceError("append of no values"))
            return
        self.append(list(request.values), reply)


def _committed(entry: Entry) -> CommittedEntry:
    return tuple.__new__(CommittedEntry, (entry[0], entry[1], entry[4], entry[2], entry[3], entry[6]))
