"""The service's wire: Kafka's KRaft RPCs, translated to and from `kraftlake.raft.messages`.

Voters talk to each other exactly as Kafka 4.3.1's controllers do: Vote v2 (with PreVote),
BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v18 (``ReplicaState``, ``ReplicaDirectoryId``) and
FetchSnapshot v1, inside Kafka's framing (int32 size, request header v2, response header v1), built with the
message classes of `kraftlake.protocol.rpc`. This module only translates; sockets are the runner's.

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
  ``control_type`` the control record's type. The leader sends the bytes it wrote (`encode_entries` takes a
  lookup of them, `kraftlake.service.file_log.FileRaftLog.raw_batch`); the follower gets them back from
  `decode_records` beside the entries and writes them unchanged. A batch that starts before the fetch offset is
  sent whole, as Kafka does; the receiver drops the entries below the offset it asked for.
- Every request carries ``ClusterId``; a voter refuses another one with INCONSISTENT_CLUSTER_ID (104) in the
  response's top-level error code, and its refusals never name its own cluster id.
- The service's own append RPC (no Kafka equivalent) has API key `APPEND_API_KEY` (1000), version 0, in the same
  framing: request header v2, response header v1, and a fixed struct body (`encode_append_request`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kraftlake.follow.errors import ObserverProtocolError
from kraftlake.follow.observer import METADATA_TOPIC, METADATA_TOPIC_ID, split_batches
from kraftlake.logformat import RecordBatch, build_control_batch, control_record_type
from kraftlake.logformat.batch import CONTROL_MASK
from kraftlake.logformat.errors import LogFormatError
from kraftlake.protocol import rpc, rpc_messages
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.rpc import ApiKey
from kraftlake.protocol.versions import Versions
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
from kraftlake.service.batch_writer import kraft_data_batch, uniform_values
from kraftlake.service.errors import CodecError
from kraftlake.service.messages import STUCK_PREFIX, QuorumDescription, ReplicaInfo, VoterInfo, follower_lag

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Twice Kafka's default max fetch size (8 MiB), so a full fetch response always fits."""
MAX_FETCH_BYTES = 8 * 1024 * 1024
"""KafkaRaftClient's MAX_FETCH_SIZE_BYTES: the MaxBytes a voter's Fetch asks for."""
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's ``Uuid.ZERO_UUID``: an unknown directory id."""
LISTENER_NAME = "CONTROLLER"
APPEND_API_KEY = 1000
"""The service's append RPC (values appended by the leader, answered once committed)."""

VOTE_VERSION = 2
BEGIN_QUORUM_EPOCH_VERSION = 1
END_QUORUM_EPOCH_VERSION = 1
FETCH_VERSION = 18
FETCH_SNAPSHOT_VERSION = 1
SENT_VERSIONS: dict[type[Message], tuple[int, int]] = {
    VoteRequest: (ApiKey.VOTE, VOTE_VERSION),
    BeginQuorumEpochRequest: (ApiKey.BEGIN_QUORUM_EPOCH, BEGIN_QUORUM_EPOCH_VERSION),
    EndQuorumEpochRequest: (ApiKey.END_QUORUM_EPOCH, END_QUORUM_EPOCH_VERSION),
    FetchRequest: (ApiKey.FETCH, FETCH_VERSION),
    FetchSnapshotRequest: (ApiKey.FETCH_SNAPSHOT, FETCH_SNAPSHOT_VERSION),
}
"""The (API key, version) a voter sends each raft request at: what Kafka 4.3.1's controllers send."""

SERVED: dict[int, Versions] = {
    ApiKey.FETCH: Versions(13, 18),
    ApiKey.API_VERSIONS: Versions(0, 4),
    ApiKey.VOTE: Versions(0, 2),
    ApiKey.BEGIN_QUORUM_EPOCH: Versions(0, 1),
    ApiKey.END_QUORUM_EPOCH: Versions(0, 1),
    ApiKey.DESCRIBE_QUORUM: Versions(0, 2),
    ApiKey.FETCH_SNAPSHOT: Versions(0, 1),
    ApiKey.DESCRIBE_CLUSTER: Versions(0, 2),
    APPEND_API_KEY: Versions(0, 0),
}
"""What a voter answers (its ApiVersions): Kafka's RPCs a controller quorum needs, and the append RPC."""


def warm_up() -> None:
    """Generate the codecs of every RPC a voter sends or answers (once per process: a second or so of
    compiling), so that a voter's first election or fetch does not wait for them."""
    rpc.message_class("RequestHeader")
    rpc.message_class("ResponseHeader")
    for key in SERVED:
        if key != APPEND_API_KEY:
            api = rpc.api(key)
            rpc.message_class(api.request.name)
            rpc.message_class(api.response.name)


RESPONSE_TYPES = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
)


def raft_error(code: int) -> Errors:
    """A Kafka error code as an `Errors` member (UNKNOWN_SERVER_ERROR for one it has no member for)."""
    return Errors.of(code)


class RequestRefused(CodecError):
    """Raised when an inbound request is well formed but cannot be served; `code` is Kafka's error code for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class WireContext:
    """What a voter puts into the requests and responses it sends besides the raft message."""

    cluster_id: str
    node_id: int
    directory_id: str
    endpoints: dict[int, tuple[str, int]]
    """Every voter's (host, port), for LeaderEndpoints and NodeEndpoints."""

    def client_id(self) -> str:
        return f"kraftlake-raft-{self.node_id}"


def _dir(directory_id: str) -> str:
    return directory_id or ZERO_UUID


def _undir(directory_id: str) -> str:
    return "" if directory_id == ZERO_UUID else directory_id


def _node(leader_id: int | None) -> int:
    return -1 if leader_id is None else leader_id


def _leader(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


def metadata_partition(topics: Sequence[Any], name_attr: str, what: str) -> Any:
    """The single partition 0 of the metadata topic a KRaft request addresses."""
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise RequestRefused(Errors.INVALID_REQUEST, f"{what} must address exactly one partition")
    topic = topics[0]
    name = getattr(topic, name_attr)
    if name_attr == "topic_id" and name != METADATA_TOPIC_ID:
        raise RequestRefused(
            Errors.UNKNOWN_TOPIC_ID,
            f"{what} of topic id {name}: only the metadata topic {METADATA_TOPIC_ID} is served",
        )
    if name_attr != "topic_id" and name != METADATA_TOPIC:
        raise RequestRefused(
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            f"{what} of topic {name!r}: only {METADATA_TOPIC} is served",
        )
    partition = topic.partitions[0]
    index = partition[0]  # partition_index / partition: the first field of every KRaft partition struct
    if index != 0:
        raise RequestRefused(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{what} of partition {index}: only 0")
    return partition


def check_cluster_id(sent: str | None, ours: str) -> None:
    """Refuse another cluster's request (a null ClusterId is accepted, as Kafka does).

    Raises
    ------
    RequestRefused
        INCONSISTENT_CLUSTER_ID, naming the id sent (never ours).
    """
    if sent is not None and sent != ours:
        raise RequestRefused(Errors.INCONSISTENT_CLUSTER_ID, f"cluster id {sent!r} is not this quorum's")


# -- entries as record batches -------------------------------------------------------------------------------

_BATCH_HEAD = struct.Struct(">qi")
_EPOCH_AT = struct.Struct(">i")


def batch_last_offset(raw: bytes) -> int:
    """The last offset of the v2 batch in `raw` (base offset + last offset delta)."""
    base = _BATCH_HEAD.unpack_from(raw, 0)[0]
    return int(base + _EPOCH_AT.unpack_from(raw, 23)[0])


def build_batch(group: Sequence[Entry]) -> bytes:
    """The batch of one leader write (entries of one batch base, epoch, timestamp and kind) at its first offset."""
    first = group[0]
    if first.is_control:
        return build_control_batch(
            first.offset, first.epoch, first.timestamp, [(e.control_type, e.value) for e in group]
        )
    return kraft_data_batch(first.offset, first.epoch, first.timestamp, [e.value for e in group])


def encode_entries(entries: Sequence[Entry], raw_batch: Callable[[int], bytes | None] | None = None) -> bytes:
    """`entries` (consecutive offsets) as the record batches of a Fetch response.

    Each leader batch goes as the bytes `raw_batch(batch_base)` returns when they hold exactly that batch's
    entries up to the last one sent (its first entries may be below ``entries[0]``: the batch goes whole); other
    runs are built (`build_batch`, at the run's first offset).
    """
    n = len(entries)
    if not n:
        return b""
    parts: list[bytes] = []
    first_offset = entries[0].offset
    i = 0
    while i < n:
        e = entries[i]
        base = e.batch_base
        raw = raw_batch(base) if raw_batch is not None and base >= 0 else None
        if raw is not None:
            j = batch_last_offset(raw) - first_offset + 1
            if (
                i < j <= n
                and entries[j - 1].batch_base == base
                and entries[j - 1].epoch == e.epoch
                and _EPOCH_AT.unpack_from(raw, 12)[0] == e.epoch
            ):
                parts.append(raw)
                i = j
                continue
        key = (base, e.epoch, e.is_control, e.timestamp)
        j = i + 1
        while j < n:
            f = entries[j]
            if (f.batch_base, f.epoch, f.is_control, f.timestamp) != key or base < 0:
                break
            j += 1
        parts.append(build_batch(entries[i:j]))
        i = j
    return b"".join(parts)


def decode_records(
    records: bytes | None, from_offset: int, source: str, end_offset: int | None = None
) -> tuple[list[Entry], list[bytes]]:
    """The entries at or above `from_offset` (and below `end_offset`, if given: batches past it are not even
    decoded) in a Fetch response's records, and the whole batches that start at or above it (to be written
    unchanged).

    Raises
    ------
    CodecError
        On a batch with a bad length, magic or CRC, or records that are not KRaft's.
    """
    if not records:
        return [], []
    try:
        batches = split_batches(records, source)
    except ObserverProtocolError as exc:
        raise CodecError(str(exc)) from exc
    entries: list[Entry] = []
    raws: list[bytes] = []
    new = tuple.__new__
    add = entries.append
    for fetched in batches:
        if fetched.last_offset < from_offset:
            continue
        if end_offset is not None and fetched.base_offset >= end_offset:
            break
        raw = fetched.data
        batch = RecordBatch(raw, source=source)
        base, epoch, ts = batch.base_offset, batch.partition_leader_epoch, batch.base_timestamp
        try:
            if batch.attributes & CONTROL_MASK:
                for rec in batch.records:
                    if rec.offset >= from_offset:
                        add(
                            new(
                                Entry,
                                (
                                    rec.offset,
                                    epoch,
                                    True,
                                    rec.value or b"",
                                    ts,
                                    base,
                                    control_record_type(rec.key),
                                ),
                            )
                        )
            else:
                values = uniform_values(raw, batch.record_count) if not batch.attributes else None
                if values is None:
                    values = batch.kraft_values()
                if values is None:
                    values = [rec.value or b"" for rec in batch.records]
                skip = max(0, from_offset - base)
                for k in range(skip, len(values)):
                    add(new(Entry, (base + k, epoch, False, values[k], ts, base, NO_CONTROL_TYPE)))
        except LogFormatError as exc:
            raise CodecError(f"{source}: {exc}") from exc
        if base >= from_offset:
            raws.append(raw)
    if end_offset is not None and entries and entries[-1].offset >= end_offset:
        entries = [e for e in entries if e.offset < end_offset]
    return entries, raws


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
        f = _cls("FetchRequest")
        partition = f.FetchPartition(
            partition=0,
            current_leader_epoch=message.epoch,
            fetch_offset=message.fetch_offset,
            last_fetched_epoch=message.last_fetched_epoch,
            log_start_offset=-1,
            partition_max_bytes=MAX_FETCH_BYTES,
            replica_directory_id=_dir(message.replica_directory_id),
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
            replica_directory_id=_dir(ctx.directory_id),
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
            replica_directory_id=_dir(ctx.directory_id),
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
        return _undir(metadata_partition(body.topics, "topic_name", "Vote").replica_directory_id)
    if api_key == ApiKey.FETCH and version >= 17:
        return _undir(metadata_partition(body.topics, "topic_id", "Fetch").replica_directory_id)
    if api_key == ApiKey.FETCH_SNAPSHOT and version >= 1:
        return _undir(metadata_partition(body.topics, "name", "FetchSnapshot").replica_directory_id)
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
            _undir(p.replica_directory_id) if version >= 17 else "",
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
            node_endpoints=_node_endpoints(_cls("FetchResponse"), ctx, message.leader_id)
            if message.error is not Errors.NONE and version >= 16
            else (),
        )
    endpoints = version >= 1
    if isinstance(message, VoteResponse):
        v = rpc_messages.VoteResponse
        partition = v.PartitionData(
            partition_index=0,
            error_code=message.error.value,
            leader_id=_node(message.leader_id),
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
            leader_id=_node(message.leader_id),
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
            _node_endpoints(_cls("FetchSnapshotResponse"), ctx, message.leader_id) if endpoints else (),
        )
    raise CodecError(f"no Kafka response for {type(message).__name__}")


@cache
def _cls(name: str) -> Any:
    """A message class (its codecs are generated on first use: not at import)."""
    return rpc.message_class(name)


@cache
def _no_diverging() -> Any:
    return _cls("FetchResponse").EpochEndOffset(epoch=-1, end_offset=-1)


@cache
def _no_snapshot() -> Any:
    return _cls("FetchResponse").SnapshotId(end_offset=-1, epoch=-1)


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
    f = _cls("FetchResponse")
    partition = f.PartitionData(
        partition_index=0,
        error_code=error,
        high_watermark=high_watermark,
        last_stable_offset=high_watermark,
        log_start_offset=log_start_offset,
        diverging_epoch=_no_diverging()
        if diverging_epoch is None
        else f.EpochEndOffset(epoch=diverging_epoch.epoch, end_offset=diverging_epoch.offset),
        current_leader=f.LeaderIdAndEpoch(leader_id=_node(leader_id), leader_epoch=epoch),
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
    s = _cls("FetchSnapshotResponse")
    partition = s.PartitionSnapshot(
        index=0,
        error_code=error,
        snapshot_id=s.SnapshotId(end_offset=snapshot_id.offset, epoch=snapshot_id.epoch),
        current_leader=s.LeaderIdAndEpoch(leader_id=_node(leader_id), leader_epoch=epoch),
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


# -- Kafka responses -> raft ---------------------------------------------------------------------------------


def _response_partition(topics: Sequence[Any], what: str) -> Any:
    for topic in topics:
        for partition in topic.partitions:
            if partition[0] == 0:
                return partition
    raise CodecError(f"{what} response without partition 0 of {METADATA_TOPIC}")


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
        p = _response_partition(body.responses, "Fetch")
        leader = p.current_leader
        entries, raws = decode_records(p.records, request.fetch_offset, f"Fetch response from node {src}")
        diverging = p.diverging_epoch
        snapshot = p.snapshot_id
        return FetchResponse(
            src,
            dst,
            corr,
            leader.leader_epoch,
            _leader(leader.leader_id),
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
        p = _response_partition(body.topics, "Vote")
        return VoteResponse(
            src,
            dst,
            corr,
            p.leader_epoch,
            _leader(p.leader_id),
            bool(p.vote_granted),
            request.pre_vote,
            request.candidate_epoch,
            raft_error(p.error_code),
        ), []
    if api_key in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
        cls = BeginQuorumEpochResponse if api_key == ApiKey.BEGIN_QUORUM_EPOCH else EndQuorumEpochResponse
        if top:
            return cls(src, dst, corr, -1, None, raft_error(top)), []
        p = _response_partition(body.topics, cls.__name__.removesuffix("Response"))
        return cls(src, dst, corr, p.leader_epoch, _leader(p.leader_id), raft_error(p.error_code)), []
    if api_key == ApiKey.FETCH_SNAPSHOT:
        assert isinstance(request, FetchSnapshotRequest)
        if top:
            return FetchSnapshotResponse(
                src, dst, corr, -1, None, request.snapshot_id, 0, request.position, b"", raft_error(top)
            ), []
        p = _response_partition(body.topics, "FetchSnapshot")
        leader = p.current_leader
        sid = p.snapshot_id
        return FetchSnapshotResponse(
            src,
            dst,
            corr,
            leader.leader_epoch,
            _leader(leader.leader_id),
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


# -- the service's append RPC and refusals -------------------------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_APPEND_TAIL = struct.Struct(">iqq")
_SIZE = struct.Struct(">i")


def frame_length(prefix: bytes) -> int:
    """The payload size in a frame's 4-byte prefix (Kafka's int32)."""
    return int(_SIZE.unpack(prefix)[0])


def _string(text: str | None) -> bytes:
    if text is None:
        return _I16.pack(-1)
    raw = text.encode("utf-8")[:0x7FFF]
    return _I16.pack(len(raw)) + raw


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, st: struct.Struct) -> Any:
        if self.pos + st.size > len(self.buf):
            raise CodecError(f"frame truncated at byte {self.pos} (needs {st.size} more bytes)")
        values = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return values if len(values) > 1 else values[0]

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CodecError(f"frame truncated at byte {self.pos} (needs {n} more bytes)")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def string(self) -> str | None:
        n = self.take(_I16)
        if n < 0:
            return None
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"bad UTF-8 string before byte {self.pos}") from exc

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.raw(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CodecError(f"malformed varint before byte {self.pos}")

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """A client asks the leader to append values; answered once they are committed (API key 1000 v0).

    Body: ``ClusterId`` (int16-length nullable string), ``Credential`` (int16-length string: the voters'
    ``append.secret``), int32 count n, n int32 value lengths, then the n values back to back (the lengths
    first: one unpack reads them all).
    """

    cluster_id: str | None
    values: tuple[bytes, ...]
    credential: str = ""


@dataclass(frozen=True, slots=True)
class AppendResponse:
    """Where the values landed (committed), or an error with the leader the node knows of.

    Body: int16 error code, int16-length nullable error message, int32 answering node id, int32 leader id (-1:
    unknown), int16-length leader endpoint (``host:port`` or empty), int32 epoch, int64 base offset, int64 last
    offset. A refusal of the whole frame (`encode_refusal`) is the first two fields alone (`refused`).
    """

    error: int
    message: str | None = None
    node_id: int = -1
    leader_id: int | None = None
    leader_endpoint: str = ""
    epoch: int = -1
    base_offset: int = -1
    last_offset: int = -1
    refused: bool = False


def encode_append_request(request: AppendRequest, correlation_id: int, client_id: str | None) -> bytes:
    """An append request frame (request header v2)."""
    values = request.values
    n = len(values)
    parts = [
        b"",
        struct.pack(">hhi", APPEND_API_KEY, 0, correlation_id),
        _string(client_id),
        b"\x00",
        _string(request.cluster_id),
        _string(request.credential),
        _I32.pack(n),
        struct.pack(f">{n}i", *map(len, values)),
        *values,
    ]
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return b"".join(parts)


def decode_append_request(payload: bytes, body_start: int) -> AppendRequest:
    """The append request in a frame's payload whose request header v1 part ends at `body_start`.

    Raises
    ------
    CodecError
        On a truncated or malformed body, or bytes left over.
    """
    r = _Reader(payload, body_start)
    r.tagged_fields()  # the rest of request header v2
    cluster_id = r.string()
    credential = r.string() or ""
    n = r.take(_I32)
    if n < 0 or n * 4 > len(payload) - r.pos:
        raise CodecError(f"append of {n} values cannot fit in the frame")
    lengths = struct.unpack_from(f">{n}i", payload, r.pos)
    pos = r.pos + 4 * n
    if min(lengths, default=0) < 0 or pos + sum(lengths) != len(payload):
        raise CodecError(f"the {n} value lengths of the append do not fill the frame")
    values: list[bytes] = []
    add = values.append
    for length in lengths:
        add(payload[pos : pos + length])
        pos += length
    return AppendRequest(cluster_id, tuple(values), credential)


def encode_append_response(response: AppendResponse, correlation_id: int) -> bytes:
    """An append response frame (response header v1)."""
    body = b"".join(
        (
            _I32.pack(correlation_id),
            b"\x00",
            _I16.pack(response.error),
            _string(response.message),
            _I32.pack(response.node_id),
            _I32.pack(_node(response.leader_id)),
            _string(response.leader_endpoint),
            _APPEND_TAIL.pack(response.epoch, response.base_offset, response.last_offset),
        )
    )
    return _SIZE.pack(len(body)) + body


def encode_refusal(correlation_id: int, code: int, message: str, *, header_v1: bool = False) -> bytes:
    """A frame refusing a whole request (undecodable, oversized, an unknown API key): the correlation id, an
    error code and a message. The connection is closed after it: a Kafka client cannot parse it as the answer it
    expected, kraftlake's clients read it (`decode_append_response`)."""
    body = _I32.pack(correlation_id) + (b"\x00" if header_v1 else b"") + _I16.pack(code) + _string(message)
    return _SIZE.pack(len(body)) + body


def decode_append_response(payload: bytes) -> tuple[int, AppendResponse]:
    """``(correlation id, response)`` of an append response payload, or of a refusal (`encode_refusal`).

    Raises
    ------
    CodecError
        On a truncated or malformed response.
    """
    r = _Reader(payload, 0)
    corr = r.take(_I32)
    r.tagged_fields()
    error = r.take(_I16)
    message = r.string()
    if r.pos == len(payload):
        return corr, AppendResponse(error, message, refused=True)
    node = r.take(_I32)
    leader = r.take(_I32)
    endpoint = r.string() or ""
    epoch, base, last = r.take(_APPEND_TAIL)
    if r.pos != len(payload):
        raise CodecError(f"{len(payload) - r.pos} bytes left over after the append response")
    return corr, AppendResponse(error, message, node, _leader(leader), endpoint, epoch, base, last)


def decode_refusal(payload: bytes) -> tuple[int, int, str]:
    """``(correlation id, error code, message)`` of a refusal frame with response header v0."""
    r = _Reader(payload, 0)
    corr = r.take(_I32)
    code = r.take(_I16)
    return corr, code, r.string() or ""


def is_response(message: Message) -> bool:
    """Whether `message` answers a request (it goes back on the connection the request came in on)."""
    return isinstance(message, RESPONSE_TYPES)


# -- DescribeQuorum ------------------------------------------------------------------------------------------

CONTROLLER_ENDPOINT_TYPE = 2
"""DescribeCluster's EndpointType of a controller (what ``--bootstrap-controller`` asks for)."""


def split_endpoint(text: str) -> tuple[str, int]:
    """``host:port`` -> (host, port) (("", -1) if it is not one)."""
    host, _, port = text.rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else ("", -1)


def describe_quorum_response(
    description: QuorumDescription, version: int, is_leader: bool, node_id: int
) -> Any:
    """Kafka's DescribeQuorum response for `description` (the answering node's `describe()`).

    Only the leader answers in full; another voter answers NOT_LEADER_OR_FOLLOWER with what it knows (the
    leader, epoch, high watermark and voters, log end offsets -1), as kraftlake's `QuorumClient` reads it.
    """
    cls = rpc_messages.DescribeQuorumResponse

    def state(node: int, directory_id: str, leo: int, fetch: int = -1, caught_up: int = -1) -> Any:
        return cls.ReplicaState(
            replica_id=node,
            replica_directory_id=_dir(directory_id) if version >= 2 else ZERO_UUID,
            log_end_offset=leo,
            last_fetch_timestamp=fetch if version >= 1 else -1,
            last_caught_up_timestamp=caught_up if version >= 1 else -1,
        )

    rows = {r.node_id: r for r in description.replicas} if is_leader else {}
    voters = []
    for v in description.voters:
        r = rows.get(v.node_id)
        voters.append(
            state(v.node_id, v.directory_id, -1)
            if r is None
            else state(
                v.node_id,
                r.directory_id or v.directory_id,
                r.log_end_offset,
                r.last_fetch_timestamp,
                r.last_caught_up_timestamp,
            )
        )
    observers = [
        state(r.node_id, r.directory_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)
        for r in description.replicas
        if r.status == "Observer"
    ]
    error = Errors.NONE if is_leader else Errors.NOT_LEADER_OR_FOLLOWER
    text = (
        None
        if is_leader or version < 2
        else description.stuck
        or f"node {node_id} is not the leader (leader: {description.leader_id}, epoch {description.leader_epoch})"
    )
    partition = cls.PartitionData(
        partition_index=0,
        error_code=error,
        error_message=text,
        leader_id=description.leader_id,
        leader_epoch=description.leader_epoch,
        high_watermark=description.high_watermark,
        current_voters=voters,
        observers=observers if is_leader else [],
    )
    nodes = []
    if version >= 2:
        for v in description.voters:
            host, port = split_endpoint(v.endpoint)
            if port >= 0:
                nodes.append(
                    cls.Node(
                        node_id=v.node_id, listeners=[cls.Listener(name=LISTENER_NAME, host=host, port=port)]
                    )
                )
    return cls(
        error_code=0,
        error_message=None,
        topics=[cls.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
        nodes=nodes,
    )


def description_from_response(cluster_id: str, body: Any) -> tuple[QuorumDescription, int]:
    """``(description, partition error code)`` of a DescribeQuorum response, with the figures
    ``kafka-metadata-quorum`` derives (MaxFollowerLag, MaxFollowerLagTimeMs, each row's Lag).

    Raises
    ------
    CodecError
        If the response has a top-level error or no metadata partition.
    """
    if body.error_code:
        raise CodecError(f"DescribeQuorum refused with error {body.error_code}: {body.error_message or ''}")
    p = _response_partition(body.topics, "DescribeQuorum")
    endpoints = {}
    for node in body.nodes:
        for listener in node.listeners[:1]:
            endpoints[node.node_id] = f"{listener.host}:{listener.port}"
    voters = tuple(
        VoterInfo(r.replica_id, _undir(r.replica_directory_id), endpoints.get(r.replica_id, ""))
        for r in p.current_voters
    )
    replicas: list[ReplicaInfo] = []
    if p.error_code == Errors.NONE:
        leader = next((r for r in p.current_voters if r.replica_id == p.leader_id), None)
        leo = leader.log_end_offset if leader is not None else p.high_watermark
        for rows, kind in ((p.current_voters, "Follower"), (p.observers, "Observer")):
            for r in rows:
                status = "Leader" if r.replica_id == p.leader_id and kind == "Follower" else kind
                replicas.append(
                    ReplicaInfo(
                        r.replica_id,
                        _undir(r.replica_directory_id),
                        r.log_end_offset,
                        leo - r.log_end_offset,
                        r.last_fetch_timestamp,
                        r.last_caught_up_timestamp,
                        status,
                    )
                )
        replicas.sort(key=lambda r: {"Leader": 0, "Follower": 1}.get(r.status, 2))
    lag, lag_ms = follower_lag(replicas)
    observers = tuple(r.replica_id for r in p.observers)
    return QuorumDescription(
        cluster_id,
        p.leader_id,
        p.leader_epoch,
        p.high_watermark,
        lag,
        lag_ms,
        voters,
        observers,
        tuple(replicas),
        p.error_message if p.error_code and (p.error_message or "").startswith(STUCK_PREFIX) else "",
    ), p.error_code
