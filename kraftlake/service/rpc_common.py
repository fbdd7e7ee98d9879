"""What every part of the service's wire shares: Kafka API versions sent and served, `WireContext`,
`RequestRefused`, how ids travel in Kafka's fields, the metadata partition a KRaft request addresses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from kraftlake.follow.observer import METADATA_TOPIC, METADATA_TOPIC_ID
from kraftlake.protocol import rpc
from kraftlake.protocol.rpc import ApiKey
from kraftlake.protocol.versions import Versions
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
    VoteRequest,
    VoteResponse,
)
from kraftlake.service.errors import CodecError

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


def to_wire_directory(directory_id: str) -> str:
    """A directory id as Kafka sends it (ZERO_UUID for none)."""
    return directory_id or ZERO_UUID


def from_wire_directory(directory_id: str) -> str:
    """A directory id as Kafka sent it, "" for ZERO_UUID."""
    return "" if directory_id == ZERO_UUID else directory_id


def to_wire_node(leader_id: int | None) -> int:
    """A node id as Kafka sends it (-1 for none)."""
    return -1 if leader_id is None else leader_id


def from_wire_node(leader_id: int) -> int | None:
    """A node id as Kafka sent it, None for a negative one."""
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


def response_partition(topics: Sequence[Any], what: str) -> Any:
    """Partition 0 of the metadata topic in a KRaft response's topics."""
    for topic in topics:
        for partition in topic.partitions:
            if partition[0] == 0:
                return partition
    raise CodecError(f"{what} response without partition 0 of {METADATA_TOPIC}")


@cache
def message_class(name: str) -> Any:
    """A message class (its codecs are generated on first use: not at import)."""
    return rpc.message_class(name)
