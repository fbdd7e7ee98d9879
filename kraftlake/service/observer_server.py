"""`ObserverServer`: Kafka's Fetch and FetchSnapshot from a replica id that is not a voter.

Observers are served by the service, never by the raft node, and only with committed records. With a
CurrentLeaderEpoch >= 0 the checks are Kafka's leader-only ones; with -1 any voter answers what it has
committed. Observers with an id >= 0 are tracked for DescribeQuorum for Kafka's session timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kraftlake.protocol import rpc_messages
from kraftlake.protocol.rpc import ApiKey
from kraftlake.raft.errors import RaftStorageError
from kraftlake.raft.messages import Errors, OffsetAndEpoch, SnapshotId
from kraftlake.service.config import NodeConfig
from kraftlake.service.connections import BUDGET_POLL_S
from kraftlake.service.entry_batches import encode_entries
from kraftlake.service.kafka_rpc import encode_response, fetch_replica_id
from kraftlake.service.limited_log import mono_ms
from kraftlake.service.messages import TrackedObserver
from kraftlake.service.response_bodies import fetch_response, fetch_snapshot_response
from kraftlake.service.rpc_common import ZERO_UUID, metadata_partition
from kraftlake.service.transport import InboundConnection

if TYPE_CHECKING:
    from kraftlake.service.raft_driver import RaftDriver

OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""Kafka's OBSERVER_SESSION_TIMEOUT_MS: an observer leaves DescribeQuorum this long after its last fetch."""
_MAX_TRACKED = 1000
"""Past this many observers tracked, a fetch sweeps out the expired ones at once."""
_SWEEP_EVERY_MS = 10_000


class ObserverServer:
    """Answers observers from `driver`'s node and log; an answer waits for `unsent_total` (the voter's
    replies not yet taken) to fall below the configured budget before it is built."""

    def __init__(self, config: NodeConfig, driver: RaftDriver, unsent_total: Callable[[], int]) -> None:
        self._config = config
        self._driver = driver
        self._unsent_total = unsent_total
        self._observers: dict[int, TrackedObserver] = {}
        self._observers_swept = 0

    def tracked(self, now: int) -> dict[int, TrackedObserver]:
        """The observers (id >= 0) that fetched within the session timeout before `now`, by replica id."""
        self._sweep_observers(now)
        return dict(self._observers)

    def _check(self, epoch: int) -> int:
        """Kafka's leader-only validation for an observer that names an epoch (-1: any voter answers)."""
        node = self._driver.node
        assert node is not None
        if epoch < 0:
            return Errors.NONE
        if epoch < node.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if epoch > node.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return Errors.NONE if node.is_leader else Errors.NOT_LEADER_OR_FOLLOWER

    def _voter_endpoints(self, cls: Any) -> list[Any]:
        return [
            cls.NodeEndpoint(node_id=v, host=host, port=port)
            for v, (host, port) in sorted(self._driver.voters.items())
        ]

    def serve_fetch(self, version: int, corr: int, body: Any, conn: InboundConnection) -> None:
        """Answer an observer's Fetch on `conn`: at once if refused, else once records past its offset are
        committed or its MaxWaitMs has passed (`conn.pending` holds the answer meanwhile)."""
        node, store = self._driver.node, self._driver.log_store
        assert node is not None and store is not None
        p = metadata_partition(body.topics, "topic_id", "Fetch")
        replica = fetch_replica_id(body, version)
        endpoints = self._voter_endpoints(rpc_messages.FetchResponse) if version >= 16 else []
        error = self._check(p.current_leader_epoch)
        if error:
            conn.send(
                encode_response(
                    fetch_response(
                        error=error,
                        leader_id=node.leader_id,
                        epoch=node.epoch,
                        high_watermark=node.applied_end,
                        log_start_offset=store.log_start_offset,
                        records=None,
                        node_endpoints=endpoints,
                    ),
                    ApiKey.FETCH,
                    version,
                    corr,
                )
            )
            return
        now = mono_ms()
        if replica >= 0:
            tracked = self._observers.get(replica)
            caught_up = (
                now
                if p.fetch_offset >= node.applied_end
                else (tracked.last_caught_up_ms if tracked else None)
            )
            directory = p.replica_directory_id if version >= 17 else ZERO_UUID
            self._observers[replica] = TrackedObserver(directory, p.fetch_offset, now, caught_up)
            if len(self._observers) > _MAX_TRACKED or now - self._observers_swept > _SWEEP_EVERY_MS:
                self._sweep_observers(now)
        max_bytes = max(
            1, min(p.partition_max_bytes, body.max_bytes, self._config.quorum_config.max_fetch_bytes)
        )
        conn.pending = asyncio.get_running_loop().create_task(
            self._answer_fetch(version, corr, p, max_bytes, body.max_wait_ms, endpoints, conn)
        )

    def _sweep_observers(self, now: int) -> None:
        self._observers_swept = now
        for rid in [
            r for r, o in self._observers.items() if now - o.last_fetch_ms > OBSERVER_SESSION_TIMEOUT_MS
        ]:
            del self._observers[rid]

    async def _answer_fetch(
        self,
        version: int,
        corr: int,
        p: Any,
        max_bytes: int,
        max_wait_ms: int,
        endpoints: list[Any],
        conn: InboundConnection,
    ) -> None:
        node, store = self._driver.node, self._driver.log_store
        assert node is not None and store is not None
        offset = p.fetch_offset
        deadline = time.monotonic() + max(0, max_wait_ms) / 1000
        while (
            self._driver.running
            and node.applied_end <= offset
            and time.monotonic() < deadline
            and offset >= store.log_start_offset
        ):
            waiter = self._driver.commit_waiter()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(waiter, max(0.0, deadline - time.monotonic()))
        # the answer is built only within the voter's budget for unsent replies (no await from here to send)
        while (
            self._driver.running
            and not conn.closed
            and self._unsent_total() >= self._config.max_unsent_total_bytes
        ):
            await asyncio.sleep(BUDGET_POLL_S)
        if not self._driver.running or conn.closed:
            return
        hw, start = node.applied_end, store.log_start_offset
        error, records, diverging, snapshot = Errors.NONE, None, None, None
        last_epoch = p.last_fetched_epoch
        if offset < start:
            snapshot = store.latest_snapshot()
            if snapshot is None:
                error = Errors.OFFSET_OUT_OF_RANGE
        elif (
            last_epoch >= 0
            and offset > 0
            and offset <= store.end_offset
            and (
                (found := store.end_offset_for_epoch(last_epoch)).epoch != last_epoch or found.offset < offset
            )
        ):
            if found.epoch < 0 or found.offset < start:
                snapshot = store.latest_snapshot()
                diverging = None if snapshot is not None else OffsetAndEpoch(0, 0)
            else:
                diverging = found
        else:
            end = min(hw, store.end_offset)
            if offset < end:
                # whole batches, as Kafka sends them: from the start of the batch holding the fetch offset
                base = store.read_all(offset, offset + 1)[0].batch_base
                begin = base if start <= base <= offset else offset
                records = encode_entries(store.read(begin, end, max_bytes), store.raw_batch)
        body = fetch_response(
            error=error,
            leader_id=node.leader_id,
            epoch=node.epoch,
            high_watermark=hw,
            log_start_offset=start,
            records=records,
            diverging_epoch=diverging,
            snapshot_id=snapshot,
            node_endpoints=endpoints,
        )
        conn.send(encode_response(body, ApiKey.FETCH, version, corr))

    def serve_snapshot(self, version: int, corr: int, body: Any, conn: InboundConnection) -> None:
        """Answer an observer's FetchSnapshot on `conn` with a chunk of the snapshot it names."""
        node, store = self._driver.node, self._driver.log_store
        assert node is not None and store is not None
        p = metadata_partition(body.topics, "name", "FetchSnapshot")
        sid = SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        endpoints = self._voter_endpoints(rpc_messages.FetchSnapshotResponse) if version >= 1 else []
        error = self._check(p.current_leader_epoch)
        size, chunk = 0, b""
        if not error:
            try:
                data = store.read_snapshot(sid)
            except (RaftStorageError, OSError):
                data = None
            if data is None:
                error = Errors.SNAPSHOT_NOT_FOUND
            elif p.position < 0 or p.position > len(data):
                error, size = Errors.POSITION_OUT_OF_RANGE, len(data)
            else:
                limit = max(1, min(body.max_bytes, self._config.quorum_config.snapshot_chunk_bytes))
                size, chunk = len(data), data[p.position : p.position + limit]
        response = fetch_snapshot_response(
            error, node.leader_id, node.epoch, sid, size, p.position, chunk, endpoints
        )
        conn.send(encode_response(response, ApiKey.FETCH_SNAPSHOT, version, corr))
