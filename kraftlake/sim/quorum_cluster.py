"""The cluster simulator against quorum controllers on a real raft quorum (`kraftlake simulate` through it).

`QuorumClusterSimulator` is `kraftlake.sim.cluster.ClusterSimulator` whose controllers are the
`ControllerHost`s of a `ControllerQuorum` (N voters in this process over 127.0.0.1, each with its own log
directory ``<data dir>/node-<id>``): the active controller is the one on the raft leader, the others are
standbys replaying what the quorum commits, snapshots are written by the service's policy (Kafka's 20 MiB
of records between snapshots) from the committed image. The simulator's actions run on the hosts' loop
thread (a controller is only ever touched from there), a few events per call so the raft work of the loop
interleaves; the driver thread throttles when too much is uncommitted. A failover event kills the active
controller's node (after what it appended is committed), waits for a standby to take over (no bootstrap)
and restarts the old node, which loads its snapshot and replays the tail.

`simulate_on_quorum(config, data_dir, progress)` runs one simulation and returns a `QuorumSimResult`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kraftlake.controller import ConfigChange, ConfigOp, ResourceType
from kraftlake.controller.errors import NotActiveError
from kraftlake.image import MetadataImage
from kraftlake.logformat import METADATA_PARTITION_DIR
from kraftlake.raft.config import QuorumConfig
from kraftlake.service.controller_host import ControllerHost, ControllerQuorum
from kraftlake.service.errors import NotControllerError, NotLeaderError, ServiceError
from kraftlake.service.snapshots import DEFAULT_SNAPSHOT_MAX_BYTES
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator, SimSummary, replicas_per_broker

R = TypeVar("R")

DEFAULT_CLUSTER_ID = "kraftlake-simulated0"


class QuorumClusterSimulator(ClusterSimulator):
    """A `ClusterSimulator` whose active and standby controllers are the hosts of `quorum` (started).

    Parameters
    ----------
    config
        The simulation; ``config.controller`` must be the hosts' controller configuration.
    quorum
        A started `ControllerQuorum`; its hosts' clocks are set to the simulated clock.
    events_per_call
        Events run per hand-over to the loop thread (larger: less overhead, longer raft pauses).
    max_uncommitted
        Records the active controller may have appended beyond what it has seen committed before the driver
        waits.
    """

    def __init__(
        self,
        config: ClusterSimConfig,
        quorum: ControllerQuorum,
        *,
        events_per_call: int = 20,
        max_uncommitted: int = 50_000,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(config)  # its in-memory log and controllers are replaced by the quorum's below
        self.quorum = quorum
        self.events_per_call = max(1, events_per_call)
        self.max_uncommitted = max_uncommitted
        self.timeout = timeout
        self.failover_seconds: list[float] = []
        self._failover_requested = False
        for host in quorum.hosts.values():
            host.clock = lambda: self.now_ms
        self._host: ControllerHost = self._bind(quorum.wait_active(timeout))

    # -- the quorum -----------------------------------------------------------------------------------------
    @property
    def host(self) -> ControllerHost:
        """The host of the active controller the simulator drives (another one after a failover)."""
        return self._host

    def _bind(self, host: ControllerHost) -> ControllerHost:
        self._host = host
        self.active = host.controller
        self.epoch = host.controller.epoch
        others = [h.controller for h in self.quorum.running() if h is not host]
        self.controllers = [host.controller, *others]
        return host

    def _on_loop(self, fn: Callable[[], R]) -> R:
        """Run `fn` on the loop thread against the active controller (rebinding after a lost leadership)."""
        while True:
            host = self._host
            if not host.active or host.controller is not self.active:
                host = self._bind(self.quorum.wait_active(self.timeout))

            def run(_: Any, host: ControllerHost = host) -> tuple[bool, Any]:
                if not host.active or host.controller is not self.active:
                    return False, None
                return True, fn()

            ran: bool
            value: R
            try:
                ran, value = host.call(run).result(self.timeout)
            except (NotActiveError, NotControllerError, NotLeaderError):
                # leadership lost in the middle of an action: what it appended may be lost; the simulated
                # brokers notice (stale epochs) and register again, as after a real failover race
                self.summary.errors["not_active"] += 1
                continue
            if ran:
                return value

    def _run(self, result: Any, kind: str) -> Any:
        err = result.error
        if err is not None and not err.ok:
            self.summary.errors[f"{kind}:{err.error.name}"] += 1
        rules = self._history_rules()
        self._host.execute(result)
        rules.check([rec for rec, _ in result.records], self.active.image)
        return result.response

    def _begin_epoch(self) -> None:
        self._bind(self.quorum.wait_active(self.timeout))

    def failover(self) -> None:
        """Asked for by an event on the loop thread; done by the driver thread after the current call."""
        if len(self.quorum.hosts) > 1:
            self._failover_requested = True

    def _do_failover(self) -> None:
        self._failover_requested = False
        old = self._host
        self._wait_committed()
        killed = time.monotonic()
        self.quorum.kill(old.node_id)
        new = self.quorum.wait_active(self.timeout, exclude=old.node_id)
        self.failover_seconds.append(time.monotonic() - killed)
        self.quorum.restart(old.node_id)
        self._bind(new)
        self.summary.failovers += 1

    def _throttle(self) -> None:
        """Wait until at most `max_uncommitted` of the active controller's records are not yet applied."""
        self._wait_committed(self.max_uncommitted, every_host=False)

    def _wait_committed(self, uncommitted: int = 0, every_host: bool = True) -> None:
        """Wait until the active controller has at most `uncommitted` records not applied (by its own host, or
        by every running host).

        What a controller appended is only sure to commit while it stays active: when raft leadership moves
        (a stalled loop lets the followers' fetch timeout expire), its uncommitted records are truncated and
        the offsets it reached will be written by the next leader with other records, or never. So the target
        is re-read from whichever controller is active.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            host, controller = self._host, self.active
            target = controller.next_offset - 1 - uncommitted
            done = self.quorum.applied(target, 0.1) if every_host else host.wait_applied(target, 0.1)
            if done:
                return
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"the active controller's records up to offset {target} were not applied "
                    f"within {self.timeout} s: {self.quorum.applied_offsets()}"
                )
            if not host.active or host.controller is not controller:
                self._on_loop(lambda: None)  # binds the controller active now

    # -- running --------------------------------------------------------------------------------------------
    def setup(self) -> None:
        """`ClusterSimulator.setup`, each action a call of its own on the loop thread."""
        self._begin_epoch()
        change = ConfigChange(
            ResourceType.BROKER, "", "min.insync.replicas", ConfigOp.SET, str(self.config.min_insync_replicas)
        )
        self._on_loop(lambda: self._run(self.active.handle_incremental_alter_configs([change]), "config"))
        for b in list(self.brokers.values()):
            self._on_loop(lambda b=b: self._register(b))  # type: ignore[misc]
        end = self.now_ms + self.config.heartbeat_interval_ms + self.config.tick_ms
        while self.now_ms < end:
            self._on_loop(self._tick)
        for i in range(self.config.topics):
            self._on_loop(lambda: self._create_topic(self.config.partitions_per_topic))
            self._throttle()
            if self.setup_progress is not None:
                self.setup_progress(i + 1)

    def _steps(self, count: int) -> None:
        """Up to `count` events (fewer when one asks for a failover); `summary.events` counts those done (a call
        that fails when leadership is lost is retried, and only its finished events count)."""
        every = self.config.check_every
        for _ in range(count):
            self.step()
            if every > 0 and self.summary.events % every == 0:
                self.check_invariants()
            if self.after_event is not None:
                self.after_event(self)
            if self._failover_requested:
                return

    def run(self, progress: Callable[[int], None] | None = None) -> SimSummary:
        """Setup, then ``events`` events, then wait for everything to commit and compare every host's image."""
        start = time.perf_counter()
        self.setup()
        self._on_loop(self.check_invariants)
        self.summary.setup_seconds = time.perf_counter() - start
        self.summary.setup_end_offset = self._on_loop(lambda: self.active.next_offset)
        total = self.config.events
        while (done := self.summary.events) < total:
            n = min(self.events_per_call, total - done)
            self._on_loop(lambda: self._steps(n))  # noqa: B023 - called at once
            if progress is not None:
                progress(self.summary.events)
            if self._failover_requested:
                self._do_failover()
            self._throttle()
        self._on_loop(self.check_invariants)
        self._wait_committed()
        self._bind(self._host)  # a standby may have loaded a snapshot into a new controller
        self._on_loop(self.check_standby)
        self.summary.seconds = time.perf_counter() - start
        return self.summary

    @property
    def image(self) -> MetadataImage:
        return self.active.image


def default_fetch_timeout_ms(brokers: int, partitions: int, replication_factor: int) -> int:
    """The in-process quorum's fetch timeout: Kafka's 2 s, or more when a broker failure's records (one per
    replica it holds, replayed by the leader and both followers on the one loop thread) take longer than that
    to commit. Too short a timeout ends in storms of elections: a broker's fencing stalls the loop past the
    timeout, the followers elect a new leader, the fencing's records are lost, and the next tick tries again."""
    return max(2000, round(replicas_per_broker(brokers, partitions, replication_factor) / 6))


def sim_quorum_config(
    config: ClusterSimConfig, voters: int = 3, fetch_timeout_ms: int | None = None
) -> QuorumConfig:
    """Kafka's quorum defaults, with the fetch timeout for the simulated cluster's size (or `fetch_timeout_ms`)."""
    timeout = fetch_timeout_ms or default_fetch_timeout_ms(
        config.brokers, config.topics * config.partitions_per_topic, config.replication_factor
    )
    return QuorumConfig(voters=frozenset(range(1, voters + 1)), fetch_timeout_ms=timeout)


@dataclass
class QuorumSimResult:
    """What `simulate_on_quorum` did and where the logs are."""

    summary: SimSummary
    image: MetadataImage
    data_dir: Path
    node_dirs: dict[int, Path]
    leader_id: int
    log_end_offset: int
    records_by_type: Counter[str]
    batches: int
    snapshots: dict[int, list[Path]]
    segments: dict[int, list[Path]]
    failover_seconds: list[float] = field(default_factory=list)
    seconds: float = 0.0
    leader_epoch: int = 0

    @property
    def records_appended(self) -> int:
        return sum(self.records_by_type.values())

    @property
    def records_lost(self) -> int:
        """Records appended by a controller whose raft leadership moved before they committed (truncated):
        what was appended beyond the log, less the log's LeaderChange records (at most one an epoch)."""
        return max(0, self.records_appended - (self.log_end_offset - self.leader_epoch))

    @property
    def log_dir(self) -> Path:
        """The leader's ``__cluster_metadata-0`` directory."""
        return self.node_dirs[self.leader_id] / METADATA_PARTITION_DIR


def simulate_on_quorum(
    config: ClusterSimConfig,
    data_dir: str | Path,
    progress: Callable[[int], None] | None = None,
    *,
    voters: int = 3,
    cluster_id: str = DEFAULT_CLUSTER_ID,
    snapshot_bytes: int = DEFAULT_SNAPSHOT_MAX_BYTES,
    segment_bytes: int | None = None,
    fsync: bool = True,
    quorum: QuorumConfig | None = None,
    events_per_call: int = 20,
    setup_progress: Callable[[int], None] | None = None,
) -> QuorumSimResult:
    """Run `config` against `voters` controllers on a local raft quorum writing under `data_dir`.

    Each voter's log directory is ``<data_dir>/node-<id>`` (``meta.properties``, ``__cluster_metadata-0``
    with segments, snapshots, ``quorum-state``); every one holds the same committed log. `progress` is
    called with the number of events done, `setup_progress` with the number of initial topics created.
    Without `quorum`, Kafka's defaults with the fetch timeout for the cluster's size (`sim_quorum_config`).
    """
    data = Path(data_dir)
    options: dict[str, Any] = {"snapshot_max_bytes": snapshot_bytes}
    if segment_bytes is not None:
        options["segment_bytes"] = segment_bytes
    started = time.perf_counter()
    cq = ControllerQuorum(
        voters,
        data,
        cluster_id,
        config=config.controller,
        seed=config.seed,
        fsync=fsync,
        quorum=quorum or sim_quorum_config(config, voters),
        node_options=options,
    )
    cq.start()
    try:
        sim = QuorumClusterSimulator(config, cq, events_per_call=events_per_call)
        sim.setup_progress = setup_progress
        summary = sim.run(progress)
        host = sim.host
        image = sim.image
        end = host.call(lambda c: c.next_offset).result(30)
        records: Counter[str] = Counter()
        batches = 0
        for h in cq.hosts.values():
            records.update(h.stats.records_appended)
            batches += h.stats.batches_appended
        leader = host.node_id
        leader_epoch = host.service.runner.node.epoch if host.service.runner.node is not None else 0
    finally:
        cq.stop()
    node_dirs = {i: cq.node_dir(i) for i in cq.hosts}
    parts = {i: d / METADATA_PARTITION_DIR for i, d in node_dirs.items()}
    return QuorumSimResult(
        summary,
        image,
        data,
        node_dirs,
        leader,
        end,
        records,
        batches,
        {i: sorted(p.glob("*.checkpoint")) for i, p in parts.items()},
        {i: sorted(p.glob("*.log")) for i, p in parts.items()},
        sim.failover_seconds,
        time.perf_counter() - started,
        leader_epoch,
    )
