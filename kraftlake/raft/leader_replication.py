"""`LeaderReplication`: the leader's side of replication in a `RaftNode`.

The leader writes what clients appended (after the linger time, or at once while nothing it wrote is
uncommitted: group commit), advances the high watermark to what a majority of voters holds durably, and serves
Fetch (entries, a DivergingEpoch for a follower whose log diverged, or the SnapshotId to fetch when the
follower's position is below the log start; a fetch with nothing new is parked until there is, the high
watermark moves or its wait ends) and FetchSnapshot (one chunk at a time). Its check-quorum deadline says when
it must resign unless more voters fetch (the node's timer resigns).
"""

from __future__ import annotations

from kraftlake.raft.errors import RaftStorageError
from kraftlake.raft.messages import (
    NO_CONTROL_TYPE,
    Entry,
    Errors,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    OffsetAndEpoch,
)
from kraftlake.raft.node_base import NodeBase
from kraftlake.raft.states import LeaderState


class LeaderReplication(NodeBase):
    """The leader's writes, high watermark, check-quorum deadline and Fetch / FetchSnapshot serving."""

    # -- check-quorum, writes and the high watermark -------------------------------------------------------
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

    # -- Fetch ---------------------------------------------------------------------------------------------
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

    # -- FetchSnapshot -------------------------------------------------------------------------------------
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
