"""`FollowerFetch`: the follower's side of replication in a `RaftNode`.

A follower fetches from its leader's log end (only once all it holds is durable, since a fetch acknowledges
it), appends what it gets, truncates to a DivergingEpoch (never below its high watermark), downloads a
snapshot chunk by chunk when the leader names one, and retries after an error or a request timeout. An observer
without a leader probes a random voter to learn one.
"""

from __future__ import annotations

from kraftlake.raft.errors import LogTruncationError, RaftStorageError
from kraftlake.raft.messages import (
    Errors,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    OffsetAndEpoch,
    SnapshotId,
)
from kraftlake.raft.node_base import NodeBase
from kraftlake.raft.states import FollowerState, UnattachedState


class FollowerFetch(NodeBase):
    """Fetch and FetchSnapshot requests sent, and their responses handled, for `RaftNode`."""

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
