"""The value objects of a metadata image: brokers, controllers, partitions, topics, ACLs, ...

They mirror Kafka's ``org.apache.kafka.metadata`` registrations (``BrokerRegistration``,
``PartitionRegistration``, ...). All are immutable; arrays are tuples, uuids are Kafka base64url strings.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from kraftlake.protocol import messages as m

MIGRATING_DIR = "AAAAAAAAAAAAAAAAAAAAAA"
"""``DirectoryId.MIGRATING`` (Uuid(0, 0)): the directory of a replica whose directory is not known."""

NO_LEADER = -1
NO_LEADER_CHANGE = -2
LEADER_RECOVERY_NO_CHANGE = -1
LEADER_RECOVERY_STATES = {0: "RECOVERED", 1: "RECOVERING"}


def uuid_sort_key(uuid: str) -> tuple[int, int]:
    """Order uuids as Java's ``Uuid.compareTo`` does: signed most then least significant 64 bits."""
    raw = base64.urlsafe_b64decode(uuid + "==")
    return int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:16], "big", signed=True)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where an image comes from: the offset, epoch and timestamp of the last record applied (-1 = none)."""

    offset: int = -1
    epoch: int = -1
    timestamp: int = -1


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener of a broker or controller."""

    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class VersionRange:
    """A supported feature range of a broker or controller."""

    min: int
    max: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker (Kafka's ``BrokerRegistration``); ``directories`` sorted as Kafka sorts them."""

    id: int
    epoch: int
    incarnation_id: str
    listeners: tuple[Endpoint, ...]  # sorted by name (a map keyed by name in Kafka)
    supported_features: tuple[tuple[str, VersionRange], ...]  # sorted by name
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool
    directories: tuple[str, ...]
    cordoned_directories: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """A registered controller (Kafka's ``ControllerRegistration``)."""

    id: int
    incarnation_id: str
    zk_migration_ready: bool
    listeners: tuple[Endpoint, ...]
    supported_features: tuple[tuple[str, VersionRange], ...]


class PartitionRegistration:
    """A partition's state (Kafka's ``PartitionRegistration``)."""

    __slots__ = (
        "adding_replicas",
        "directories",
        "elr",
        "isr",
        "last_known_elr",
        "leader",
        "leader_epoch",
        "leader_recovery_state",
        "partition_epoch",
        "removing_replicas",
        "replicas",
    )

    def __init__(
        self,
        replicas: tuple[int, ...],
        directories: tuple[str, ...],
        isr: tuple[int, ...],
        removing_replicas: tuple[int, ...],
        adding_replicas: tuple[int, ...],
        leader: int,
        leader_recovery_state: int,
        leader_epoch: int,
        partition_epoch: int,
        elr: tuple[int, ...],
        last_known_elr: tuple[int, ...],
    ) -> None:
        self.replicas = replicas
        self.directories = directories
        self.isr = isr
        self.removing_replicas = removing_replicas
        self.adding_replicas = adding_replicas
        self.leader = leader
        self.leader_recovery_state = leader_recovery_state
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.elr = elr
        self.last_known_elr = last_known_elr

    def _key(self) -> tuple[object, ...]:
        return (
            self.replicas,
            self.directories,
            self.isr,
            self.removing_replicas,
            self.adding_replicas,
            self.leader,
            self.leader_recovery_state,
            self.leader_epoch,
            self.partition_epoch,
            self.elr,
            self.last_known_elr,
        )

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, PartitionRegistration) and self._key() == other._key())

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"PartitionRegistration(replicas={list(self.replicas)}, directories={list(self.directories)}, "
            f"isr={list(self.isr)}, removing_replicas={list(self.removing_replicas)}, "
            f"adding_replicas={list(self.adding_replicas)}, elr={list(self.elr)}, "
            f"last_known_elr={list(self.last_known_elr)}, leader={self.leader}, "
            f"leader_recovery_state={self.leader_recovery_state}, leader_epoch={self.leader_epoch}, "
            f"partition_epoch={self.partition_epoch})"
        )


class TopicImage:
    """A topic: name, id and its partitions by index. Immutable; ``partitions`` must not be mutated."""

    __slots__ = ("id", "name", "partitions")

    def __init__(self, name: str, topic_id: str, partitions: dict[int, PartitionRegistration]) -> None:
        self.name = name
        self.id = topic_id
        self.partitions = partitions

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, TopicImage)
            and self.name == other.name
            and self.id == other.id
            and self.partitions == other.partitions
        )

    def __hash__(self) -> int:
        return hash((self.name, self.id))

    def __repr__(self) -> str:
        return f"TopicImage(name={self.name!r}, id={self.id!r}, partitions={len(self.partitions)})"


@dataclass(frozen=True, slots=True)
class Acl:
    """An ACL (Kafka's ``StandardAcl``); the enums keep Kafka's numeric codes."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """A SCRAM credential of one user for one mechanism (Kafka's ``ScramCredentialData``)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """A delegation token (Kafka's ``DelegationTokenData``)."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiration_timestamp: int


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A metadata transaction begun but not yet ended or aborted at the image's offset.

    ``records`` are the metadata records read since BeginTransaction, not yet visible in the image.
    """

    name: str | None
    begin_offset: int
    records: tuple[m.Record, ...] = field(default=())
