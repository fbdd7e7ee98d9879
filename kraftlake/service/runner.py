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
import logging
import random
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable
from dataclasses import dataclass

from kraftlake.logformat import (
    METADATA_PARTITION_DIR,
    MetaProperties,
    QuorumStateFile,
    read_meta_properties,
    read_quorum_state,
    write_meta_properties,
    write_quorum_state,
)
from kraftlake.raft.errors import NotLeaderError as RaftNotLeaderError
from kraftlake.raft.errors import RaftStorageError
from kraftlake.raft.log import CommittedEntries, snapshot_floor
from kraftlake.raft.messages import Entry, Message, SnapshotId
from kraftlake.raft.node import AppendResult, RaftNode, Ready
from kraftlake.raft.states import ElectionState
from kraftlake.service.codec import decode_frame, encode_frame, is_response, peek_header
from kraftlake.service.config import NodeConfig, format_endpoint
from kraftlake.service.errors import (
    CodecError,
    FrameTooLargeError,
    NotLeaderError,
    ServiceError,
    ServiceStoppedError,
)
from kraftlake.service.file_log import FileRaftLog, FlushTicket
from kraftlake.service.listener import LeaderAndEpoch, Listener, SnapshotReader, group_batches
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
    ReplicaInfo,
    VoterInfo,
)
from kraftlake.service.snapshots import SnapshotJob, SnapshotPolicy, SnapshotProvider
from kraftlake.service.transport import InboundConnection, PeerChannel, read_frame, serve

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


def _mono_ms() -> int:
    return int(time.monotonic() * 1000)


def new_uuid() -> str:
    """A random uuid in Kafka's base64url form (22 characters)."""
    return urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


@dataclass
class _PendingAppend:
    last_offset: int
    epoch: int
    base_offset: int
    resolve: Callable[[tuple[int, int] | BaseException], None]


class NodeRunner:
    """One voter on the running asyncio loop: its server, peer channels, log files and raft node."""

    def __init__(self, config: NodeConfig, listeners: list[Listener] | None = None,
                 snapshot_provider: SnapshotProvider | None = None) -> None:
        self.config = config
        self.snapshot_provider = snapshot_provider
        self.snapshot_policy = SnapshotPolicy(config.snapshot_max_bytes, config.snapshot_interval_ms)
        self.node_id = config.node_id
        self.listeners: list[Listener] = list(listeners or [])
        self.partition_dir = config.data_dir / METADATA_PARTITION_DIR
        self.directory_id = ""
        self.node: RaftNode | None = None
        self.log_store: FileRaftLog | None = None
        self.server: asyncio.Server | None = None
        self.port = config.voters[config.node_id][1]
        self._peers: dict[int, PeerChannel] = {}
        self._routes: dict[tuple[int, int], InboundConnection] = {}
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

    # -- life cycle ----------------------------------------------------------------------------------------
    async def bind(self) -> int:
        """Start listening (before `start`, so a local quorum can learn the ports); return the port."""
        self.server = await serve(HOST, self.port, self._handle_connection)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def start(self, voters: dict[int, tuple[str, int]] | None = None) -> None:
        """Open the log and quorum-state, build the node, connect to the peers."""
        if voters is not None:
            self.voters = dict(voters)
        if self.server is None:
            await self.bind()
        self._prepare_log_dir()
        self.log_store = FileRaftLog(self.partition_dir, fsync=self.config.fsync,
                                     segment_bytes=self.config.segment_bytes)
        self._flusher = concurrent.futures.ThreadPoolExecutor(1, f"kraftlake-fsync-{self.node_id}")
        if self.log_store.recovery is not None and self.log_store.recovery.truncated_bytes:
            log.warning("node %d: recovered log tail: %s", self.node_id, self.log_store.recovery)
        stored = read_quorum_state(self.partition_dir / "quorum-state")
        election = None
        if stored is not None and stored.leader_epoch >= 0:
            election = ElectionState(stored.leader_epoch, stored.leader_id if stored.leader_id >= 0 else None,
                                     stored.voted_id if stored.voted_id >= 0 else None)
        rng = random.Random(self.config.seed)
        now = _mono_ms()
        self.node = RaftNode(self.node_id, self.config.quorum_config, self.log_store, election, rng, now,
                             timestamp_base_ms=int(time.time() * 1000) - now, directory_id=self.directory_id)
        for peer, endpoint in self.voters.items():
            if peer != self.node_id:
                channel = PeerChannel(endpoint, self._on_peer_frame, self.config.max_frame_bytes,
                                      self.config.quorum_config.request_timeout_ms, self.config.reconnect_backoff_ms)
                channel.start()
                self._peers[peer] = channel
        self._running = True
        snapshot = self.log_store.latest_snapshot()
        if snapshot is not None:
            reader = SnapshotReader(snapshot, self.log_store.read_snapshot(snapshot))
            for listener in self.listeners:
                self._call(listener.handle_load_snapshot, reader)
        self._process(Ready(), _mono_ms())

    def _prepare_log_dir(self) -> None:
        self.partition_dir.mkdir(parents=True, exist_ok=True)
        meta_path = self.config.data_dir / "meta.properties"
        if meta_path.exists():
            meta = read_meta_properties(meta_path)
            if meta.cluster_id != self.config.cluster_id or meta.node_id != self.node_id:
                raise ServiceError(
                    f"{meta_path} belongs to cluster {meta.cluster_id} node {meta.node_id}, not "
                    f"{self.config.cluster_id} node {self.node_id}")
            self.directory_id = meta.directory_id or ""
        else:
            self.directory_id = new_uuid()
            write_meta_properties(meta_path, MetaProperties(self.config.cluster_id, self.node_id,
                                                            directory_id=self.directory_id))

    async def stop(self) -> None:
        """Stop serving, close the log; pending appends fail with `ServiceStoppedError`."""
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
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
            lambda f: loop.call_soon_threadsafe(done, f))

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
        log.info("node %d: snapshot %s written (%d bytes); log starts at %d", self.node_id, job.snapshot_id,
                 len(job.data), store.log_start_offset)
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
            epoch = self.log_store.epoch_at(pending.last_offset) if self.log_store and \
                pending.last_offset >= self.log_store.log_start_offset else pending.epoch
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

    def append_assigned(self, values: list[bytes],
                        resolve: Callable[[tuple[int, int] | BaseException], None]) -> AppendResult:
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
        voters = tuple(VoterInfo(v, dir_ids.get(v, ""), format_endpoint(e)) for v, e in sorted(self.voters.items()))
        replicas: list[ReplicaInfo] = []
        observers: list[int] = []
        max_lag = max_lag_ms = 0
        leo = store.end_offset
        for rep in statuses:
            is_self = rep.node_id == self.node_id
            if not is_self and rep.is_voter:
                max_lag = max(max_lag, leo - rep.log_end_offset)
                caught = rep.last_caught_up_ms
                max_lag_ms = max(max_lag_ms, 0 if caught is None or rep.log_end_offset >= leo
                                 else now_mono - caught)
            status = "Leader" if is_self else ("Follower" if rep.is_voter else "Observer")
            if not rep.is_voter:
                observers.append(rep.node_id)
            caught_up = rep.last_caught_up_ms if rep.log_end_offset < leo else rep.last_fetch_ms
            replicas.append(ReplicaInfo(rep.node_id, rep.directory_id, rep.log_end_offset,
                                        leo - rep.log_end_offset, wall(rep.last_fetch_ms), wall(caught_up), status))
        return QuorumDescription(
            self.config.cluster_id, -1 if node.leader_id is None else node.leader_id, node.epoch,
            node.high_watermark, max_lag, max_lag_ms, voters, tuple(observers), tuple(replicas))

    # -- network -------------------------------------------------------------------------------------------
    def _send(self, message: Message) -> None:
        try:
            frame = encode_frame(message, self.config.cluster_id, self.config.max_frame_bytes)
        except FrameTooLargeError:
            log.error("node %d: dropping oversized %s", self.node_id, type(message).__name__)
            return
        if is_response(message):
            conn = self._routes.pop((message.dst, message.correlation_id), None)
            if conn is not None:
                conn.send(frame)
            return
        channel = self._peers.get(message.dst)
        if channel is not None:
            channel.send(frame, message.correlation_id)

    def _on_peer_frame(self, payload: bytes) -> None:
        try:
            cluster_id, message = decode_frame(payload)
        except CodecError as exc:
            log.warning("node %d: undecodable response: %s", self.node_id, exc)
            return
        if isinstance(message, ErrorResponse):
            log.warning("node %d: peer %d refused a request: %s %s", self.node_id, message.src,
                        message.error.name, message.message)
            return
        if cluster_id != self.config.cluster_id or self.node is None or not self._running:
            return
        now = _mono_ms()
        self._process(self.node.step(message, now), now)

    async def _handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = InboundConnection(writer)
        self._connections.add(conn)
        try:
            while self._running or self.node is None:
                try:
                    payload = await read_frame(reader, self.config.max_frame_bytes)
                except FrameTooLargeError as exc:
                    conn.send(self._error_frame(-1, -1, ErrorCode.MESSAGE_TOO_LARGE, str(exc)))
                    await writer.drain()
                    return
                self._on_request(payload, conn)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self._connections.discard(conn)
            conn.close()

    def _error_frame(self, dst: int, corr: int, code: ErrorCode, text: str) -> bytes:
        return encode_frame(ErrorResponse(self.node_id, dst, corr, code, text), self.config.cluster_id)

    def _on_request(self, payload: bytes, conn: InboundConnection) -> None:
        try:
            _api, corr, src, cluster_id = peek_header(payload)
        except CodecError as exc:
            conn.send(self._error_frame(-1, -1, ErrorCode.INVALID_REQUEST, str(exc)))
            return
        if cluster_id != self.config.cluster_id:
            conn.send(self._error_frame(src, corr, ErrorCode.INCONSISTENT_CLUSTER_ID,
                                        f"cluster id {cluster_id!r} is not {self.config.cluster_id!r}"))
            return
        try:
            _, message = decode_frame(payload)
        except CodecError as exc:
            conn.send(self._error_frame(src, corr, ErrorCode.INVALID_REQUEST, str(exc)))
            return
        node = self.node
        if node is None or not self._running:
            return
        if isinstance(message, AppendRequest):
            self._serve_append(message, conn)
        elif isinstance(message, ObserverFetchRequest):
            asyncio.get_running_loop().create_task(self._serve_observer_fetch(message, conn))
        elif isinstance(message, ObserverFetchSnapshotRequest):
            self._serve_observer_snapshot(message, conn)
        elif isinstance(message, DescribeQuorumRequest):
            self._serve_describe(message, conn)
        elif message.dst != self.node_id:
            conn.send(self._error_frame(src, corr, ErrorCode.INVALID_REQUEST,
                                        f"message for node {message.dst} sent to node {self.node_id}"))
        else:
            if not is_response(message):
                self._routes[(message.src, message.correlation_id)] = conn
                if len(self._routes) > 10_000:  # answers that never came: forget the oldest
                    for key in list(self._routes)[:1000]:
                        del self._routes[key]
            now = _mono_ms()
            self._process(node.step(message, now), now)

    def _serve_append(self, request: AppendRequest, conn: InboundConnection) -> None:
        def reply(outcome: tuple[int, int] | BaseException) -> None:
            node = self.node
            assert node is not None
            if isinstance(outcome, NotLeaderError):
                response = AppendResponse(self.node_id, request.src, request.correlation_id,
                                          ErrorCode.NOT_LEADER_OR_FOLLOWER, outcome.leader_id,
                                          outcome.leader_endpoint or "", outcome.epoch, message=str(outcome))
            elif isinstance(outcome, BaseException):
                response = AppendResponse(self.node_id, request.src, request.correlation_id,
                                          ErrorCode.UNKNOWN_SERVER_ERROR, node.leader_id, "", node.epoch,
                                          message=str(outcome))
            else:
                response = AppendResponse(self.node_id, request.src, request.correlation_id, ErrorCode.NONE,
                                          self.node_id, "", node.epoch, outcome[0], outcome[1])
            conn.send(encode_frame(response, self.config.cluster_id, self.config.max_frame_bytes))

        if not request.values:
            reply(ServiceError("append of no values"))
            return
        self.append(list(request.values), reply)

    async def _serve_observer_fetch(self, request: ObserverFetchRequest, conn: InboundConnection) -> None:
        node, store = self.node, self.log_store
        assert node is not None and store is not None
        deadline = time.monotonic() + request.max_wait_ms / 1000
        while self._running and node.applied_end <= request.fetch_offset and time.monotonic() < deadline:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._hw_waiters.append(waiter)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(waiter, max(0.0, deadline - time.monotonic()))
        if not self._running:
            return
        error = ErrorCode.NONE
        entries: list[Entry] = []
        snapshot_id = None
        if request.fetch_offset < store.log_start_offset:
            error = ErrorCode.OFFSET_OUT_OF_RANGE
            snapshot_id = store.latest_snapshot()
        else:
            end = min(node.applied_end, store.end_offset, request.fetch_offset + max(1, request.max_records))
            size = 0
            for entry in store.read_all(request.fetch_offset, end):
                size += len(entry.value) + 40
                if entries and size > request.max_bytes:
                    break
                entries.append(entry)
        response = ObserverFetchResponse(self.node_id, request.src, request.correlation_id, error, node.leader_id,
                                         node.epoch, node.applied_end, store.log_start_offset, tuple(entries),
                                         snapshot_id)
        conn.send(encode_frame(response, self.config.cluster_id, self.config.max_frame_bytes))

    def _serve_observer_snapshot(self, request: ObserverFetchSnapshotRequest, conn: InboundConnection) -> None:
        store = self.log_store
        assert store is not None
        try:
            data = store.read_snapshot(request.snapshot_id)
        except RaftStorageError:
            data = None
        if data is None:
            error, size, chunk = ErrorCode.SNAPSHOT_NOT_FOUND, 0, b""
        elif request.position < 0 or request.position > len(data):
            error, size, chunk = ErrorCode.POSITION_OUT_OF_RANGE, len(data), b""
        else:
            limit = max(1, min(request.max_bytes, self.config.quorum_config.snapshot_chunk_bytes))
            error, size, chunk = ErrorCode.NONE, len(data), data[request.position : request.position + limit]
        response = ObserverFetchSnapshotResponse(self.node_id, request.src, request.correlation_id, error,
                                                 request.snapshot_id, size, request.position, chunk)
        conn.send(encode_frame(response, self.config.cluster_id, self.config.max_frame_bytes))

    def _serve_describe(self, request: DescribeQuorumRequest, conn: InboundConnection) -> None:
        node = self.node
        assert node is not None
        description = self.describe()
        if node.is_leader:
            error, endpoint = ErrorCode.NONE, format_endpoint(self.voters[self.node_id])
        else:
            leader = node.leader_id
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            endpoint = format_endpoint(self.voters[leader]) if leader in self.voters else ""
        response = DescribeQuorumResponse(self.node_id, request.src, request.correlation_id, error, endpoint,
                                          description)
        conn.send(encode_frame(response, self.config.cluster_id, self.config.max_frame_bytes))


def _committed(entry: Entry) -> CommittedEntry:
    return tuple.__new__(CommittedEntry, (entry[0], entry[1], entry[4], entry[2], entry[3], entry[6]))

