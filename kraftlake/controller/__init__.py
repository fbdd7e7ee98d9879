"""The quorum controller: commands in, ``ControllerResult(records, response)`` out; state only by replay.

Public API: :class:`QuorumController`, :class:`ControllerConfig`, :class:`ControllerResult`, :class:`Errors`,
:class:`ApiError`, :class:`PartitionChangeBuilder`, :class:`Election`, :class:`MemoryMetadataLog`, the request
classes of :mod:`kraftlake.controller.requests`, and :mod:`kraftlake.controller.errors`.
"""

from __future__ import annotations

from kraftlake.controller.config import LATEST_PRODUCTION, ControllerConfig
from kraftlake.controller.errors import AppendError, ControllerError, NotActiveError
from kraftlake.controller.ids import TopicIdMinter, random_uuid
from kraftlake.controller.memory_log import MemoryMetadataLog
from kraftlake.controller.partition_change import Election, PartitionChangeBuilder
from kraftlake.controller.quorum_controller import MetadataAppender, QuorumController
from kraftlake.controller.requests import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ConfigChange,
    ConfigOp,
    CreatableTopic,
    FeatureUpdate,
    Listener,
    PartitionIsrUpdate,
    ResourceType,
    UpgradeType,
)
from kraftlake.controller.result import OK, ApiError, ControllerResult, Errors, TopicResult, TopicsResponse

__all__ = [
    "LATEST_PRODUCTION",
    "OK",
    "AlterPartitionRequest",
    "ApiError",
    "AppendError",
    "BrokerHeartbeatRequest",
    "BrokerRegistrationRequest",
    "ConfigChange",
    "ConfigOp",
    "ControllerConfig",
    "ControllerError",
    "ControllerResult",
    "CreatableTopic",
    "Election",
    "Errors",
    "FeatureUpdate",
    "Listener",
    "MemoryMetadataLog",
    "MetadataAppender",
    "NotActiveError",
    "PartitionChangeBuilder",
    "PartitionIsrUpdate",
    "QuorumController",
    "ResourceType",
    "TopicIdMinter",
    "TopicResult",
    "TopicsResponse",
    "UpgradeType",
    "random_uuid",
]
