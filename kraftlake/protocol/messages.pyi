# Generated from schemas/ by `make stubs` (python -m kraftlake.protocol.stubs): do not edit.

from collections.abc import Iterable
from typing import Any, Self

from kraftlake.protocol.codegen import Record as Record
from kraftlake.protocol.spec import MessageSpec, StructSpec

__all__ = ["MESSAGE_CLASSES", "Record", "class_for", "spec_of"]

MESSAGE_CLASSES: dict[str, type[Record]]

def class_for(name: str) -> type[Record]: ...
def spec_of(record_or_class: Any) -> MessageSpec: ...
def struct_classes() -> dict[str, type[Record]]: ...
def struct_spec_of(cls: type[Record]) -> StructSpec: ...

class RegisterBrokerRecord(Record):
    class BrokerEndpoint(Record):
        def __new__(
            cls, *, name: str = ..., host: str = ..., port: int = ..., security_protocol: int = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, name: str = ..., host: str = ..., port: int = ..., security_protocol: int = ...
        ) -> Self: ...
        @property
        def name(self) -> str: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...
        @property
        def security_protocol(self) -> int: ...

    class BrokerFeature(Record):
        def __new__(
            cls, *, name: str = ..., min_supported_version: int = ..., max_supported_version: int = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, name: str = ..., min_supported_version: int = ..., max_supported_version: int = ...
        ) -> Self: ...
        @property
        def name(self) -> str: ...
        @property
        def min_supported_version(self) -> int: ...
        @property
        def max_supported_version(self) -> int: ...

    def __new__(
        cls,
        *,
        broker_id: int = ...,
        is_migrating_zk_broker: bool = ...,
        incarnation_id: str = ...,
        broker_epoch: int = ...,
        end_points: Iterable[RegisterBrokerRecord.BrokerEndpoint] = ...,
        features: Iterable[RegisterBrokerRecord.BrokerFeature] = ...,
        rack: str | None = ...,
        fenced: bool = ...,
        in_controlled_shutdown: bool = ...,
        log_dirs: Iterable[str] = ...,
        cordoned_log_dirs: Iterable[str] | None = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        broker_id: int = ...,
        is_migrating_zk_broker: bool = ...,
        incarnation_id: str = ...,
        broker_epoch: int = ...,
        end_points: Iterable[RegisterBrokerRecord.BrokerEndpoint] = ...,
        features: Iterable[RegisterBrokerRecord.BrokerFeature] = ...,
        rack: str | None = ...,
        fenced: bool = ...,
        in_controlled_shutdown: bool = ...,
        log_dirs: Iterable[str] = ...,
        cordoned_log_dirs: Iterable[str] | None = ...,
    ) -> Self: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def is_migrating_zk_broker(self) -> bool: ...
    @property
    def incarnation_id(self) -> str: ...
    @property
    def broker_epoch(self) -> int: ...
    @property
    def end_points(self) -> tuple[RegisterBrokerRecord.BrokerEndpoint, ...]: ...
    @property
    def features(self) -> tuple[RegisterBrokerRecord.BrokerFeature, ...]: ...
    @property
    def rack(self) -> str | None: ...
    @property
    def fenced(self) -> bool: ...
    @property
    def in_controlled_shutdown(self) -> bool: ...
    @property
    def log_dirs(self) -> tuple[str, ...]: ...
    @property
    def cordoned_log_dirs(self) -> tuple[str, ...] | None: ...

class UnregisterBrokerRecord(Record):
    def __new__(cls, *, broker_id: int = ..., broker_epoch: int = ...) -> Self: ...
    def _replace(self, *, broker_id: int = ..., broker_epoch: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def broker_id(self) -> int: ...
    @property
    def broker_epoch(self) -> int: ...

class TopicRecord(Record):
    def __new__(cls, *, name: str = ..., topic_id: str = ...) -> Self: ...
    def _replace(self, *, name: str = ..., topic_id: str = ...) -> Self: ...  # type: ignore[override]
    @property
    def name(self) -> str: ...
    @property
    def topic_id(self) -> str: ...

class PartitionRecord(Record):
    def __new__(
        cls,
        *,
        partition_id: int = ...,
        topic_id: str = ...,
        replicas: Iterable[int] = ...,
        isr: Iterable[int] = ...,
        removing_replicas: Iterable[int] = ...,
        adding_replicas: Iterable[int] = ...,
        leader: int = ...,
        leader_recovery_state: int = ...,
        leader_epoch: int = ...,
        partition_epoch: int = ...,
        directories: Iterable[str] = ...,
        eligible_leader_replicas: Iterable[int] | None = ...,
        last_known_elr: Iterable[int] | None = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        partition_id: int = ...,
        topic_id: str = ...,
        replicas: Iterable[int] = ...,
        isr: Iterable[int] = ...,
        removing_replicas: Iterable[int] = ...,
        adding_replicas: Iterable[int] = ...,
        leader: int = ...,
        leader_recovery_state: int = ...,
        leader_epoch: int = ...,
        partition_epoch: int = ...,
        directories: Iterable[str] = ...,
        eligible_leader_replicas: Iterable[int] | None = ...,
        last_known_elr: Iterable[int] | None = ...,
    ) -> Self: ...
    @property
    def partition_id(self) -> int: ...
    @property
    def topic_id(self) -> str: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def removing_replicas(self) -> tuple[int, ...]: ...
    @property
    def adding_replicas(self) -> tuple[int, ...]: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_recovery_state(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def partition_epoch(self) -> int: ...
    @property
    def directories(self) -> tuple[str, ...]: ...
    @property
    def eligible_leader_replicas(self) -> tuple[int, ...] | None: ...
    @property
    def last_known_elr(self) -> tuple[int, ...] | None: ...

class ConfigRecord(Record):
    def __new__(
        cls, *, resource_type: int = ..., resource_name: str = ..., name: str = ..., value: str | None = ...
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self, *, resource_type: int = ..., resource_name: str = ..., name: str = ..., value: str | None = ...
    ) -> Self: ...
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> str | None: ...

class PartitionChangeRecord(Record):
    def __new__(
        cls,
        *,
        partition_id: int = ...,
        topic_id: str = ...,
        isr: Iterable[int] | None = ...,
        leader: int = ...,
        replicas: Iterable[int] | None = ...,
        removing_replicas: Iterable[int] | None = ...,
        adding_replicas: Iterable[int] | None = ...,
        leader_recovery_state: int = ...,
        directories: Iterable[str] | None = ...,
        eligible_leader_replicas: Iterable[int] | None = ...,
        last_known_elr: Iterable[int] | None = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        partition_id: int = ...,
        topic_id: str = ...,
        isr: Iterable[int] | None = ...,
        leader: int = ...,
        replicas: Iterable[int] | None = ...,
        removing_replicas: Iterable[int] | None = ...,
        adding_replicas: Iterable[int] | None = ...,
        leader_recovery_state: int = ...,
        directories: Iterable[str] | None = ...,
        eligible_leader_replicas: Iterable[int] | None = ...,
        last_known_elr: Iterable[int] | None = ...,
    ) -> Self: ...
    @property
    def partition_id(self) -> int: ...
    @property
    def topic_id(self) -> str: ...
    @property
    def isr(self) -> tuple[int, ...] | None: ...
    @property
    def leader(self) -> int: ...
    @property
    def replicas(self) -> tuple[int, ...] | None: ...
    @property
    def removing_replicas(self) -> tuple[int, ...] | None: ...
    @property
    def adding_replicas(self) -> tuple[int, ...] | None: ...
    @property
    def leader_recovery_state(self) -> int: ...
    @property
    def directories(self) -> tuple[str, ...] | None: ...
    @property
    def eligible_leader_replicas(self) -> tuple[int, ...] | None: ...
    @property
    def last_known_elr(self) -> tuple[int, ...] | None: ...

class FenceBrokerRecord(Record):
    def __new__(cls, *, id: int = ..., epoch: int = ...) -> Self: ...
    def _replace(self, *, id: int = ..., epoch: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def id(self) -> int: ...
    @property
    def epoch(self) -> int: ...

class UnfenceBrokerRecord(Record):
    def __new__(cls, *, id: int = ..., epoch: int = ...) -> Self: ...
    def _replace(self, *, id: int = ..., epoch: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def id(self) -> int: ...
    @property
    def epoch(self) -> int: ...

class RemoveTopicRecord(Record):
    def __new__(cls, *, topic_id: str = ...) -> Self: ...
    def _replace(self, *, topic_id: str = ...) -> Self: ...  # type: ignore[override]
    @property
    def topic_id(self) -> str: ...

class DelegationTokenRecord(Record):
    def __new__(
        cls,
        *,
        owner: str = ...,
        requester: str = ...,
        renewers: Iterable[str] = ...,
        issue_timestamp: int = ...,
        max_timestamp: int = ...,
        expiration_timestamp: int = ...,
        token_id: str = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        owner: str = ...,
        requester: str = ...,
        renewers: Iterable[str] = ...,
        issue_timestamp: int = ...,
        max_timestamp: int = ...,
        expiration_timestamp: int = ...,
        token_id: str = ...,
    ) -> Self: ...
    @property
    def owner(self) -> str: ...
    @property
    def requester(self) -> str: ...
    @property
    def renewers(self) -> tuple[str, ...]: ...
    @property
    def issue_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def expiration_timestamp(self) -> int: ...
    @property
    def token_id(self) -> str: ...

class UserScramCredentialRecord(Record):
    def __new__(
        cls,
        *,
        name: str = ...,
        mechanism: int = ...,
        salt: bytes = ...,
        stored_key: bytes = ...,
        server_key: bytes = ...,
        iterations: int = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        name: str = ...,
        mechanism: int = ...,
        salt: bytes = ...,
        stored_key: bytes = ...,
        server_key: bytes = ...,
        iterations: int = ...,
    ) -> Self: ...
    @property
    def name(self) -> str: ...
    @property
    def mechanism(self) -> int: ...
    @property
    def salt(self) -> bytes: ...
    @property
    def stored_key(self) -> bytes: ...
    @property
    def server_key(self) -> bytes: ...
    @property
    def iterations(self) -> int: ...

class FeatureLevelRecord(Record):
    def __new__(cls, *, name: str = ..., feature_level: int = ...) -> Self: ...
    def _replace(self, *, name: str = ..., feature_level: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def name(self) -> str: ...
    @property
    def feature_level(self) -> int: ...

class ClientQuotaRecord(Record):
    class EntityData(Record):
        def __new__(cls, *, entity_type: str = ..., entity_name: str | None = ...) -> Self: ...
        def _replace(self, *, entity_type: str = ..., entity_name: str | None = ...) -> Self: ...  # type: ignore[override]
        @property
        def entity_type(self) -> str: ...
        @property
        def entity_name(self) -> str | None: ...

    def __new__(
        cls,
        *,
        entity: Iterable[ClientQuotaRecord.EntityData] = ...,
        key: str = ...,
        value: float = ...,
        remove: bool = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        entity: Iterable[ClientQuotaRecord.EntityData] = ...,
        key: str = ...,
        value: float = ...,
        remove: bool = ...,
    ) -> Self: ...
    @property
    def entity(self) -> tuple[ClientQuotaRecord.EntityData, ...]: ...
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> float: ...
    @property
    def remove(self) -> bool: ...

class ProducerIdsRecord(Record):
    def __new__(
        cls, *, broker_id: int = ..., broker_epoch: int = ..., next_producer_id: int = ...
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self, *, broker_id: int = ..., broker_epoch: int = ..., next_producer_id: int = ...
    ) -> Self: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def broker_epoch(self) -> int: ...
    @property
    def next_producer_id(self) -> int: ...

class BrokerRegistrationChangeRecord(Record):
    def __new__(
        cls,
        *,
        broker_id: int = ...,
        broker_epoch: int = ...,
        fenced: int = ...,
        in_controlled_shutdown: int = ...,
        log_dirs: Iterable[str] = ...,
        cordoned_log_dirs: Iterable[str] | None = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        broker_id: int = ...,
        broker_epoch: int = ...,
        fenced: int = ...,
        in_controlled_shutdown: int = ...,
        log_dirs: Iterable[str] = ...,
        cordoned_log_dirs: Iterable[str] | None = ...,
    ) -> Self: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def broker_epoch(self) -> int: ...
    @property
    def fenced(self) -> int: ...
    @property
    def in_controlled_shutdown(self) -> int: ...
    @property
    def log_dirs(self) -> tuple[str, ...]: ...
    @property
    def cordoned_log_dirs(self) -> tuple[str, ...] | None: ...

class AccessControlEntryRecord(Record):
    def __new__(
        cls,
        *,
        id: str = ...,
        resource_type: int = ...,
        resource_name: str = ...,
        pattern_type: int = ...,
        principal: str = ...,
        host: str = ...,
        operation: int = ...,
        permission_type: int = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        id: str = ...,
        resource_type: int = ...,
        resource_name: str = ...,
        pattern_type: int = ...,
        principal: str = ...,
        host: str = ...,
        operation: int = ...,
        permission_type: int = ...,
    ) -> Self: ...
    @property
    def id(self) -> str: ...
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def pattern_type(self) -> int: ...
    @property
    def principal(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...

class RemoveAccessControlEntryRecord(Record):
    def __new__(cls, *, id: str = ...) -> Self: ...
    def _replace(self, *, id: str = ...) -> Self: ...  # type: ignore[override]
    @property
    def id(self) -> str: ...

class NoOpRecord(Record):
    def __new__(cls) -> Self: ...
    def _replace(self) -> Self: ...  # type: ignore[override]

class ZkMigrationStateRecord(Record):
    def __new__(cls, *, zk_migration_state: int = ...) -> Self: ...
    def _replace(self, *, zk_migration_state: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def zk_migration_state(self) -> int: ...

class RemoveUserScramCredentialRecord(Record):
    def __new__(cls, *, name: str = ..., mechanism: int = ...) -> Self: ...
    def _replace(self, *, name: str = ..., mechanism: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def name(self) -> str: ...
    @property
    def mechanism(self) -> int: ...

class BeginTransactionRecord(Record):
    def __new__(cls, *, name: str | None = ...) -> Self: ...
    def _replace(self, *, name: str | None = ...) -> Self: ...  # type: ignore[override]
    @property
    def name(self) -> str | None: ...

class EndTransactionRecord(Record):
    def __new__(cls) -> Self: ...
    def _replace(self) -> Self: ...  # type: ignore[override]

class AbortTransactionRecord(Record):
    def __new__(cls, *, reason: str | None = ...) -> Self: ...
    def _replace(self, *, reason: str | None = ...) -> Self: ...  # type: ignore[override]
    @property
    def reason(self) -> str | None: ...

class RemoveDelegationTokenRecord(Record):
    def __new__(cls, *, token_id: str = ...) -> Self: ...
    def _replace(self, *, token_id: str = ...) -> Self: ...  # type: ignore[override]
    @property
    def token_id(self) -> str: ...

class RegisterControllerRecord(Record):
    class ControllerEndpoint(Record):
        def __new__(
            cls, *, name: str = ..., host: str = ..., port: int = ..., security_protocol: int = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, name: str = ..., host: str = ..., port: int = ..., security_protocol: int = ...
        ) -> Self: ...
        @property
        def name(self) -> str: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...
        @property
        def security_protocol(self) -> int: ...

    class ControllerFeature(Record):
        def __new__(
            cls, *, name: str = ..., min_supported_version: int = ..., max_supported_version: int = ...
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self, *, name: str = ..., min_supported_version: int = ..., max_supported_version: int = ...
        ) -> Self: ...
        @property
        def name(self) -> str: ...
        @property
        def min_supported_version(self) -> int: ...
        @property
        def max_supported_version(self) -> int: ...

    def __new__(
        cls,
        *,
        controller_id: int = ...,
        incarnation_id: str = ...,
        zk_migration_ready: bool = ...,
        end_points: Iterable[RegisterControllerRecord.ControllerEndpoint] = ...,
        features: Iterable[RegisterControllerRecord.ControllerFeature] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        controller_id: int = ...,
        incarnation_id: str = ...,
        zk_migration_ready: bool = ...,
        end_points: Iterable[RegisterControllerRecord.ControllerEndpoint] = ...,
        features: Iterable[RegisterControllerRecord.ControllerFeature] = ...,
    ) -> Self: ...
    @property
    def controller_id(self) -> int: ...
    @property
    def incarnation_id(self) -> str: ...
    @property
    def zk_migration_ready(self) -> bool: ...
    @property
    def end_points(self) -> tuple[RegisterControllerRecord.ControllerEndpoint, ...]: ...
    @property
    def features(self) -> tuple[RegisterControllerRecord.ControllerFeature, ...]: ...

class ClearElrRecord(Record):
    def __new__(cls, *, topic_name: str = ...) -> Self: ...
    def _replace(self, *, topic_name: str = ...) -> Self: ...  # type: ignore[override]
    @property
    def topic_name(self) -> str: ...

class UnregisterControllerRecord(Record):
    def __new__(cls, *, controller_id: int = ...) -> Self: ...
    def _replace(self, *, controller_id: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def controller_id(self) -> int: ...

class LeaderChangeMessage(Record):
    class Voter(Record):
        def __new__(cls, *, voter_id: int = ..., voter_directory_id: str = ...) -> Self: ...
        def _replace(self, *, voter_id: int = ..., voter_directory_id: str = ...) -> Self: ...  # type: ignore[override]
        @property
        def voter_id(self) -> int: ...
        @property
        def voter_directory_id(self) -> str: ...

    def __new__(
        cls,
        *,
        version: int = ...,
        leader_id: int = ...,
        voters: Iterable[LeaderChangeMessage.Voter] = ...,
        granting_voters: Iterable[LeaderChangeMessage.Voter] = ...,
    ) -> Self: ...
    def _replace(  # type: ignore[override]
        self,
        *,
        version: int = ...,
        leader_id: int = ...,
        voters: Iterable[LeaderChangeMessage.Voter] = ...,
        granting_voters: Iterable[LeaderChangeMessage.Voter] = ...,
    ) -> Self: ...
    @property
    def version(self) -> int: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def voters(self) -> tuple[LeaderChangeMessage.Voter, ...]: ...
    @property
    def granting_voters(self) -> tuple[LeaderChangeMessage.Voter, ...]: ...

class SnapshotHeaderRecord(Record):
    def __new__(cls, *, version: int = ..., last_contained_log_timestamp: int = ...) -> Self: ...
    def _replace(self, *, version: int = ..., last_contained_log_timestamp: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def version(self) -> int: ...
    @property
    def last_contained_log_timestamp(self) -> int: ...

class SnapshotFooterRecord(Record):
    def __new__(cls, *, version: int = ...) -> Self: ...
    def _replace(self, *, version: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def version(self) -> int: ...

class KRaftVersionRecord(Record):
    def __new__(cls, *, version: int = ..., kraft_version: int = ...) -> Self: ...
    def _replace(self, *, version: int = ..., kraft_version: int = ...) -> Self: ...  # type: ignore[override]
    @property
    def version(self) -> int: ...
    @property
    def kraft_version(self) -> int: ...

class VotersRecord(Record):
    class Voter(Record):
        def __new__(
            cls,
            *,
            voter_id: int = ...,
            voter_directory_id: str = ...,
            endpoints: Iterable[VotersRecord.Endpoint] = ...,
            kraft_version_feature: VotersRecord.KRaftVersionFeature = ...,
        ) -> Self: ...
        def _replace(  # type: ignore[override]
            self,
            *,
            voter_id: int = ...,
            voter_directory_id: str = ...,
            endpoints: Iterable[VotersRecord.Endpoint] = ...,
            kraft_version_feature: VotersRecord.KRaftVersionFeature = ...,
        ) -> Self: ...
        @property
        def voter_id(self) -> int: ...
        @property
        def voter_directory_id(self) -> str: ...
        @property
        def endpoints(self) -> tuple[VotersRecord.Endpoint, ...]: ...
        @property
        def kraft_version_feature(self) -> VotersRecord.KRaftVersionFeature: ...

    class Endpoint(Record):
        def __new__(cls, *, name: str = ..., host: str = ..., port: int = ...) -> Self: ...
        def _replace(self, *, name: str = ..., host: str = ..., port: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def name(self) -> str: ...
        @property
        def host(self) -> str: ...
        @property
        def port(self) -> int: ...

    class KRaftVersionFeature(Record):
        def __new__(cls, *, min_supported_version: int = ..., max_supported_version: int = ...) -> Self: ...
        def _replace(self, *, min_supported_version: int = ..., max_supported_version: int = ...) -> Self: ...  # type: ignore[override]
        @property
        def min_supported_version(self) -> int: ...
        @property
        def max_supported_version(self) -> int: ...

    def __new__(cls, *, version: int = ..., voters: Iterable[VotersRecord.Voter] = ...) -> Self: ...
    def _replace(self, *, version: int = ..., voters: Iterable[VotersRecord.Voter] = ...) -> Self: ...  # type: ignore[override]
    @property
    def version(self) -> int: ...
    @property
    def voters(self) -> tuple[VotersRecord.Voter, ...]: ...
