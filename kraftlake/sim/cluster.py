"""A seeded, deterministic cluster simulator that drives the quorum controller as a real cluster would.

Brokers register and heartbeat every ``heartbeat_interval_ms`` of simulated time; the controller fences the
silent ones after the session timeout. Each *event* advances the clock and performs one random action, chosen
by configurable weights: ISR shrink or expand from simulated replica lag (AlterPartition from the leader),
broker crash (it stops heartbeating; it comes back later after an unclean shutdown), controlled shutdown and
restart, a rolling restart of every broker, topic creation and deletion, partition creation, reassignment,
config changes, producer id blocks, and failover to a standby controller. The same seed gives the same log.

It runs against an in-process controller with either the in-memory log (fast, for tests) or
``LocalMetadataLog`` (a real log directory). After every ``check_every`` events the image invariants are
checked: ISR, ELR and adding/removing replicas within replicas, leader in the ISR or -1 and an unfenced
broker, no replica twice, directories parallel to replicas, ELR disjoint from the ISR, an ISR never empty
without ELR. The standby controller replays committed records and must hold the same image.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kraftlake.controller import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ConfigChange,
    ConfigOp,
    ControllerConfig,
    CreatableTopic,
    Listener,
    MemoryMetadataLog,
    PartitionIsrUpdate,
    QuorumController,
    ResourceType,
    random_uuid,
)
from kraftlake.image import MetadataImage
from kraftlake.image.model import NO_LEADER
from kraftlake.sim.errors import InvariantViolation, SimError
from kraftlake.sim.history_rules import HistoryRules

DEFAULT_WEIGHTS: dict[str, float] = {
    # a lagging replica catches up faster than in-sync ones fall behind: a cluster's ISRs stay (mostly) full
    "isr_shrink": 25.0,
    "isr_expand": 35.0,
    "crash": 1.0,
    "restart": 3.0,
    "controlled_shutdown": 1.0,
    "rolling_restart": 0.05,
    "create_topic": 2.0,
    "delete_topic": 1.0,
    "create_partitions": 0.5,
    "reassign": 1.0,
    "config_change": 3.0,
    "producer_ids": 1.0,
    "failover": 0.1,
    "idle": 5.0,
}

T = TypeVar("T", bound=Hashable)


class RandomAccessSet(Generic[T]):
    """A set with O(1) add, remove and random pick (a list, and each element's position in it): removal moves
    the last element into the gap, so a seeded pick is deterministic."""

    def __init__(self) -> None:
        self._items: list[T] = []
        self._pos: dict[T, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> T:
        return self._items[i]

    def add(self, item: T) -> None:
        if item not in self._pos:
            self._pos[item] = len(self._items)
            self._items.append(item)

    def remove(self, item: T) -> None:
        i = self._pos.pop(item)
        last = self._items.pop()
        if last != item:
            self._items[i] = last
            self._pos[last] = i

    def pop_random(self, rng: random.Random) -> T | None:
        """Remove and return a random element (None when empty)."""
        if not self._items:
            return None
        item = self._items[rng.randrange(len(self._items))]
        self.remove(item)
        return item


BROKER_EVENTS = ("crash", "controlled_shutdown", "rolling_restart", "failover")
TOPIC_EVENTS = ("create_topic", "delete_topic", "create_partitions")
REFERENCE_REPLICAS_PER_BROKER = 100
REFERENCE_PARTITIONS = 10_000


def replicas_per_broker(brokers: int, partitions: int, replication_factor: int) -> float:
    """What a broker's failure costs in records: one per replica it holds."""
    return partitions * replication_factor / max(brokers, 1)


def scaled_weights(brokers: int, partitions: int, replication_factor: int) -> dict[str, float]:
    """``DEFAULT_WEIGHTS`` for a cluster of this size: what it costs in records keeps the log's mix realistic.

    A broker crash or controlled shutdown writes a record per replica the broker holds (out of every ISR,
    then back as it catches up): about 120k records at 2M partitions on 100 brokers, where an ISR change is
    one. Their weights fall by ``(100 / replicas per broker) ** 1.5`` beyond 100 replicas per broker, a
    rolling restart's (every broker) by a further ``10 / brokers``, and topic creation and deletion by
    ``10,000 / partitions`` (a 100-partition topic is 101 records). Small clusters keep ``DEFAULT_WEIGHTS``.
    """
    weights = dict(DEFAULT_WEIGHTS)
    per_broker = replicas_per_broker(brokers, partitions, replication_factor)
    broker_scale = min(1.0, REFERENCE_REPLICAS_PER_BROKER / max(per_broker, 1.0)) ** 1.5
    for kind in BROKER_EVENTS:
        weights[kind] *= broker_scale
    weights["rolling_restart"] *= min(1.0, 10 / max(brokers, 1))
    for kind in TOPIC_EVENTS:
        weights[kind] *= min(1.0, REFERENCE_PARTITIONS / max(partitions, 1))
    return weights


@dataclass(frozen=True)
class ClusterSimConfig:
    """Sizes, rates and seeds of a simulated cluster.

    ``weights`` are the relative rates of the event kinds (None: ``scaled_weights`` for the cluster's size,
    which are ``DEFAULT_WEIGHTS`` for small clusters); ``tick_ms`` is the
    simulated time between events; ``max_down_fraction`` caps how many brokers may be down at once;
    ``catch_up_per_tick`` is how many of a restarted broker's replicas rejoin their ISRs per tick.
    """

    brokers: int = 5
    topics: int = 10
    partitions_per_topic: int = 3
    replication_factor: int = 3
    events: int = 1000
    seed: int = 0
    tick_ms: int = 100
    heartbeat_interval_ms: int = 2000
    max_down_fraction: float = 0.2
    catch_up_per_tick: int = 2000
    min_insync_replicas: int = 2
    check_every: int = 1
    standby: bool = True
    weights: dict[str, float] | None = None
    controller: ControllerConfig = field(default_factory=ControllerConfig)

    def __post_init__(self) -> None:
        """Refuse sizes no cluster has (Kafka refuses a replication factor above the broker count with
        INVALID_REPLICATION_FACTOR rather than lowering it).

        Raises
        ------
        SimError
        """
        for name, low in (
            ("brokers", 1),
            ("topics", 0),
            ("partitions_per_topic", 1),
            ("replication_factor", 1),
            ("events", 0),
            ("tick_ms", 1),
            ("min_insync_replicas", 1),
            ("check_every", 0),
        ):
            value = getattr(self, name)
            if value < low:
                raise SimError(f"{name} is {value}: at least {low}")
        if self.replication_factor > self.brokers:
            raise SimError(
                f"replication factor {self.replication_factor} is above the broker count {self.brokers}"
            )


@dataclass
class SimBroker:
    """A simulated broker process."""

    id: int
    incarnation: str
    log_dir: str
    alive: bool = False
    epoch: int = -1
    last_clean_epoch: int = -1  # the epoch it shut down cleanly in (-1 after a crash)
    next_heartbeat_ms: int = 0
    shutting_down: bool = False
    restart_at_ms: int = -1
    rolled: bool = False  # a rolling restart has shut it down and waits for it to be back


@dataclass
class SimSummary:
    """What a run did."""

    events: int = 0
    event_counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    failovers: int = 0
    invariant_checks: int = 0
    seconds: float = 0.0
    setup_seconds: float = 0.0
    setup_cpu_seconds: float = 0.0
    setup_end_offset: int = 0
    events_cpu_seconds: float = 0.0


class ClusterSimulator:
    """Runs a simulated cluster against one active and (optionally) one standby controller.

    Parameters
    ----------
    config : ClusterSimConfig
    log : appender, optional
        ``MemoryMetadataLog`` (default) or ``LocalMetadataLog``; it must have ``append``, ``end_offset`` and
        ``listeners`` (committed records go to the standby through them).

    Hooks (None by default; set before ``run``; both run on the thread that drives the simulation, between
    commands, so they may read the controllers' images):

    after_event : callable(simulator) -> None
        Called after each of the ``events`` events, once its records are appended (e.g. to snapshot the
        log).
    setup_progress : callable(int) -> None
        Called during ``setup`` after each initial topic is created, with the number created so far.
    """

    def __init__(self, config: ClusterSimConfig, log: Any | None = None) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.now_ms = 1_700_000_000_000
        self.log = log if log is not None else MemoryMetadataLog(clock=lambda: self.now_ms)
        if hasattr(self.log, "clock"):
            self.log.clock = lambda: self.now_ms
        ccfg = config.controller
        self.controllers = [QuorumController(ccfg, node_id=1, seed=config.seed)]
        if config.standby:
            self.controllers.append(QuorumController(ccfg, node_id=2, seed=config.seed + 1))
        self.active = self.controllers[0]
        self.epoch = 1
        self.log.listeners.append(self._on_commit)
        self.brokers = {
            b: SimBroker(b, random_uuid(self.rng), random_uuid(self.rng)) for b in range(config.brokers)
        }
        self.topic_seq = 0
        # the names of live topics, for O(1) random picks (sorting the image's names per event was O(n log n))
        self._names: RandomAccessSet[str] = RandomAccessSet()
        # replicas out of their ISR that an ISR expansion may bring back: (topic id, partition, broker)
        self._lagging: RandomAccessSet[tuple[str, int, int]] = RandomAccessSet()
        # brokers registered again whose replicas have not all rejoined their ISRs: broker -> the partitions
        # left to catch up (None until the broker is unfenced)
        self._catching_up: dict[int, list[tuple[str, int]] | None] = {}
        self.weights = (
            config.weights
            if config.weights is not None
            else scaled_weights(
                config.brokers, config.topics * config.partitions_per_topic, config.replication_factor
            )
        )
        self._kinds = list(self.weights)
        self._cum_weights = list(itertools.accumulate(self.weights[k] for k in self._kinds))
        self.summary = SimSummary()
        # the history's rules (topic ids unique, epochs never back), checked on every command's records; built
        # from the active controller's image at the first command, rebased at each new controller epoch
        self.history_rules: HistoryRules | None = None
        self._rules_epoch = -1
        self._rolling: list[int] = []
        self.after_event: Callable[[ClusterSimulator], None] | None = None
        self.setup_progress: Callable[[int], None] | None = None

    # -- plumbing -------------------------------------------------------------------------------------------

    def _on_commit(self, records: Any) -> None:
        for c in self.controllers:
            c.handle_commit(records)

    def _begin_epoch(self) -> None:
        if hasattr(self.log, "begin_epoch"):
            self.log.begin_epoch(self.epoch)
        self.active.activate(self.epoch, self.log, self.now_ms)

    @property
    def image(self) -> MetadataImage:
        return self.active.image

    def _run(self, result: Any, kind: str) -> Any:
        err = result.error
        if err is not None and not err.ok:
            self.summary.errors[f"{kind}:{err.error.name}"] += 1
        rules = self._history_rules()
        self.active.execute(result)
        rules.check([rec for rec, _ in result.records], self.active.image)
        return result.response

    def _history_rules(self) -> HistoryRules:
        """The rules, up to date with the active controller's image before its next command."""
        rules = self.history_rules
        if rules is None:
            rules = self.history_rules = HistoryRules(self.active.image)
        elif self._rules_epoch != self.active.epoch:
            # what an earlier term appended and did not commit is gone: the history goes on from this image
            rules.rebase(self.active.image)
        self._rules_epoch = self.active.epoch
        return rules

    # -- brokers --------------------------------------------------------------------------------------------

    def _register(self, b: SimBroker) -> None:
        req = BrokerRegistrationRequest(
            b.id,
            b.incarnation,
            (Listener("PLAINTEXT", f"broker-{b.id}", 9092),),
            rack=None,
            log_dirs=(b.log_dir,),
            previous_broker_epoch=b.last_clean_epoch,
        )
        resp = self._run(self.active.handle_register_broker(req, self.now_ms), "register")
        if resp.error.ok:
            b.epoch = resp.data["broker_epoch"]
            b.alive = True
            b.shutting_down = False
            b.next_heartbeat_ms = self.now_ms
            self._catching_up[b.id] = None
        else:
            b.restart_at_ms = self.now_ms + self.config.heartbeat_interval_ms

    def _heartbeat(self, b: SimBroker) -> None:
        # a live broker's metadata offset trails the log end by a little
        offset = self.active.next_offset - 1 - (self.rng.randrange(3) if self.rng.random() < 0.2 else 0)
        req = BrokerHeartbeatRequest(b.id, b.epoch, offset, want_shutdown=b.shutting_down)
        resp = self._run(self.active.handle_heartbeat(req, self.now_ms), "heartbeat")
        if resp.error.ok and resp.data.get("should_shut_down"):
            b.alive = False
            b.last_clean_epoch = b.epoch
            b.shutting_down = False
            b.restart_at_ms = self.now_ms + self.rng.randrange(1, 10) * self.config.heartbeat_interval_ms
        elif not resp.error.ok:
            # fenced with a stale epoch (e.g. after a failover race): register again
            b.alive = False
            b.last_clean_epoch = -1
            b.restart_at_ms = self.now_ms
        b.next_heartbeat_ms = self.now_ms + self.config.heartbeat_interval_ms

    def _tick(self) -> None:
        self.now_ms += self.config.tick_ms
        for b in self.brokers.values():
            if b.alive and b.next_heartbeat_ms <= self.now_ms:
                self._heartbeat(b)
            elif not b.alive and 0 <= b.restart_at_ms <= self.now_ms and b.id not in self._rolling[:1]:
                b.restart_at_ms = -1
                b.incarnation = random_uuid(self.rng)
                self._register(b)
        while (result := self.active.handle_fence_stale_broker(self.now_ms)) is not None:
            self._run(result, "fence")
        if self._catching_up:
            self._catch_up()

    def _settle(self, ms: int) -> None:
        end = self.now_ms + ms
        while self.now_ms < end:
            self._tick()

    # -- setup ----------------------------------------------------------------------------------------------

    def setup(self) -> None:
        """Bootstrap, register every broker, let them unfence, then create the initial topics."""
        self._begin_epoch()
        self._run(
            self.active.handle_incremental_alter_configs(
                [
                    ConfigChange(
                        ResourceType.BROKER,
                        "",
                        "min.insync.replicas",
                        ConfigOp.SET,
                        str(self.config.min_insync_replicas),
                    ),
                ]
            ),
            "config",
        )
        for b in self.brokers.values():
            self._register(b)
        self._settle(self.config.heartbeat_interval_ms + self.config.tick_ms)
        for i in range(self.config.topics):
            self._create_topic(self.config.partitions_per_topic)
            if self.setup_progress is not None:
                self.setup_progress(i + 1)

    def _create_topic(self, partitions: int) -> None:
        name = f"topic-{self.topic_seq:06d}"
        self.topic_seq += 1
        rf = min(self.config.replication_factor, max(1, self._usable_count()))
        resp = self._run(
            self.active.handle_create_topics([CreatableTopic(name, partitions, rf)]), "create_topic"
        )
        if resp.by_name()[name].error.ok:
            self._names.add(name)

    def _usable_count(self) -> int:
        return sum(1 for r in self.image.brokers.values() if not r.fenced and not r.in_controlled_shutdown)

    # -- replicas catching up -------------------------------------------------------------------------------

    def _can_rejoin(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        reg = self.image.brokers.get(broker_id)
        return (
            b is not None
            and b.alive
            and not b.shutting_down
            and reg is not None
            and not reg.fenced
            and not reg.in_controlled_shutdown
        )

    def _catch_up(self) -> None:
        """A broker back after a restart fetches until its replicas are in sync; their leaders add it to the ISRs,
        ``catch_up_per_tick`` partitions a tick, one AlterPartition per leader (what brings a cluster back to
        fully replicated after a broker's fencing took it out of every ISR)."""
        img = self.image
        budget = self.config.catch_up_per_tick
        for broker_id in list(self._catching_up):
            if budget <= 0:
                return
            todo = self._catching_up[broker_id]
            if not self._can_rejoin(broker_id):
                b = self.brokers.get(broker_id)
                if b is None or not b.alive:
                    del self._catching_up[broker_id]  # down again: it starts over when it registers
                continue
            if todo is None:
                todo = self._catching_up[broker_id] = [
                    (t.id, pid)
                    for t, pid, p in self.active.broker_partitions.partitions(broker_id, img)
                    if broker_id not in p.isr
                ]
                todo.reverse()  # popped from the end: index order
            by_leader: dict[int, list[PartitionIsrUpdate]] = {}
            while todo and budget > 0:
                budget -= 1
                topic_id, pid = todo.pop()
                update = self._isr_addition(topic_id, pid, broker_id)
                if update is not None:
                    by_leader.setdefault(update[0], []).append(update[1])
            if not todo:
                del self._catching_up[broker_id]
            for leader_id, updates in by_leader.items():
                leader = self.brokers[leader_id]
                self._alter_partition(
                    AlterPartitionRequest(leader.id, leader.epoch, tuple(updates)), "catch_up"
                )

    def _isr_addition(self, topic_id: str, pid: int, broker_id: int) -> tuple[int, PartitionIsrUpdate] | None:
        """The leader and its AlterPartition entry that adds `broker_id` to the partition's ISR, if it can."""
        t = self.image.topics_by_id.get(topic_id)
        p = t.partitions.get(pid) if t is not None else None
        if p is None or broker_id not in p.replicas or broker_id in p.isr or p.leader == NO_LEADER:
            return None
        leader = self.brokers.get(p.leader)
        if leader is None or not leader.alive or leader.shutting_down:
            return None
        return p.leader, PartitionIsrUpdate(
            topic_id, pid, p.leader_epoch, p.partition_epoch, (*p.isr, broker_id), 0
        )

    # -- events ---------------------------------------------------------------------------------------------

    def _random_partition(self) -> tuple[Any, int, Any] | None:
        img = self.image
        if not len(img.topics_by_id):
            return None
        names = self._topic_names()
        if not names:
            return None
        t = img.topics_by_name.get(names[self.rng.randrange(len(names))])
        if t is None or not t.partitions:
            return None
        pid = self.rng.randrange(len(t.partitions))
        return t, pid, t.partitions.get(pid)

    def _topic_names(self) -> RandomAccessSet[str]:
        """The live topics' names, in creation order with deletions filled from the end (do not mutate)."""
        return self._names

    def _shrink_isr(self) -> None:
        """ISR churn from replica lag: a leader drops a random follower of a random partition (it is lagging)."""
        found = self._random_partition()
        if found is None:
            return
        t, pid, p = found
        if p is None or p.leader == NO_LEADER:
            return
        leader = self.brokers[p.leader]
        if not leader.alive or leader.shutting_down:
            return
        followers = [r for r in p.isr if r != p.leader]
        if not followers:
            return
        dropped = self.rng.choice(followers)
        new_isr = tuple(r for r in p.isr if r != dropped)
        req = AlterPartitionRequest(
            leader.id,
            leader.epoch,
            (PartitionIsrUpdate(t.id, pid, p.leader_epoch, p.partition_epoch, new_isr, 0),),
        )
        if self._alter_partition(req, "alter_partition"):
            self._lagging.add((t.id, pid, dropped))

    def _expand_isr(self) -> None:
        """A random lagging replica has caught up: its leader adds it back to the ISR."""
        while (key := self._lagging.pop_random(self.rng)) is not None:
            topic_id, pid, broker_id = key
            if not self._can_rejoin(broker_id):
                continue  # a broker that is down catches up in bulk when it is back
            found = self._isr_addition(topic_id, pid, broker_id)
            if found is None:
                continue
            leader = self.brokers[found[0]]
            self._alter_partition(
                AlterPartitionRequest(leader.id, leader.epoch, (found[1],)), "alter_partition"
            )
            return

    def _alter_partition(self, req: AlterPartitionRequest, kind: str) -> bool:
        """Send `req`; count its partitions' errors; whether all were accepted."""
        resp = self._run(self.active.handle_alter_partition(req), kind)
        ok = resp.error.ok
        for err, _ in resp.data.get("partitions", {}).values():
            if not err.ok:
                self.summary.errors[f"{kind}:{err.error.name}"] += 1
                ok = False
        return bool(ok)

    def _down_allowed(self) -> bool:
        down = sum(1 for b in self.brokers.values() if not b.alive or b.shutting_down)
        return down + 1 <= max(1, int(self.config.max_down_fraction * len(self.brokers)))

    def _crash(self) -> None:
        alive = [b for b in self.brokers.values() if b.alive and not b.shutting_down]
        if not alive or not self._down_allowed():
            return
        b = self.rng.choice(alive)
        b.alive = False
        b.last_clean_epoch = -1
        b.restart_at_ms = self.now_ms + self.config.controller.session_timeout_ms + self.rng.randrange(20_000)

    def _controlled_shutdown(self) -> None:
        alive = [b for b in self.brokers.values() if b.alive and not b.shutting_down]
        if not alive or not self._down_allowed():
            return
        b = self.rng.choice(alive)
        b.shutting_down = True
        self._heartbeat(b)

    def _restart(self) -> None:
        down = [b for b in self.brokers.values() if not b.alive and b.restart_at_ms >= 0]
        if down:
            self.rng.choice(down).restart_at_ms = self.now_ms

    def _rolling_restart(self) -> None:
        if not self._rolling:
            self._rolling = sorted(self.brokers)

    def _advance_rolling(self) -> None:
        if not self._rolling:
            return
        b = self.brokers[self._rolling[0]]
        if b.alive and not b.shutting_down and b.epoch >= 0:
            reg = self.image.brokers.get(b.id)
            if reg is not None and not reg.fenced and b.restart_at_ms < 0 and not b.rolled:
                b.shutting_down = True
                b.rolled = True
                self._heartbeat(b)
            elif b.rolled and reg is not None and not reg.fenced:
                b.rolled = False
                self._rolling.pop(0)
        elif not b.alive and b.restart_at_ms > self.now_ms:
            b.restart_at_ms = self.now_ms + self.config.tick_ms  # restart promptly during a roll

    def _delete_topic(self) -> None:
        names = self._topic_names()
        if len(names) > 1:
            name = self.rng.choice(names)
            resp = self._run(self.active.handle_delete_topics([name]), "delete_topic")
            if resp.by_name()[name].error.ok:
                self._names.remove(name)

    def _create_partitions(self) -> None:
        found = self._random_partition()
        if found is not None:
            t = found[0]
            self._run(
                self.active.handle_create_partitions({t.name: len(t.partitions) + 1}), "create_partitions"
            )

    def _reassign(self) -> None:
        found = self._random_partition()
        if found is None:
            return
        t, pid, p = found
        if p is None:
            return
        if p.adding_replicas or p.removing_replicas:
            self._run(self.active.handle_alter_reassignments({(t.name, pid): None}), "reassign")
            return
        usable = [b for b, r in self.image.brokers.items() if not r.fenced and not r.in_controlled_shutdown]
        if len(usable) < len(p.replicas):
            return
        target = self.rng.sample(sorted(usable), len(p.replicas))
        self._run(self.active.handle_alter_reassignments({(t.name, pid): target}), "reassign")
        moved = self.image.topics_by_id[t.id].partitions.get(pid)
        for r in moved.adding_replicas if moved is not None else ():
            self._lagging.add((t.id, pid, r))  # the new replicas join the ISR once they have caught up

    def _config_change(self) -> None:
        names = self._topic_names()
        if not names:
            return
        name = self.rng.choice(names)
        if self.rng.random() < 0.2:
            change = ConfigChange(ResourceType.TOPIC, name, "retention.ms", ConfigOp.DELETE)
        else:
            key, value = self.rng.choice(
                [
                    ("retention.ms", str(self.rng.randrange(3_600_000, 604_800_000))),
                    ("cleanup.policy", self.rng.choice(["delete", "compact", "compact,delete"])),
                    ("max.message.bytes", str(self.rng.randrange(1_000_000, 10_000_000))),
                ]
            )
            change = ConfigChange(ResourceType.TOPIC, name, key, ConfigOp.SET, value)
        self._run(self.active.handle_incremental_alter_configs([change]), "config_change")

    def _producer_ids(self) -> None:
        alive = [b for b in self.brokers.values() if b.alive and b.epoch >= 0]
        if alive:
            b = self.rng.choice(alive)
            self._run(self.active.handle_allocate_producer_ids(b.id, b.epoch), "producer_ids")

    def failover(self) -> None:
        """The active controller resigns; the standby (hot image, no bootstrap) takes over at epoch + 1."""
        if len(self.controllers) < 2:
            return
        old = self.active
        old.deactivate()
        self.controllers.reverse()
        self.active = self.controllers[0]
        self.epoch += 1
        self._begin_epoch()
        self.summary.failovers += 1

    # -- scripted control (deterministic scenarios call these instead of random events) ----------------------

    def command(self, result: Any, kind: str) -> Any:
        """Execute a controller result on the active controller (history rules checked); its response."""
        return self._run(result, kind)

    def settle(self, ms: int) -> None:
        """Let ``ms`` of simulated time pass: heartbeats, fencing, restarts due, replicas catching up."""
        self._settle(ms)

    def alter_isr(
        self, topic: str, partition: int, isr: tuple[int, ...], leader_recovery_state: int = 0
    ) -> bool:
        """The partition's leader asks for ``isr`` (AlterPartition); whether the controller accepted it."""
        t = self.image.topics_by_name[topic]
        p = t.partitions[partition]
        leader = self.brokers[p.leader]
        update = PartitionIsrUpdate(
            t.id, partition, p.leader_epoch, p.partition_epoch, isr, leader_recovery_state
        )
        return self._alter_partition(AlterPartitionRequest(leader.id, leader.epoch, (update,)), "scripted")

    def crash_broker(self, broker_id: int) -> None:
        """``broker_id`` stops without a clean shutdown and stays down until ``restart_broker``."""
        b = self.brokers[broker_id]
        b.alive = False
        b.last_clean_epoch = -1
        b.restart_at_ms = -1

    def shut_down_broker(self, broker_id: int) -> None:
        """A controlled shutdown of ``broker_id``, run until the controller lets it stop; it stays down."""
        b = self.brokers[broker_id]
        b.shutting_down = True
        while b.alive:
            self._tick()
        b.restart_at_ms = -1

    def restart_broker(self, broker_id: int) -> None:
        """``broker_id`` starts again at the next tick (it registers, then catches up)."""
        self.brokers[broker_id].restart_at_ms = self.now_ms

    def step(self) -> str:
        """One event: advance the clock, heartbeats and fencing, then one random action."""
        self._tick()
        self._advance_rolling()
        kind = self.rng.choices(self._kinds, cum_weights=self._cum_weights)[0]
        action: dict[str, Callable[[], None]] = {
            "isr_shrink": self._shrink_isr,
            "isr_expand": self._expand_isr,
            "crash": self._crash,
            "restart": self._restart,
            "controlled_shutdown": self._controlled_shutdown,
            "rolling_restart": self._rolling_restart,
            "create_topic": lambda: self._create_topic(self.config.partitions_per_topic),
            "delete_topic": self._delete_topic,
            "create_partitions": self._create_partitions,
            "reassign": self._reassign,
            "config_change": self._config_change,
            "producer_ids": self._producer_ids,
            "failover": self.failover,
            "idle": lambda: None,
        }
        if kind not in action:
            raise SimError(f"unknown event kind {kind!r}")
        action[kind]()
        self.summary.events += 1
        self.summary.event_counts[kind] += 1
        return kind

    def run(self, progress: Callable[[int], None] | None = None) -> SimSummary:
        """Setup, then ``events`` events, checking invariants every ``check_every`` events and at the end."""
        start = time.perf_counter()
        cpu = time.process_time()
        self.setup()
        self.summary.setup_seconds = time.perf_counter() - start
        self.summary.setup_cpu_seconds = time.process_time() - cpu
        self.summary.setup_end_offset = self.log.end_offset()
        self.check_invariants()
        events_cpu = time.process_time()
        every = self.config.check_every
        for i in range(self.config.events):
            self.step()
            if every > 0 and (i + 1) % every == 0:
                self.check_invariants()
            if self.after_event is not None:
                self.after_event(self)
            if progress is not None:
                progress(i + 1)
        self.summary.events_cpu_seconds = time.process_time() - events_cpu
        self.check_invariants()
        self.check_standby()
        self.summary.seconds = time.perf_counter() - start
        return self.summary

    # -- invariants -----------------------------------------------------------------------------------------

    def check_invariants(self) -> None:
        self.summary.invariant_checks += 1
        check_image(self.image, elr_enabled=self.active.elr_enabled())

    def check_standby(self) -> None:
        """Every controller's committed image equals the active one's (the log is all committed)."""
        img = self.active.image
        for c in self.controllers[1:]:
            if not c.committed_image.state_equals(img):
                raise InvariantViolation(
                    "standby", f"controller {c.node_id}'s replayed image differs from the active"
                )


def check_image(img: MetadataImage, *, elr_enabled: bool) -> None:
    """Raise ``InvariantViolation`` if a partition or broker of ``img`` is inconsistent."""
    brokers = img.brokers
    for t in img.topics_by_id.values():
        for pid, p in t.partitions.items():
            where = f"{t.name}-{pid}"
            replicas = set(p.replicas)
            if len(replicas) != len(p.replicas):
                raise InvariantViolation("replicas", f"{where}: duplicate replicas {p.replicas}")
            if len(set(p.isr)) != len(p.isr) or not set(p.isr) <= replicas:
                raise InvariantViolation("isr", f"{where}: ISR {p.isr} not a subset of replicas {p.replicas}")
            if not set(p.elr) <= replicas or set(p.elr) & set(p.isr):
                raise InvariantViolation(
                    "elr", f"{where}: ELR {p.elr} vs ISR {p.isr} / replicas {p.replicas}"
                )
            if not set(p.adding_replicas) <= replicas or not set(p.removing_replicas) <= replicas:
                raise InvariantViolation("reassignment", f"{where}: adding/removing outside replicas")
            if p.leader != NO_LEADER:
                if p.leader not in p.isr:
                    raise InvariantViolation("leader", f"{where}: leader {p.leader} not in ISR {p.isr}")
                reg = brokers.get(p.leader)
                if reg is None or reg.fenced:
                    raise InvariantViolation(
                        "leader", f"{where}: leader {p.leader} is fenced or unregistered"
                    )
            if not p.isr and not elr_enabled:
                raise InvariantViolation("isr", f"{where}: empty ISR without ELR")
            if len(p.directories) != len(p.replicas):
                raise InvariantViolation(
                    "directories", f"{where}: {len(p.directories)} dirs, {len(p.replicas)} replicas"
                )
            if p.leader_epoch < 0 or p.partition_epoch < 0:
                raise InvariantViolation("epochs", f"{where}: negative epoch")
