# Generated from schemas/ by `make stubs` (python -m kraftlake.protocol.stubs): do not edit.

from collections.abc import Iterable
from typing import Self

from kraftlake.protocol.codegen import Record

class ApiVersionsRequest(Record):
    def __new__(
        cls,
        *,
        client_software_name: str = ...,
        client_software_version: str = ...,
        cluster_id: str | None = ...,
        node_id: int = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        client_software_name: str = ...,
        client_software_version: str = ...,
        cluster_id: str | None = ...,
        node_id: int = ...,
    ) -> Self: ...
    @property
    def client_software_name(self) -> str: ...
    @property
    def client_software_version(self) -> str: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def node_id(self) -> int: ...

class ApiVersionsResponse(Record):
    class ApiVersion(Record):
        def __new__(cls, *, api_key: int = ..., min_version: int = ..., max_version: int = ...) -> Self: ...
        def _replace(self, *, api_key: int = ..., min_version: int = ..., max_version: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def api_key(self) -> int: ...
        @property
        def min_version(self) -> int: ...
        @property
        def max_version(self) -> int: ...

    class SupportedFeatureKey(Record):
        def __new__(cls, *, name: str = ..., min_version: int = ..., max_version: int = ...) -> Self: ...
        def _replace(self, *, name: str = ..., min_version: int = ..., max_version: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def name(self) -> str: ...
        @property
        def min_version(self) -> int: ...
        @property
        def max_version(self) -> int: ...

    class FinalizedFeatureKey(Record):
        def __new__(
            cls, *, name: str = ..., max_version_level: int = ..., min_version_level: int = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, name: str = ..., max_version_level: int = ..., min_version_level: int = ...
        ) -> Self: ...
        @property
        def name(self) -> str: ...
        @property
        def max_version_level(self) -> int: ...
        @property
        def min_version_level(self) -> int: ...

    def __new__(
        cls,
        *,
        error_code: int = ...,
        api_keys: Iterable[ApiVersionsResponse.ApiVersion] = ...,
        throttle_time_ms: int = ...,
        supported_features: Iterable[ApiVersionsResponse.SupportedFeatureKey] = ...,
        finalized_features_epoch: int = ...,
        finalized_features: Iterable[ApiVersionsResponse.FinalizedFeatureKey] = ...,
        zk_migration_ready: bool = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        error_code: int = ...,
        api_keys: Iterable[ApiVersionsResponse.ApiVersion] = ...,
        throttle_time_ms: int = ...,
        supported_features: Iterable[ApiVersionsResponse.SupportedFeatureKey] = ...,
        finalized_features_epoch: int = ...,
        finalized_features: Iterable[ApiVersionsResponse.FinalizedFeatureKey] = ...,
        zk_migration_ready: bool = ...,
    ) -> Self: ...
    @property
    def error_code(self) -> int: ...
    @property
    def api_keys(self) -> tuple[ApiVersionsResponse.ApiVersion, ...]: ...
    @property
    def throttle_time_ms(self) -> int: ...
    @property
    def supported_features(self) -> tuple[ApiVersionsResponse.SupportedFeatureKey, ...]: ...
    @property
    def finalized_features_epoch(self) -> int: ...
    @property
    def finalized_features(self) -> tuple[ApiVersionsResponse.FinalizedFeatureKey, ...]: ...
    @property
    def zk_migration_ready(self) -> bool: ...

class BeginQuorumEpochRequest(Record):
    class TopicData(Record):
        def __new__(
            cls, *, topic_name: str = ..., partitions: Iterable[BeginQuorumEpochRequest.PartitionData] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic_name: str = ..., partitions: Iterable[BeginQuorumEpochRequest.PartitionData] = ...
        ) -> Self: ...
        @property
        def topic_name(self) -> str: ...
        @property
        def partitions(self) -> tuple[BeginQuorumEpochRequest.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(
            cls,
            *,
            partition_index: int = ...,
            voter_directory_id: str = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition_index: int = ...,
            voter_directory_id: str = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
        ) -> Self: ...
        @property
        def partition_index(self) -> int: ...
        @property
        def voter_directory_id(self) -> str: ...
        @property
        def leader_id(self) -> int: ...
        @property
        def leader_epoch(self) -> int: ...

    class LeaderEndpoint(Record):
        def __new__(cls, *, name: str = ..., host: str = ..., port: int = ...) -> Self: ...
        def _replace(self, *, name: str = ..., host: str = ..., port: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def name(self) -> str: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...

    def __new__(
        cls,
        *,
        cluster_id: str | None = ...,
        voter_id: int = ...,
        topics: Iterable[BeginQuorumEpochRequest.TopicData] = ...,
        leader_endpoints: Iterable[BeginQuorumEpochRequest.LeaderEndpoint] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        cluster_id: str | None = ...,
        voter_id: int = ...,
        topics: Iterable[BeginQuorumEpochRequest.TopicData] = ...,
        leader_endpoints: Iterable[BeginQuorumEpochRequest.LeaderEndpoint] = ...,
    ) -> Self: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def voter_id(self) -> int: ...
    @property
    def topics(self) -> tuple[BeginQuorumEpochRequest.TopicData, ...]: ...
    @property
    def leader_endpoints(self) -> tuple[BeginQuorumEpochRequest.LeaderEndpoint, ...]: ...

class BeginQuorumEpochResponse(Record):
    class TopicData(Record):
        def __new__(
            cls, *, topic_name: str = ..., partitions: Iterable[BeginQuorumEpochResponse.PartitionData] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic_name: str = ..., partitions: Iterable[BeginQuorumEpochResponse.PartitionData] = ...
        ) -> Self: ...
        @property
        def topic_name(self) -> str: ...
        @property
        def partitions(self) -> tuple[BeginQuorumEpochResponse.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(
            cls,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
        ) -> Self: ...
        @property
        def partition_index(self) -> int: ...
        @property
        def error_code(self) -> int: ...
        @property
        def leader_id(self) -> int: ...
        @property
        def leader_epoch(self) -> int: ...

    class NodeEndpoint(Record):
        def __new__(cls, *, node_id: int = ..., host: str = ..., port: int = ...) -> Self: ...
        def _replace(self, *, node_id: int = ..., host: str = ..., port: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def node_id(self) -> int: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...

    def __new__(
        cls,
        *,
        error_code: int = ...,
        topics: Iterable[BeginQuorumEpochResponse.TopicData] = ...,
        node_endpoints: Iterable[BeginQuorumEpochResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        error_code: int = ...,
        topics: Iterable[BeginQuorumEpochResponse.TopicData] = ...,
        node_endpoints: Iterable[BeginQuorumEpochResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    @property
    def error_code(self) -> int: ...
    @property
    def topics(self) -> tuple[BeginQuorumEpochResponse.TopicData, ...]: ...
    @property
    def node_endpoints(self) -> tuple[BeginQuorumEpochResponse.NodeEndpoint, ...]: ...

class DescribeClusterRequest(Record):
    def __new__(
        cls,
        *,
        include_cluster_authorized_operations: bool = ...,
        endpoint_type: int = ...,
        include_fenced_brokers: bool = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        include_cluster_authorized_operations: bool = ...,
        endpoint_type: int = ...,
        include_fenced_brokers: bool = ...,
    ) -> Self: ...
    @property
    def include_cluster_authorized_operations(self) -> bool: ...
    @property
    def endpoint_type(self) -> int: ...
    @property
    def include_fenced_brokers(self) -> bool: ...

class DescribeClusterResponse(Record):
    class DescribeClusterBroker(Record):
        def __new__(
            cls,
            *,
            broker_id: int = ...,
            host: str = ...,
            port: int = ...,
            rack: str | None = ...,
            is_fenced: bool = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            broker_id: int = ...,
            host: str = ...,
            port: int = ...,
            rack: str | None = ...,
            is_fenced: bool = ...,
        ) -> Self: ...
        @property
        def broker_id(self) -> int: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...
        @property
        def rack(self) -> str | None: ...
        @property
        def is_fenced(self) -> bool: ...

    def __new__(
        cls,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        endpoint_type: int = ...,
        cluster_id: str = ...,
        controller_id: int = ...,
        brokers: Iterable[DescribeClusterResponse.DescribeClusterBroker] = ...,
        cluster_authorized_operations: int = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        error_message: str | None = ...,
        endpoint_type: int = ...,
        cluster_id: str = ...,
        controller_id: int = ...,
        brokers: Iterable[DescribeClusterResponse.DescribeClusterBroker] = ...,
        cluster_authorized_operations: int = ...,
    ) -> Self: ...
    @property
    def throttle_time_ms(self) -> int: ...
    @property
    def error_code(self) -> int: ...
    @property
    def error_message(self) -> str | None: ...
    @property
    def endpoint_type(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def controller_id(self) -> int: ...
    @property
    def brokers(self) -> tuple[DescribeClusterResponse.DescribeClusterBroker, ...]: ...
    @property
    def cluster_authorized_operations(self) -> int: ...

class DescribeQuorumRequest(Record):
    class TopicData(Record):
        def __new__(
            cls, *, topic_name: str = ..., partitions: Iterable[DescribeQuorumRequest.PartitionData] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic_name: str = ..., partitions: Iterable[DescribeQuorumRequest.PartitionData] = ...
        ) -> Self: ...
        @property
        def topic_name(self) -> str: ...
        @property
        def partitions(self) -> tuple[DescribeQuorumRequest.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(cls, *, partition_index: int = ...) -> Self: ...
        def _replace(self, *, partition_index: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def partition_index(self) -> int: ...

    def __new__(cls, *, topics: Iterable[DescribeQuorumRequest.TopicData] = ...) -> Self: ...
    def _replace(self, *, topics: Iterable[DescribeQuorumRequest.TopicData] = ...) -> Self: ...  # type: ignore[override]
    @property
    def topics(self) -> tuple[DescribeQuorumRequest.TopicData, ...]: ...

class DescribeQuorumResponse(Record):
    class TopicData(Record):
        def __new__(
            cls, *, topic_name: str = ..., partitions: Iterable[DescribeQuorumResponse.PartitionData] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic_name: str = ..., partitions: Iterable[DescribeQuorumResponse.PartitionData] = ...
        ) -> Self: ...
        @property
        def topic_name(self) -> str: ...
        @property
        def partitions(self) -> tuple[DescribeQuorumResponse.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(
            cls,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            error_message: str | None = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            high_watermark: int = ...,
            current_voters: Iterable[DescribeQuorumResponse.ReplicaState] = ...,
            observers: Iterable[DescribeQuorumResponse.ReplicaState] = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            error_message: str | None = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            high_watermark: int = ...,
            current_voters: Iterable[DescribeQuorumResponse.ReplicaState] = ...,
            observers: Iterable[DescribeQuorumResponse.ReplicaState] = ...,
        ) -> Self: ...
        @property
        def partition_index(self) -> int: ...
        @property
        def error_code(self) -> int: ...
        @property
        def error_message(self) -> str | None: ...
        @property
        def leader_id(self) -> int: ...
        @property
        def leader_epoch(self) -> int: ...
        @property
        def high_watermark(self) -> int: ...
        @property
        def current_voters(self) -> tuple[DescribeQuorumResponse.ReplicaState, ...]: ...
        @property
        def observers(self) -> tuple[DescribeQuorumResponse.ReplicaState, ...]: ...

    class ReplicaState(Record):
        def __new__(
            cls,
            *,
            replica_id: int = ...,
            replica_directory_id: str = ...,
            log_end_offset: int = ...,
            last_fetch_timestamp: int = ...,
            last_caught_up_timestamp: int = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            replica_id: int = ...,
            replica_directory_id: str = ...,
            log_end_offset: int = ...,
            last_fetch_timestamp: int = ...,
            last_caught_up_timestamp: int = ...,
        ) -> Self: ...
        @property
        def replica_id(self) -> int: ...
        @property
        def replica_directory_id(self) -> str: ...
        @property
        def log_end_offset(self) -> int: ...
        @property
        def last_fetch_timestamp(self) -> int: ...
        @property
        def last_caught_up_timestamp(self) -> int: ...

    class Node(Record):
        def __new__(
            cls, *, node_id: int = ..., listeners: Iterable[DescribeQuorumResponse.Listener] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, node_id: int = ..., listeners: Iterable[DescribeQuorumResponse.Listener] = ...
        ) -> Self: ...
        @property
        def node_id(self) -> int: ...
        @property
        def listeners(self) -> tuple[DescribeQuorumResponse.Listener, ...]: ...

    class Listener(Record):
        def __new__(cls, *, name: str = ..., host: str = ..., port: int = ...) -> Self: ...
        def _replace(self, *, name: str = ..., host: str = ..., port: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def name(self) -> str: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...

    def __new__(
        cls,
        *,
        error_code: int = ...,
        error_message: str | None = ...,
        topics: Iterable[DescribeQuorumResponse.TopicData] = ...,
        nodes: Iterable[DescribeQuorumResponse.Node] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        error_code: int = ...,
        error_message: str | None = ...,
        topics: Iterable[DescribeQuorumResponse.TopicData] = ...,
        nodes: Iterable[DescribeQuorumResponse.Node] = ...,
    ) -> Self: ...
    @property
    def error_code(self) -> int: ...
    @property
    def error_message(self) -> str | None: ...
    @property
    def topics(self) -> tuple[DescribeQuorumResponse.TopicData, ...]: ...
    @property
    def nodes(self) -> tuple[DescribeQuorumResponse.Node, ...]: ...

class EndQuorumEpochRequest(Record):
    class TopicData(Record):
        def __new__(
            cls, *, topic_name: str = ..., partitions: Iterable[EndQuorumEpochRequest.PartitionData] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic_name: str = ..., partitions: Iterable[EndQuorumEpochRequest.PartitionData] = ...
        ) -> Self: ...
        @property
        def topic_name(self) -> str: ...
        @property
        def partitions(self) -> tuple[EndQuorumEpochRequest.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(
            cls,
            *,
            partition_index: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            preferred_successors: Iterable[int] = ...,
            preferred_candidates: Iterable[EndQuorumEpochRequest.ReplicaInfo] = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition_index: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            preferred_successors: Iterable[int] = ...,
            preferred_candidates: Iterable[EndQuorumEpochRequest.ReplicaInfo] = ...,
        ) -> Self: ...
        @property
        def partition_index(self) -> int: ...
        @property
        def leader_id(self) -> int: ...
        @property
        def leader_epoch(self) -> int: ...
        @property
        def preferred_successors(self) -> tuple[int, ...]: ...
        @property
        def preferred_candidates(self) -> tuple[EndQuorumEpochRequest.ReplicaInfo, ...]: ...

    class ReplicaInfo(Record):
        def __new__(cls, *, candidate_id: int = ..., candidate_directory_id: str = ...) -> Self: ...
        def _replace(self, *, candidate_id: int = ..., candidate_directory_id: str = ...) -> Self: ...  # type: ignore[override]
        @property
        def candidate_id(self) -> int: ...
        @property
        def candidate_directory_id(self) -> str: ...

    class LeaderEndpoint(Record):
        def __new__(cls, *, name: str = ..., host: str = ..., port: int = ...) -> Self: ...
        def _replace(self, *, name: str = ..., host: str = ..., port: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def name(self) -> str: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...

    def __new__(
        cls,
        *,
        cluster_id: str | None = ...,
        topics: Iterable[EndQuorumEpochRequest.TopicData] = ...,
        leader_endpoints: Iterable[EndQuorumEpochRequest.LeaderEndpoint] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        cluster_id: str | None = ...,
        topics: Iterable[EndQuorumEpochRequest.TopicData] = ...,
        leader_endpoints: Iterable[EndQuorumEpochRequest.LeaderEndpoint] = ...,
    ) -> Self: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def topics(self) -> tuple[EndQuorumEpochRequest.TopicData, ...]: ...
    @property
    def leader_endpoints(self) -> tuple[EndQuorumEpochRequest.LeaderEndpoint, ...]: ...

class EndQuorumEpochResponse(Record):
    class TopicData(Record):
        def __new__(
            cls, *, topic_name: str = ..., partitions: Iterable[EndQuorumEpochResponse.PartitionData] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic_name: str = ..., partitions: Iterable[EndQuorumEpochResponse.PartitionData] = ...
        ) -> Self: ...
        @property
        def topic_name(self) -> str: ...
        @property
        def partitions(self) -> tuple[EndQuorumEpochResponse.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(
            cls,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
        ) -> Self: ...
        @property
        def partition_index(self) -> int: ...
        @property
        def error_code(self) -> int: ...
        @property
        def leader_id(self) -> int: ...
        @property
        def leader_epoch(self) -> int: ...

    class NodeEndpoint(Record):
        def __new__(cls, *, node_id: int = ..., host: str = ..., port: int = ...) -> Self: ...
        def _replace(self, *, node_id: int = ..., host: str = ..., port: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def node_id(self) -> int: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...

    def __new__(
        cls,
        *,
        error_code: int = ...,
        topics: Iterable[EndQuorumEpochResponse.TopicData] = ...,
        node_endpoints: Iterable[EndQuorumEpochResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        error_code: int = ...,
        topics: Iterable[EndQuorumEpochResponse.TopicData] = ...,
        node_endpoints: Iterable[EndQuorumEpochResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    @property
    def error_code(self) -> int: ...
    @property
    def topics(self) -> tuple[EndQuorumEpochResponse.TopicData, ...]: ...
    @property
    def node_endpoints(self) -> tuple[EndQuorumEpochResponse.NodeEndpoint, ...]: ...

class FetchRequest(Record):
    class ReplicaState(Record):
        def __new__(cls, *, replica_id: int = ..., replica_epoch: int = ...) -> Self: ...
        def _replace(self, *, replica_id: int = ..., replica_epoch: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def replica_id(self) -> int: ...
        @property
        def replica_epoch(self) -> int: ...

    class FetchTopic(Record):
        def __new__(
            cls,
            *,
            topic: str = ...,
            topic_id: str = ...,
            partitions: Iterable[FetchRequest.FetchPartition] = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            topic: str = ...,
            topic_id: str = ...,
            partitions: Iterable[FetchRequest.FetchPartition] = ...,
        ) -> Self: ...
        @property
        def topic(self) -> str: ...
        @property
        def topic_id(self) -> str: ...
        @property
        def partitions(self) -> tuple[FetchRequest.FetchPartition, ...]: ...

    class FetchPartition(Record):
        def __new__(
            cls,
            *,
            partition: int = ...,
            current_leader_epoch: int = ...,
            fetch_offset: int = ...,
            last_fetched_epoch: int = ...,
            log_start_offset: int = ...,
            partition_max_bytes: int = ...,
            replica_directory_id: str = ...,
            high_watermark: int = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition: int = ...,
            current_leader_epoch: int = ...,
            fetch_offset: int = ...,
            last_fetched_epoch: int = ...,
            log_start_offset: int = ...,
            partition_max_bytes: int = ...,
            replica_directory_id: str = ...,
            high_watermark: int = ...,
        ) -> Self: ...
        @property
        def partition(self) -> int: ...
        @property
        def current_leader_epoch(self) -> int: ...
        @property
        def fetch_offset(self) -> int: ...
        @property
        def last_fetched_epoch(self) -> int: ...
        @property
        def log_start_offset(self) -> int: ...
        @property
        def partition_max_bytes(self) -> int: ...
        @property
        def replica_directory_id(self) -> str: ...
        @property
        def high_watermark(self) -> int: ...

    class ForgottenTopic(Record):
        def __new__(
            cls, *, topic: str = ..., topic_id: str = ..., partitions: Iterable[int] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic: str = ..., topic_id: str = ..., partitions: Iterable[int] = ...
        ) -> Self: ...
        @property
        def topic(self) -> str: ...
        @property
        def topic_id(self) -> str: ...
        @property
        def partitions(self) -> tuple[int, ...]: ...

    def __new__(
        cls,
        *,
        cluster_id: str | None = ...,
        replica_id: int = ...,
        replica_state: FetchRequest.ReplicaState = ...,
        max_wait_ms: int = ...,
        min_bytes: int = ...,
        max_bytes: int = ...,
        isolation_level: int = ...,
        session_id: int = ...,
        session_epoch: int = ...,
        topics: Iterable[FetchRequest.FetchTopic] = ...,
        forgotten_topics_data: Iterable[FetchRequest.ForgottenTopic] = ...,
        rack_id: str = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        cluster_id: str | None = ...,
        replica_id: int = ...,
        replica_state: FetchRequest.ReplicaState = ...,
        max_wait_ms: int = ...,
        min_bytes: int = ...,
        max_bytes: int = ...,
        isolation_level: int = ...,
        session_id: int = ...,
        session_epoch: int = ...,
        topics: Iterable[FetchRequest.FetchTopic] = ...,
        forgotten_topics_data: Iterable[FetchRequest.ForgottenTopic] = ...,
        rack_id: str = ...,
    ) -> Self: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def replica_id(self) -> int: ...
    @property
    def replica_state(self) -> FetchRequest.ReplicaState: ...
    @property
    def max_wait_ms(self) -> int: ...
    @property
    def min_bytes(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def isolation_level(self) -> int: ...
    @property
    def session_id(self) -> int: ...
    @property
    def session_epoch(self) -> int: ...
    @property
    def topics(self) -> tuple[FetchRequest.FetchTopic, ...]: ...
    @property
    def forgotten_topics_data(self) -> tuple[FetchRequest.ForgottenTopic, ...]: ...
    @property
    def rack_id(self) -> str: ...

class FetchResponse(Record):
    class FetchableTopicResponse(Record):
        def __new__(
            cls,
            *,
            topic: str = ...,
            topic_id: str = ...,
            partitions: Iterable[FetchResponse.PartitionData] = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            topic: str = ...,
            topic_id: str = ...,
            partitions: Iterable[FetchResponse.PartitionData] = ...,
        ) -> Self: ...
        @property
        def topic(self) -> str: ...
        @property
        def topic_id(self) -> str: ...
        @property
        def partitions(self) -> tuple[FetchResponse.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(
            cls,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            high_watermark: int = ...,
            last_stable_offset: int = ...,
            log_start_offset: int = ...,
            diverging_epoch: FetchResponse.EpochEndOffset = ...,
            current_leader: FetchResponse.LeaderIdAndEpoch = ...,
            snapshot_id: FetchResponse.SnapshotId = ...,
            aborted_transactions: Iterable[FetchResponse.AbortedTransaction] | None = ...,
            preferred_read_replica: int = ...,
            records: bytes | None = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            high_watermark: int = ...,
            last_stable_offset: int = ...,
            log_start_offset: int = ...,
            diverging_epoch: FetchResponse.EpochEndOffset = ...,
            current_leader: FetchResponse.LeaderIdAndEpoch = ...,
            snapshot_id: FetchResponse.SnapshotId = ...,
            aborted_transactions: Iterable[FetchResponse.AbortedTransaction] | None = ...,
            preferred_read_replica: int = ...,
            records: bytes | None = ...,
        ) -> Self: ...
        @property
        def partition_index(self) -> int: ...
        @property
        def error_code(self) -> int: ...
        @property
        def high_watermark(self) -> int: ...
        @property
        def last_stable_offset(self) -> int: ...
        @property
        def log_start_offset(self) -> int: ...
        @property
        def diverging_epoch(self) -> FetchResponse.EpochEndOffset: ...
        @property
        def current_leader(self) -> FetchResponse.LeaderIdAndEpoch: ...
        @property
        def snapshot_id(self) -> FetchResponse.SnapshotId: ...
        @property
        def aborted_transactions(self) -> tuple[FetchResponse.AbortedTransaction, ...] | None: ...
        @property
        def preferred_read_replica(self) -> int: ...
        @property
        def records(self) -> bytes | None: ...

    class EpochEndOffset(Record):
        def __new__(cls, *, epoch: int = ..., end_offset: int = ...) -> Self: ...
        def _replace(self, *, epoch: int = ..., end_offset: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def epoch(self) -> int: ...
        @property
        def end_offset(self) -> int: ...

    class LeaderIdAndEpoch(Record):
        def __new__(cls, *, leader_id: int = ..., leader_epoch: int = ...) -> Self: ...
        def _replace(self, *, leader_id: int = ..., leader_epoch: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def leader_id(self) -> int: ...
        @property
        def leader_epoch(self) -> int: ...

    class SnapshotId(Record):
        def __new__(cls, *, end_offset: int = ..., epoch: int = ...) -> Self: ...
        def _replace(self, *, end_offset: int = ..., epoch: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def end_offset(self) -> int: ...
        @property
        def epoch(self) -> int: ...

    class AbortedTransaction(Record):
        def __new__(cls, *, producer_id: int = ..., first_offset: int = ...) -> Self: ...
        def _replace(self, *, producer_id: int = ..., first_offset: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def producer_id(self) -> int: ...
        @property
        def first_offset(self) -> int: ...

    class NodeEndpoint(Record):
        def __new__(
            cls, *, node_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, node_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...
        ) -> Self: ...
        @property
        def node_id(self) -> int: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...
        @property
        def rack(self) -> str | None: ...

    def __new__(
        cls,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        session_id: int = ...,
        responses: Iterable[FetchResponse.FetchableTopicResponse] = ...,
        node_endpoints: Iterable[FetchResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        session_id: int = ...,
        responses: Iterable[FetchResponse.FetchableTopicResponse] = ...,
        node_endpoints: Iterable[FetchResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    @property
    def throttle_time_ms(self) -> int: ...
    @property
    def error_code(self) -> int: ...
    @property
    def session_id(self) -> int: ...
    @property
    def responses(self) -> tuple[FetchResponse.FetchableTopicResponse, ...]: ...
    @property
    def node_endpoints(self) -> tuple[FetchResponse.NodeEndpoint, ...]: ...

class FetchSnapshotRequest(Record):
    class TopicSnapshot(Record):
        def __new__(
            cls, *, name: str = ..., partitions: Iterable[FetchSnapshotRequest.PartitionSnapshot] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, name: str = ..., partitions: Iterable[FetchSnapshotRequest.PartitionSnapshot] = ...
        ) -> Self: ...
        @property
        def name(self) -> str: ...
        @property
        def partitions(self) -> tuple[FetchSnapshotRequest.PartitionSnapshot, ...]: ...

    class PartitionSnapshot(Record):
        def __new__(
            cls,
            *,
            partition: int = ...,
            current_leader_epoch: int = ...,
            snapshot_id: FetchSnapshotRequest.SnapshotId = ...,
            position: int = ...,
            replica_directory_id: str = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition: int = ...,
            current_leader_epoch: int = ...,
            snapshot_id: FetchSnapshotRequest.SnapshotId = ...,
            position: int = ...,
            replica_directory_id: str = ...,
        ) -> Self: ...
        @property
        def partition(self) -> int: ...
        @property
        def current_leader_epoch(self) -> int: ...
        @property
        def snapshot_id(self) -> FetchSnapshotRequest.SnapshotId: ...
        @property
        def position(self) -> int: ...
        @property
        def replica_directory_id(self) -> str: ...

    class SnapshotId(Record):
        def __new__(cls, *, end_offset: int = ..., epoch: int = ...) -> Self: ...
        def _replace(self, *, end_offset: int = ..., epoch: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def end_offset(self) -> int: ...
        @property
        def epoch(self) -> int: ...

    def __new__(
        cls,
        *,
        cluster_id: str | None = ...,
        replica_id: int = ...,
        max_bytes: int = ...,
        topics: Iterable[FetchSnapshotRequest.TopicSnapshot] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        cluster_id: str | None = ...,
        replica_id: int = ...,
        max_bytes: int = ...,
        topics: Iterable[FetchSnapshotRequest.TopicSnapshot] = ...,
    ) -> Self: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def replica_id(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def topics(self) -> tuple[FetchSnapshotRequest.TopicSnapshot, ...]: ...

class FetchSnapshotResponse(Record):
    class TopicSnapshot(Record):
        def __new__(
            cls, *, name: str = ..., partitions: Iterable[FetchSnapshotResponse.PartitionSnapshot] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, name: str = ..., partitions: Iterable[FetchSnapshotResponse.PartitionSnapshot] = ...
        ) -> Self: ...
        @property
        def name(self) -> str: ...
        @property
        def partitions(self) -> tuple[FetchSnapshotResponse.PartitionSnapshot, ...]: ...

    class PartitionSnapshot(Record):
        def __new__(
            cls,
            *,
            index: int = ...,
            error_code: int = ...,
            snapshot_id: FetchSnapshotResponse.SnapshotId = ...,
            current_leader: FetchSnapshotResponse.LeaderIdAndEpoch = ...,
            size: int = ...,
            position: int = ...,
            unaligned_records: bytes = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            index: int = ...,
            error_code: int = ...,
            snapshot_id: FetchSnapshotResponse.SnapshotId = ...,
            current_leader: FetchSnapshotResponse.LeaderIdAndEpoch = ...,
            size: int = ...,
            position: int = ...,
            unaligned_records: bytes = ...,
        ) -> Self: ...
        @property
        def index(self) -> int: ...  # type: ignore[override]
        @property
        def error_code(self) -> int: ...
        @property
        def snapshot_id(self) -> FetchSnapshotResponse.SnapshotId: ...
        @property
        def current_leader(self) -> FetchSnapshotResponse.LeaderIdAndEpoch: ...
        @property
        def size(self) -> int: ...
        @property
        def position(self) -> int: ...
        @property
        def unaligned_records(self) -> bytes: ...

    class SnapshotId(Record):
        def __new__(cls, *, end_offset: int = ..., epoch: int = ...) -> Self: ...
        def _replace(self, *, end_offset: int = ..., epoch: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def end_offset(self) -> int: ...
        @property
        def epoch(self) -> int: ...

    class LeaderIdAndEpoch(Record):
        def __new__(cls, *, leader_id: int = ..., leader_epoch: int = ...) -> Self: ...
        def _replace(self, *, leader_id: int = ..., leader_epoch: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def leader_id(self) -> int: ...
        @property
        def leader_epoch(self) -> int: ...

    class NodeEndpoint(Record):
        def __new__(cls, *, node_id: int = ..., host: str = ..., port: int = ...) -> Self: ...
        def _replace(self, *, node_id: int = ..., host: str = ..., port: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def node_id(self) -> int: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...

    def __new__(
        cls,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        topics: Iterable[FetchSnapshotResponse.TopicSnapshot] = ...,
        node_endpoints: Iterable[FetchSnapshotResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        throttle_time_ms: int = ...,
        error_code: int = ...,
        topics: Iterable[FetchSnapshotResponse.TopicSnapshot] = ...,
        node_endpoints: Iterable[FetchSnapshotResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    @property
    def throttle_time_ms(self) -> int: ...
    @property
    def error_code(self) -> int: ...
    @property
    def topics(self) -> tuple[FetchSnapshotResponse.TopicSnapshot, ...]: ...
    @property
    def node_endpoints(self) -> tuple[FetchSnapshotResponse.NodeEndpoint, ...]: ...

class RequestHeader(Record):
    def __new__(
        cls,
        *,
        request_api_key: int = ...,
        request_api_version: int = ...,
        correlation_id: int = ...,
        client_id: str | None = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        request_api_key: int = ...,
        request_api_version: int = ...,
        correlation_id: int = ...,
        client_id: str | None = ...,
    ) -> Self: ...
    @property
    def request_api_key(self) -> int: ...
    @property
    def request_api_version(self) -> int: ...
    @property
    def correlation_id(self) -> int: ...
    @property
    def client_id(self) -> str | None: ...

class ResponseHeader(Record):
    def __new__(cls, *, correlation_id: int = ...) -> Self: ...
    def _replace(self, *, correlation_id: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def correlation_id(self) -> int: ...

class SaslAuthenticateRequest(Record):
    def __new__(cls, *, auth_bytes: bytes = ...) -> Self: ...
    def _replace(self, *, auth_bytes: bytes = ...) -> Self: ...  # type: ignore[override]
    @property
    def auth_bytes(self) -> bytes: ...

class SaslAuthenticateResponse(Record):
    def __new__(
        cls,
        *,
        error_code: int = ...,
        error_message: str | None = ...,
        auth_bytes: bytes = ...,
        session_lifetime_ms: int = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        error_code: int = ...,
        error_message: str | None = ...,
        auth_bytes: bytes = ...,
        session_lifetime_ms: int = ...,
    ) -> Self: ...
    @property
    def error_code(self) -> int: ...
    @property
    def error_message(self) -> str | None: ...
    @property
    def auth_bytes(self) -> bytes: ...
    @property
    def session_lifetime_ms(self) -> int: ...

class SaslHandshakeRequest(Record):
    def __new__(cls, *, mechanism: str = ...) -> Self: ...
    def _replace(self, *, mechanism: str = ...) -> Self: ...  # type: ignore[override]
    @property
    def mechanism(self) -> str: ...

class SaslHandshakeResponse(Record):
    def __new__(cls, *, error_code: int = ..., mechanisms: Iterable[str] = ...) -> Self: ...
    def _replace(self, *, error_code: int = ..., mechanisms: Iterable[str] = ...) -> Self: ...  # type: ignore[override]
    @property
    def error_code(self) -> int: ...
    @property
    def mechanisms(self) -> tuple[str, ...]: ...

class VoteRequest(Record):
    class TopicData(Record):
        def __new__(
            cls, *, topic_name: str = ..., partitions: Iterable[VoteRequest.PartitionData] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic_name: str = ..., partitions: Iterable[VoteRequest.PartitionData] = ...
        ) -> Self: ...
        @property
        def topic_name(self) -> str: ...
        @property
        def partitions(self) -> tuple[VoteRequest.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(
            cls,
            *,
            partition_index: int = ...,
            replica_epoch: int = ...,
            replica_id: int = ...,
            replica_directory_id: str = ...,
            voter_directory_id: str = ...,
            last_offset_epoch: int = ...,
            last_offset: int = ...,
            pre_vote: bool = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition_index: int = ...,
            replica_epoch: int = ...,
            replica_id: int = ...,
            replica_directory_id: str = ...,
            voter_directory_id: str = ...,
            last_offset_epoch: int = ...,
            last_offset: int = ...,
            pre_vote: bool = ...,
        ) -> Self: ...
        @property
        def partition_index(self) -> int: ...
        @property
        def replica_epoch(self) -> int: ...
        @property
        def replica_id(self) -> int: ...
        @property
        def replica_directory_id(self) -> str: ...
        @property
        def voter_directory_id(self) -> str: ...
        @property
        def last_offset_epoch(self) -> int: ...
        @property
        def last_offset(self) -> int: ...
        @property
        def pre_vote(self) -> bool: ...

    def __new__(
        cls,
        *,
        cluster_id: str | None = ...,
        voter_id: int = ...,
        topics: Iterable[VoteRequest.TopicData] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        cluster_id: str | None = ...,
        voter_id: int = ...,
        topics: Iterable[VoteRequest.TopicData] = ...,
    ) -> Self: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def voter_id(self) -> int: ...
    @property
    def topics(self) -> tuple[VoteRequest.TopicData, ...]: ...

class VoteResponse(Record):
    class TopicData(Record):
        def __new__(
            cls, *, topic_name: str = ..., partitions: Iterable[VoteResponse.PartitionData] = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, topic_name: str = ..., partitions: Iterable[VoteResponse.PartitionData] = ...
        ) -> Self: ...
        @property
        def topic_name(self) -> str: ...
        @property
        def partitions(self) -> tuple[VoteResponse.PartitionData, ...]: ...

    class PartitionData(Record):
        def __new__(
            cls,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            vote_granted: bool = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            partition_index: int = ...,
            error_code: int = ...,
            leader_id: int = ...,
            leader_epoch: int = ...,
            vote_granted: bool = ...,
        ) -> Self: ...
        @property
        def partition_index(self) -> int: ...
        @property
        def error_code(self) -> int: ...
        @property
        def leader_id(self) -> int: ...
        @property
        def leader_epoch(self) -> int: ...
        @property
        def vote_granted(self) -> bool: ...

    class NodeEndpoint(Record):
        def __new__(cls, *, node_id: int = ..., host: str = ..., port: int = ...) -> Self: ...
        def _replace(self, *, node_id: int = ..., host: str = ..., port: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def node_id(self) -> int: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...

    def __new__(
        cls,
        *,
        error_code: int = ...,
        topics: Iterable[VoteResponse.TopicData] = ...,
        node_endpoints: Iterable[VoteResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        error_code: int = ...,
        topics: Iterable[VoteResponse.TopicData] = ...,
        node_endpoints: Iterable[VoteResponse.NodeEndpoint] = ...,
    ) -> Self: ...
    @property
    def error_code(self) -> int: ...
    @property
    def topics(self) -> tuple[VoteResponse.TopicData, ...]: ...
    @property
    def node_endpoints(self) -> tuple[VoteResponse.NodeEndpoint, ...]: ...
