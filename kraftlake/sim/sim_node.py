"""``SimNode``: one simulated machine of ``kraftlake.sim.simulation``.

Its durable disk (log and quorum-state) survives crashes, the node running on it does not. It has a module of
its own because both the simulation, which drives it, and the invariant checker, which reads it, need it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftlake.raft.memory_log import MemoryRaftLog
from kraftlake.raft.node import RaftNode
from kraftlake.raft.states import ElectionState
from kraftlake.sim.state_machine import DigestStateMachine


@dataclass
class SimNode:
    """A simulated machine: its durable disk (log and quorum-state) survives crashes, the node does not."""

    node_id: int
    log: MemoryRaftLog = field(default_factory=MemoryRaftLog)
    stored: ElectionState | None = None
    node: RaftNode | None = None
    sm: DigestStateMachine = field(default_factory=DigestStateMachine)
    incarnation: int = 0
    flush_scheduled: bool = False
    ticks: set[int] = field(default_factory=set)
    was_leader_epoch: int | None = None
    # client appends waiting for commit: offset -> (epoch, value)
    pending_acks: dict[int, tuple[int, bytes]] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.node is not None
