"""DescribeQuorum both ways: Kafka's response for a voter's `QuorumDescription`, and the description (with
``kafka-metadata-quorum``'s derived figures) read back from a response."""

from __future__ import annotations

from typing import Any

from kraftlake.follow.observer import METADATA_TOPIC
from kraftlake.protocol import rpc_messages
from kraftlake.raft.messages import Errors
from kraftlake.service.errors import CodecError
from kraftlake.service.messages import STUCK_PREFIX, QuorumDescription, ReplicaInfo, VoterInfo, follower_lag
from kraftlake.service.rpc_common import (
    LISTENER_NAME,
    ZERO_UUID,
    from_wire_directory,
    response_partition,
    to_wire_directory,
)

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
            replica_directory_id=to_wire_directory(directory_id) if version >= 2 else ZERO_UUID,
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
    p = response_partition(body.topics, "DescribeQuorum")
    endpoints = {}
    for node in body.nodes:
        for listener in node.listeners[:1]:
            endpoints[node.node_id] = f"{listener.host}:{listener.port}"
    voters = tuple(
        VoterInfo(r.replica_id, from_wire_directory(r.replica_directory_id), endpoints.get(r.replica_id, ""))
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
                        from_wire_directory(r.replica_directory_id),
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
