"""``ConfigurationControlManager``: topic and broker configs (Kafka's ``ConfigurationControlManager``).

It holds the validators of the topic configs this controller accepts (a subset of Kafka's ``LogConfig``),
IncrementalAlterConfigs, and the lookups the replication manager makes per topic: ``min.insync.replicas``
and ``unclean.leader.election.enable``, each a topic config, else the cluster-wide broker config, else the
controller's default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kraftlake.controller.requests import ConfigChange, ConfigOp, ResourceType
from kraftlake.controller.result import (
    OK,
    ApiError,
    ControllerResult,
    Errors,
    RecordAndVersion,
    SimpleResponse,
)
from kraftlake.controller.state import ControllerState
from kraftlake.image import MetadataImage
from kraftlake.protocol import messages as m

TOPIC = int(ResourceType.TOPIC)
BROKER = int(ResourceType.BROKER)


def _int_at_least(lo: int) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        try:
            return int(v) >= lo
        except ValueError:
            return False

    return check


def _bool(v: str) -> bool:
    return v.lower() in ("true", "false")


TOPIC_CONFIGS: dict[str, Callable[[str], bool]] = {
    "cleanup.policy": lambda v: all(p in ("delete", "compact") for p in v.split(",")),
    "compression.type": lambda v: v in ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "delete.retention.ms": _int_at_least(0),
    "max.message.bytes": _int_at_least(0),
    "min.insync.replicas": _int_at_least(1),
    "retention.bytes": _int_at_least(-1),
    "retention.ms": _int_at_least(-1),
    "segment.bytes": _int_at_least(14),
    "segment.ms": _int_at_least(1),
    "unclean.leader.election.enable": _bool,
    "message.timestamp.type": lambda v: v in ("CreateTime", "LogAppendTime"),
    "follower.replication.throttled.replicas": lambda v: True,
    "leader.replication.throttled.replicas": lambda v: True,
}
"""The topic configs this controller validates, name -> whether a value is valid; other names are
INVALID_CONFIG."""


def topic_configs_error(configs: Mapping[str, str]) -> ApiError | None:
    """The error for the first unknown or invalid topic config of ``configs`` (CreateTopics), else None."""
    for key, value in configs.items():
        check = TOPIC_CONFIGS.get(key)
        if check is None:
            return ApiError(Errors.INVALID_CONFIG, f"Unknown topic config name: {key}")
        if not check(value):
            return ApiError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {key}")
    return None


class ConfigurationControlManager:
    """Configs: IncrementalAlterConfigs and the per-topic lookups of the replication manager."""

    def __init__(self, state: ControllerState) -> None:
        self._state = state

    def min_isr(self, img: MetadataImage, topic: str) -> int:
        """``min.insync.replicas`` of ``topic`` in ``img``."""
        v = _config_value(img, topic, "min.insync.replicas")
        return int(v) if v is not None else self._state.config.min_insync_replicas

    def unclean_enabled(self, img: MetadataImage, topic: str) -> bool:
        """``unclean.leader.election.enable`` of ``topic`` in ``img``."""
        v = _config_value(img, topic, "unclean.leader.election.enable")
        return v.lower() == "true" if v is not None else self._state.config.unclean_leader_election

    def handle_incremental_alter_configs(
        self, changes: Sequence[ConfigChange]
    ) -> ControllerResult[SimpleResponse]:
        """IncrementalAlterConfigs: ConfigRecords (a null value deletes); per-resource errors, all or nothing."""
        img = self._state.image
        by_resource: dict[tuple[int, str], list[ConfigChange]] = {}
        for c in changes:
            by_resource.setdefault((int(c.resource_type), c.resource_name), []).append(c)
        records: list[RecordAndVersion] = []
        out: dict[tuple[int, str], ApiError] = {}
        for (rtype, rname), items in by_resource.items():
            err, recs = _config_records(img, rtype, rname, items)
            out[(rtype, rname)] = err or OK
            if err is None:
                records.extend(recs)
        return ControllerResult(tuple(records), SimpleResponse(OK, {"resources": out}))


def _config_value(img: MetadataImage, topic: str, name: str) -> str | None:
    cfg = img.configs.get((TOPIC, topic))
    if cfg and name in cfg:
        return cfg[name]
    cfg = img.configs.get((BROKER, ""))
    if cfg and name in cfg:
        return cfg[name]
    return None


def _config_records(
    img: MetadataImage, rtype: int, rname: str, items: list[ConfigChange]
) -> tuple[ApiError | None, list[RecordAndVersion]]:
    """One resource's changes as ConfigRecords, or the error that refuses them all."""
    if rtype == TOPIC:
        if rname not in img.topics_by_name:
            return ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{rname}' does not exist."), []
    elif rtype == BROKER:
        if rname and not rname.isdigit():
            return ApiError(Errors.INVALID_REQUEST, f"Illegal broker resource name {rname!r}"), []
    else:
        return ApiError(Errors.INVALID_REQUEST, f"Unsupported resource type {rtype}"), []
    current = dict(img.configs.get((rtype, rname)) or {})
    recs: list[RecordAndVersion] = []
    for c in items:
        if rtype == TOPIC:
            check = TOPIC_CONFIGS.get(c.name)
            if check is None:
                return ApiError(Errors.INVALID_CONFIG, f"Unknown topic config name: {c.name}"), []
        else:
            check = None
        value: str | None
        if c.op == ConfigOp.SET:
            value = c.value
        elif c.op == ConfigOp.DELETE:
            value = None
        elif c.op in (ConfigOp.APPEND, ConfigOp.SUBTRACT):
            old = [v for v in (current.get(c.name) or "").split(",") if v]
            add = [v for v in (c.value or "").split(",") if v]
            new = (
                old + [v for v in add if v not in old]
                if c.op == ConfigOp.APPEND
                else [v for v in old if v not in add]
            )
            value = ",".join(new)
        else:
            return ApiError(Errors.INVALID_REQUEST, f"Unknown config op {c.op}"), []
        if value is not None and check is not None and not check(value):
            return ApiError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {c.name}"), []
        if value is None:
            current.pop(c.name, None)
        else:
            current[c.name] = value
        recs.append((m.ConfigRecord(resource_type=rtype, resource_name=rname, name=c.name, value=value), 0))
    return None, recs
