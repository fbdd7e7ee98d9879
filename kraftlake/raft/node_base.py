"""`NodeBase`: the state a `RaftNode`'s concerns share, its outbox, and the transitions they ask it for.

`RaftNode` (`node.py`, the step machine) is built from one mixin per concern, each a `NodeBase`:
`Election` (`election.py`: Vote, BeginQuorumEpoch, EndQuorumEpoch), `LeaderReplication`
(`leader_replication.py`: the leader's writes, high watermark and Fetch / FetchSnapshot serving) and
`FollowerFetch` (`follower_fetch.py`: fetching from the leader). A concern's handlers read the node's state and
queue messages here; when one decides that the node changes state, it calls one of the abstract transitions
below, which `RaftNode` implements: every call into `QuorumState`'s transitions is in `node.py`.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.log import RaftLog
from kraftlake.raft.messages import Entry, Message, SnapshotId
from kraftlake.raft.quorum_state import QuorumState
from kraftlake.raft.states import CandidateState, ProspectiveState


class NodeBase(ABC):
    """The fields every concern of a `RaftNode` reads (`RaftNode.__init__` sets them) and its outbox."""

    node_id: int
    directory_id: str
    # added to now_ms for the append timestamp of what this node writes as leader
    timestamp_base_ms: int
    config: QuorumConfig
    log: RaftLog
    rng: random.Random
    quorum: QuorumState
    # the highest committed end offset this node knows; never decreases while it runs
    _hw: int
    # the outbox, handed to the driver in the next Ready
    _messages: list[Message]
    _appended: list[Entry]
    _corr: int
    # leader side: values appended and not yet written (linger, group commit)
    _pending: list[bytes]
    _pending_bytes: int
    # follower side: the fetch in flight (correlation id, sent at), a fetch held until the log is durable,
    # when to retry after an error, and the snapshot being downloaded
    _inflight_fetch: tuple[int, int] | None
    _awaiting_flush: bool
    _retry_at: int | None
    _snap_download: tuple[SnapshotId, bytearray] | None

    @property
    def epoch(self) -> int:
        """The current epoch."""
        return self.quorum.epoch

    @property
    def leader_id(self) -> int | None:
        """The leader of the current epoch, if known."""
        return self.quorum.leader_id

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _send(self, message: Message) -> None:
        self._messages.append(message)

    # -- transitions, made by RaftNode ---------------------------------------------------------------------
    @abstractmethod
    def _observe_epoch(self, epoch: int, leader_id: int | None, now_ms: int) -> bool:
        """Adopt a higher epoch or a newly learned leader; True if the state changed."""

    @abstractmethod
    def _grant_vote(self, candidate_epoch: int, candidate_id: int, now_ms: int) -> None:
        """Record (durably, through the next Ready) the vote for `candidate_id` in `candidate_epoch`."""

    @abstractmethod
    def _maybe_become_candidate(self, state: ProspectiveState, now_ms: int) -> bool:
        """Become a candidate if a majority granted the pre-vote; True if this node did."""

    @abstractmethod
    def _maybe_become_leader(self, state: CandidateState, now_ms: int) -> bool:
        """Become the leader if a majority granted the vote; True if this node did."""
