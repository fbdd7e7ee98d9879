"""The response bodies a voter builds besides translating raft messages: Fetch and FetchSnapshot for
partition 0 of the metadata topic, and a whole-request refusal of any API it serves."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from kraftlake.follow.observer import METADATA_TOPIC, METADATA_TOPIC_ID
from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.rpc import ApiKey
from kraftlake.raft.messages import OffsetAndEpoch, SnapshotId
from kraftlake.service.rpc_common import message_class, to_wire_node


@cache
def _no_diverging() -> Any:
    return message_class("FetchResponse").EpochEndOffset(epoch=-1, end_offset=-1)


@cache
def _no_snapshot() -> Any:
    return message_class("FetchResponse").SnapshotId(end_offset=-1, epoch=-1)


def fetch_response(
    *,
    error: int,
    leader_id: int | None,
    epoch: int,
    high_watermark: int,
    log_start_offset: int,
    records: bytes | None,
    diverging_epoch: OffsetAndEpoch | None = None,
    snapshot_id: SnapshotId | None = None,
    node_endpoints: Sequence[Any] = (),
    top_level_error: int = 0,
) -> Any:
    """A Fetch response body for partition 0 of the metadata topic."""
    f = message_class("FetchResponse")
    partition = f.PartitionData(
        partition_index=0,
        error_code=error,
        high_watermark=high_watermark,
        last_stable_offset=high_watermark,
        log_start_offset=log_start_offset,
        diverging_epoch=_no_diverging()
        if diverging_epoch is None
        else f.EpochEndOffset(epoch=diverging_epoch.epoch, end_offset=diverging_epoch.offset),
        current_leader=f.LeaderIdAndEpoch(leader_id=to_wire_node(leader_id), leader_epoch=epoch),
        snapshot_id=_no_snapshot()
        if snapshot_id is None
        else f.SnapshotId(end_offset=snapshot_id.offset, epoch=snapshot_id.epoch),
        records=records,
    )
    return f(
        throttle_time_ms=0,
        error_code=top_level_error,
        session_id=0,
        responses=[f.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[partition])],
        node_endpoints=list(node_endpoints),
    )


def fetch_snapshot_response(
    error: int,
    leader_id: int | None,
    epoch: int,
    snapshot_id: SnapshotId,
    size: int,
    position: int,
    chunk: bytes,
    node_endpoints: Sequence[Any] = (),
) -> Any:
    """A FetchSnapshot response body for partition 0 of the metadata topic."""
    s = message_class("FetchSnapshotResponse")
    partition = s.PartitionSnapshot(
        index=0,
        error_code=error,
        snapshot_id=s.SnapshotId(end_offset=snapshot_id.offset, epoch=snapshot_id.epoch),
        current_leader=s.LeaderIdAndEpoch(leader_id=to_wire_node(leader_id), leader_epoch=epoch),
        size=size,
        position=position,
        unaligned_records=chunk,
    )
    return s(
        throttle_time_ms=0,
        error_code=0,
        topics=[s.TopicSnapshot(name=METADATA_TOPIC, partitions=[partition])],
        node_endpoints=list(node_endpoints),
    )


def error_response(api_key: int, version: int, code: int, message: str = "") -> Any:
    """The body of a whole-request refusal of `api_key` (top-level error code; DescribeQuorum v2 and
    DescribeCluster also carry `message`)."""
    if api_key == ApiKey.API_VERSIONS:
        return rpc_messages.ApiVersionsResponse(error_code=code)
    if api_key == ApiKey.DESCRIBE_QUORUM:
        return rpc_messages.DescribeQuorumResponse(
            error_code=code, error_message=message if version >= 2 else None
        )
    if api_key == ApiKey.DESCRIBE_CLUSTER:
        return rpc_messages.DescribeClusterResponse(error_code=code, error_message=message, cluster_id="")
    names = {
        ApiKey.FETCH: "FetchResponse",
        ApiKey.VOTE: "VoteResponse",
        ApiKey.BEGIN_QUORUM_EPOCH: "BeginQuorumEpochResponse",
        ApiKey.END_QUORUM_EPOCH: "EndQuorumEpochResponse",
        ApiKey.FETCH_SNAPSHOT: "FetchSnapshotResponse",
    }
    return rpc.make(names[api_key], error_code=code)
