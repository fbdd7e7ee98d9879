"""The requests the controller serves, as plain value objects (the fields Kafka's RPCs carry)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    """BrokerRegistration (API 62). ``previous_broker_epoch`` is -1 after an unclean shutdown or first start."""

    broker_id: int
    incarnation_id: str
    listeners: tuple[Listener, ...]
    rack: str | None = None
    log_dirs: tuple[str, ...] = ()
    features: dict[str, tuple[int, int]] | None = None  # None: everything this controller supports
    previous_broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    """BrokerHeartbeat (API 63)."""

    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """One topic of CreateTopics (API 19); -1 means the cluster default, ``assignments`` pins replicas."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, tuple[int, ...]] | None = None
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionIsrUpdate:
    """One partition of AlterPartition (API 56) from its leader."""

    topic_id: str
    partition_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    partitions: tuple[PartitionIsrUpdate, ...]


class ConfigOp(enum.IntEnum):
    """Kafka's ``AlterConfigOp.OpType``."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type``."""

    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True, slots=True)
class ConfigChange:
    resource_type: ResourceType
    resource_name: str
    name: str
    op: ConfigOp
    value: str | None = None


class UpgradeType(enum.IntEnum):
    """Kafka's ``FeatureUpdate.UpgradeType``."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    name: str
    max_version_level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE
