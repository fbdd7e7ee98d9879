"""The service's wire: Kafka's KRaft RPCs, translated to and from `kraftlake.raft.messages`.

Voters talk to each other exactly as Kafka 4.3.1's controllers do: Vote v2 (with PreVote),
BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v18 (``ReplicaState``, ``ReplicaDirectoryId``) and
FetchSnapshot v1, inside Kafka's framing (int32 size, request header v2, response header v1), built with the
message classes of `kraftlake.protocol.rpc`. This module translates raft messages both ways; what it shares
with the rest of the wire is in `rpc_common`, entries as record batches in `entry_batches`, the Fetch and
FetchSnapshot bodies in `response_bodies`, the append RPC in `append_rpc`, DescribeQuorum in `describe_quorum`.
Sockets are the runner's.

Translation rules
-----------------
- The raft messages' ``src`` / ``dst`` are node ids: a request names its sender in its body (``ReplicaId`` of a
  Fetch or FetchSnapshot, ``ReplicaId`` of a Vote's candidate, ``LeaderId`` of BeginQuorumEpoch and
  EndQuorumEpoch); a response comes from the peer its request went to. Kafka's correlation ids are int32 and
  per connection: the sending side keeps each outstanding request by its correlation id
  (`kraftlake.service.transport.PeerChannel`), and the answer is translated with it: the raft correlation id,
  and the fields Kafka's responses do not carry (a VoteResponse's ``pre_vote`` and ``candidate_epoch``, a Fetch's
  offset) come from the request.
- Entries travel as Kafka record batches v2, the batches the leader wrote: an entry's epoch is the batch's
  partition leader epoch, its timestamp the batch's base timestamp, ``batch_base`` the batch's base offset and
  ``control_type`` the control record's type. The leader sends the bytes it wrote
  (`entry_batches.encode_entries` takes a lookup of them, `kraftlake.service.file_log.FileRaftLog.raw_batch`);
  the follower gets them back from `entry_batches.decode_records` beside the entries and writes them
  unchanged. A batch that starts before the fetch offset is sent whole, as Kafka does; the receiver drops the
  entries below the offset it asked for.
- Every request carries ``ClusterId``; a voter refuses another one with INCONSISTENT_CLUSTER_ID (104) in the
  response's top-level error code, and its refusals never name its own cluster id.
- The service's own append RPC (no Kafka equivalent) has API key `APPEND_API_KEY` (1000), version 0, in the same
  framing: request header v2, response header v1, and a fixed struct body (`append_rpc.encode_append_request`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kraftlake.follow.observer import METADATA_TOPIC, METADATA_TOPIC_ID
from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
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
from kraftlake.service.entry_batches import decode_records, encode_entries
from kraftlake.service.errors import CodecError
from kraftlake.service.response_bodies import fetch_response, fetch_snapshot_response
from kraftlake.service.rpc_common import (
    BEGIN_QUORUM_EPOCH_VERSION,
    END_QUORUM_EPOCH_VERSION,
    FETCH_SNAPSHOT_VERSION,
    FETCH_VERSION,
    LISTENER_NAME,
    MAX_FETCH_BYTES,
    RESPONSE_TYPES,
    VOTE_VERSION,
    ZERO_UUID,
    RequestRefused,
    WireContext,
    check_cluster_id,
    from_wire_directory,
    from_wire_node,
    message_class,
    metadata_partition,
    raft_error,
    response_partition,
    to_wire_directory,
    to_wire_node,
)

# -- raft requests -> Kafka ----------------------------------------------------------------------------------


def _leader_endpoints(cls: Any, ctx: WireContext) -> list[Any]:
    endpoint = ctx.endpoints.get(ctx.node_id)
    if endpoint is None:
        return []
    return [cls.LeaderEndpoint(name=LISTENER_NAME, host=endpoint[0], port=endpoint[1])]


def kafka_request(message: Message, ctx: WireContext) -> tuple[int, int, Any]:
    """``(API key, version, Kafka request)`` of a raft request, at the version `SENT_VERSIONS` names."""
    cid = ctx.cluster_id
    if isinstance(message, FetchRequest):
        f = message_class("FetchRequest")
        partition = f.FetchPartition(
            partition=0,
            current_leader_epoch=message.epoch,
            fetch_offset=message.fetch_offset,
            last_fetched_epoch=message.last_fetched_epoch,
            log_start_offset=-1,
            partition_max_bytes=MAX_FETCH_BYTES,
            replica_directory_id=to_wire_directory(message.replica_directory_id),
        )
        return (
            ApiKey.FETCH,
            FETCH_VERSION,
            f(
                cluster_id=cid,
                replica_state=f.ReplicaState(replica_id=message.replica_id, replica_epoch=-1),
                max_wait_ms=message.max_wait_ms,
                min_bytes=0,
                max_bytes=MAX_FETCH_BYTES,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[f.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[partition])],
            ),
        )
    if isinstance(message, VoteRequest):
        v = rpc_messages.VoteRequest
        partition = v.PartitionData(
            partition_index=0,
            replica_epoch=message.candidate_epoch,
            replica_id=message.candidate_id,
            replica_directory_id=to_wire_directory(ctx.directory_id),
            voter_directory_id=ZERO_UUID,
            last_offset_epoch=message.last_epoch,
            last_offset=message.last_epoch_end_offset,
            pre_vote=message.pre_vote,
        )
        return (
            ApiKey.VOTE,
            VOTE_VERSION,
            v(
                cluster_id=cid,
                voter_id=message.dst,
                topics=[v.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
            ),
        )
    if isinstance(message, BeginQuorumEpochRequest):
        b = rpc_messages.BeginQuorumEpochRequest
        partition = b.PartitionData(
            partition_index=0,
            voter_directory_id=ZERO_UUID,
            leader_id=message.leader_id,
            leader_epoch=message.epoch,
        )
        return (
            ApiKey.BEGIN_QUORUM_EPOCH,
            BEGIN_QUORUM_EPOCH_VERSION,
            b(
                cluster_id=cid,
                voter_id=message.dst,
                topics=[b.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
                leader_endpoints=_leader_endpoints(b, ctx),
            ),
        )
    if isinstance(message, EndQuorumEpochRequest):
        q = rpc_messages.EndQuorumEpochRequest
        partition = q.PartitionData(
            partition_index=0,
            leader_id=message.leader_id,
            leader_epoch=message.epoch,
            preferred_candidates=[
                q.ReplicaInfo(candidate_id=c, candidate_directory_id=ZERO_UUID)
                for c in message.preferred_successors
            ],
        )
        return (
            ApiKey.END_QUORUM_EPOCH,
            END_QUORUM_EPOCH_VERSION,
            q(
                cluster_id=cid,
                topics=[q.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
                leader_endpoints=_leader_endpoints(q, ctx),
            ),
        )
    if isinstance(message, FetchSnapshotRequest):
        s = rpc_messages.FetchSnapshotRequest
        sid = message.snapshot_id
        partition = s.PartitionSnapshot(
            partition=0,
            current_leader_epoch=message.epoch,
            snapshot_id=s.SnapshotId(end_offset=sid.offset, epoch=sid.epoch),
            position=message.position,
            replica_directory_id=to_wire_directory(ctx.directory_id),
        )
        return (
            ApiKey.FETCH_SNAPSHOT,
            FETCH_SNAPSHOT_VERSION,
            s(
                cluster_id=cid,
                replica_id=message.replica_id,
                max_bytes=message.max_bytes,
                topics=[s.TopicSnapshot(name=METADATA_TOPIC, partitions=[partition])],
            ),
        )
    raise CodecError(f"no Kafka request for {type(message).__name__}")


def encode_raft_request(message: Message, correlation_id: int, ctx: WireContext) -> tuple[int, int, bytes]:
    """``(API key, version, frame)`` of a raft request sent with Kafka's `correlation_id`."""
    api_key, version, body = kafka_request(message, ctx)
    return api_key, version, rpc.encode_request(body, version, correlation_id, ctx.client_id())


# -- Kafka requests -> raft ----------------------------------------------------------------------------------


def fetch_replica_id(body: Any, version: int) -> int:
    """The sender of a Fetch: ``ReplicaState.ReplicaId`` from v15, ``ReplicaId`` before."""
    return int(body.replica_state.replica_id if version >= 15 else body.replica_id)


def sender_directory_id(api_key: int, version: int, body: Any) -> str | None:
    """The directory id a raft request carries of its sender ("" for Kafka's zero uuid); None where the
    request has no such field: BeginQuorumEpoch and EndQuorumEpoch (any version), Vote v0, Fetch before v17,
    FetchSnapshot v0."""
    if api_key == ApiKey.VOTE and version >= 1:
        return from_wire_directory(metadata_partition(body.topics, "topic_name", "Vote").replica_directory_id)
    if api_key == ApiKey.FETCH and version >= 17:
        return from_wire_directory(metadata_partition(body.topics, "topic_id", "Fetch").replica_directory_id)
    if api_key == ApiKey.FETCH_SNAPSHOT and version >= 1:
        return from_wire_directory(
            metadata_partition(body.topics, "name", "FetchSnapshot").replica_directory_id
        )
    return None


def raft_request(
    api_key: int, version: int, correlation_id: int, body: Any, node_id: int, cluster_id: str
) -> Message:
    """The raft request a voter steps for a Kafka request addressed to it (node `node_id`).

    Raises
    ------
    RequestRefused
        Another cluster id, another partition than ``__cluster_metadata``-0, or a Vote or BeginQuorumEpoch for
        another voter id.
    """
    corr = correlation_id
    if api_key == ApiKey.FETCH:
        check_cluster_id(body.cluster_id, cluster_id)
        p = metadata_partition(body.topics, "topic_id", "Fetch")
        replica = fetch_replica_id(body, version)
        return FetchRequest(
            replica,
            node_id,
            corr,
            p.current_leader_epoch,
            replica,
            p.fetch_offset,
            p.last_fetched_epoch,
            body.max_wait_ms,
            from_wire_directory(p.replica_directory_id) if version >= 17 else "",
        )
    if api_key == ApiKey.VOTE:
        check_cluster_id(body.cluster_id, cluster_id)
        if version >= 1 and body.voter_id >= 0 and body.voter_id != node_id:
            raise RequestRefused(
                Errors.INCONSISTENT_VOTER_SET, f"Vote for voter {body.voter_id} reached node {node_id}"
            )
        p = metadata_partition(body.topics, "topic_name", "Vote")
        return VoteRequest(
            p.replica_id,
            node_id,
            corr,
            p.replica_epoch,
            p.replica_id,
            p.last_offset_epoch,
            p.last_offset,
            bool(p.pre_vote) if version >= 2 else False,
        )
    if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
        check_cluster_id(body.cluster_id, cluster_id)
        if version >= 1 and body.voter_id >= 0 and body.voter_id != node_id:
            raise RequestRefused(
                Errors.INCONSISTENT_VOTER_SET,
                f"BeginQuorumEpoch for voter {body.voter_id} reached node {node_id}",
            )
        p = metadata_partition(body.topics, "topic_name", "BeginQuorumEpoch")
        return BeginQuorumEpochRequest(p.leader_id, node_id, corr, p.leader_epoch, p.leader_id)
    if api_key == ApiKey.END_QUORUM_EPOCH:
        check_cluster_id(body.cluster_id, cluster_id)
        p = metadata_partition(body.topics, "topic_name", "EndQuorumEpoch")
        successors = (
            tuple(p.preferred_successors)
            if version == 0
            else tuple(c.candidate_id for c in p.preferred_candidates)
        )
        return EndQuorumEpochRequest(p.leader_id, node_id, corr, p.leader_epoch, p.leader_id, successors)
    if api_key == ApiKey.FETCH_SNAPSHOT:
        check_cluster_id(body.cluster_id, cluster_id)
        p = metadata_partition(body.topics, "name", "FetchSnapshot")
        sid = p.snapshot_id
        return FetchSnapshotRequest(
            body.replica_id,
            node_id,
            corr,
            p.current_leader_epoch,
            body.replica_id,
            SnapshotId(sid.end_offset, sid.epoch),
            p.position,
            body.max_bytes,
        )
    raise RequestRefused(Errors.INVALID_REQUEST, f"API key {api_key} is not a raft RPC")


# -- raft responses -> Kafka ---------------------------------------------------------------------------------


def _node_endpoints(cls: Any, ctx: WireContext, leader_id: int | None) -> list[Any]:
    """The leader's endpoint (Kafka sends the endpoints of the leader it names)."""
    if leader_id is None or leader_id not in ctx.endpoints:
        return []
    host, port = ctx.endpoints[leader_id]
    return [cls.NodeEndpoint(node_id=leader_id, host=host, port=port)]


def kafka_response(
    message: Message,
    version: int,
    ctx: WireContext,
    raw_batch: Callable[[int], bytes | None] | None = None,
    log_start_offset: int = -1,
) -> Any:
    """The Kafka response body of a raft response (to a request of `version`: NodeEndpoints only in the versions
    that have them)."""
    if isinstance(message, FetchResponse):
        return fetch_response(
            error=message.error.value,
            leader_id=message.leader_id,
            epoch=message.epoch,
            high_watermark=message.high_watermark,
            log_start_offset=log_start_offset,
            records=encode_entries(message.entries, raw_batch) if message.entries else None,
            diverging_epoch=message.diverging_epoch,
            snapshot_id=message.snapshot_id,
            node_endpoints=_node_endpoints(message_class("FetchResponse"), ctx, message.leader_id)
            if message.error is not Errors.NONE and version >= 16
            else (),
        )
    endpoints = version >= 1
    if isinstance(message, VoteResponse):
        v = rpc_messages.VoteResponse
        partition = v.PartitionData(
            partition_index=0,
            error_code=message.error.value,
            leader_id=to_wire_node(message.leader_id),
            leader_epoch=message.epoch,
            vote_granted=message.vote_granted,
        )
        return v(
            error_code=0,
            topics=[v.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
            node_endpoints=_node_endpoints(v, ctx, message.leader_id) if endpoints else [],
        )
    if isinstance(message, (BeginQuorumEpochResponse, EndQuorumEpochResponse)):
        name = (
            "BeginQuorumEpochResponse"
            if isinstance(message, BeginQuorumEpochResponse)
            else "EndQuorumEpochResponse"
        )
        b = rpc.message_class(name)
        partition = b.PartitionData(
            partition_index=0,
            error_code=message.error.value,
            leader_id=to_wire_node(message.leader_id),
            leader_epoch=message.epoch,
        )
        return b(
            error_code=0,
            topics=[b.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
            node_endpoints=_node_endpoints(b, ctx, message.leader_id) if endpoints else [],
        )
    if isinstance(message, FetchSnapshotResponse):
        return fetch_snapshot_response(
            message.error.value,
            message.leader_id,
            message.epoch,
            message.snapshot_id,
            message.size,
            message.position,
            message.chunk,
            _node_endpoints(message_class("FetchSnapshotResponse"), ctx, message.leader_id)
            if endpoints
            else (),
        )
    raise CodecError(f"no Kafka response for {type(message).__name__}")


# -- Kafka responses -> raft ---------------------------------------------------------------------------------


def raft_response(api_key: int, body: Any, request: Message) -> tuple[Message, list[bytes]]:
    """The raft response to `request` in a Kafka response body, and (for a Fetch) the whole record batches it
    carried, to be written as they are.

    A top-level error (INCONSISTENT_CLUSTER_ID, ...) becomes the response's error with no leader and epoch -1:
    the node backs off and asks again.

    Raises
    ------
    CodecError
        On a response without the metadata partition or with malformed records.
    """
    src, dst, corr = request.dst, request.src, request.correlation_id
    top = body.error_code
    if api_key == ApiKey.FETCH:
        assert isinstance(request, FetchRequest)
        if top:
            return FetchResponse(src, dst, corr, -1, None, 0, error=raft_error(top)), []
        p = response_partition(body.responses, "Fetch")
        leader = p.current_leader
        entries, raws = decode_records(p.records, request.fetch_offset, f"Fetch response from node {src}")
        diverging = p.diverging_epoch
        snapshot = p.snapshot_id
        return FetchResponse(
            src,
            dst,
            corr,
            leader.leader_epoch,
            from_wire_node(leader.leader_id),
            p.high_watermark,
            tuple(entries),
            OffsetAndEpoch(diverging.end_offset, diverging.epoch)
            if diverging.end_offset >= 0 and diverging.epoch >= 0
            else None,
            SnapshotId(snapshot.end_offset, snapshot.epoch)
            if snapshot.end_offset >= 0 and snapshot.epoch >= 0
            else None,
            raft_error(p.error_code),
        ), raws
    if api_key == ApiKey.VOTE:
        assert isinstance(request, VoteRequest)
        if top:
            return VoteResponse(
                src, dst, corr, -1, None, False, request.pre_vote, request.candidate_epoch, raft_error(top)
            ), []
        p = response_partition(body.topics, "Vote")
        return VoteResponse(
            src,
            dst,
            corr,
            p.leader_epoch,
            from_wire_node(p.leader_id),
            bool(p.vote_granted),
            request.pre_vote,
            request.candidate_epoch,
            raft_error(p.error_code),
        ), []
    if api_key in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
        cls = BeginQuorumEpochResponse if api_key == ApiKey.BEGIN_QUORUM_EPOCH else EndQuorumEpochResponse
        if top:
            return cls(src, dst, corr, -1, None, raft_error(top)), []
        p = response_partition(body.topics, cls.__name__.removesuffix("Response"))
        return cls(src, dst, corr, p.leader_epoch, from_wire_node(p.leader_id), raft_error(p.error_code)), []
    if api_key == ApiKey.FETCH_SNAPSHOT:
        assert isinstance(request, FetchSnapshotRequest)
        if top:
            return FetchSnapshotResponse(
                src, dst, corr, -1, None, request.snapshot_id, 0, request.position, b"", raft_error(top)
            ), []
        p = response_partition(body.topics, "FetchSnapshot")
        leader = p.current_leader
        sid = p.snapshot_id
        return FetchSnapshotResponse(
            src,
            dst,
            corr,
            leader.leader_epoch,
            from_wire_node(leader.leader_id),
            SnapshotId(sid.end_offset, sid.epoch),
            p.size,
            p.position,
            p.unaligned_records or b"",
            raft_error(p.error_code),
        ), []
    raise CodecError(f"API key {api_key} is not a raft RPC")


def decode_raft_response(
    payload: bytes, api_key: int, version: int, request: Message
) -> tuple[Message, list[bytes]]:
    """`raft_response` of a response frame's payload (the bytes after the size).

    Raises
    ------
    CodecError
        If the payload is not a `version` response of `api_key` (or see `raft_response`).
    """
    try:
        _, body = rpc.decode_response(payload, api_key, version)
    except ProtocolError as exc:
        raise CodecError(f"malformed {rpc.api(api_key).name} v{version} response: {exc}") from exc
    return raft_response(api_key, body, request)


def encode_response(body: Any, api_key: int, version: int, correlation_id: int) -> bytes:
    """A response frame (Kafka's response header for the API and version)."""
    return rpc.encode_response(body, api_key, version, correlation_id)


def is_response(message: Message) -> bool:
    """Whether `message` answers a request (it goes back on the connection the request came in on)."""
    return isinstance(message, RESPONSE_TYPES)
