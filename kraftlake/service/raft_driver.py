"""`RaftDriver`: drives one `RaftNode` on an asyncio loop (timers, raft peers, disk, commits).

The driver is the etcd-style driver of the step machine: every input (a received frame, a due timer, a
completed flush, a client append) goes into the node, and the returned `Ready` is carried out in the order
the node requires: store ``quorum-state`` (fsync) before anything is sent, send, flush the log, load a
snapshot, apply committed entries (listeners, append futures, observer fetches waiting for a commit).
Everything here runs on the loop's thread except the log's fsync: it runs on the driver's flush thread, one
at a time, each covering every append written before it began (appends arriving meanwhile share the next
one), while the loop goes on serving fetches, acks and appends; entries count (high watermark, follower
fetch offset) only once their fsync has returned. Requests reach it from `RequestServer` (`step_request`),
answers go back on the connection they came on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kraftlake.logformat import METADATA_PARTITION_DIR, QuorumStateFile, read_quorum_state, write_quorum_state
from kraftlake.raft.errors import NotLeaderError as RaftNotLeaderError
from kraftlake.raft.log import CommittedEntries, snapshot_floor
from kraftlake.raft.messages import Entry, Errors, Message, SnapshotId
from kraftlake.raft.node import AppendResult, RaftNode, Ready
from kraftlake.raft.states import ElectionState
from kraftlake.service.config import NodeConfig, format_endpoint
from kraftlake.service.errors import CodecError, NotLeaderError, ServiceStoppedError
from kraftlake.service.file_log import FileRaftLog, FlushTicket
from kraftlake.service.kafka_rpc import (
    decode_raft_response,
    encode_raft_request,
    encode_response,
    is_response,
    kafka_response,
)
from kraftlake.service.limited_log import LimitedLog, mono_ms
from kraftlake.service.listener import LeaderAndEpoch, Listener, SnapshotReader, group_batches
from kraftlake.service.messages import (
    CommittedEntry,
    QuorumDescription,
    ReplicaInfo,
    TrackedObserver,
    VoterInfo,
    follower_lag,
)
from kraftlake.service.peer_login import client_tls, sasl_login
from kraftlake.service.rpc_common import ZERO_UUID, WireContext
from kraftlake.service.snapshots import SnapshotJob, SnapshotPolicy, SnapshotProvider
from kraftlake.service.transport import InboundConnection, Login, PeerChannel

log = logging.getLogger(__name__)

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
_MAX_ROUTES = 10_000
"""Requests awaiting the node's answer past which the oldest are forgotten (answers that never came)."""


@dataclass
class _PendingAppend:
    last_offset: int
    epoch: int
    base_offset: int
    resolve: Callable[[tuple[int, int] | BaseException], None]


class RaftDriver:
    """The raft node of one voter, its log files, its channels to the other voters and its listeners.

    `node` and `log_store` exist from `start` on; `running` is True from `start` until `halt`.
    """

    def __init__(
        self,
        config: NodeConfig,
        listeners: list[Listener],
        snapshot_provider: SnapshotProvider | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.listeners = listeners
        self.snapshot_provider = snapshot_provider
        self.snapshot_policy = SnapshotPolicy(config.snapshot_max_bytes, config.snapshot_interval_ms)
        self.partition_dir = config.data_dir / METADATA_PARTITION_DIR
        self.voters = dict(config.voters)
        self.directory_id = ""
        self.node: RaftNode | None = None
        self.log_store: FileRaftLog | None = None
        self.running = False
        self._peers: dict[int, PeerChannel] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._flush_scheduled = False  # a flush is queued or its fsync is running
        self._flusher: concurrent.futures.ThreadPoolExecutor | None = None
        self._kick_scheduled = False
        self._appends: list[_PendingAppend] = []
        self._hw_waiters: list[asyncio.Future[None]] = []
        self._leader_seen: tuple[int | None, int] | None = None
        self._snapshot_job: SnapshotJob | None = None
        self._routes: dict[tuple[int, int], tuple[InboundConnection, int, int]] = {}
        self._peer_errors: dict[int, Errors] = {}
        self._stuck: str | None = None
        self._ctx = WireContext(config.cluster_id, self.node_id, "", self.voters)
        self._peer_tls = client_tls(config.peer_security)
        self._limited = LimitedLog(log)

    # -- life cycle ----------------------------------------------------------------------------------------
    def start(self, directory_id: str) -> None:
        """Open the log and quorum-state, build the node (with this voter's `directory_id`), connect to the
        peers, hand the latest snapshot to the listeners and process the first Ready."""
        self.directory_id = directory_id
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
        now = mono_ms()
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
        self.running = True
        snapshot = self.log_store.latest_snapshot()
        if snapshot is not None:
            reader = SnapshotReader(snapshot, self.log_store.read_snapshot(snapshot))
            for listener in self.listeners:
                self._call(listener.handle_load_snapshot, reader)
        self._process(Ready(), mono_ms())

    def _peer_login(self, endpoint: tuple[str, int]) -> Login | None:
        security = self.config.peer_security
        if security is None or not security.uses_sasl:
            return None
        return functools.partial(
            sasl_login, security=security, peer=format_endpoint(endpoint), client_id=self._ctx.client_id()
        )

    def halt(self) -> None:
        """Take no input from here on (the first step of stopping)."""
        self.running = False
        if self._timer is not None:
            self._timer.cancel()

    async def stop_peers(self) -> None:
        """Close the channels to the other voters."""
        for channel in self._peers.values():
            await channel.stop()

    def close(self) -> None:
        """Fail the pending appends with `ServiceStoppedError`, wake the commit waiters, close the log."""
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
        if not self.running:
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
            self._limited.log(
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
        if not self.running:
            raise ServiceStoppedError(f"node {self.node_id} is not running")
        job = self._prepare_snapshot()
        if job is None:
            return None
        job.build_and_write()
        return self._install_snapshot(job, mono_ms())

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
            if self.running and job.error is None:
                self._install_snapshot(job, mono_ms())
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
        if self.running and self.node is not None:
            now = mono_ms()
            self._process(self.node.tick(now), now)

    def _kick(self) -> None:
        self._kick_scheduled = False
        self._on_timer()

    def _flush(self) -> None:
        node, store = self.node, self.log_store
        if not self.running or node is None or store is None or self._flusher is None:
            self._flush_scheduled = False
            return
        ticket = store.begin_flush()
        if ticket is None:  # no fsync: writing out is cheap, do it here
            self._flush_scheduled = False
            now = mono_ms()
            self._process(node.flush(now), now)
            return
        future = asyncio.get_running_loop().run_in_executor(self._flusher, ticket.sync)
        future.add_done_callback(lambda f: self._flush_done(ticket, f))

    def _flush_done(self, ticket: FlushTicket, future: asyncio.Future[None]) -> None:
        self._flush_scheduled = False
        node, store = self.node, self.log_store
        if not self.running or node is None or store is None:
            return
        now = mono_ms()
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
        if not self.running or node is None:
            raise ServiceStoppedError(f"node {self.node_id} is not running")
        now = mono_ms()
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

    def commit_waiter(self) -> asyncio.Future[None]:
        """A future done at the next commit applied (or when the driver closes)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._hw_waiters.append(waiter)
        return waiter

    def describe(self, served_observers: Mapping[int, TrackedObserver]) -> QuorumDescription:
        """The status as this node knows it (replication rows only on the leader, with the observers the
        service served, `served_observers`, besides those the node tracks).

        Raises
        ------
        ServiceStoppedError
            Before `start`.
        """
        node, store = self.node, self.log_store
        if node is None or store is None:
            raise ServiceStoppedError(f"node {self.node_id} is not running")
        now_mono, now_wall = mono_ms(), int(time.time() * 1000)

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
            # the observers the service served (it answers observers itself, not through the node)
            for rid, obs in sorted(served_observers.items()):
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
        if context is None or node is None or store is None or not self.running:
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
        now = mono_ms()
        if raws:
            store.offer_batches(raws)
        try:
            self._process(node.step(message, now), now)
        finally:
            if raws:
                store.offer_batches(())

    def step_request(self, message: Message, conn: InboundConnection, api_key: int, version: int) -> None:
        """Step the node with a request a voter sent on `conn`; its answer goes back there as `api_key`
        `version`'s response."""
        node = self.node
        assert node is not None
        self._routes[(message.src, message.correlation_id)] = (conn, api_key, version)
        if len(self._routes) > _MAX_ROUTES:  # answers that never came: forget the oldest
            for key in list(self._routes)[:1000]:
                del self._routes[key]
        now = mono_ms()
        self._process(node.step(message, now), now)


def _committed(entry: Entry) -> CommittedEntry:
    return tuple.__new__(CommittedEntry, (entry[0], entry[1], entry[4], entry[2], entry[3], entry[6]))
