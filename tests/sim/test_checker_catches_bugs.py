"""The invariant checker is not vacuous: deliberately broken nodes are caught."""

from __future__ import annotations

import random
from collections.abc import Callable

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.log import RaftLog
from kraftlake.raft.messages import VoteRequest, VoteResponse
from kraftlake.raft.node import RaftNode
from kraftlake.raft.states import ElectionState, LeaderState
from kraftlake.sim.runner import run_seed


class HighWatermarkWithoutMajority(RaftNode):
    """Bug: the leader commits whatever it has flushed itself, without waiting for a majority."""

    def _maybe_update_high_watermark(self, state: LeaderState, now_ms: int) -> bool:
        candidate = self.log.flushed_end_offset
        if candidate > state.epoch_start_offset and (state.high_watermark or 0) < candidate:
            state.high_watermark = candidate
            self._hw = max(self._hw, candidate)
            self._complete_parked(state, now_ms, force=True)
            return True
        return False


class TwoVotesPerEpoch(RaftNode):
    """Bug: a voter forgets whom it voted for, granting every candidate of the epoch."""

    def _may_grant_vote(self, request: VoteRequest) -> bool:
        return request.candidate_epoch == self.epoch and self._log_is_up_to_date(
            request.last_epoch, request.last_epoch_end_offset
        )

    def handle_vote_request(self, request: VoteRequest, now_ms: int) -> None:
        if not request.pre_vote and request.candidate_epoch == self.epoch and self._may_grant_vote(request):
            self._send(
                VoteResponse(
                    self.node_id,
                    request.src,
                    request.correlation_id,
                    self.epoch,
                    None,
                    True,
                    False,
                    request.candidate_epoch,
                )
            )
            return
        super().handle_vote_request(request, now_ms)


class SkipsPreVote(TwoVotesPerEpoch):
    """Grants pre-votes even with a live leader, so that elections overlap often."""

    def _has_live_leader(self, state: object, now_ms: int) -> bool:
        return False


def _factory(cls: type[RaftNode]) -> Callable[..., RaftNode]:
    def make(
        node_id: int,
        config: QuorumConfig,
        log: RaftLog,
        stored: ElectionState | None,
        rng: random.Random,
        now_ms: int,
    ) -> RaftNode:
        return cls(node_id, config, log, stored, rng, now_ms)

    return make


def test_correct_nodes_pass_the_same_seeds() -> None:
    for seed in range(5):
        assert run_seed("leader_hard_failure", seed).violation is None


def test_commit_without_majority_is_caught() -> None:
    found = [
        run_seed("leader_hard_failure", seed, node_factory=_factory(HighWatermarkWithoutMajority))
        for seed in range(10)
    ]
    violations = [o.violation for o in found if o.violation is not None]
    assert violations, "advancing the HW without a majority went unnoticed"
    assert {v.invariant for v in violations} & {
        "majority-holds-hw",
        "acked-append-kept",
        "committed-data-identical",
    }
    assert all(o.trace for o in found if o.violation is not None)


def test_two_votes_per_epoch_is_caught() -> None:
    found = [run_seed("chaos", seed, node_factory=_factory(SkipsPreVote)) for seed in range(40)]
    invariants = {o.violation.invariant for o in found if o.violation is not None}
    assert "one-leader-per-epoch" in invariants, invariants
