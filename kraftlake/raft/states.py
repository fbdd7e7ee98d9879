"""One class per epoch state (Kafka's `EpochState` implementations), each holding its own timers."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraftlake.raft.messages import FetchRequest


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What `quorum-state` persists: the epoch, the leader and the vote cast in it (-1 in Kafka = None)."""

    epoch: int = 0
    leader_id: int | None = None
    voted_id: int | None = None


@dataclass(slots=True)
class EpochState:
    """Fields every state has."""

    epoch: int

    name = "EpochState"

    @property
    def leader_id(self) -> int | None:
        """The leader known in this state."""
        return None

    @property
    def voted_id(self) -> int | None:
        """The candidate this node voted for in this epoch."""
        return None

    def election(self) -> ElectionState:
        """The part of this state that must survive a restart."""
        return ElectionState(self.epoch, self.leader_id, self.voted_id)


@dataclass(slots=True)
class UnattachedState(EpochState):
    """No leader known in the epoch; possibly voted. An observer has no election deadline."""

    voted: int | None = None
    election_deadline_ms: int | None = None
    # an observer probes voters for the leader; next time it may send
    next_probe_ms: int = 0

    name = "Unattached"

    @property
    def voted_id(self) -> int | None:
        return self.voted


@dataclass(slots=True)
class ProspectiveState(EpochState):
    """Pre-vote (KIP-996): asks whether it could win without bumping the epoch."""

    voted: int | None = None
    last_leader: int | None = None
    election_deadline_ms: int = 0
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    retries: int = 1

    name = "Prospective"

    @property
    def voted_id(self) -> int | None:
        return self.voted


@dataclass(slots=True)
class CandidateState(EpochState):
    """Bumped the epoch, voted for itself, asks for votes; after a lost election waits a backoff."""

    node_id: int = -1
    election_deadline_ms: int = 0
    backoff_deadline_ms: int | None = None
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    retries: int = 1

    name = "Candidate"

    @property
    def voted_id(self) -> int | None:
        return self.node_id


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one replica."""

    end_offset: int = 0
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    directory_id: str = ""


@dataclass(slots=True)
class LeaderState(EpochState):
    """Elected: appends, serves fetches, computes the high watermark, checks the quorum."""

    node_id: int = -1
    epoch_start_offset: int = 0
    granting_voters: frozenset[int] = frozenset()
    high_watermark: int | None = None
    replicas: dict[int, ReplicaState] = field(default_factory=dict)
    elected_ms: int = 0
    begin_epoch_deadline_ms: int = 0
    linger_deadline_ms: int | None = None
    # long-polled fetches: replica id -> (request, deadline)
    parked: dict[int, tuple[FetchRequest, int]] = field(default_factory=dict)

    name = "Leader"

    @property
    def leader_id(self) -> int | None:
        return self.node_id

    @property
    def voted_id(self) -> int | None:
        return self.node_id


@dataclass(slots=True)
class FollowerState(EpochState):
    """Knows the leader of the epoch and fetches from it."""

    leader: int = -1
    voted: int | None = None
    fetch_deadline_ms: int = 0
    leader_resigned: bool = False
    last_leader_contact_ms: int | None = None

    name = "Follower"

    @property
    def leader_id(self) -> int | None:
        return self.leader

    @property
    def voted_id(self) -> int | None:
        return self.voted


@dataclass(slots=True)
class ResignedState(EpochState):
    """A former leader of the epoch that stepped down; waits for the next election."""

    node_id: int = -1
    election_deadline_ms: int = 0
    preferred_successors: tuple[int, ...] = ()

    name = "Resigned"

    @property
    def leader_id(self) -> int | None:
        return self.node_id

    @property
    def voted_id(self) -> int | None:
        return self.node_id
