"""The safety invariants, checked after every simulation event."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftlake.raft.messages import Entry
from kraftlake.raft.states import ResignedState
from kraftlake.sim.errors import InvariantViolation
from kraftlake.sim.sim_node import SimNode


@dataclass(frozen=True, slots=True)
class Acked:
    """An append the leader reported as committed to its client."""

    offset: int
    epoch: int
    value: bytes


@dataclass
class InvariantChecker:
    """Keeps the global history the invariants are checked against.

    - one leader per epoch;
    - a node's epoch never decreases, across restarts (it is persisted), unless its disk was wiped;
    - a node's high watermark never decreases while it runs, and the global one never does;
    - a majority of voters durably holds the log up to the high watermark;
    - committed data is identical on every node (digest chain per offset);
    - every acknowledged append is in the log of every later leader;
    - a snapshot sits at the log start offset.
    """

    voters: frozenset[int]
    check_majority_hw: bool = True
    # Off only where a voter's disk is wiped: with a static voter set the empty voter may vote a lagging
    # candidate in and committed entries can be lost (what KIP-853's directory ids prevent).
    check_durability: bool = True
    leaders: dict[int, int] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    hws: dict[tuple[int, int], int] = field(default_factory=dict)
    global_hw: int = 0
    digests: dict[int, bytes] = field(default_factory=dict)
    committed_epochs: dict[int, int] = field(default_factory=dict)
    acked: list[Acked] = field(default_factory=list)
    checks: int = 0

    def on_apply(self, node_id: int, entry: Entry, digest: bytes) -> None:
        """A node applied a committed entry, reaching `digest`."""
        known = self.digests.get(entry.offset + 1)
        if known is None:
            self.digests[entry.offset + 1] = digest
            self.committed_epochs[entry.offset] = entry.epoch
        elif known != digest and self.check_durability:
            raise InvariantViolation(
                "committed-data-identical",
                f"node {node_id} committed different data at offset {entry.offset} (epoch {entry.epoch})",
            )

    def on_snapshot_load(self, node_id: int, end_offset: int, digest: bytes) -> None:
        """A node loaded a snapshot of the state up to `end_offset`."""
        known = self.digests.get(end_offset)
        if known is None:
            self.digests[end_offset] = digest
        elif known != digest and end_offset > 0 and self.check_durability:
            raise InvariantViolation(
                "committed-data-identical", f"node {node_id} loaded a snapshot at {end_offset} that differs"
            )

    def on_ack(self, acked: Acked) -> None:
        """A client's append was acknowledged."""
        self.acked.append(acked)

    def on_new_leader(self, sim_node: SimNode) -> None:
        """Leader completeness: a new leader's log holds every acknowledged append."""
        node = sim_node.node
        assert node is not None
        if not self.check_durability:
            return
        log = node.log
        for ack in self.acked:
            if ack.offset < log.log_start_offset:
                continue
            if ack.offset >= log.end_offset:
                raise InvariantViolation(
                    "acked-append-kept",
                    f"leader {node.node_id} of epoch {node.epoch} lacks acked offset {ack.offset}",
                )
            entry = log.read(ack.offset, ack.offset + 1)[0]
            if (entry.epoch, entry.value) != (ack.epoch, ack.value):
                raise InvariantViolation(
                    "acked-append-kept",
                    f"leader {node.node_id} of epoch {node.epoch} has another entry at "
                    f"acked offset {ack.offset}",
                )

    def forget_node(self, node_id: int) -> None:
        """The node's disk was wiped: its persisted epoch is gone."""
        self.epochs.pop(node_id, None)

    def check(self, nodes: dict[int, SimNode]) -> None:
        """Check every state invariant against the current nodes."""
        self.checks += 1
        for sim_node in nodes.values():
            node = sim_node.node
            if node is None:
                continue
            nid = node.node_id
            if node.is_leader or isinstance(node.quorum.state, ResignedState):
                leader = self.leaders.setdefault(node.epoch, nid)
                if leader != nid:
                    raise InvariantViolation(
                        "one-leader-per-epoch", f"nodes {leader} and {nid} both lead epoch {node.epoch}"
                    )
            last = self.epochs.get(nid, 0)
            if node.epoch < last:
                raise InvariantViolation(
                    "monotonic-epoch", f"node {nid} went from epoch {last} to {node.epoch}"
                )
            self.epochs[nid] = node.epoch
            key = (nid, sim_node.incarnation)
            hw = node.high_watermark
            if hw < self.hws.get(key, 0):
                raise InvariantViolation("monotonic-hw", f"node {nid} HW went from {self.hws[key]} to {hw}")
            self.hws[key] = hw
            self.global_hw = max(self.global_hw, hw)
            snap = node.log.latest_snapshot()
            start = node.log.log_start_offset
            if (snap is None and start != 0) or (snap is not None and snap.offset != start):
                raise InvariantViolation(
                    "snapshot-at-log-start", f"node {nid}: log start {start}, snapshot {snap}"
                )
        if self.check_majority_hw and self.global_hw > 0:
            self._check_majority_holds_hw(nodes)

    def _check_majority_holds_hw(self, nodes: dict[int, SimNode]) -> None:
        hw = self.global_hw
        epoch = self.committed_epochs.get(hw - 1)
        holders = []
        for vid in self.voters:
            log = nodes[vid].log
            if log.flushed_end_offset < hw:
                continue
            if hw <= log.log_start_offset or epoch is None or log.epoch_at(hw - 1) == epoch:
                holders.append(vid)
        if len(holders) < len(self.voters) // 2 + 1:
            raise InvariantViolation(
                "majority-holds-hw", f"only voters {sorted(holders)} durably hold the log up to HW {hw}"
            )
