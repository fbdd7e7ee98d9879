"""``ControllerResult`` and Kafka's error codes (``org.apache.kafka.common.protocol.Errors``).

A command returns the records to append atomically (one batch) and the response it would send. Failed
commands carry an error code and write nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kraftlake.protocol.codegen import Record

T = TypeVar("T")


class Errors(enum.IntEnum):
    """The subset of Kafka's error codes the controller answers with (codes checked against Kafka 4.3.1)."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    INVALID_TOPIC_EXCEPTION = 17
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108


@dataclass(frozen=True, slots=True)
class ApiError:
    """An error code with its message (Kafka's ``ApiError``)."""

    error: Errors
    message: str | None = None

    @property
    def code(self) -> int:
        return int(self.error)

    @property
    def ok(self) -> bool:
        return self.error == Errors.NONE


OK = ApiError(Errors.NONE)

RecordAndVersion = tuple[Record, int]
"""A record and the version it is written at (Kafka's ``ApiMessageAndVersion``)."""


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    """What a command produced: ``records`` to append atomically and the ``response``.

    ``atomic`` mirrors Kafka's flag: the records must land in one batch (the controller never splits them).
    """

    records: tuple[RecordAndVersion, ...]
    response: T
    atomic: bool = True

    @property
    def error(self) -> ApiError | None:
        err = getattr(self.response, "error", None)
        return err if isinstance(err, ApiError) else None


@dataclass(frozen=True, slots=True)
class TopicResult:
    """The outcome for one topic of a create, delete or create-partitions request."""

    name: str
    error: ApiError
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class TopicsResponse:
    """The response of CreateTopics / DeleteTopics / CreatePartitions: one result per requested topic."""

    topics: tuple[TopicResult, ...]

    def by_name(self) -> dict[str, TopicResult]:
        return {t.name: t for t in self.topics}


@dataclass(frozen=True, slots=True)
class SimpleResponse:
    """A response that is just an error, plus optional data."""

    error: ApiError
    data: dict[str, Any] = field(default_factory=dict)
