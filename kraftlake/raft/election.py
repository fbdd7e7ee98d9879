"""`Election`: the Vote, BeginQuorumEpoch and EndQuorumEpoch side of a `RaftNode`.

Which (pre-)votes to grant and how votes are counted; the new leader's announcement (BeginQuorumEpoch, sent
again until each voter has fetched) and a resigning leader's request for an election (EndQuorumEpoch), and
how a follower takes them. The transitions these lead to (voting, becoming candidate or leader, following a
higher epoch) are the node's (`node.py`).
"""

from __future__ import annotations

from kraftlake.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    VoteRequest,
    VoteResponse,
)
from kraftlake.raft.node_base import NodeBase
from kraftlake.raft.states import (
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    UnattachedState,
)


class Election(NodeBase):
    """Vote requests and responses, BeginQuorumEpoch and EndQuorumEpoch, for `RaftNode`."""

    # -- Vote ----------------------------------------------------------------------------------------------
    def _log_is_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_epoch(), self.log.end_offset)

    def build_vote_request(self, voter: int, candidate_epoch: int, pre_vote: bool) -> VoteRequest:
        """A (pre-)vote request describing our log."""
        return VoteRequest(
            self.node_id,
            voter,
            self._next_corr(),
            candidate_epoch,
            self.node_id,
            self.log.last_epoch(),
            self.log.end_offset,
            pre_vote,
        )

    def handle_vote_request(self, request: VoteRequest, now_ms: int) -> None:
        """Grant a (pre-)vote only to an up-to-date log, once per epoch, and only without a live leader."""
        granted = False
        if not self.quorum.is_voter or request.candidate_epoch < self.epoch:
            granted = False
        elif request.pre_vote:
            state = self.quorum.state
            if isinstance(state, LeaderState) or (
                isinstance(state, FollowerState) and self._has_live_leader(state, now_ms)
            ):
                granted = False
            else:
                granted = self._log_is_up_to_date(request.last_epoch, request.last_epoch_end_offset)
        else:
            if request.candidate_epoch > self.epoch:
                self._observe_epoch(request.candidate_epoch, None, now_ms)
            granted = self._may_grant_vote(request)
            if granted:
                self._grant_vote(request.candidate_epoch, request.candidate_id, now_ms)
        self._send(
            VoteResponse(
                self.node_id,
                request.src,
                request.correlation_id,
                self.epoch,
                self.leader_id,
                granted,
                request.pre_vote,
                request.candidate_epoch,
            )
        )

    def _may_grant_vote(self, request: VoteRequest) -> bool:
        state = self.quorum.state
        if request.candidate_epoch != state.epoch or not isinstance(
            state, (UnattachedState, ProspectiveState)
        ):
            return False
        if state.voted_id not in (None, request.candidate_id):
            return False
        return self._log_is_up_to_date(request.last_epoch, request.last_epoch_end_offset)

    def _has_live_leader(self, state: FollowerState, now_ms: int) -> bool:
        contact = state.last_leader_contact_ms
        return (
            not state.leader_resigned
            and contact is not None
            and now_ms - contact < self.config.fetch_timeout_ms
        )

    def handle_vote_response(self, response: VoteResponse, now_ms: int) -> None:
        """Count a (pre-)vote; a higher epoch or a known leader ends the election."""
        if self._observe_epoch(response.epoch, response.leader_id, now_ms):
            return
        state = self.quorum.state
        if response.candidate_epoch != state.epoch:
            return
        if isinstance(state, ProspectiveState) and response.pre_vote:
            (state.granted if response.vote_granted else state.rejected).add(response.src)
            self._maybe_become_candidate(state, now_ms)
        elif (
            isinstance(state, CandidateState) and not response.pre_vote and state.backoff_deadline_ms is None
        ):
            (state.granted if response.vote_granted else state.rejected).add(response.src)
            self._maybe_become_leader(state, now_ms)

    # -- BeginQuorumEpoch / EndQuorumEpoch -----------------------------------------------------------------
    def _send_begin_quorum_epoch(self, leader: LeaderState, now_ms: int) -> None:
        for voter in sorted(self.quorum.voters - {self.node_id}):
            if leader.replicas[voter].last_fetch_ms is None:
                self._send(self.build_begin_quorum_epoch_request(voter, leader.epoch))
        leader.begin_epoch_deadline_ms = now_ms + self.config.fetch_timeout_ms // 2

    def build_begin_quorum_epoch_request(self, voter: int, epoch: int) -> BeginQuorumEpochRequest:
        """The new leader's announcement."""
        return BeginQuorumEpochRequest(self.node_id, voter, self._next_corr(), epoch, self.node_id)

    def handle_begin_quorum_epoch_request(self, request: BeginQuorumEpochRequest, now_ms: int) -> None:
        """Follow the announced leader unless we already know a higher epoch."""
        if request.epoch >= self.epoch:
            self._observe_epoch(request.epoch, request.leader_id, now_ms)
        state = self.quorum.state
        if isinstance(state, FollowerState) and state.leader == request.src and state.epoch == request.epoch:
            state.last_leader_contact_ms = now_ms
            state.fetch_deadline_ms = max(state.fetch_deadline_ms, now_ms + self.config.fetch_timeout_ms)
        self._send(
            BeginQuorumEpochResponse(
                self.node_id, request.src, request.correlation_id, self.epoch, self.leader_id
            )
        )

    def handle_begin_quorum_epoch_response(self, response: BeginQuorumEpochResponse, now_ms: int) -> None:
        """Only a higher epoch matters."""
        self._observe_epoch(response.epoch, response.leader_id, now_ms)

    def build_end_quorum_epoch_request(
        self, voter: int, epoch: int, successors: tuple[int, ...]
    ) -> EndQuorumEpochRequest:
        """A resigning leader's request for an election."""
        return EndQuorumEpochRequest(self.node_id, voter, self._next_corr(), epoch, self.node_id, successors)

    def handle_end_quorum_epoch_request(self, request: EndQuorumEpochRequest, now_ms: int) -> None:
        """Our leader resigned: stop trusting it and time out soon, sooner the more preferred we are."""
        if request.epoch >= self.epoch:
            self._observe_epoch(request.epoch, request.leader_id, now_ms)
        state = self.quorum.state
        if (
            isinstance(state, FollowerState)
            and state.epoch == request.epoch
            and state.leader == request.leader_id
        ):
            state.leader_resigned = True
            if self.node_id in request.preferred_successors:
                rank = request.preferred_successors.index(self.node_id)
                backoff = min(self.config.election_backoff_max_ms, 50 * (1 << min(rank, 10)) - 50)
            else:
                backoff = self.config.election_backoff_max_ms
            state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + backoff)
        self._send(
            EndQuorumEpochResponse(
                self.node_id, request.src, request.correlation_id, self.epoch, self.leader_id
            )
        )

    def handle_end_quorum_epoch_response(self, response: EndQuorumEpochResponse, now_ms: int) -> None:
        """Only a higher epoch matters."""
        self._observe_epoch(response.epoch, response.leader_id, now_ms)
