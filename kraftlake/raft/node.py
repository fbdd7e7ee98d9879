"""`RaftNode`: KRaft as a deterministic step machine.

A driver (`kraftlake.sim`'s simulation, or `kraftlake.service`'s asyncio runner) feeds it messages (`step`),
the passing of time (`tick`) and the completion of disk flushes (`flush`), and appends client values on the
leader (`append`).
Every call returns a `Ready`: what to persist and send, in this order:

1. write `Ready.quorum_state` to `quorum-state` (durably) if set: a vote is never sent before it is stored;
2. send `Ready.messages`;
3. when `Ready.flush_needed`, make the log durable (whenever the disk allows) and then call `flush` (with the
   end offset made durable, if the driver wrote out only part of the log, e.g. on another thread);
4. load `Ready.load_snapshot` if set, then apply `Ready.committed` in order.

Time enters only as `now_ms`, randomness only through the injected `random.Random`; the node owns its
`RaftLog` (it reads the leader-epoch cache and truncates synchronously, as Kafka's KafkaRaftClient does), but
appended entries count towards the high watermark only once flushed.

This module is the step machine: the driver API, the timers, the dispatch of messages, the Ready, and the
transitions (every call into `QuorumState`'s `transition_to_*`, and what the node starts in its new state).
The handlers are mixins by concern (`node_base.py` holds what they share): `election.py` (Vote,
BeginQuorumEpoch, EndQuorumEpoch), `leader_replication.py` (the leader's writes, high watermark, check-quorum
and Fetch / FetchSnapshot serving) and `follower_fetch.py` (fetching from the leader, truncation, snapshot
download, probing for a leader).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.control import LEADER_CHANGE_CONTROL_TYPE, encode_leader_change
from kraftlake.raft.election import Election
from kraftlake.raft.errors import EpochRefusedError, NotLeaderError, RaftStorageError
from kraftlake.raft.follower_fetch import FollowerFetch
from kraftlake.raft.leader_replication import LeaderReplication
from kraftlake.raft.log import CommittedEntries, RaftLog, snapshot_floor
from kraftlake.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    Errors,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraftlake.raft.quorum_state import MAX_USABLE_EPOCH, QuorumState, epoch_is_last, epoch_reachable
from kraftlake.raft.states import (
    CandidateState,
    ElectionState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)


@dataclass(frozen=True, slots=True)
class Ready:
    """What one call into a `RaftNode` asks its driver to do (see the module docstring for the order)."""

    messages: tuple[Message, ...] = ()
    quorum_state: ElectionState | None = None
    appended: tuple[Entry, ...] = ()
    flush_needed: bool = False
    load_snapshot: SnapshotId | None = None
    committed: CommittedEntries | tuple[()] = ()
    high_watermark: int = 0
    refused: tuple[EpochRefusedError, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """The leader's view of one replica (a row of `kafka-metadata-quorum describe --replication`).

    Times are in the node's clock (the `now_ms` its driver passes); None: never.
    """

    node_id: int
    directory_id: str
    log_end_offset: int
    last_fetch_ms: int | None
    last_caught_up_ms: int | None
    is_voter: bool


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where an append landed: committed once the high watermark passes `last_offset`."""

    base_offset: int
    last_offset: int
    epoch: int


class RaftNode(Election, LeaderReplication, FollowerFetch):
    """One KRaft replica (voter or observer) as a step machine: the driver API, the timers, the dispatch of
    messages to the concerns' handlers, and the transitions."""

    def __init__(
        self,
        node_id: int,
        config: QuorumConfig,
        log: RaftLog,
        stored: ElectionState | None,
        rng: random.Random,
        now_ms: int,
        *,
        timestamp_base_ms: int = 0,
        directory_id: str = "",
    ) -> None:
        """`timestamp_base_ms` is added to `now_ms` for the append timestamp of the entries this node writes
        as leader (the driver's wall clock minus its monotonic clock); `directory_id` is sent in fetches."""
        self.node_id = node_id
        self.timestamp_base_ms = timestamp_base_ms
        self.directory_id = directory_id
        self.config = config
        self.log = log
        self.rng = rng
        self.quorum = QuorumState(node_id, config, rng, stored, log.last_epoch(), now_ms)
        self._hw = 0
        self._applied_end = 0
        self._messages = []
        self._appended = []
        self._pending = []
        self._pending_bytes = 0
        self._refused: list[EpochRefusedError] = []
        self._corr = rng.randrange(1 << 40)
        self._seen_transitions = -1
        # follower side
        self._inflight_fetch = None
        self._awaiting_flush = False
        self._retry_at = None
        self._snap_download = None
        self._sync_state(now_ms)

    # -- public properties ---------------------------------------------------------------------------------
    @property
    def role(self) -> str:
        """The state's name: Unattached, Prospective, Candidate, Leader, Follower or Resigned."""
        return self.quorum.state.name

    @property
    def stuck(self) -> str | None:
        """Why this voter can never leave its state (None: it can): in the last usable epoch no election can
        follow, so it stays Prospective without a leader until its `quorum-state` is reset by hand."""
        state = self.quorum.state
        if (
            not self.quorum.is_voter
            or not epoch_is_last(state.epoch)
            or isinstance(state, (LeaderState, FollowerState))
        ):
            return None
        return (
            f"stuck: node {self.node_id} is {self.role} in epoch {self.epoch}: no election can follow it "
            "(Kafka's epochs are int32); the quorum needs its quorum-state files reset"
        )

    @property
    def is_leader(self) -> bool:
        """Whether this node leads the current epoch."""
        return isinstance(self.quorum.state, LeaderState)

    @property
    def high_watermark(self) -> int:
        """The highest committed end offset this node knows (never decreases while it runs)."""
        return self._hw

    @property
    def applied_end(self) -> int:
        """The end offset of what has been handed out as committed or as a snapshot to load."""
        return self._applied_end

    def replica_states(self, now_ms: int) -> tuple[ReplicaStatus, ...]:
        """Per replica (voters, then observers that fetched), as the leader knows it; empty unless leader."""
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            return ()
        out = []
        for rid, rep in sorted(
            state.replicas.items(), key=lambda kv: (kv[0] not in self.quorum.voters, kv[0])
        ):
            if rid == self.node_id:
                out.append(ReplicaStatus(rid, self.directory_id, self.log.end_offset, now_ms, now_ms, True))
            else:
                out.append(
                    ReplicaStatus(
                        rid,
                        rep.directory_id,
                        rep.end_offset,
                        rep.last_fetch_ms,
                        rep.last_caught_up_ms,
                        rid in self.quorum.voters,
                    )
                )
        return tuple(out)

    # -- driver API ----------------------------------------------------------------------------------------
    def step(self, message: Message, now_ms: int) -> Ready:
        """Handle one received message."""
        if message.dst != self.node_id:
            raise RaftStorageError(f"message for node {message.dst} stepped into node {self.node_id}")
        refusal = self._refusal(message)
        if refusal is not None:
            self._refuse(message, refusal)
        elif isinstance(
            message,
            (
                VoteResponse,
                BeginQuorumEpochResponse,
                EndQuorumEpochResponse,
                FetchResponse,
                FetchSnapshotResponse,
            ),
        ) and not epoch_reachable(self.epoch, message.epoch):
            self._refused_epoch(message, message.epoch)  # ignored: nothing changes
        elif isinstance(message, VoteRequest):
            self.handle_vote_request(message, now_ms)
        elif isinstance(message, VoteResponse):
            self.handle_vote_response(message, now_ms)
        elif isinstance(message, BeginQuorumEpochRequest):
            self.handle_begin_quorum_epoch_request(message, now_ms)
        elif isinstance(message, BeginQuorumEpochResponse):
            self.handle_begin_quorum_epoch_response(message, now_ms)
        elif isinstance(message, EndQuorumEpochRequest):
            self.handle_end_quorum_epoch_request(message, now_ms)
        elif isinstance(message, EndQuorumEpochResponse):
            self.handle_end_quorum_epoch_response(message, now_ms)
        elif isinstance(message, FetchRequest):
            self.handle_fetch_request(message, now_ms)
        elif isinstance(message, FetchResponse):
            self.handle_fetch_response(message, now_ms)
        elif isinstance(message, FetchSnapshotRequest):
            self.handle_fetch_snapshot_request(message, now_ms)
        elif isinstance(message, FetchSnapshotResponse):
            self.handle_fetch_snapshot_response(message, now_ms)
        return self._drain(now_ms)

    def _refusal(self, message: Message) -> Errors | None:
        """The error a request gets before any state changes: Kafka's checks of epoch and voter set."""
        if isinstance(message, VoteRequest):
            if not epoch_reachable(self.epoch, message.candidate_epoch):
                self._refused_epoch(message, message.candidate_epoch)
                return Errors.INVALID_REQUEST
            if message.candidate_id not in self.quorum.voters:
                return Errors.INCONSISTENT_VOTER_SET
        elif isinstance(message, (BeginQuorumEpochRequest, EndQuorumEpochRequest)):
            if not epoch_reachable(self.epoch, message.epoch):
                self._refused_epoch(message, message.epoch)
                return Errors.INVALID_REQUEST
            if message.leader_id not in self.quorum.voters:
                return Errors.INCONSISTENT_VOTER_SET
        elif isinstance(message, (FetchRequest, FetchSnapshotRequest)) and not epoch_reachable(
            self.epoch, message.epoch
        ):
            self._refused_epoch(message, message.epoch)
            return Errors.INVALID_REQUEST
        return None

    def _refused_epoch(self, message: Message, epoch: int) -> None:
        self._refused.append(
            EpochRefusedError(self.node_id, type(message).__name__, message.src, epoch, self.epoch)
        )

    def _refuse(self, request: Message, error: Errors) -> None:
        """Answer a refused request with `error` and what this node knows; nothing changes."""
        src, corr, epoch, leader = request.src, request.correlation_id, self.epoch, self.leader_id
        if isinstance(request, VoteRequest):
            self._send(
                VoteResponse(
                    self.node_id,
                    src,
                    corr,
                    epoch,
                    leader,
                    False,
                    request.pre_vote,
                    request.candidate_epoch,
                    error,
                )
            )
        elif isinstance(request, BeginQuorumEpochRequest):
            self._send(BeginQuorumEpochResponse(self.node_id, src, corr, epoch, leader, error))
        elif isinstance(request, EndQuorumEpochRequest):
            self._send(EndQuorumEpochResponse(self.node_id, src, corr, epoch, leader, error))
        elif isinstance(request, FetchRequest):
            self._send(FetchResponse(self.node_id, src, corr, epoch, leader, self._hw, error=error))
        elif isinstance(request, FetchSnapshotRequest):
            self._send(
                FetchSnapshotResponse(
                    self.node_id,
                    src,
                    corr,
                    epoch,
                    leader,
                    request.snapshot_id,
                    0,
                    request.position,
                    b"",
                    error,
                )
            )

    def tick(self, now_ms: int) -> Ready:
        """Let time pass to `now_ms`: fire the timers that are due."""
        state = self.quorum.state
        if isinstance(state, UnattachedState):
            if state.election_deadline_ms is not None and now_ms >= state.election_deadline_ms:
                self._start_prospective(now_ms)
            elif not self.quorum.is_voter and now_ms >= state.next_probe_ms:
                self._probe_for_leader(state, now_ms)
        elif isinstance(state, ProspectiveState):
            if now_ms >= state.election_deadline_ms:
                self._start_prospective(now_ms)
        elif isinstance(state, CandidateState):
            if state.backoff_deadline_ms is None and now_ms >= state.election_deadline_ms:
                state.backoff_deadline_ms = now_ms + self.quorum.election_backoff_ms(state.retries)
            if state.backoff_deadline_ms is not None and now_ms >= state.backoff_deadline_ms:
                self._start_prospective(now_ms)
        elif isinstance(state, LeaderState):
            self._leader_tick(state, now_ms)
        elif isinstance(state, FollowerState):
            if now_ms >= state.fetch_deadline_ms:
                if self.quorum.is_voter:
                    self._start_prospective(now_ms)
                else:
                    self.quorum.transition_to_unattached(state.epoch, now_ms)
            else:
                self._follower_tick(now_ms)
        elif isinstance(state, ResignedState) and now_ms >= state.election_deadline_ms:
            self._start_prospective(now_ms)
        return self._drain(now_ms)

    def _leader_tick(self, state: LeaderState, now_ms: int) -> None:
        deadline = self._check_quorum_deadline(state)
        if deadline is not None and now_ms >= deadline:
            self._resign(state, now_ms)
            return
        if state.linger_deadline_ms is not None and now_ms >= state.linger_deadline_ms:
            self._write_pending(state, now_ms)
        if now_ms >= state.begin_epoch_deadline_ms:
            self._send_begin_quorum_epoch(state, now_ms)
        self._complete_parked(state, now_ms, force=False)

    def flush(self, now_ms: int, end_offset: int | None = None) -> Ready:
        """The driver made the log durable (below `end_offset`; None: the node flushes the whole log itself):
        count it towards the high watermark, fetch on (a follower only once all it holds is durable)."""
        self.log.flush(end_offset)
        state = self.quorum.state
        if isinstance(state, LeaderState):
            self._maybe_update_high_watermark(state, now_ms)
        elif self._awaiting_flush:
            self._awaiting_flush = False
            self._send_fetch(now_ms)
        return self._drain(now_ms)

    def append(self, values: Sequence[bytes], now_ms: int) -> AppendResult:
        """Accumulate values on the leader; they are written after the linger time (or a full batch).

        The work this causes is returned by the next `tick`, `step` or `flush`.
        """
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(self.node_id, self.epoch, self.leader_id)
        if not values:
            raise RaftStorageError("append of no values")
        base = self.log.end_offset + len(self._pending)
        if not self._pending:
            state.linger_deadline_ms = now_ms + self.config.append_linger_ms
        self._pending.extend(values)
        self._pending_bytes += sum(len(v) for v in values)
        if (
            self._pending_bytes >= self.config.max_batch_bytes
            or self.config.append_linger_ms == 0
            or (self.config.append_when_idle and self._leader_idle(state))
        ):
            self._write_pending(state, now_ms)
        return AppendResult(base, base + len(values) - 1, state.epoch)

    def resign(self, now_ms: int) -> Ready:
        """Graceful shutdown of a leader: resign and ask the voters to elect a successor."""
        state = self.quorum.state
        if isinstance(state, LeaderState):
            self._resign(state, now_ms)
        return self._drain(now_ms)

    def create_snapshot(self, end_offset: int, data: bytes, retention_bytes: int = 0) -> SnapshotId:
        """Store a snapshot of the applied state up to `end_offset` and advance the log start offset as far as
        `retention_bytes` lets go of the log (see `RaftLog.delete_before_snapshot`; 0: to this snapshot)."""
        if end_offset > self._applied_end or end_offset > self._hw:
            raise RaftStorageError(f"snapshot at {end_offset} beyond the applied offset {self._applied_end}")
        floor = snapshot_floor(self.log)
        if end_offset <= floor:
            raise RaftStorageError(
                f"snapshot at {end_offset} not past the latest snapshot or log start {floor}"
            )
        snapshot_id = SnapshotId(end_offset, self.log.epoch_at(end_offset - 1))
        self.log.create_snapshot(snapshot_id, data)
        self.log.delete_before_snapshot(retention_bytes)
        return snapshot_id

    def next_deadline_ms(self) -> int | None:
        """The earliest time at which `tick` has something to do (None: only messages can wake it)."""
        state = self.quorum.state
        times: list[int | None] = []
        if isinstance(state, UnattachedState):
            times.append(state.election_deadline_ms)
            if not self.quorum.is_voter:
                times.append(state.next_probe_ms)
        elif isinstance(state, ProspectiveState):
            times.append(state.election_deadline_ms)
        elif isinstance(state, CandidateState):
            times.append(
                state.backoff_deadline_ms
                if state.backoff_deadline_ms is not None
                else state.election_deadline_ms
            )
        elif isinstance(state, LeaderState):
            times.append(state.linger_deadline_ms)
            times.append(self._check_quorum_deadline(state))
            times.append(state.begin_epoch_deadline_ms)
            times.extend(deadline for _, deadline in state.parked.values())
        elif isinstance(state, FollowerState):
            times.append(state.fetch_deadline_ms)
            times.append(self._retry_at)
            if self._inflight_fetch is not None:
                times.append(self._inflight_fetch[1] + self.config.request_timeout_ms)
        elif isinstance(state, ResignedState):
            times.append(state.election_deadline_ms)
        present = [t for t in times if t is not None]
        return min(present) if present else None

    # -- the Ready -----------------------------------------------------------------------------------------
    def _drain(self, now_ms: int) -> Ready:
        self._sync_state(now_ms)
        load = None
        if self._applied_end < self.log.log_start_offset or self._applied_end == 0:
            # behind the log start (a snapshot installed from the leader), or starting up: load the latest
            # snapshot and replay the tail after it (the log may retain entries before it for slow readers)
            latest = self.log.latest_snapshot()
            if latest is not None and latest.offset > self._applied_end:
                load = latest
                self._applied_end = latest.offset
            elif self._applied_end < self.log.log_start_offset:
                raise RaftStorageError(f"log starts at {self.log.log_start_offset} without a snapshot there")
        committed: CommittedEntries | tuple[()] = ()
        end = min(self._hw, self.log.end_offset)
        if end > self._applied_end:
            committed = CommittedEntries(self.log, self._applied_end, end)
            self._applied_end = end
        ready = Ready(
            tuple(self._messages),
            self.quorum.take_pending_persist(),
            tuple(self._appended),
            self.log.flushed_end_offset < self.log.end_offset,
            load,
            committed,
            self._hw,
            tuple(self._refused),
        )
        self._refused.clear()
        self._messages.clear()
        self._appended.clear()
        return ready

    def _sync_state(self, now_ms: int) -> None:
        """React to a transition: reset the per-state machinery and start what the new state does."""
        if self.quorum.transitions == self._seen_transitions:
            return
        self._seen_transitions = self.quorum.transitions
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            self._pending.clear()
            self._pending_bytes = 0
        self._inflight_fetch = None
        self._awaiting_flush = False
        self._retry_at = None
        self._snap_download = None
        if isinstance(state, FollowerState):
            self._send_fetch(now_ms)

    # -- transitions ---------------------------------------------------------------------------------------
    def _start_prospective(self, now_ms: int) -> None:
        self.quorum.transition_to_prospective(now_ms)
        state = self.quorum.state
        assert isinstance(state, ProspectiveState)
        if not self._maybe_become_candidate(state, now_ms):
            for voter in sorted(self.quorum.voters - {self.node_id}):
                self._send(self.build_vote_request(voter, state.epoch, pre_vote=True))

    def _maybe_become_candidate(self, state: ProspectiveState, now_ms: int) -> bool:
        if len(state.granted) < self.config.majority or state.epoch >= MAX_USABLE_EPOCH:
            return False
        self.quorum.transition_to_candidate(now_ms)
        candidate = self.quorum.state
        assert isinstance(candidate, CandidateState)
        if not self._maybe_become_leader(candidate, now_ms):
            for voter in sorted(self.quorum.voters - {self.node_id}):
                self._send(self.build_vote_request(voter, candidate.epoch, pre_vote=False))
        return True

    def _maybe_become_leader(self, state: CandidateState, now_ms: int) -> bool:
        if len(state.granted) < self.config.majority:
            return False
        epoch_start = self.log.end_offset
        leader = self.quorum.transition_to_leader(epoch_start, now_ms)
        self._sync_state(now_ms)
        control = Entry(
            epoch_start,
            leader.epoch,
            True,
            encode_leader_change(self.node_id, self.quorum.voters, leader.granting_voters),
            now_ms + self.timestamp_base_ms,
            epoch_start,
            LEADER_CHANGE_CONTROL_TYPE,
        )
        self.log.append([control])
        self._appended.append(control)
        self._send_begin_quorum_epoch(leader, now_ms)
        return True

    def _grant_vote(self, candidate_epoch: int, candidate_id: int, now_ms: int) -> None:
        self.quorum.transition_to_voted(candidate_epoch, candidate_id, now_ms)

    def _observe_epoch(self, epoch: int, leader_id: int | None, now_ms: int) -> bool:
        """Adopt a higher epoch or a newly learned leader; True if the state changed."""
        usable_leader = (
            leader_id
            if leader_id is not None and leader_id != self.node_id and leader_id in self.quorum.voters
            else None
        )
        if epoch > self.epoch:
            if usable_leader is not None:
                self.quorum.transition_to_follower(epoch, usable_leader, now_ms)
            else:
                self.quorum.transition_to_unattached(epoch, now_ms)
            return True
        state = self.quorum.state
        if (
            epoch == self.epoch
            and usable_leader is not None
            and not isinstance(state, (FollowerState, LeaderState, ResignedState))
            # a Prospective that gave up on this leader must not be pulled back by hearsay about it
            and not (isinstance(state, ProspectiveState) and state.last_leader == usable_leader)
        ):
            self.quorum.transition_to_follower(epoch, usable_leader, now_ms)
            return True
        return False

    def _resign(self, leader: LeaderState, now_ms: int) -> None:
        others = [v for v in self.quorum.voters if v != self.node_id]
        successors = tuple(sorted(others, key=lambda v: (-leader.replicas[v].end_offset, v)))
        self.quorum.transition_to_resigned(successors, now_ms)
        for voter in sorted(others):
            self._send(self.build_end_quorum_epoch_request(voter, leader.epoch, successors))
