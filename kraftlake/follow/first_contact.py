"""What a follower asks a controller before its first fetch: which cluster it is, and who its nodes are.

KRaft's Fetch never says which cluster answers (a request without a cluster id is served by any quorum), so a
mirror learns its cluster id with DescribeCluster (EndpointType 2, the controllers: their ids are the voters)
and records it in ``meta.properties``; every request then carries it, and another cluster's controllers refuse
it (INCONSISTENT_CLUSTER_ID). DescribeQuorum (answered by the leader only) lists the voters and the observers
fetching now: the brokers. An observer id that is one of them would make the leader track the mirror as that
node (Kafka logs non-monotonic fetch offsets for it), so it is refused. A controller that refuses either
request (no DESCRIBE or ALTER on the cluster) leaves that check to the next controller; a new mirror whose
cluster id no controller tells is refused (``--cluster-id`` says it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kraftlake.follow.errors import ClusterIdMismatchError, FollowError
from kraftlake.protocol import rpc_messages
from kraftlake.protocol.error_codes import Errors
from kraftlake.protocol.rpc import ApiKey

CONTROLLER_ENDPOINTS = 2
"""DescribeCluster's EndpointType for controllers (KIP-919)."""


class ObserverIdError(FollowError):
    """Raised when the observer id is a voter's or a broker's id in the quorum followed."""


class ClusterIdUnknownError(FollowError):
    """Raised when a new mirror has no cluster id and no controller tells it (DescribeCluster refused)."""


@dataclass
class QuorumFacts:
    """What the controllers told so far (None / empty while none did)."""

    cluster_id: str | None = None
    voters: frozenset[int] | None = None
    observers: frozenset[int] | None = None
    describe_cluster_refused: bool = False
    """A controller that speaks DescribeCluster refused it (an older one that does not speak it tells nothing)."""

    @property
    def complete(self) -> bool:
        """Whether both questions were answered (then no other controller is asked)."""
        return self.cluster_id is not None and self.observers is not None


def ask(conn: Any, facts: QuorumFacts) -> None:
    """Ask the controller on `conn` what `facts` still lacks (DescribeCluster, DescribeQuorum), when it speaks
    them; refusals leave the fact unknown. Raises the connection's errors (the caller retries elsewhere)."""
    if facts.cluster_id is None and ApiKey.DESCRIBE_CLUSTER in conn.versions:
        request = rpc_messages.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=CONTROLLER_ENDPOINTS
        )
        r = conn.request(ApiKey.DESCRIBE_CLUSTER, request)
        if r.error_code == Errors.NONE and r.cluster_id:
            facts.cluster_id = r.cluster_id
            facts.voters = (facts.voters or frozenset()) | {b.broker_id for b in r.brokers}
        else:
            facts.describe_cluster_refused = True
    if facts.observers is None and ApiKey.DESCRIBE_QUORUM in conn.versions:
        q = rpc_messages.DescribeQuorumRequest
        describe = q(
            topics=[
                q.TopicData(topic_name="__cluster_metadata", partitions=[q.PartitionData(partition_index=0)])
            ]
        )
        r = conn.request(ApiKey.DESCRIBE_QUORUM, describe)
        if r.error_code != Errors.NONE:
            return
        for topic in r.topics:
            for p in topic.partitions:
                if p.partition_index == 0 and p.error_code == Errors.NONE:
                    voters = {v.replica_id for v in p.current_voters}
                    facts.voters = (facts.voters or frozenset()) | voters
                    facts.observers = frozenset(o.replica_id for o in p.observers if o.replica_id >= 0)


def check(facts: QuorumFacts, mirror: Any, observer_id: int, *, fresh: bool, where: str) -> None:
    """Record the cluster id in a mirror without one; refuse another cluster's, and an observer id that is a
    voter's (always) or a fetching broker's (for a `fresh` mirror: an existing one may see its own last run).

    Raises
    ------
    ClusterIdMismatchError
        The controllers belong to another cluster than the mirror.
    ObserverIdError
        The observer id is a node's of the quorum.
    """
    if facts.cluster_id is not None:
        if mirror.cluster_id is None:
            mirror.set_cluster_id(facts.cluster_id)
        elif mirror.cluster_id != facts.cluster_id:
            raise ClusterIdMismatchError(
                f"{where} belongs to cluster {facts.cluster_id}; the mirror {mirror.data_dir} holds cluster "
                f"{mirror.cluster_id}: use another --data-dir"
            )
    if facts.voters and observer_id in facts.voters:
        raise ObserverIdError(
            f"observer id {observer_id} is a voter of the quorum (voters {sorted(facts.voters)}): choose an id "
            f"no node of the cluster has (or leave --observer-id out)"
        )
    if fresh and facts.observers and observer_id in facts.observers:
        raise ObserverIdError(
            f"observer id {observer_id} is fetching from the quorum already (a broker: observers "
            f"{sorted(facts.observers)}): choose an id no node of the cluster has (or leave --observer-id out)"
        )


def require_cluster_id(facts: QuorumFacts, mirror: Any, where: str) -> None:
    """Refuse to fetch into a mirror without a cluster id when `where` would not tell it."""
    if mirror.cluster_id is None and facts.cluster_id is None and facts.describe_cluster_refused:
        raise ClusterIdUnknownError(
            f"{where} did not tell the cluster id (DescribeCluster refused: the principal needs DESCRIBE on the "
            f"cluster) and the mirror {mirror.data_dir} has none: pass --cluster-id"
        )
