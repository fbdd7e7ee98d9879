"""``ControllerResult``, ``ApiError`` and the responses of the controller's commands.

A command returns the records to append atomically (one batch) and the response it would send. Failed
commands carry an error code and write nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kraftlake.protocol.codegen import Record
from kraftlake.protocol.error_codes import Errors as Errors

T = TypeVar("T")


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

    Readers see all the records or none: the controller appends them as one batch, or as a metadata
    transaction when they do not fit in one (`QuorumController.execute_steps`).
    """

    records: tuple[RecordAndVersion, ...]
    response: T

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


def failure(code: Errors, message: str | None = None, **data: Any) -> ControllerResult[SimpleResponse]:
    """A failed command's result: no records, the error (and ``data``) in a ``SimpleResponse``."""
    return ControllerResult((), SimpleResponse(ApiError(code, message), data))
