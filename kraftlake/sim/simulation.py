"""A seeded, deterministic event simulation of a KRaft quorum over an in-memory network.

One `random.Random(seed)` drives everything (message delays, loss, duplication, disk latency, the nodes' own
randomness), so a seed replays exactly. Invariants are checked after every event.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.errors import NotLeaderError, RaftError
from kraftlake.raft.memory_log import MemoryRaftLog
from kraftlake.raft.messages import Message
from kraftlake.raft.node import RaftNode, Ready
from kraftlake.raft.states import ElectionState
from kraftlake.sim.errors import InvariantViolation
from kraftlake.sim.invariants import Acked, InvariantChecker
from kraftlake.sim.sim_node import SimNode
from kraftlake.sim.state_machine import DigestStateMachine


@dataclass(frozen=True, slots=True)
class Faults:
    """Fault rates of a simulation run."""

    min_delay_ms: int = 1
    max_delay_ms: int = 25
    loss: float = 0.02
    duplicate: float = 0.02
    max_flush_ms: int = 5
    slow_disk: float = 0.02
    slow_flush_ms: int = 400


def sim_config(voters: frozenset[int]) -> QuorumConfig:
    """Kafka's defaults, with a snapshot chunk small enough that snapshots span several FetchSnapshots."""
    return QuorumConfig(voters=voters, request_timeout_ms=1000, snapshot_chunk_bytes=64)


NodeFactory = Callable[
    [int, QuorumConfig, MemoryRaftLog, "ElectionState | None", random.Random, int], RaftNode
]


class Simulation:
    """The event loop: nodes, network, disks, clients and faults."""

    def __init__(
        self,
        seed: int,
        voters: int,
        observers: int = 0,
        faults: Faults | None = None,
        check_majority_hw: bool = True,
        check_durability: bool = True,
        node_factory: NodeFactory | None = None,
        trace_size: int = 60,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or Faults()
        self.voter_ids = frozenset(range(1, voters + 1))
        self.config = sim_config(self.voter_ids)
        ids = list(range(1, voters + observers + 1))
        self.nodes = {i: SimNode(i) for i in ids}
        self.checker = InvariantChecker(self.voter_ids, check_majority_hw, check_durability)
        self.node_factory: NodeFactory = node_factory or RaftNode
        self.now = 0
        self._events: list[tuple[int, int, str, tuple[object, ...]]] = []
        self._seq = 0
        self.groups: dict[int, int] = {}
        # (time, text or object): formatted only when printed, to keep the hot loop cheap
        self.trace: deque[tuple[int, str, object]] = deque(maxlen=trace_size)
        self.events_run = 0
        self.appends = 0
        for i in ids:
            self.start(i)

    # -- scheduling ----------------------------------------------------------------------------------------
    def _schedule(self, at: int, kind: str, *payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._events, (at, self._seq, kind, payload))

    def _log(self, text: str, obj: object = None) -> None:
        self.trace.append((self.now, text, obj))

    def formatted_trace(self) -> list[str]:
        """The retained trace, one line per event, oldest first."""
        return [f"{at:>7} {text}{'' if obj is None else ' ' + repr(obj)}" for at, text, obj in self.trace]

    def run_until(self, end_ms: int, stop: Callable[[], bool] | None = None) -> bool:
        """Run events up to `end_ms`, or until `stop()` holds; returns whether it held."""
        while self._events and self._events[0][0] <= end_ms:
            if stop is not None and stop():
                return True
            at, _, kind, payload = heapq.heappop(self._events)
            self.now = max(self.now, at)
            self._dispatch(kind, payload)
            self.events_run += 1
            self.checker.check(self.nodes)
        self.now = max(self.now, end_ms)
        return stop() if stop is not None else True

    def _dispatch(self, kind: str, payload: tuple[object, ...]) -> None:
        if kind == "deliver":
            (message,) = payload
            assert isinstance(message, Message)
            target = self.nodes[message.dst]
            if target.node is None or not self.connected(message.src, message.dst):
                return
            self._log("deliver", message)
            self._process(target, lambda n: n.step(message, self.now))
        elif kind == "tick":
            node_id, incarnation = payload
            target = self.nodes[node_id]  # type: ignore[index]
            target.ticks.discard(self.now)
            if target.node is not None and target.incarnation == incarnation:
                self._process(target, lambda n: n.tick(self.now))
        elif kind == "flush":
            node_id, incarnation = payload
            target = self.nodes[node_id]  # type: ignore[index]
            if target.node is not None and target.incarnation == incarnation:
                target.flush_scheduled = False
                self._log(f"flush node {node_id} to {target.log.end_offset}")
                self._process(target, lambda n: n.flush(self.now))
        elif kind == "call":
            (func,) = payload
            func()  # type: ignore[operator]

    def at(self, delay_ms: int, func: Callable[[], None]) -> None:
        """Run `func` as an event `delay_ms` from now."""
        self._schedule(self.now + delay_ms, "call", func)

    def call_at(self, at_ms: int, func: Callable[[], None]) -> None:
        """Run `func` as an event at simulated time `at_ms` (a scenario's schedule of faults, written before
        the run); events at the same time run in the order they were scheduled."""
        self._schedule(at_ms, "call", func)

    # -- nodes ---------------------------------------------------------------------------------------------
    def _process(self, sim_node: SimNode, call: Callable[[RaftNode], Ready]) -> None:
        node = sim_node.node
        assert node is not None
        try:
            ready = call(node)
        except RaftError as exc:
            raise InvariantViolation("protocol-error", f"node {sim_node.node_id}: {exc}") from exc
        self._handle_ready(sim_node, ready)

    def _handle_ready(self, sim_node: SimNode, ready: Ready) -> None:
        node = sim_node.node
        assert node is not None
        if ready.quorum_state is not None:
            sim_node.stored = ready.quorum_state  # durable before anything is sent
        for message in ready.messages:
            self._send(message)
        if ready.flush_needed and not sim_node.flush_scheduled:
            sim_node.flush_scheduled = True
            slow = self.rng.random() < self.faults.slow_disk
            delay = self.rng.randint(0, self.faults.slow_flush_ms if slow else self.faults.max_flush_ms)
            self._schedule(self.now + delay, "flush", sim_node.node_id, sim_node.incarnation)
        if ready.load_snapshot is not None:
            sim_node.sm.load(node.log.read_snapshot(ready.load_snapshot))
            self._log(f"node {sim_node.node_id} loads snapshot {ready.load_snapshot}")
            self.checker.on_snapshot_load(sim_node.node_id, sim_node.sm.next_offset, sim_node.sm.digest)
        for entry in ready.committed:
            digest = sim_node.sm.apply(entry)
            self.checker.on_apply(sim_node.node_id, entry, digest)
            pending = sim_node.pending_acks.pop(entry.offset, None)
            if pending is not None and pending == (entry.epoch, entry.value):
                self.checker.on_ack(Acked(entry.offset, entry.epoch, entry.value))
        if node.is_leader and sim_node.was_leader_epoch != node.epoch:
            sim_node.was_leader_epoch = node.epoch
            self._log(f"node {sim_node.node_id} leads epoch {node.epoch}")
            self.checker.on_new_leader(sim_node)
        deadline = node.next_deadline_ms()
        if deadline is not None:
            deadline = max(deadline, self.now)
            if deadline not in sim_node.ticks:
                sim_node.ticks.add(deadline)
                self._schedule(deadline, "tick", sim_node.node_id, sim_node.incarnation)

    def _send(self, message: Message) -> None:
        if not self.connected(message.src, message.dst):
            return
        if self.rng.random() < self.faults.loss:
            self._log(f"lose {type(message).__name__} {message.src}->{message.dst}")
            return
        copies = 2 if self.rng.random() < self.faults.duplicate else 1
        for _ in range(copies):
            delay = self.rng.randint(self.faults.min_delay_ms, self.faults.max_delay_ms)
            self._schedule(self.now + delay, "deliver", message)

    def start(self, node_id: int) -> None:
        """Start (or restart) a node from its disk: latest snapshot + log tail + quorum-state."""
        sim_node = self.nodes[node_id]
        sim_node.incarnation += 1
        sim_node.sm = DigestStateMachine()
        sim_node.flush_scheduled = False
        sim_node.ticks = set()
        sim_node.was_leader_epoch = None
        sim_node.pending_acks = {}
        rng = random.Random(self.rng.getrandbits(64))
        try:
            sim_node.node = self.node_factory(
                node_id, self.config, sim_node.log, sim_node.stored, rng, self.now
            )
        except RaftError as exc:
            raise InvariantViolation("protocol-error", f"node {node_id} failed to start: {exc}") from exc
        self._log(f"start node {node_id} (epoch {sim_node.node.epoch}, {sim_node.node.role})")
        self._process(sim_node, lambda n: n.tick(self.now))

    def crash(self, node_id: int) -> None:
        """Kill a node: it loses its unflushed log tail and every in-memory state."""
        sim_node = self.nodes[node_id]
        if sim_node.node is None:
            return
        lost = sim_node.log.crash()
        sim_node.node = None
        self._log(f"crash node {node_id} (lost {lost} unflushed entries)")

    def wipe(self, node_id: int) -> None:
        """Crash a node and lose its whole disk (committed data loss on one node)."""
        self.crash(node_id)
        sim_node = self.nodes[node_id]
        sim_node.log.wipe()
        sim_node.stored = None
        self.checker.forget_node(node_id)
        self._log(f"wipe node {node_id}")

    def restart(self, node_id: int) -> None:
        """Start a crashed node again."""
        if self.nodes[node_id].node is None:
            self.start(node_id)

    def resign(self, node_id: int) -> None:
        """Graceful leader shutdown: resign (EndQuorumEpoch), then stop."""
        sim_node = self.nodes[node_id]
        if sim_node.node is not None:
            self._log(f"resign node {node_id}")
            self._process(sim_node, lambda n: n.resign(self.now))

    # -- network -------------------------------------------------------------------------------------------
    def connected(self, a: int, b: int) -> bool:
        """Whether the partition lets a and b talk."""
        return self.groups.get(a, 0) == self.groups.get(b, 0)

    def partition(self, *groups: set[int]) -> None:
        """Split the network into groups; nodes not named stay in group 0."""
        self.groups = {n: i + 1 for i, group in enumerate(groups) for n in group}
        self._log(f"partition {[sorted(g) for g in groups]}")

    def heal(self) -> None:
        """Reconnect everyone."""
        self.groups = {}
        self._log("heal")

    # -- clients and snapshots -----------------------------------------------------------------------------
    def leaders(self) -> list[int]:
        """The alive nodes that think they lead."""
        return [i for i, s in self.nodes.items() if s.node is not None and s.node.is_leader]

    def leader(self) -> int | None:
        """The alive leader of the highest epoch."""
        leaders = self.leaders()
        if not leaders:
            return None
        return max(leaders, key=lambda i: self.nodes[i].node.epoch)  # type: ignore[union-attr]

    def client_append(self) -> tuple[int, int] | None:
        """A client appends a value to whichever node claims leadership; returns (node, offset)."""
        leaders = self.leaders()
        if not leaders:
            return None
        target = self.nodes[self.rng.choice(leaders)]
        assert target.node is not None
        self.appends += 1
        value = f"v{self.appends}".encode()
        try:
            result = target.node.append([value], self.now)
        except NotLeaderError:
            return None
        target.pending_acks[result.last_offset] = (result.epoch, value)
        self._process(target, lambda n: n.tick(self.now))
        return target.node_id, result.last_offset

    def workload(self, until_ms: int, every_ms: tuple[int, int] = (20, 120)) -> None:
        """Schedule client appends at random intervals up to `until_ms`."""
        t = self.now
        while True:
            t += self.rng.randint(*every_ms)
            if t >= until_ms:
                return
            self._schedule(t, "call", self.client_append)

    def snapshots(self, until_ms: int, every_ms: tuple[int, int] = (300, 900)) -> None:
        """Schedule snapshots on random nodes up to `until_ms`."""
        t = self.now
        while True:
            t += self.rng.randint(*every_ms)
            if t >= until_ms:
                return
            self._schedule(t, "call", self.snapshot_random_node)

    def snapshot_random_node(self) -> None:
        """Snapshot a random alive node at its applied offset (which advances its log start)."""
        alive = [s for s in self.nodes.values() if s.node is not None]
        if not alive:
            return
        sim_node = self.rng.choice(alive)
        node = sim_node.node
        assert node is not None
        if node.applied_end > node.log.log_start_offset:
            snapshot_id = node.create_snapshot(node.applied_end, sim_node.sm.snapshot())
            self._log(f"node {sim_node.node_id} snapshot {snapshot_id}")

    # -- liveness helpers ----------------------------------------------------------------------------------
    def await_leader(self, within_ms: int, what: str = "leader elected") -> int:
        """Run until some alive node leads and has committed in its epoch; raise if it takes too long."""

        def ready() -> bool:
            leader = self.leader()
            return leader is not None and self.nodes[leader].node.high_watermark > 0  # type: ignore[union-attr]

        if not self.run_until(self.now + within_ms, ready):
            raise InvariantViolation("liveness", f"no {what} within {within_ms} ms")
        leader = self.leader()
        assert leader is not None
        return leader

    def await_convergence(self, within_ms: int) -> None:
        """Run until every alive node has applied the leader's high watermark after a fresh append."""
        self.await_leader(within_ms, "leader after healing")
        target: list[tuple[int, int, int]] = []  # (leader, epoch, offset) of the probe append

        def converged() -> bool:
            leader_id = self.leader()
            if leader_id is None:
                return False
            node = self.nodes[leader_id].node
            assert node is not None
            if not target or target[0][:2] != (leader_id, node.epoch):
                # the probe may land on a stale leader (client_append picks any node claiming leadership):
                # remember the node that took it, so that a probe lost with that node is made again
                appended = self.client_append()
                took = self.nodes[appended[0]].node if appended is not None else None
                target[:] = [(appended[0], took.epoch, appended[1])] if appended is not None and took else []
                return False
            hw = node.high_watermark
            return hw > target[0][2] and all(
                s.node.applied_end >= hw for s in self.nodes.values() if s.node is not None
            )

        if not self.run_until(self.now + within_ms, converged):
            raise InvariantViolation("liveness", f"nodes did not converge within {within_ms} ms")
