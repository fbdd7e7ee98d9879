"""A hand-driven quorum for scripted, data-driven tests (in the style of etcd's `rafttest`).

Messages wait in one FIFO queue until a command delivers them; nothing is lost, delayed or reordered unless
the script says so, and each node's randomness is seeded by its id, so a script's output is exact.

Commands (one per block, output after ``----``):

``voters 1 2 3 [observers 4]``  create the quorum at time 0
``tick <ms> [<n>...]``          advance the clock; tick the listed nodes (default every running node)
``run <ms> [<pattern>]``         advance in 10 ms steps, ticking and stabilizing each step; print the
                                delivered messages and Ready lines that contain `pattern` (ignoring case;
                                none without one)
``stabilize``                   deliver messages and complete flushes until nothing is left; print them
``deliver [<n>]``               deliver the queued messages (only those to node n); print them
``drop [<n>]``                  drop the queued messages (only those to node n)
``append <node>|leader <value>...``  append values on a node (prints the offsets or NotLeaderError)
``crash <n>`` / ``restart <n>`` kill (losing unflushed entries) / restart a node from its disk
``partition <a b> / <c d>``     split the network (``heal`` joins it again)
``snapshot <n>``                snapshot node n at its applied offset
``vote <from> <to> <epoch> <last-epoch> <end-offset> [pre]``  inject a VoteRequest
``resign <n>``                  graceful shutdown of a leader
``status``                      one line per node: role, epoch, leader, HW, log start/end, last epoch
``log <n>``                     the entries of node n
``persisted <n>``               the quorum-state stored by node n

Below the line that caused it, each `Ready` a node hands its driver is printed as etcd's raft scripts print
theirs: what the node asked to persist (``> 2 persist epoch=3 leader=-1 voted=1``: its quorum-state, written
before any message of that Ready is sent), to load (``> 2 load snapshot 8-1``) and the range it committed
(``> 2 commit [3,5)``, applied to its state machine).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, fields

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.control import LEADER_CHANGE_CONTROL_TYPE
from kraftlake.raft.errors import NotLeaderError, RaftError
from kraftlake.raft.memory_log import MemoryRaftLog
from kraftlake.raft.messages import Entry, Message, VoteRequest
from kraftlake.raft.node import RaftNode, Ready
from kraftlake.raft.states import ElectionState
from kraftlake.sim.errors import SimError
from kraftlake.sim.state_machine import DigestStateMachine


def describe(message: Message) -> str:
    """A one-line, stable rendering of a message."""
    parts = []
    for f in fields(message):
        if f.name in ("src", "dst", "correlation_id"):
            continue
        value = getattr(message, f.name)
        if f.name == "entries":
            value = "[" + " ".join(_entry(e) for e in value) + "]" if value else None
        elif f.name == "error":
            value = None if value.name == "NONE" else value.name
        elif f.name == "chunk":
            value = f"{len(value)}B"
        if value is None or value == () or (f.name == "replica_directory_id" and not value):
            continue
        parts.append(f"{f.name}={value}")
    return f"{message.src}->{message.dst} {type(message).__name__} " + " ".join(parts)


def _state(state: ElectionState) -> str:
    """A quorum-state as the node persists it (-1: none, as in Kafka's file)."""
    leader = -1 if state.leader_id is None else state.leader_id
    voted = -1 if state.voted_id is None else state.voted_id
    return f"epoch={state.epoch} leader={leader} voted={voted}"


def _entry(entry: Entry) -> str:
    body = (
        (
            "LeaderChange"
            if entry.control_type == LEADER_CHANGE_CONTROL_TYPE
            else f"control{entry.control_type}"
        )
        if entry.is_control
        else entry.value.decode(errors="replace")
    )
    return f"{entry.offset}@{entry.epoch}:{body}"


@dataclass
class _Disk:
    log: MemoryRaftLog = field(default_factory=MemoryRaftLog)
    stored: ElectionState | None = None
    sm: DigestStateMachine = field(default_factory=DigestStateMachine)
    node: RaftNode | None = None
    restarts: int = 0


class ScriptedQuorum:
    """The quorum a script drives."""

    def __init__(self) -> None:
        self.now = 0
        self.disks: dict[int, _Disk] = {}
        self.queue: list[Message] = []
        self.unflushed: set[int] = set()
        self.groups: dict[int, int] = {}
        self.config: QuorumConfig | None = None
        self.readies: list[str] = []
        """What the Readies handled since the last output line asked to persist, load and commit."""

    # -- plumbing ------------------------------------------------------------------------------------------
    def _start(self, node_id: int) -> None:
        disk = self.disks[node_id]
        assert self.config is not None
        disk.sm = DigestStateMachine()
        rng = random.Random(node_id * 1000 + disk.restarts)
        disk.node = RaftNode(node_id, self.config, disk.log, disk.stored, rng, self.now)
        self._ready(disk, disk.node.tick(self.now))

    def _ready(self, disk: _Disk, ready: Ready) -> None:
        """Do what `ready` asks, in the driver's order, and note what was persisted, loaded and committed."""
        assert disk.node is not None
        node_id = disk.node.node_id
        if ready.quorum_state is not None:
            disk.stored = ready.quorum_state
            self.readies.append(f"> {node_id} persist {_state(ready.quorum_state)}")
        self.queue.extend(m for m in ready.messages if self._connected(m.src, m.dst))
        if ready.flush_needed:
            self.unflushed.add(node_id)
        if ready.load_snapshot is not None:
            disk.sm.load(disk.log.read_snapshot(ready.load_snapshot))
            snapshot = ready.load_snapshot
            self.readies.append(f"> {node_id} load snapshot {snapshot.offset}-{snapshot.epoch}")
        if ready.committed:
            first = ready.committed[0].offset
            for entry in ready.committed:
                disk.sm.apply(entry)
            self.readies.append(f"> {node_id} commit [{first},{first + len(ready.committed)})")

    def _take_readies(self) -> list[str]:
        out, self.readies = self.readies, []
        return out

    def _connected(self, a: int, b: int) -> bool:
        return self.groups.get(a, 0) == self.groups.get(b, 0)

    def _node(self, node_id: int) -> RaftNode:
        node = self.disks[node_id].node
        if node is None:
            raise SimError(f"node {node_id} is down")
        return node

    def _deliver(self, only: int | None) -> list[str]:
        out = []
        batch = [m for m in self.queue if only is None or m.dst == only]
        self.queue = [m for m in self.queue if not (only is None or m.dst == only)]
        for message in batch:
            disk = self.disks[message.dst]
            if disk.node is None or not self._connected(message.src, message.dst):
                out.append(f"dropped {describe(message)}")
                continue
            out.append(describe(message))
            self._ready(disk, disk.node.step(message, self.now))
            out.extend(self._take_readies())
        return out

    def _flush_all(self) -> list[str]:
        out = []
        for node_id in sorted(self.unflushed):
            disk = self.disks[node_id]
            if disk.node is not None:
                out.append(f"flush {node_id} to {disk.log.end_offset}")
                self._ready(disk, disk.node.flush(self.now))
                out.extend(self._take_readies())
        self.unflushed.clear()
        return out

    # -- commands ------------------------------------------------------------------------------------------
    def run(self, command: str) -> str:
        """Run one command line; returns its output."""
        words = command.split()
        name, args = words[0], words[1:]
        try:
            handler = getattr(self, "cmd_" + name.replace("-", "_"))
        except AttributeError:
            raise SimError(f"unknown command {name!r}") from None
        try:
            lines: list[str] = handler(args)
        except RaftError as exc:
            lines = [f"error: {type(exc).__name__}: {exc}"]
        lines += self._take_readies()  # a tick's, a restart's or a resignation's
        return "\n".join(lines) if lines else "ok"

    def cmd_voters(self, args: list[str]) -> list[str]:
        observers: list[int] = []
        if "observers" in args:
            index = args.index("observers")
            observers = [int(a) for a in args[index + 1 :]]
            args = args[:index]
        voters = [int(a) for a in args]
        self.config = QuorumConfig(voters=frozenset(voters), snapshot_chunk_bytes=64)
        for node_id in voters + observers:
            self.disks[node_id] = _Disk()
            self._start(node_id)
        return []

    def cmd_tick(self, args: list[str]) -> list[str]:
        self.now += int(args[0])
        only = {int(a) for a in args[1:]}
        for node_id, disk in sorted(self.disks.items()):
            if disk.node is not None and (not only or node_id in only):
                self._ready(disk, disk.node.tick(self.now))
        return []

    def cmd_run(self, args: list[str]) -> list[str]:
        pattern = args[1].lower() if len(args) > 1 else None
        out = []
        end = self.now + int(args[0])
        while self.now < end:
            self.cmd_tick([str(min(10, end - self.now))])
            for line in self._take_readies() + self.cmd_stabilize([]):
                if pattern is not None and pattern in line.lower():
                    out.append(f"t={self.now} {line}")
        return out

    def _leader(self) -> int:
        leaders = [
            (d.node.epoch, i) for i, d in self.disks.items() if d.node is not None and d.node.is_leader
        ]
        if not leaders:
            raise SimError("no leader")
        return max(leaders)[1]

    def cmd_stabilize(self, args: list[str]) -> list[str]:
        out: list[str] = []
        for _ in range(10_000):
            if not self.queue and not self.unflushed:
                return out
            out.extend(self._flush_all())
            out.extend(self._deliver(None))
        raise SimError("stabilize did not converge")

    def cmd_deliver(self, args: list[str]) -> list[str]:
        return self._deliver(int(args[0]) if args else None)

    def cmd_drop(self, args: list[str]) -> list[str]:
        only = int(args[0]) if args else None
        dropped = [m for m in self.queue if only is None or m.dst == only]
        self.queue = [m for m in self.queue if m not in dropped]
        return [f"dropped {describe(m)}" for m in dropped]

    def cmd_append(self, args: list[str]) -> list[str]:
        node = self._node(self._leader() if args[0] == "leader" else int(args[0]))
        try:
            result = node.append([v.encode() for v in args[1:]], self.now)
        except NotLeaderError as exc:
            return [f"NotLeaderError: leader {exc.leader_id} epoch {exc.epoch}"]
        return [f"offsets {result.base_offset}-{result.last_offset} epoch {result.epoch}"]

    def cmd_crash(self, args: list[str]) -> list[str]:
        disk = self.disks[int(args[0])]
        lost = disk.log.crash()
        disk.node = None
        self.unflushed.discard(int(args[0]))
        return [f"lost {lost} unflushed entries"]

    def cmd_restart(self, args: list[str]) -> list[str]:
        disk = self.disks[int(args[0])]
        disk.restarts += 1
        self._start(int(args[0]))
        node = self._node(int(args[0]))
        return [f"{node.role} epoch {node.epoch}"]

    def cmd_partition(self, args: list[str]) -> list[str]:
        self.groups = {}
        group = 1
        for word in args:
            if word == "/":
                group += 1
            else:
                self.groups[int(word)] = group
        return []

    def cmd_heal(self, args: list[str]) -> list[str]:
        self.groups = {}
        return []

    def cmd_snapshot(self, args: list[str]) -> list[str]:
        disk = self.disks[int(args[0])]
        node = self._node(int(args[0]))
        snapshot_id = node.create_snapshot(node.applied_end, disk.sm.snapshot())
        return [f"snapshot {snapshot_id.offset}-{snapshot_id.epoch}, log start {disk.log.log_start_offset}"]

    def cmd_vote(self, args: list[str]) -> list[str]:
        src, dst, epoch, last_epoch, end = (int(a) for a in args[:5])
        self.queue.append(VoteRequest(src, dst, 1, epoch, src, last_epoch, end, "pre" in args[5:]))
        return []

    def cmd_resign(self, args: list[str]) -> list[str]:
        disk = self.disks[int(args[0])]
        self._ready(disk, self._node(int(args[0])).resign(self.now))
        return []

    def cmd_status(self, args: list[str]) -> list[str]:
        out = []
        for node_id, disk in sorted(self.disks.items()):
            node = disk.node
            if node is None:
                out.append(f"{node_id}: down")
                continue
            out.append(
                f"{node_id}: {node.role} epoch={node.epoch} leader={node.leader_id} "
                f"hw={node.high_watermark} log=[{disk.log.log_start_offset},{disk.log.end_offset}) "
                f"last_epoch={disk.log.last_epoch()} applied={disk.sm.next_offset}"
            )
        return out

    def cmd_log(self, args: list[str]) -> list[str]:
        log = self.disks[int(args[0])].log
        entries = log.read(log.log_start_offset, log.end_offset)
        return [" ".join(_entry(e) for e in entries) or "empty"]

    def cmd_persisted(self, args: list[str]) -> list[str]:
        return [str(self.disks[int(args[0])].stored)]
