"""The driver-side raft service: nodes on an asyncio loop thread, TCP transport (TLS, SASL, ACLs), clients.

Service (`kraftlake.service.service`)
    `RaftService` (one voter on a background loop thread), `LocalQuorum` (N voters in one process),
    `ServiceLoop`.
Configuration (`kraftlake.service.config`)
    `NodeConfig`, `parse_voters`.
Clients (`kraftlake.service.client`)
    `ObserverClient` (committed entries over Kafka's Fetch, from any process), `QuorumClient` (append, describe
    over Kafka's DescribeCluster and DescribeQuorum).
Snapshots (`kraftlake.service.snapshots`)
    `SnapshotProvider`, `SnapshotPolicy`, `build_checkpoint`, `checkpoint_values`.
Listeners (`kraftlake.service.listener`)
    `Listener`, `Batch`, `SnapshotReader`, `LeaderAndEpoch`.
Security (`kraftlake.service.authenticator`: the SASL handshake of an inbound connection;
`kraftlake.service.authorizer`: Kafka's ACL checks on the cluster; `kraftlake.service.peer_login`: a voter's
outgoing TLS and SASL).
Wire (`kraftlake.service.kafka_rpc`: Kafka's KRaft RPCs translated to and from the raft messages), storage
(`kraftlake.service.file_log.FileRaftLog`), errors (`kraftlake.service.errors`).
"""

from __future__ import annotations

from kraftlake.service.client import ObserverClient, QuorumClient
from kraftlake.service.config import NodeConfig, parse_voters
from kraftlake.service.errors import (
    ClusterIdMismatchError,
    FrameTooLargeError,
    NotLeaderError,
    ServiceError,
    ServiceStoppedError,
    SnapshotRequiredError,
)
from kraftlake.service.listener import Batch, LeaderAndEpoch, Listener, SnapshotReader
from kraftlake.service.messages import CommittedEntry, QuorumDescription
from kraftlake.service.service import LocalQuorum, RaftService, ServiceLoop
from kraftlake.service.snapshots import (
    SnapshotPolicy,
    SnapshotProvider,
    build_checkpoint,
    checkpoint_data_batches,
    checkpoint_values,
)

__all__ = [
    "Batch",
    "ClusterIdMismatchError",
    "CommittedEntry",
    "FrameTooLargeError",
    "LeaderAndEpoch",
    "Listener",
    "LocalQuorum",
    "NodeConfig",
    "NotLeaderError",
    "ObserverClient",
    "QuorumClient",
    "QuorumDescription",
    "RaftService",
    "ServiceError",
    "ServiceLoop",
    "ServiceStoppedError",
    "SnapshotPolicy",
    "SnapshotProvider",
    "SnapshotReader",
    "SnapshotRequiredError",
    "build_checkpoint",
    "checkpoint_data_batches",
    "checkpoint_values",
    "parse_voters",
]
