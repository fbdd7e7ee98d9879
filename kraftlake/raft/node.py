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
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kraftlake.raft.config import QuorumConfig
from kraftlake.raft.control import LEADER_CHANGE_CONTROL_TYPE, encode_leader_change
from kraftlake.raft.errors import EpochRefusedError, LogTruncationError, NotLeaderError, RaftStorageError
from kraftlake.raft.log import CommittedEntries, RaftLog, snapshot_floor
from kraftlake.raft.messages import (
    NO_CONTROL_TYPE,
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
    OffsetAndEpoch,
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


class RaftNode:
    """One KRaft replica (voter or observer) as a step machine."""

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
        self._messages: list[Message] = []
        self._appended: list[Entry] = []
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._refused: list[EpochRefusedError] = []
        self._corr = rng.randrange(1 << 40)
        self._seen_transitions = -1
        # follower side
        self._inflight_fetch: tuple[int, int] | None = None
        self._awaiting_flush = False
        self._retry_at: int | None = None
        self._snap_download: tuple[SnapshotId, bytearray] | None = None
        self._sync_state(now_ms)

    # -- public properties ---------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The current epoch."""
        return self.quorum.epoch

    @property
    def leader_id(self) -> int | None:
        """The leader of the current epoch, if known."""
        return self.quorum.leader_id

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

    # -- output --------------------------------------------------------------------------------------------
    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _send(self, message: Message) -> None:
        self._messages.append(message)

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

    # -- elections -----------------------------------------------------------------------------------------
    def _log_is_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        return (last_epoch, end_offset) >= (self.log.last_epoch(), self.log.end_offset)

    def _start_prospective(self, now_ms: int) -> None:
        self.quorum.transition_to_prospective(now_ms)
        state = self.quorum.state
        assert isinstance(state, ProspectiveState)
        if not self._maybe_become_candidate(state, now_ms):
            for voter in sorted(self.quorum.voters - {self.node_id}):
                self._send(self.build_vote_request(voter, state.epoch, pre_vote=True))

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
                self.quorum.transition_to_voted(request.candidate_epoch, request.candidate_id, now_ms)
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

    def _resign(self, leader: LeaderState, now_ms: int) -> None:
        others = [v for v in self.quorum.voters if v != self.node_id]
        successors = tuple(sorted(others, key=lambda v: (-leader.replicas[v].end_offset, v)))
        self.quorum.transition_to_resigned(successors, now_ms)
        for voter in sorted(others):
            self._send(self.build_end_quorum_epoch_request(voter, leader.epoch, successors))

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

    # -- leader --------------------------------------------------------------------------------------------
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

    def _check_quorum_deadline(self, state: LeaderState) -> int | None:
        """When the leader must resign unless more voters fetch (None for a single voter)."""
        needed = self.config.majority - 1
        if needed == 0:
            return None
        times = sorted(
            (
                r.last_fetch_ms if r.last_fetch_ms is not None else state.elected_ms
                for v, r in state.replicas.items()
                if v in self.quorum.voters and v != self.node_id
            ),
            reverse=True,
        )
        return times[needed - 1] + self.config.check_quorum_timeout_ms

    def _write_pending(self, state: LeaderState, now_ms: int) -> None:
        if not self._pending:
            state.linger_deadline_ms = None
            return
        start = self.log.end_offset
        ts = now_ms + self.timestamp_base_ms
        epoch = state.epoch
        new = tuple.__new__
        pending = self._pending
        if self._pending_bytes <= self.config.max_batch_bytes:
            entries = [
                new(Entry, (start + i, epoch, False, v, ts, start, NO_CONTROL_TYPE))
                for i, v in enumerate(pending)
            ]
        else:
            # what piled up while a write was in flight: batches of at most max_batch_bytes, as Kafka's
            # accumulator cuts them (a reader of the log gets one batch at a time, whole)
            entries, base, size, limit = [], start, 0, self.config.max_batch_bytes
            for i, v in enumerate(pending):
                if size and size + len(v) > limit:
                    base, size = start + i, 0
                size += len(v)
                entries.append(new(Entry, (start + i, epoch, False, v, ts, base, NO_CONTROL_TYPE)))
        self._pending.clear()
        self._pending_bytes = 0
        state.linger_deadline_ms = None
        self.log.append(entries)
        self._appended.extend(entries)
        self._complete_parked(state, now_ms, force=False)

    def _leader_idle(self, state: LeaderState) -> bool:
        """Whether everything the leader wrote is committed (nothing in flight)."""
        return state.high_watermark is not None and state.high_watermark >= self.log.end_offset

    def _maybe_update_high_watermark(self, state: LeaderState, now_ms: int) -> bool:
        ends = sorted(
            (
                self.log.flushed_end_offset if v == self.node_id else state.replicas[v].end_offset
                for v in self.quorum.voters
            ),
            reverse=True,
        )
        candidate = ends[len(ends) // 2]
        if candidate > state.epoch_start_offset and (
            state.high_watermark is None or candidate > state.high_watermark
        ):
            state.high_watermark = candidate
            self._hw = max(self._hw, candidate)
            if self._pending and self.config.append_when_idle and self._leader_idle(state):
                # group commit: what accumulated while the last write was in flight goes out now
                self._write_pending(state, now_ms)
            self._complete_parked(state, now_ms, force=True)
            return True
        return False

    def handle_fetch_request(self, request: FetchRequest, now_ms: int) -> None:
        """Answer with entries, a DivergingEpoch or a SnapshotId; long-poll when there is nothing new."""
        if request.epoch > self.epoch:
            self._observe_epoch(request.epoch, None, now_ms)
        state = self.quorum.state
        if not isinstance(state, LeaderState):
            self._send(
                FetchResponse(
                    self.node_id,
                    request.src,
                    request.correlation_id,
                    self.epoch,
                    self.leader_id,
                    self._hw,
                    error=Errors.NOT_LEADER_OR_FOLLOWER,
                )
            )
            return
        invalid = (
            Errors.FENCED_LEADER_EPOCH if request.epoch < state.epoch else self._invalid_fetch(state, request)
        )
        if invalid is not None:
            self._send(
                FetchResponse(
                    self.node_id,
                    request.src,
                    request.correlation_id,
                    state.epoch,
                    self.node_id,
                    self._hw,
                    error=invalid,
                )
            )
            return
        replica = state.replicas.setdefault(request.replica_id, type(state.replicas[self.node_id])())
        replica.last_fetch_ms = now_ms
        if request.replica_directory_id:
            replica.directory_id = request.replica_directory_id
        if request.fetch_offset >= self.log.end_offset:
            # Kafka's LastCaughtUpTimestamp: the replica asked from the leader's log end
            replica.last_caught_up_ms = now_ms
        state.parked.pop(request.replica_id, None)
        response = self._build_fetch_response(state, request)
        advanced = False
        if response.diverging_epoch is None and response.snapshot_id is None:
            replica.end_offset = request.fetch_offset
            if request.replica_id in self.quorum.voters:
                advanced = self._maybe_update_high_watermark(state, now_ms)
            if advanced:
                response = self._build_fetch_response(state, request)
        if (
            not response.entries
            and response.diverging_epoch is None
            and response.snapshot_id is None
            and request.max_wait_ms > 0
            and not advanced
        ):
            state.parked[request.replica_id] = (request, now_ms + request.max_wait_ms)
            return
        self._send(response)

    def _invalid_fetch(self, state: LeaderState, request: FetchRequest) -> Errors | None:
        """Kafka's checks of a fetch position before it is served or counted: a negative offset or a last
        fetched epoch above the request's is INVALID_REQUEST; an offset past this leader's log end that claims
        entries of its own epoch (which only it writes) is OFFSET_OUT_OF_RANGE. An offset past the end with an
        older epoch is a follower's divergent tail: answered with a DivergingEpoch, not counted."""
        if request.fetch_offset < 0 or request.last_fetched_epoch > request.epoch:
            return Errors.INVALID_REQUEST
        if request.fetch_offset > self.log.end_offset and request.last_fetched_epoch >= state.epoch:
            return Errors.OFFSET_OUT_OF_RANGE
        return None

    def _build_fetch_response(self, state: LeaderState, request: FetchRequest) -> FetchResponse:
        log = self.log
        hw = state.high_watermark if state.high_watermark is not None else 0

        def reply(**kwargs: object) -> FetchResponse:
            return FetchResponse(
                self.node_id,
                request.src,
                request.correlation_id,
                state.epoch,
                self.node_id,
                hw,
                **kwargs,  # type: ignore[arg-type]
            )

        snapshot = log.latest_snapshot()
        if request.fetch_offset < log.log_start_offset and snapshot is not None:
            return reply(snapshot_id=snapshot)
        if request.fetch_offset > 0:
            found = log.end_offset_for_epoch(request.last_fetched_epoch)
            if found.epoch < 0 or found.offset < log.log_start_offset:
                if snapshot is not None:
                    return reply(snapshot_id=snapshot)
                return reply(diverging_epoch=OffsetAndEpoch(0, 0))
            if found.epoch != request.last_fetched_epoch or found.offset < request.fetch_offset:
                return reply(diverging_epoch=found)
        if request.fetch_offset > log.end_offset:
            return reply(diverging_epoch=OffsetAndEpoch(log.end_offset, log.last_epoch()))
        entries = log.read(request.fetch_offset, log.end_offset, self.config.max_fetch_bytes)
        return reply(entries=tuple(entries))

    def _complete_parked(self, state: LeaderState, now_ms: int, force: bool) -> None:
        if not state.parked:
            return
        for replica_id, (request, deadline) in list(state.parked.items()):
            if force or now_ms >= deadline or self.log.end_offset > request.fetch_offset:
                del state.parked[replica_id]
                self._send(self._build_fetch_response(state, request))

    def handle_fetch_snapshot_request(self, request: FetchSnapshotRequest, now_ms: int) -> None:
        """Serve one chunk of a snapshot."""
        state = self.quorum.state

        def reply(error: Errors, size: int = 0, chunk: bytes = b"") -> None:
            self._send(
                FetchSnapshotResponse(
                    self.node_id,
                    request.src,
                    request.correlation_id,
                    self.epoch,
                    self.leader_id,
                    request.snapshot_id,
                    size,
                    request.position,
                    chunk,
                    error,
                )
            )

        if not isinstance(state, LeaderState):
            reply(Errors.NOT_LEADER_OR_FOLLOWER)
            return
        if request.epoch != state.epoch:
            reply(Errors.FENCED_LEADER_EPOCH if request.epoch < state.epoch else Errors.UNKNOWN_LEADER_EPOCH)
            return
        replica = state.replicas.get(request.replica_id)
        if replica is not None:
            replica.last_fetch_ms = now_ms
        try:
            data = self.log.read_snapshot(request.snapshot_id)
        except RaftStorageError:
            reply(Errors.SNAPSHOT_NOT_FOUND)
            return
        if request.position > len(data):
            reply(Errors.POSITION_OUT_OF_RANGE, len(data))
            return
        size = min(request.max_bytes, self.config.snapshot_chunk_bytes)
        reply(Errors.NONE, len(data), data[request.position : request.position + size])

    # -- follower ------------------------------------------------------------------------------------------
    def _follower_tick(self, now_ms: int) -> None:
        if self._retry_at is not None and now_ms >= self._retry_at:
            self._retry_at = None
            self._send_fetch(now_ms)
        elif (
            self._inflight_fetch is not None
            and now_ms >= self._inflight_fetch[1] + self.config.request_timeout_ms
        ):
            self._inflight_fetch = None
            self._send_fetch(now_ms)

    def _probe_for_leader(self, state: UnattachedState, now_ms: int) -> None:
        """An observer without a leader asks a random voter (as Kafka's bootstrap servers are used)."""
        voter = self.rng.choice(sorted(self.quorum.voters))
        state.next_probe_ms = now_ms + min(
            self.config.request_timeout_ms, 10 * self.config.retry_backoff_ms + 100
        )
        self._send(
            FetchRequest(
                self.node_id,
                voter,
                self._next_corr(),
                self.epoch,
                self.node_id,
                self.log.end_offset,
                self.log.last_epoch(),
                0,
            )
        )

    def _send_fetch(self, now_ms: int) -> None:
        state = self.quorum.state
        if not isinstance(state, FollowerState):
            return
        if self._snap_download is not None:
            snapshot_id, buffer = self._snap_download
            self._send(self.build_fetch_snapshot_request(state, snapshot_id, len(buffer), now_ms))
            return
        if self.log.flushed_end_offset < self.log.end_offset:
            # only durable entries may be acknowledged to the leader
            self._awaiting_flush = True
            return
        self._send(self.build_fetch_request(state, now_ms))

    def build_fetch_request(self, state: FollowerState, now_ms: int) -> FetchRequest:
        """A fetch from our log end offset, naming the epoch of our last entry."""
        corr = self._next_corr()
        self._inflight_fetch = (corr, now_ms)
        return FetchRequest(
            self.node_id,
            state.leader,
            corr,
            state.epoch,
            self.node_id,
            self.log.end_offset,
            self.log.last_epoch(),
            self.config.max_fetch_wait_ms,
            self.directory_id,
        )

    def build_fetch_snapshot_request(
        self, state: FollowerState, snapshot_id: SnapshotId, position: int, now_ms: int
    ) -> FetchSnapshotRequest:
        """Ask for the next chunk of the snapshot being downloaded."""
        corr = self._next_corr()
        self._inflight_fetch = (corr, now_ms)
        return FetchSnapshotRequest(
            self.node_id,
            state.leader,
            corr,
            state.epoch,
            self.node_id,
            snapshot_id,
            position,
            self.config.snapshot_chunk_bytes,
        )

    def _accept_response(self, response: FetchResponse | FetchSnapshotResponse, now_ms: int) -> bool:
        """Common checks of a fetch-type response; True if the follower should process its body."""
        if self._observe_epoch(response.epoch, response.leader_id, now_ms):
            return False
        state = self.quorum.state
        if isinstance(state, UnattachedState) and not self.quorum.is_voter:
            return False
        if not isinstance(state, FollowerState) or response.src != state.leader:
            return False
        if self._inflight_fetch is None or self._inflight_fetch[0] != response.correlation_id:
            return False
        self._inflight_fetch = None
        if response.error is not Errors.NONE:
            self._snap_download = None if isinstance(response, FetchSnapshotResponse) else self._snap_download
            self._retry_at = now_ms + self.config.retry_backoff_ms
            return False
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        state.last_leader_contact_ms = now_ms
        return True

    def handle_fetch_response(self, response: FetchResponse, now_ms: int) -> None:
        """Append entries, truncate on a DivergingEpoch, or start downloading a snapshot."""
        if not self._accept_response(response, now_ms):
            return
        if response.diverging_epoch is not None:
            self._truncate_to_diverging(response.diverging_epoch)
        elif response.snapshot_id is not None:
            self._snap_download = (response.snapshot_id, bytearray())
        elif response.entries:
            if response.entries[0].offset != self.log.end_offset:
                raise RaftStorageError(
                    f"node {self.node_id}: fetch response at {response.entries[0].offset}, "
                    f"log end {self.log.end_offset}"
                )
            self.log.append(response.entries)
            self._appended.extend(response.entries)
        new_hw = min(response.high_watermark, self.log.end_offset)
        if response.diverging_epoch is None and response.snapshot_id is None and new_hw > self._hw:
            self._hw = new_hw
        self._send_fetch(now_ms)

    def _truncate_to_diverging(self, diverging: OffsetAndEpoch) -> None:
        local = self.log.end_offset_for_epoch(diverging.epoch)
        target = min(diverging.offset, local.offset) if local.epoch >= 0 else diverging.offset
        target = max(target, self.log.log_start_offset)
        if target < self._hw:
            raise LogTruncationError(
                f"node {self.node_id}: DivergingEpoch {diverging} would truncate to {target}, "
                f"below the high watermark {self._hw}"
            )
        self.log.truncate_to(target)

    def handle_fetch_snapshot_response(self, response: FetchSnapshotResponse, now_ms: int) -> None:
        """Collect a chunk; install the snapshot once complete and fetch on from its end."""
        if self._snap_download is None or response.snapshot_id != self._snap_download[0]:
            self._observe_epoch(response.epoch, response.leader_id, now_ms)
            return
        if not self._accept_response(response, now_ms):
            return
        snapshot_id, buffer = self._snap_download
        if response.position != len(buffer):
            self._send_fetch(now_ms)
            return
        buffer.extend(response.chunk)
        if len(buffer) >= response.size:
            self.log.install_snapshot(snapshot_id, bytes(buffer))
            self._snap_download = None
            self._hw = max(self._hw, snapshot_id.offset)
        self._send_fetch(now_ms)
