"""`QuorumState`: the only place where a node changes epoch state.

Transition table (voters)::

    Unattached  -> Unattached   on learning of a higher epoch, or on granting a vote in its epoch
                -> Prospective  when the election timeout expires
                -> Follower     on learning of the leader of an equal or higher epoch
    Prospective -> Unattached   on learning of a higher epoch, or on granting a vote in its epoch
                -> Prospective  when the election timeout expires (a new pre-vote round)
                -> Candidate    on a majority of granted pre-votes
                -> Follower     on learning of the leader of an equal or higher epoch
    Candidate   -> Unattached   on learning of a higher epoch
                -> Prospective  when the election is lost (timeout, then backoff)
                -> Leader       on a majority of granted votes
                -> Follower     on learning of the leader of an equal or higher epoch
    Leader      -> Unattached   on learning of a higher epoch
                -> Resigned     on graceful shutdown or a failed check-quorum
                -> Follower     on learning of the leader of a higher epoch
    Follower    -> Unattached   on learning of a higher epoch
                -> Prospective  when the fetch timeout expires
                -> Follower     on learning of the leader of a higher epoch
    Resigned    -> Unattached   on learning of a higher epoch
                -> Prospective  when the election timeout expires
                -> Follower     on learning of the leader of a higher epoch

Observers only move between Unattached and Follower: Unattached -> Unattached (higher epoch) or Follower
(leader of an equal or higher epoch); Follower -> Unattached (higher epoch, or the same epoch when the leader
stops answering) or Follower (leader of a higher epoch).

No transition enters an epoch above `MAX_USABLE_EPOCH` (the next election would need an epoch Kafka's int32
field cannot hold): it raises `IllegalTransitionError`, so such a state is never persisted. From the network a
node adopts only what `epoch_reachable` allows: any epoch up to `NETWORK_EPOCH_CEILING` (2^30), above it one
more than its own at most, so no single message can move a voter to an epoch the quorum cannot leave; the
node refuses the others (`EpochRefusedError`). Any other transition raises `IllegalTransitionError`. A vote is never cast twice in an epoch: the states of an
epoch carry the vote forward, and a transition that would replace it raises.
"""

from __future__ import annotations

import random

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.errors import IllegalTransitionError
from kraftlake.raft.states import (
    CandidateState,
    ElectionState,
    EpochState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ReplicaState,
    ResignedState,
    UnattachedState,
)

_NO_DEADLINE = None

MAX_USABLE_EPOCH = 2**31 - 2
"""The highest epoch a node enters: from it, an election still needs 2^31 - 1, the int32 maximum."""


NETWORK_EPOCH_CEILING = 2**30
"""The highest epoch a message may move a node to in one step.

Why a ceiling and not a bound on the step: a voter that was down through many elections (or restored from an
old disk) must still join a quorum whose epoch is far ahead of its own, and a BeginQuorumEpoch, a Vote or a
fetch answer is all it hears; any bound on the step would keep it out for good. What bricks a quorum is only
the top of the int32 range: from `MAX_USABLE_EPOCH` no election can follow. So up to 2^30 any jump is adopted
(a quorum put there by a forged message still has 2^30 elections ahead of it, more than any quorum will hold),
and above it an epoch moves by one per message, as elections move it: reaching the top from there takes 2^30
messages, each of them logged by the voters that refuse or adopt them.
"""


def epoch_reachable(current: int, epoch: int) -> bool:
    """Whether a node in epoch `current` may adopt `epoch` from a message (lower or equal: always)."""
    return epoch <= current or (
        epoch <= MAX_USABLE_EPOCH and (epoch <= NETWORK_EPOCH_CEILING or epoch == current + 1)
    )


def epoch_is_last(epoch: int) -> bool:
    """Whether no election can follow `epoch`: a voter there stays without a leader (Prospective) for good."""
    return epoch >= MAX_USABLE_EPOCH


class QuorumState:
    """The epoch state of one node, its legal transitions, and what must be persisted."""

    def __init__(
        self,
        node_id: int,
        config: QuorumConfig,
        rng: random.Random,
        stored: ElectionState | None,
        log_last_epoch: int,
        now_ms: int,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.rng = rng
        self.voters = config.voters
        self.is_voter = node_id in config.voters
        self._persisted = stored if stored is not None else ElectionState()
        self.pending_persist: ElectionState | None = None
        self.transitions = 0
        self.state: EpochState = self._initial_state(self._persisted, log_last_epoch, now_ms)
        self._mark_dirty()

    # -- helpers -------------------------------------------------------------------------------------------
    def random_election_timeout_ms(self) -> int:
        """A timeout in [T, 2T)."""
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t)

    def election_backoff_ms(self, retries: int) -> int:
        """Binary exponential backoff, capped at the configured maximum (Kafka's election backoff)."""
        if self.config.election_backoff_max_ms == 0:
            return 0
        return min(self.config.election_backoff_max_ms, 50 * self.rng.randrange(1, 2 ** min(retries, 10) + 1))

    def _mark_dirty(self) -> None:
        election = self.state.election()
        if election != self._persisted:
            self.pending_persist = election
            self._persisted = election

    def take_pending_persist(self) -> ElectionState | None:
        """The election state to write to `quorum-state` before any message leaves; cleared on read."""
        out, self.pending_persist = self.pending_persist, None
        return out

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int | None:
        return self.state.leader_id

    def _initial_state(self, stored: ElectionState, log_last_epoch: int, now_ms: int) -> EpochState:
        if stored.epoch < log_last_epoch:
            return self._unattached(log_last_epoch, None, now_ms)
        if stored.leader_id == self.node_id and self.is_voter:
            # A former leader restarts resigned in its epoch: it must not vote again in it, and it must not
            # lead it again after losing unflushed entries (an (offset, epoch) names one entry only).
            return ResignedState(stored.epoch, self.node_id, now_ms + self.random_election_timeout_ms())
        if stored.leader_id is not None and stored.leader_id != self.node_id:
            return FollowerState(
                stored.epoch, stored.leader_id, stored.voted_id, now_ms + self.config.fetch_timeout_ms
            )
        return self._unattached(stored.epoch, stored.voted_id, now_ms)

    def _unattached(
        self, epoch: int, voted: int | None, now_ms: int, deadline: int | None = None
    ) -> UnattachedState:
        if not self.is_voter:
            return UnattachedState(epoch, None, _NO_DEADLINE)
        return UnattachedState(
            epoch, voted, deadline if deadline is not None else now_ms + self.random_election_timeout_ms()
        )

    def _set(self, state: EpochState) -> None:
        if state.epoch > MAX_USABLE_EPOCH:
            raise self._illegal(state.name, f"epoch {state.epoch} leaves no epoch for the next election")
        self.state = state
        self.transitions += 1
        self._mark_dirty()

    def _illegal(self, target: str, why: str) -> IllegalTransitionError:
        return IllegalTransitionError(
            f"node {self.node_id}: {self.state.name}(epoch {self.epoch}) -> {target}: {why}"
        )

    # -- transitions ---------------------------------------------------------------------------------------
    def transition_to_unattached(self, epoch: int, now_ms: int) -> None:
        """Learned of a higher epoch without its leader (observers: also a silent leader in the epoch)."""
        current = self.state
        if epoch < current.epoch:
            raise self._illegal("Unattached", f"epoch {epoch} is lower")
        if epoch == current.epoch and not (not self.is_voter and isinstance(current, FollowerState)):
            raise self._illegal("Unattached", "the epoch must increase")
        # keep a running election timer so that a stream of higher epochs cannot postpone our election forever
        deadline = getattr(current, "election_deadline_ms", None)
        if isinstance(current, (LeaderState, FollowerState, ResignedState)) or deadline is None:
            deadline = None
        self._set(self._unattached(epoch, None, now_ms, deadline))

    def transition_to_voted(self, epoch: int, candidate_id: int, now_ms: int) -> None:
        """Grant a vote: Unattached in `epoch` with the vote recorded (persisted before the reply)."""
        current = self.state
        if not self.is_voter or candidate_id not in self.voters or candidate_id == self.node_id:
            raise self._illegal("Unattached(voted)", f"cannot vote for {candidate_id}")
        if epoch != current.epoch:
            raise self._illegal("Unattached(voted)", f"vote for epoch {epoch} in epoch {current.epoch}")
        if not isinstance(current, (UnattachedState, ProspectiveState)):
            raise self._illegal("Unattached(voted)", "only Unattached or Prospective can grant a vote")
        if current.voted_id not in (None, candidate_id):
            raise self._illegal("Unattached(voted)", f"already voted for {current.voted_id}")
        self._set(UnattachedState(epoch, candidate_id, now_ms + self.random_election_timeout_ms()))

    def transition_to_prospective(self, now_ms: int) -> None:
        """Start (or restart) a pre-vote round in the current epoch."""
        current = self.state
        if not self.is_voter:
            raise self._illegal("Prospective", "observers do not run elections")
        if isinstance(current, LeaderState):
            raise self._illegal("Prospective", "a leader resigns first")
        retries = 1
        if isinstance(current, (ProspectiveState, CandidateState)):
            retries = current.retries + 1
        self._set(
            ProspectiveState(
                current.epoch,
                voted=current.voted_id,
                last_leader=current.leader_id if isinstance(current, FollowerState) else None,
                election_deadline_ms=now_ms + self.random_election_timeout_ms(),
                granted={self.node_id},
                retries=retries,
            )
        )

    def transition_to_candidate(self, now_ms: int) -> None:
        """Pre-vote won: bump the epoch and vote for ourselves."""
        current = self.state
        if not isinstance(current, ProspectiveState):
            raise self._illegal("Candidate", "only a Prospective may become Candidate")
        if len(current.granted) < self.config.majority:
            raise self._illegal("Candidate", "no majority of pre-votes")
        self._set(
            CandidateState(
                current.epoch + 1,
                self.node_id,
                now_ms + self.random_election_timeout_ms(),
                None,
                {self.node_id},
                set(),
                current.retries,
            )
        )

    def transition_to_leader(self, epoch_start_offset: int, now_ms: int) -> LeaderState:
        """Election won: lead the candidate's epoch from `epoch_start_offset`."""
        current = self.state
        if not isinstance(current, CandidateState):
            raise self._illegal("Leader", "only a Candidate may become Leader")
        if len(current.granted) < self.config.majority:
            raise self._illegal("Leader", "no majority of votes")
        replicas = {v: ReplicaState() for v in self.voters}
        replicas[self.node_id] = ReplicaState(0, now_ms)
        leader = LeaderState(
            current.epoch,
            self.node_id,
            epoch_start_offset,
            frozenset(current.granted),
            None,
            replicas,
            now_ms,
            now_ms,
        )
        self._set(leader)
        return leader

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        """Learned the leader of `epoch`."""
        current = self.state
        if leader_id == self.node_id or leader_id not in self.voters:
            raise self._illegal("Follower", f"{leader_id} cannot be a leader here")
        if epoch < current.epoch:
            raise self._illegal("Follower", f"epoch {epoch} is lower")
        if epoch == current.epoch and isinstance(current, (FollowerState, LeaderState, ResignedState)):
            raise self._illegal("Follower", "the leader of this epoch is already known")
        voted = current.voted_id if epoch == current.epoch else None
        self._set(FollowerState(epoch, leader_id, voted, now_ms + self.config.fetch_timeout_ms))

    def transition_to_resigned(self, preferred_successors: tuple[int, ...], now_ms: int) -> None:
        """A leader steps down in its epoch."""
        current = self.state
        if not isinstance(current, LeaderState):
            raise self._illegal("Resigned", "only a Leader may resign")
        self._set(
            ResignedState(
                current.epoch, self.node_id, now_ms + self.random_election_timeout_ms(), preferred_successors
            )
        )
