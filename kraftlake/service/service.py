"""`RaftService`: a raft node (or, with `LocalQuorum`, a whole quorum) on a background asyncio thread.

This is the driver-side service: the Spark driver (or `kraftlake quorum start`) creates it, appends through
it and reads what is committed; executors read through `kraftlake.service.client.ObserverClient` over TCP.
Every public method is thread-safe: it hands the work to the loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.messages import SnapshotId
from kraftlake.raft.states import LeaderState
from kraftlake.service.config import NodeConfig
from kraftlake.service.errors import ServiceError, ServiceStoppedError
from kraftlake.service.listener import Listener
from kraftlake.service.messages import CommittedEntry, QuorumDescription
from kraftlake.service.runner import (
    APPEND_SECRET_FILE,
    HOST,
    NodeRunner,
    ensure_append_secret,
    ensure_directory_id,
)
from kraftlake.service.snapshots import SnapshotProvider
from kraftlake.wire.client_config import ClientSecurity
from kraftlake.wire.listener_config import ListenerSecurity

T = TypeVar("T")
log = logging.getLogger(__name__)


class ServiceLoop:
    """An asyncio loop running in a daemon thread of the calling process."""

    def __init__(self, name: str = "kraftlake-raft") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
        """Run a coroutine on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float | None = 30.0) -> T:
        """Call `fn` on the loop thread and wait for its result."""

        async def wrapper() -> T:
            return fn()

        return self.run(wrapper(), timeout)

    def close(self) -> None:
        """Stop the loop and join the thread."""
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self.loop.is_running():
            self.loop.close()


class RaftService:
    """One voter driven on a `ServiceLoop` (its own unless one is given).

    Parameters
    ----------
    config
        The node's configuration.
    listeners
        Called on the loop thread with commits, snapshot loads and leader changes.
    loop
        A shared loop (a `LocalQuorum` runs all its voters on one); the service then does not close it.
    snapshot_provider
        Supplies the record values of a snapshot (see `kraftlake.service.snapshots.SnapshotProvider`); without
        one, snapshots hold every committed data value.
    """

    def __init__(
        self,
        config: NodeConfig,
        listeners: list[Listener] | None = None,
        loop: ServiceLoop | None = None,
        snapshot_provider: SnapshotProvider | None = None,
    ) -> None:
        self.config = config
        self._own_loop = loop is None
        self._loop = loop or ServiceLoop(f"kraftlake-raft-{config.node_id}")
        self.runner = NodeRunner(config, listeners, snapshot_provider)
        self.started = False

    @property
    def node_id(self) -> int:
        """This voter's id."""
        return self.config.node_id

    @property
    def service_loop(self) -> ServiceLoop:
        """The loop the node runs on (listeners are called on its thread)."""
        return self._loop

    @property
    def port(self) -> int:
        """The TCP port the node listens on."""
        return self.runner.port

    def bind(self) -> int:
        """Listen (picks the port if it was 0) without starting the node; returns the port."""
        try:
            return self._loop.run(self.runner.bind())
        except BaseException:
            self._close_own_loop()
            raise

    def start(self, voters: dict[int, tuple[str, int]] | None = None) -> RaftService:
        """Open the log and start the node (with the voters' actual endpoints, if they were bound late).

        A start that fails (a refused listener, a log that cannot be opened) leaves no thread behind: the
        service's own loop is closed, as :meth:`stop` would (nobody calls it for a service never started)."""
        try:
            self._loop.run(self.runner.start(voters))
        except BaseException:
            self._close_own_loop()
            raise
        self.started = True
        return self

    def _close_own_loop(self) -> None:
        if self._own_loop:
            self._loop.close()

    def stop(self) -> None:
        """Stop the node (pending appends fail) and, if the loop is the service's own, the loop."""
        if self.started:
            self.started = False
            self._loop.run(self.runner.stop())
        self._close_own_loop()

    def __enter__(self) -> RaftService:
        return self if self.started else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- API -----------------------------------------------------------------------------------------------
    def append(self, records: list[bytes]) -> Future[tuple[int, int]]:
        """Append `records` on this node if it leads.

        Returns
        -------
        concurrent.futures.Future
            Resolved with ``(base offset, last offset)`` once committed; failed with
            `kraftlake.service.errors.NotLeaderError` (carrying the known leader) if this node does not lead
            or loses leadership before the records are written, or with `ServiceStoppedError`.
        """
        future: Future[tuple[int, int]] = Future()
        if not self.started:
            future.set_exception(ServiceStoppedError(f"node {self.node_id} is not running"))
            return future
        values = [bytes(r) for r in records]

        def resolve(outcome: tuple[int, int] | BaseException) -> None:
            if future.done():
                return
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

        self._loop.loop.call_soon_threadsafe(self.runner.append, values, resolve)
        return future

    def read_committed(self, from_offset: int, max_records: int = 10_000) -> list[CommittedEntry]:
        """Committed entries from `from_offset` on this node (at most `max_records`)."""
        return self._loop.call(lambda: self.runner.read_committed(from_offset, max_records))

    def snapshot_now(self) -> SnapshotId | None:
        """Write a snapshot of what this node has applied, as the snapshot policy would (None: nothing new)."""
        return self._loop.call(self.runner.snapshot_now)

    def describe(self) -> QuorumDescription:
        """The `kafka-metadata-quorum describe` fields as this node knows them."""
        return self._loop.call(self.runner.describe)

    @property
    def leader_id(self) -> int | None:
        """The leader this node knows of."""
        node = self.runner.node
        return None if node is None else node.leader_id

    @property
    def epoch(self) -> int:
        """The node's current epoch."""
        node = self.runner.node
        return -1 if node is None else node.epoch

    @property
    def is_leader(self) -> bool:
        """Whether this node leads its epoch."""
        node = self.runner.node
        return bool(self.started and node is not None and node.is_leader)

    @property
    def leader_ready(self) -> bool:
        """Whether this node leads and has committed in its epoch (its LeaderChange is committed)."""
        node = self.runner.node
        if not self.started or node is None:
            return False
        state = node.quorum.state
        return isinstance(state, LeaderState) and state.high_watermark is not None

    @property
    def high_watermark(self) -> int:
        """The highest committed end offset this node knows."""
        node = self.runner.node
        return 0 if node is None else node.high_watermark


class LocalQuorum:
    """N voters in this process, each with its own data dir (``<data_dir>/node-<id>``) and 127.0.0.1 port.

    Parameters
    ----------
    voters
        How many voters (ids 1..N).
    data_dir
        Parent of the nodes' log dirs.
    cluster_id
        The quorum's cluster id.
    ports
        Fixed ports per node (default: free ports picked at bind time, kept across restarts).
    snapshot_providers
        Per node id, the snapshot provider of its service.
    node_options
        Further `NodeConfig` fields for every node (``snapshot_max_bytes``, ``segment_bytes``, ...).
    on_service
        Called with each `RaftService` built (at start and on every restart) before it starts, so that a
        state machine above it (`kraftlake.service.controller_host.ControllerHost`) can append through it.
    listener_security
        Every voter's listener security (``--listener-config``: TLS, SASL, authorizer); PLAINTEXT by default.
    security
        How the voters connect to each other (``--command-config``: Kafka's client properties); None is
        PLAINTEXT.
    """

    def __init__(
        self,
        voters: int,
        data_dir: str | Path,
        cluster_id: str,
        *,
        fsync: bool = True,
        quorum: QuorumConfig | None = None,
        ports: dict[int, int] | None = None,
        listeners: dict[int, list[Listener]] | None = None,
        snapshot_providers: dict[int, SnapshotProvider] | None = None,
        node_options: dict[str, Any] | None = None,
        on_service: Callable[[RaftService], None] | None = None,
        listener_security: ListenerSecurity | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        if voters < 1:
            raise ServiceError("a quorum needs at least one voter")
        self.data_dir = Path(data_dir)
        self.cluster_id = cluster_id
        self.fsync = fsync
        self.quorum = quorum if quorum is not None else QuorumConfig(voters=frozenset(range(1, voters + 1)))
        self.loop = ServiceLoop("kraftlake-quorum")
        self.ports = dict(ports or {})
        self.listeners = listeners or {}
        self.snapshot_providers = snapshot_providers or {}
        self.node_options = dict(node_options or {})
        if listener_security is not None:
            self.node_options["listener_security"] = listener_security
        if security is not None:
            self.node_options["peer_security"] = security
        self.on_service = on_service
        self.endpoints: dict[int, tuple[str, int]] = {
            i: (HOST, self.ports.get(i, 0)) for i in range(1, voters + 1)
        }
        self.services: dict[int, RaftService] = {}
        self.directory_ids: dict[int, str] = {}
        """Each voter's directory id (its ``meta.properties``), written before the first start and given to
        every voter: a Vote or Fetch in a voter's name must carry it."""

    def _make(self, node_id: int) -> RaftService:
        config = NodeConfig(
            node_id,
            dict(self.endpoints),
            self.data_dir / f"node-{node_id}",
            self.cluster_id,
            fsync=self.fsync,
            quorum=self.quorum,
            **{"voter_directory_ids": dict(self.directory_ids), **self.node_options},
        )
        service = RaftService(
            config,
            self.listeners.get(node_id),
            loop=self.loop,
            snapshot_provider=self.snapshot_providers.get(node_id),
        )
        if self.on_service is not None:
            self.on_service(service)
        return service

    @property
    def append_secret_path(self) -> Path:
        """The append credential its voters share (each holds a copy in its data dir): give it to `QuorumClient`."""
        return self.data_dir / f"node-{min(self.endpoints)}" / APPEND_SECRET_FILE

    def start(self) -> LocalQuorum:
        """Bind every voter, then start them all (the first start writes one append credential for all)."""
        shared = ensure_append_secret(self.append_secret_path.parent)
        for i in self.endpoints:
            ensure_append_secret(self.data_dir / f"node-{i}", shared)
            self.directory_ids[i] = ensure_directory_id(self.data_dir / f"node-{i}", self.cluster_id, i)
        fresh = {i: self._make(i) for i in self.endpoints}
        for i, service in fresh.items():
            self.endpoints[i] = (HOST, service.bind())
        for service in fresh.values():
            service.start(dict(self.endpoints))
        self.services = fresh
        return self

    def stop_node(self, node_id: int) -> None:
        """Stop one voter (its data dir stays)."""
        self.services[node_id].stop()

    def restart_node(self, node_id: int) -> RaftService:
        """Start a stopped voter again on its port, from its data dir."""
        service = self._make(node_id)
        service.bind()
        service.start(dict(self.endpoints))
        self.services[node_id] = service
        return service

    def leader(self) -> RaftService | None:
        """The running voter that leads the highest epoch, if any."""
        leaders = [s for s in self.services.values() if s.is_leader]
        return max(leaders, key=lambda s: s.epoch) if leaders else None

    def wait_for_leader(self, timeout: float = 15.0, exclude: int | None = None) -> RaftService:
        """Block until a voter (other than `exclude`) leads and has committed in its epoch."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.leader()
            if leader is not None and leader.node_id != exclude and leader.leader_ready:
                return leader
            time.sleep(0.02)
        raise ServiceError(f"no leader within {timeout} s")

    def append(self, records: list[bytes]) -> Future[tuple[int, int]]:
        """Append through the current leader (a failed future with NotLeaderError if there is none)."""
        leader = self.leader() or next(iter(s for s in self.services.values() if s.started), None)
        if leader is None:
            raise ServiceStoppedError("no voter is running")
        return leader.append(records)

    def stop(self) -> None:
        """Stop every voter and the loop."""
        for service in self.services.values():
            try:
                service.stop()
            except Exception:  # stop the others regardless, but say what failed
                log.exception("stopping node %d failed", service.node_id)
        self.loop.close()

    def __enter__(self) -> LocalQuorum:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
