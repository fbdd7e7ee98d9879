"""Entities of an image as rows of the history tables (the image JSON's names, without the validity range)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from kraftlake.history.entities import ENTITIES
from kraftlake.image import MetadataImage
from kraftlake.image.image import QuotaEntity, ScramKey
from kraftlake.image.model import (
    Acl,
    BrokerRegistration,
    ControllerRegistration,
    DelegationToken,
    Endpoint,
    PartitionRegistration,
    ScramCredential,
    VersionRange,
)
from kraftlake.image.render import CONFIG_RESOURCE_TYPES, SCRAM_MECHANISMS, SECURITY_PROTOCOLS

# a row maps a history table's columns to values of each column's own type (int, str, bool, list, dict, None):
# heterogeneous by nature, so Any
Row = dict[str, Any]
"""One row of a history table (column -> value)."""

EntityKey = tuple[str | int, ...]
"""The values of a history table's key columns (``ENTITIES[table].key``)."""

Keyed = tuple[EntityKey, Row]
"""(entity key, row)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _endpoints(listeners: tuple[Endpoint, ...]) -> list[Row]:
    return [
        {
            "name": e.name,
            "host": e.host,
            "port": e.port,
            "security_protocol": SECURITY_PROTOCOLS.get(e.security_protocol, str(e.security_protocol)),
        }
        for e in listeners
    ]


def _features(features: tuple[tuple[str, VersionRange], ...]) -> list[Row]:
    return [{"name": n, "min": r.min, "max": r.max} for n, r in features]


def broker_row(b: BrokerRegistration) -> Row:
    return {
        "id": b.id,
        "epoch": b.epoch,
        "incarnation_id": b.incarnation_id,
        "endpoints": _endpoints(b.listeners),
        "rack": b.rack,
        "fenced": b.fenced,
        "in_controlled_shutdown": b.in_controlled_shutdown,
        "is_migrating_zk_broker": b.is_migrating_zk_broker,
        "log_dirs": list(b.directories),
        "cordoned_log_dirs": None if b.cordoned_directories is None else list(b.cordoned_directories),
        "features": _features(b.supported_features),
    }


def controller_row(c: ControllerRegistration) -> Row:
    return {
        "id": c.id,
        "incarnation_id": c.incarnation_id,
        "zk_migration_ready": c.zk_migration_ready,
        "endpoints": _endpoints(c.listeners),
        "features": _features(c.supported_features),
    }


def topic_row(name: str, topic_id: str) -> Row:
    return {"name": name, "topic_id": topic_id}


def partition_row(topic: str, topic_id: str, pid: int, p: PartitionRegistration) -> Row:
    # the registration's tuples as they are (Arrow and JSON take them as lists): no copy per version
    return {
        "topic": topic,
        "topic_id": topic_id,
        "partition": pid,
        "replicas": p.replicas,
        "isr": p.isr,
        "removing_replicas": p.removing_replicas,
        "adding_replicas": p.adding_replicas,
        "leader": p.leader,
        "leader_recovery_state": p.leader_recovery_state,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "directories": p.directories,
        "eligible_leader_replicas": p.elr,
        "last_known_elr": p.last_known_elr,
    }


def config_key(resource_type: int, resource_name: str, name: str) -> tuple[str, str, str]:
    """The key of a config row (the resource type by its name, as the image JSON prints it)."""
    return (CONFIG_RESOURCE_TYPES.get(resource_type, str(resource_type)), resource_name, name)


def config_row(key: tuple[str, str, str], value: str) -> Row:
    return {"resource_type": key[0], "resource_name": key[1], "name": key[2], "value": value}


def config_rows(resource: tuple[int, str], values: dict[str, str]) -> Iterator[Keyed]:
    """The rows of one resource's configs (one per name)."""
    for name, value in values.items():
        key = config_key(resource[0], resource[1], name)
        yield key, config_row(key, value)


def quota_entity_key(entity: tuple[tuple[str, str | None], ...]) -> str:
    """A stable text key of a client quota entity (``user=alice,client-id=<default>``)."""
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def quota_rows(entity: QuotaEntity, quotas: dict[str, float]) -> Iterator[Keyed]:
    """The rows of one client quota entity (one per quota key)."""
    ek = quota_entity_key(entity)
    parts = [{"entity_type": t, "entity_name": n} for t, n in entity]
    for k, v in quotas.items():
        yield (ek, k), {"entity": parts, "entity_key": ek, "key": k, "value": v}


def feature_row(name: str, level: int) -> Row:
    return {"name": name, "level": level}


def acl_row(acl_id: str, a: Acl) -> Row:
    return {
        "id": acl_id,
        "resource_type": a.resource_type,
        "resource_name": a.resource_name,
        "pattern_type": a.pattern_type,
        "principal": a.principal,
        "host": a.host,
        "operation": a.operation,
        "permission_type": a.permission_type,
    }


def scram_key(k: ScramKey) -> tuple[str, str]:
    """The key of a scram row, (user, mechanism name), from the image's (mechanism, user)."""
    return (k[1], SCRAM_MECHANISMS.get(k[0], str(k[0])))


def scram_row(k: ScramKey, s: ScramCredential) -> Row:
    user, mech = scram_key(k)
    return {
        "user": user,
        "mechanism": mech,
        "salt": _b64(s.salt),
        "stored_key": _b64(s.stored_key),
        "server_key": _b64(s.server_key),
        "iterations": s.iterations,
    }


def token_row(d: DelegationToken) -> Row:
    return {
        "token_id": d.token_id,
        "owner": d.owner,
        "requester": d.requester,
        "renewers": list(d.renewers),
        "issue_timestamp": d.issue_timestamp,
        "max_timestamp": d.max_timestamp,
        "expiration_timestamp": d.expiration_timestamp,
    }


def keyed_rows(image: MetadataImage) -> dict[str, list[Keyed]]:
    """Every entity of ``image`` as (key, row) per history table."""
    out: dict[str, list[Keyed]] = {t: [] for t in ENTITIES}
    out["brokers"] = [((i,), broker_row(b)) for i, b in sorted(image.brokers.items())]
    out["controllers"] = [((i,), controller_row(c)) for i, c in sorted(image.controllers.items())]
    for tid, t in sorted(image.topics_by_id.items()):
        out["topics"].append(((tid,), topic_row(t.name, tid)))
        for pid, p in sorted(t.partitions.items()):
            out["partitions"].append(((tid, pid), partition_row(t.name, tid, pid, p)))
    for key, values in sorted(image.configs.items()):
        out["configs"].extend(config_rows(key, values))
    out["features"] = [((n,), feature_row(n, v)) for n, v in sorted(image.features.items())]
    for entity, quotas in image.client_quotas.items():
        out["client_quotas"].extend(quota_rows(entity, quotas))
    if image.next_producer_id != -1:
        out["producer_ids"] = [((), {"next_producer_id": image.next_producer_id})]
    out["acls"] = [((i,), acl_row(i, a)) for i, a in sorted(image.acls.items())]
    out["scram"] = [(scram_key(k), scram_row(k, s)) for k, s in sorted(image.scram.items())]
    out["delegation_tokens"] = [((i,), token_row(d)) for i, d in sorted(image.delegation_tokens.items())]
    return out


def entity_rows(image: MetadataImage) -> dict[str, list[Row]]:
    """Every entity of ``image`` as rows of the history tables (without the validity range)."""
    return {table: [row for _, row in rows] for table, rows in keyed_rows(image).items()}
