"""`ControllerHost`: the quorum controller on a raft service node (one per voter), and `ControllerQuorum`.

Kafka runs its `QuorumController` as a `RaftClient.Listener`: every controller replays committed batches into
its image (standbys stay hot, so failover needs no bootstrap); the node that leads an epoch claims the active
role once its LeaderChange record is committed (everything before it is then committed and replayed); it
appends its commands' records through the raft client, which gives their offsets at once, replays them
into its uncommitted image and answers the command when they are committed; on losing leadership it
reverts to the committed image.

Threading. Everything of a host runs on its service's loop thread: the listener callbacks, the commands
(`submit`, `call`), the appends (`NodeRunner.append_assigned` hands back the offsets synchronously) and the
snapshot provider (which reads the committed image, so a snapshot holds exactly the state at its offset).
Kafka gives the controller a thread of its own; in CPython a second thread buys no CPU (the GIL), while one
thread makes the order of commits, appends and snapshots trivially right. The cost: a long command (a
controlled shutdown of a broker with 20k partitions) delays the node's raft work for as long as it runs.

Snapshots: the host is its service's `SnapshotProvider`: the committed image as the minimal records that
rebuild it (`kraftlake.image.snapshot_records`), encoded lazily by the service's snapshot worker (the
partitions unchanged since the last snapshot reuse their bytes: `SnapshotValues`), so the
``.checkpoint`` files are Kafka metadata snapshots; `handle_load_snapshot` loads one into a fresh controller.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kraftlake.controller import ControllerConfig, ControllerResult, QuorumController
from kraftlake.controller.errors import NotActiveError
from kraftlake.controller.result import RecordAndVersion
from kraftlake.image import EMPTY, ImageLoader, MetadataImage, Provenance
from kraftlake.image.snapshot import SnapshotValues
from kraftlake.protocol.codec import encoder
from kraftlake.protocol.messages import spec_of
from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.messages import SnapshotId
from kraftlake.records import (
    MetadataRecord,
    control_envelope,
    decode_data_envelope,
    encode_metadata_record,
    iter_records,
)
from kraftlake.records.reader import decode_values
from kraftlake.records.serde import metadata_header
from kraftlake.service.errors import NotControllerError, NotLeaderError, ServiceError, ServiceStoppedError
from kraftlake.service.listener import Batch, LeaderAndEpoch, SnapshotReader
from kraftlake.service.service import LocalQuorum, RaftService

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger(__name__)


def batch_records(batch: Batch, source: str = "<committed batch>") -> list[MetadataRecord]:
    """The committed entries of `batch` as `MetadataRecord` envelopes (metadata records and control records).

    Raises
    ------
    RecordDecodeError
        On a value that cannot be decoded, naming `source` and the entry's offset (no byte position: the
        entries come from the raft log, not a file).
    """
    base = batch.base_offset
    return [
        control_envelope(
            e.control_type, e.value, e.offset, e.epoch, e.timestamp, base, source=source, position=None
        )
        if e.is_control
        else decode_data_envelope(e.value, e.offset, e.epoch, e.timestamp, base, source=source, position=None)
        for e in batch.entries
    ]


_gc_pauses = 0
STEP_RECORDS = 2_000
"""Records per appended batch of a command's metadata transaction: each is one loop callback on the thread
that also serves raft I/O (of all voters, in a `ControllerQuorum`); a few milliseconds of work each."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: bulk work (a 60k-record command, the replay of its batches, a
    snapshot load) allocates hundreds of thousands of acyclic objects, and every few thousand allocations
    CPython collects a generation; the oldest one holds the whole image (millions of objects in a
    2M-partition cluster), and walking it once costs more than the command. Collections resume afterwards,
    over what is then young. Nests; leaves the collector off if it was off."""
    global _gc_pauses
    if _gc_pauses == 0 and not gc.isenabled():
        yield
        return
    _gc_pauses += 1
    gc.disable()
    try:
        yield
    finally:
        _gc_pauses -= 1
        if _gc_pauses == 0:
            gc.enable()


def _type_name(rv: RecordAndVersion) -> str:
    return type(rv[0]).__name__


def encode_records(records: Sequence[RecordAndVersion]) -> list[bytes]:
    """The values of ``records`` (as `encode_metadata_record`), with the encoder and the frame header looked up
    once per (record class, version) rather than once per record: a controlled shutdown encodes 60k."""
    out: list[bytes] = []
    add = out.append
    cache: dict[tuple[type, int], tuple[bytes, Any]] = {}
    for rec, version in records:
        key = (type(rec), version)
        hit = cache.get(key)
        if hit is None:  # metadata_header validates the class and version, raising the typed errors
            hit = cache[key] = (metadata_header(rec, version), encoder(spec_of(rec), version))
        w = bytearray(hit[0])
        try:
            hit[1](rec, w)
        except Exception:  # a field the codec refuses: the generic path raises the typed error
            add(encode_metadata_record(rec, version))
            continue
        add(bytes(w))
    return out


def snapshot_image(reader: SnapshotReader) -> MetadataImage:
    """The image a service snapshot holds (provenance: its end offset - 1 and epoch)."""
    loader = ImageLoader(EMPTY)
    ts = -1
    source = f"<snapshot {reader.snapshot_id}>"
    for batch in reader.batches():
        # KRaft-shaped data batches (all of ours) are decoded straight into the loader, in bulk
        values = None if batch.is_control else batch.kraft_values()
        if values is not None:
            loader.feed_batch(
                decode_values(values, batch.base_offset, source, batch.position),
                batch.base_offset,
                batch.partition_leader_epoch,
                batch.base_timestamp,
            )
            continue
        for mr in iter_records([batch], source=source):
            if not mr.is_control:
                loader.feed(mr)
            elif mr.type == "SnapshotHeaderRecord" and mr.record is not None:
                ts = mr.record.last_contained_log_timestamp  # type: ignore[attr-defined]
    sid = reader.snapshot_id
    return loader.image().with_provenance(Provenance(sid.offset - 1, sid.epoch, ts))


@dataclass
class Activation:
    """One time this host became the active controller."""

    epoch: int
    image_offset: int
    records_replayed_before: int
    bootstrapped: bool
    monotonic: float


@dataclass
class HostStats:
    """What a host did: records replayed as a standby, snapshots loaded, activations, commands."""

    records_replayed: int = 0
    snapshots_loaded: int = 0
    resets: int = 0
    commands: int = 0
    activations: list[Activation] = field(default_factory=list)
    deactivations: int = 0
    records_appended: Counter[str] = field(default_factory=Counter)
    batches_appended: int = 0


class _Appender:
    """The active controller's `MetadataAppender`: one call = one leader write through the host's service."""

    def __init__(self, host: ControllerHost) -> None:
        self.host = host
        self.last_commit: Future[tuple[int, int]] | None = None
        self.appended = 0  # appends of the command being executed

    def append(self, epoch: int, records: Sequence[RecordAndVersion]) -> int:
        service = self.host.service
        values = encode_records(records)
        commit: Future[tuple[int, int]] = Future()

        def resolve(outcome: tuple[int, int] | BaseException) -> None:
            if isinstance(outcome, BaseException):
                commit.set_exception(outcome)
                self.host._append_failed(epoch, outcome)
            else:
                commit.set_result(outcome)

        result = service.runner.append_assigned(values, resolve)
        if result.epoch != epoch:
            # raft moved to another epoch under the controller: these offsets are not the controller's
            raise NotLeaderError(
                service.node_id,
                result.epoch,
                service.leader_id,
                None,
                f"appended in epoch {result.epoch}, controller epoch {epoch}",
            )
        self.last_commit = commit
        self.appended += 1
        stats = self.host.stats
        stats.batches_appended += 1
        stats.records_appended.update(map(_type_name, records))
        return result.base_offset

    def end_offset(self) -> int:
        store = self.host.service.runner.log_store
        if store is None:
            raise ServiceStoppedError(f"node {self.host.node_id} is not running")
        return store.end_offset


class ControllerHost:
    """A `QuorumController` driven by one raft service node: listener, snapshot provider, command API.

    Parameters
    ----------
    node_id
        The voter's id.
    config
        The controller's configuration.
    seed
        Seeds the controller's generator of topic ids (one stream per term: `kraftlake.controller.ids`); None
        draws them from the operating system's generator.
    clock
        Milliseconds given to the controller at activation (broker sessions start then); wall time by default.

    Attach the node's `RaftService` with `attach` before it starts (`ControllerQuorum` does it); pass the host
    as the service's listener and `host.snapshot_values` as its snapshot provider.
    """

    def __init__(
        self,
        node_id: int,
        config: ControllerConfig | None = None,
        *,
        seed: int | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.node_id = node_id
        self.config = config or ControllerConfig()
        self.seed = seed
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.controller = QuorumController(self.config, node_id=node_id, seed=self.seed)
        self.stats = HostStats()
        self._service: RaftService | None = None
        self._appender = _Appender(self)
        self._applied = -1  # the last committed offset handed to the controller
        self._snapshot_values = SnapshotValues()  # re-encodes only the partitions changed since the last one
        # waiters on `_applied` (other threads) block on this instead of polling: a thread waking every
        # millisecond takes the GIL from the loop thread that does the work it waits for
        self._applied_changed = threading.Condition()
        self._last_data = -1  # the last committed metadata (non-control) offset
        self._claim_epoch: int | None = None  # the epoch this node leads, waiting for its LeaderChange commit
        self._activation_scheduled = False
        self._announced_epoch = -1  # the epoch whose activation is in `stats` (see `active`)
        self._stepping = False  # a command's batches are being appended (`_step`): others wait
        self._inflight: set[Future[Any]] = set()  # commands appended, waiting for their commit
        self._waiting: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()

    # -- wiring ---------------------------------------------------------------------------------------------
    def attach(self, service: RaftService) -> None:
        """Use `service` (this node's, started or about to start) for appends."""
        if service.node_id != self.node_id:
            raise ServiceError(f"host {self.node_id} attached to node {service.node_id}")
        self._service = service

    @property
    def service(self) -> RaftService:
        if self._service is None:
            raise ServiceStoppedError(f"controller host {self.node_id} has no service attached")
        return self._service

    @property
    def applied_offset(self) -> int:
        """The last committed offset the controller has been handed."""
        return self._applied

    def wait_applied(self, offset: int, timeout: float) -> bool:
        """Block (any thread but the host's) until `applied_offset` reaches `offset`; whether it did."""
        with self._applied_changed:
            return self._applied_changed.wait_for(lambda: self._applied >= offset, timeout)

    def _set_applied(self, offset: int) -> None:
        self._applied = offset
        with self._applied_changed:
            self._applied_changed.notify_all()

    @property
    def active(self) -> bool:
        """Whether the controller is active, once its activation is in ``stats`` (the loop thread activates it
        first: a caller seeing it active must also see how it activated)."""
        return self.controller.active and self._announced_epoch == self.controller.epoch

    # -- Listener -------------------------------------------------------------------------------------------
    def handle_commit(self, batch: Batch) -> None:
        """Replay a committed batch (standby) or move the active controller's committed image forward."""
        with gc_paused():
            self._handle_commit(batch)

    def _handle_commit(self, batch: Batch) -> None:
        entries = batch.entries
        if batch.base_offset <= self._applied:
            if batch.base_offset == 0:
                # the node restarted without a snapshot and replays its log from the start
                self._reset(EMPTY)
            else:
                entries = tuple(e for e in entries if e.offset > self._applied)
                if not entries:
                    return
                batch = Batch(entries[0].offset, batch.epoch, batch.append_timestamp, entries)
        c = self.controller
        if c.active and batch.epoch != c.epoch:
            # entries of another leader where this controller appended: its uncommitted state is void
            log.error(
                "node %d: committed batch of epoch %d at %d while active in epoch %d; deactivating",
                self.node_id,
                batch.epoch,
                batch.base_offset,
                c.epoch,
            )
            self._deactivate()
        if c.active:
            # the active controller replayed these records when it appended them: it needs only the offset
            # (decoding a 60k-record controlled shutdown again would cost as much as the replay)
            c.commit_upto(batch.last_offset)
        elif not any(e.is_control for e in entries):
            # a batch of metadata records (what a leader's command writes): decoded straight into the loader
            typed = decode_values([e.value for e in entries], entries[0].offset, f"<node {self.node_id} log>")
            self.stats.records_replayed += len(typed)
            c.replay_committed(typed, entries[0].offset, batch.epoch, [e.timestamp for e in entries])
        else:
            records = batch_records(batch, f"<node {self.node_id} log>")
            self.stats.records_replayed += len(records)
            c.handle_commit(records)
        self._set_applied(batch.last_offset)
        for e in reversed(entries):
            if not e.is_control:
                self._last_data = max(self._last_data, e.offset)
                break
        if (
            self._claim_epoch is not None
            and batch.epoch == self._claim_epoch
            and not c.active
            and not self._activation_scheduled
        ):
            # the LeaderChange of our epoch (its first entry) is committed: everything before it is replayed
            self._activation_scheduled = True
            self.service.service_loop.loop.call_soon(self._activate, self._claim_epoch)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace the state with a snapshot's (on start, or when a lagging node downloads one)."""
        with gc_paused():
            image = snapshot_image(reader)
            self._reset(image)
        self.stats.snapshots_loaded += 1

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        """Claim the epoch this node leads (activation waits for its LeaderChange commit); resign otherwise."""
        mine = leader.leader_id == self.node_id
        self._claim_epoch = leader.epoch if mine else None
        c = self.controller
        if c.active and (not mine or leader.epoch != c.epoch):
            self._deactivate()

    # -- SnapshotProvider -----------------------------------------------------------------------------------
    def snapshot_values(self, snapshot_id: SnapshotId) -> Iterable[bytes] | None:
        """The committed image as snapshot record values, or None if it is not the state at the snapshot's end
        (a metadata transaction committed only in part: a snapshot never holds half of one)."""
        image = self.controller.committed_image
        end = snapshot_id.offset - 1
        if self._applied != end or image.transaction is not None or image.offset < self._last_data:
            return None
        return self._snapshot_values.values(image)

    # -- commands -------------------------------------------------------------------------------------------
    def submit(self, fn: Callable[[QuorumController], ControllerResult[T]]) -> Future[T]:
        """Run a controller handler on the host's thread, append its records atomically, answer on commit.

        The future resolves with the result's response once its records are committed (at once when there
        are none, e.g. an error response); it fails with `NotControllerError` if this controller is not active,
        `NotLeaderError` if leadership is lost before the records commit, or the handler's exception.
        """
        future: Future[T] = Future()
        self._call_soon(self._run_command, fn, future)
        return future

    def call(self, fn: Callable[[QuorumController], R]) -> Future[R]:
        """Run `fn(controller)` on the host's thread (any controller state, active or not); its return value."""
        future: Future[R] = Future()

        def run() -> None:
            try:
                future.set_result(fn(self.controller))
            except BaseException as exc:
                future.set_exception(exc)

        self._call_soon(run)
        return future

    def execute(self, result: ControllerResult[Any]) -> Future[tuple[int, int]] | None:
        """Execute `result` on the active controller now (call on the host's thread, e.g. inside `call`).

        Returns the commit future of its last append (None if it had no records).

        Raises
        ------
        NotControllerError, NotLeaderError, ServiceStoppedError
        """
        c = self.controller
        if not c.active:
            raise NotControllerError(self.node_id, self.service.leader_id)
        self._appender.last_commit = None
        self._appender.appended = 0
        try:
            c.execute(result)
        except Exception:
            if self._appender.appended:
                # a metadata transaction appended in part: only the committed state is safe (the node still
                # leads raft but serves no commands until the next election, see the report in the docstring)
                self._deactivate()
            raise
        self.stats.commands += 1
        return self._appender.last_commit

    def _call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        service = self.service
        if not service.started:
            raise ServiceStoppedError(f"node {self.node_id} is not running")
        service.service_loop.loop.call_soon_threadsafe(self._serialized, fn, args)

    def _serialized(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        """Run a command or call now, or after the command whose batches are being appended."""
        if self._stepping:
            self._waiting.append((fn, args))
        else:
            fn(*args)

    def _run_command(self, fn: Callable[[QuorumController], ControllerResult[T]], future: Future[T]) -> None:
        c = self.controller
        if not c.active:
            future.set_exception(NotControllerError(self.node_id, self.service.leader_id))
            return
        try:
            with gc_paused():
                result = fn(c)
                self._appender.last_commit = None
                self._appender.appended = 0
                steps = c.execute_steps(result, STEP_RECORDS)
        except BaseException as exc:
            future.set_exception(exc)
            return
        self._stepping = True
        self._step(steps, result, future)

    def _step(self, steps: Any, result: ControllerResult[T], future: Future[T]) -> None:
        """Append and replay the command's next batch; between batches the loop serves raft I/O (the other
        voters of a `ControllerQuorum` too), so a 60k-record command does not stall replication for seconds."""
        try:
            with gc_paused():
                next(steps)
        except StopIteration:
            self.stats.commands += 1
            commit = self._appender.last_commit
            self._resume()
            if commit is None:
                future.set_result(result.response)
                return

            self._inflight.add(future)

            def done(f: Future[tuple[int, int]]) -> None:
                self._inflight.discard(future)
                if future.done():  # failed when this controller was deactivated
                    return
                exc = f.exception()
                if exc is not None:
                    future.set_exception(exc)
                else:
                    future.set_result(result.response)

            commit.add_done_callback(done)
            return
        except BaseException as exc:
            if self._appender.appended:
                # a metadata transaction appended in part: only the committed state is safe
                self._deactivate()
            if isinstance(exc, NotActiveError):
                exc = NotControllerError(self.node_id, self._service.leader_id if self._service else None)
            self._resume()
            future.set_exception(exc)
            return
        self.service.service_loop.loop.call_soon(self._step, steps, result, future)

    def _resume(self) -> None:
        self._stepping = False
        while self._waiting and not self._stepping:
            fn, args = self._waiting.popleft()
            fn(*args)

    # -- leadership -----------------------------------------------------------------------------------------
    def _activate(self, epoch: int) -> None:
        self._activation_scheduled = False
        service = self._service
        node = service.runner.node if service is not None and service.started else None
        c = self.controller
        if (
            node is None
            or not node.is_leader
            or node.epoch != epoch
            or c.active
            or self._claim_epoch != epoch
        ):
            return
        before = self.stats.records_replayed
        offset = c.committed_image.offset
        try:
            boot = c.activate(epoch, self._appender, self.clock())
        except Exception:
            log.exception("node %d: activation in epoch %d failed", self.node_id, epoch)
            self._deactivate()
            return
        self.stats.activations.append(Activation(epoch, offset, before, boot is not None, time.monotonic()))
        self._announced_epoch = epoch
        log.info(
            "node %d: active controller in epoch %d from the hot image at offset %d",
            self.node_id,
            epoch,
            offset,
        )

    def _deactivate(self) -> None:
        if self.controller.active:
            self.controller.deactivate()
            self.stats.deactivations += 1
        # commands waiting for their commit fail as Kafka's do (NOT_CONTROLLER; the caller retries): entries
        # a lost leader wrote may be truncated, or committed much later by the next leader
        inflight, self._inflight = self._inflight, set()
        leader = self._service.leader_id if self._service is not None and self._service.started else None
        for future in inflight:
            if not future.done():
                future.set_exception(NotControllerError(self.node_id, leader))

    def _append_failed(self, epoch: int, exc: BaseException) -> None:
        c = self.controller
        if c.active and c.epoch == epoch:
            log.warning("node %d: append of epoch %d failed (%s); deactivating", self.node_id, epoch, exc)
            self._deactivate()

    def _reset(self, image: MetadataImage) -> None:
        self._deactivate()
        self.controller = QuorumController(self.config, node_id=self.node_id, seed=self.seed, image=image)
        self._set_applied(image.offset)
        self._last_data = image.offset
        self.stats.resets += 1


class ControllerQuorum:
    """A `LocalQuorum` of N voters with a `ControllerHost` on each (listener and snapshot provider).

    Parameters
    ----------
    voters, data_dir, cluster_id, fsync, quorum, node_options
        As for `LocalQuorum`.
    config
        The controllers' configuration.
    seed
        Host ``i`` seeds its controller with ``seed + i``; None (the default) seeds none of them.
    """

    def __init__(
        self,
        voters: int,
        data_dir: str | Path,
        cluster_id: str,
        *,
        config: ControllerConfig | None = None,
        seed: int | None = None,
        fsync: bool = True,
        quorum: QuorumConfig | None = None,
        node_options: dict[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.hosts = {
            i: ControllerHost(i, config, seed=None if seed is None else seed + i, clock=clock)
            for i in range(1, voters + 1)
        }
        self.local = LocalQuorum(
            voters,
            data_dir,
            cluster_id,
            fsync=fsync,
            quorum=quorum,
            listeners={i: [h] for i, h in self.hosts.items()},
            snapshot_providers={i: h.snapshot_values for i, h in self.hosts.items()},
            node_options=node_options,
            on_service=lambda service: self.hosts[service.node_id].attach(service),
        )

    @property
    def data_dir(self) -> Path:
        return self.local.data_dir

    def node_dir(self, node_id: int) -> Path:
        """The log dir of a voter (``meta.properties`` and ``__cluster_metadata-0``)."""
        return self.local.data_dir / f"node-{node_id}"

    def start(self) -> ControllerQuorum:
        self.local.start()
        return self

    def stop(self) -> None:
        self.local.stop()

    def __enter__(self) -> ControllerQuorum:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def running(self) -> list[ControllerHost]:
        return [
            h
            for i, h in self.hosts.items()
            if self.local.services.get(i) is not None and self.local.services[i].started
        ]

    def active_host(self) -> ControllerHost | None:
        """The running host whose controller is active (the highest epoch if, briefly, two are)."""
        active = [h for h in self.running() if h.active]
        return max(active, key=lambda h: h.controller.epoch) if active else None

    def wait_active(self, timeout: float = 15.0, exclude: int | None = None) -> ControllerHost:
        """Block until a running host (other than `exclude`) has an active controller."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            host = self.active_host()
            if host is not None and host.node_id != exclude:
                return host
            time.sleep(0.002)
        raise ServiceError(f"no active controller within {timeout} s")

    def submit(self, fn: Callable[[QuorumController], ControllerResult[T]], timeout: float = 15.0) -> T:
        """Run a command on the active controller and wait for its commit (retries on a leader change)."""
        deadline = time.monotonic() + timeout
        while True:
            host = self.wait_active(max(0.0, deadline - time.monotonic()))
            try:
                return host.submit(fn).result(max(0.0, deadline - time.monotonic()))
            except (NotControllerError, NotLeaderError, ServiceStoppedError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def kill(self, node_id: int) -> None:
        """Stop a voter (its data dir stays)."""
        self.local.stop_node(node_id)

    def restart(self, node_id: int) -> RaftService:
        """Start a stopped voter again from its data dir (its host loads the snapshot and replays the tail)."""
        return self.local.restart_node(node_id)

    def wait_applied(self, offset: int, timeout: float = 15.0) -> None:
        """Block until every running host has been handed the committed records through `offset`."""
        if not self.applied(offset, timeout):
            raise ServiceError(
                f"hosts did not apply offset {offset} within {timeout} s: {self.applied_offsets()}"
            )

    def applied_offsets(self) -> dict[int, int]:
        """Each running host's applied offset."""
        return {h.node_id: h.applied_offset for h in self.running()}

    def applied(self, offset: int, timeout: float) -> bool:
        """Whether every running host was handed the committed records through `offset` within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            behind = [h for h in self.running() if h.applied_offset < offset]
            left = deadline - time.monotonic()
            if not behind or left <= 0:
                return not behind
            # in slices: a host stopped meanwhile is no longer waited for
            behind[0].wait_applied(offset, min(left, 0.1))
