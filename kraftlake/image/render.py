"""Rendering an image: a JSON document (``kraftlake image``) and the ``kafka-metadata-shell`` layout."""

from __future__ import annotations

import base64
import datetime as _dt
from collections.abc import Iterable
from typing import Any

from kraftlake.image.delta import METADATA_VERSION
from kraftlake.image.image import MetadataImage
from kraftlake.image.model import (
    LEADER_RECOVERY_STATES,
    Acl,
    BrokerRegistration,
    ControllerRegistration,
    DelegationToken,
    Endpoint,
    PartitionRegistration,
    VersionRange,
)

# a JSON object of the image document: its values are of mixed types (numbers, strings, lists, objects)
JsonObject = dict[str, Any]

SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
CONFIG_RESOURCE_TYPES = {
    0: "UNKNOWN",
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
# MetadataVersion feature level -> Kafka's name (Kafka 4.4.0's MetadataVersion enum)
METADATA_VERSIONS = {
    1: "3.0-IV1",
    2: "3.1-IV0",
    3: "3.2-IV0",
    4: "3.3-IV0",
    5: "3.3-IV1",
    6: "3.3-IV2",
    7: "3.3-IV3",
    8: "3.4-IV0",
    9: "3.5-IV0",
    10: "3.5-IV1",
    11: "3.5-IV2",
    12: "3.6-IV0",
    13: "3.6-IV1",
    14: "3.6-IV2",
    15: "3.7-IV0",
    16: "3.7-IV1",
    17: "3.7-IV2",
    18: "3.7-IV3",
    19: "3.7-IV4",
    20: "3.8-IV0",
    21: "3.9-IV0",
    22: "4.0-IV0",
    23: "4.0-IV1",
    24: "4.0-IV2",
    25: "4.0-IV3",
    26: "4.1-IV0",
    27: "4.1-IV1",
    28: "4.2-IV0",
    29: "4.2-IV1",
    30: "4.3-IV0",
    31: "4.4-IV0",
    32: "4.4-IV1",
    33: "4.4-IV2",
    34: "4.5-IV0",
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _endpoint(e: Endpoint) -> JsonObject:
    return {
        "name": e.name,
        "host": e.host,
        "port": e.port,
        "security_protocol": SECURITY_PROTOCOLS.get(e.security_protocol, str(e.security_protocol)),
    }


def _broker(b: BrokerRegistration) -> JsonObject:
    return {
        "id": b.id,
        "epoch": b.epoch,
        "incarnation_id": b.incarnation_id,
        "endpoints": [_endpoint(e) for e in b.listeners],
        "rack": b.rack,
        "fenced": b.fenced,
        "in_controlled_shutdown": b.in_controlled_shutdown,
        "is_migrating_zk_broker": b.is_migrating_zk_broker,
        "log_dirs": list(b.directories),
        "cordoned_log_dirs": None if b.cordoned_directories is None else list(b.cordoned_directories),
        "features": {n: {"min": r.min, "max": r.max} for n, r in b.supported_features},
    }


def _controller(c: ControllerRegistration) -> JsonObject:
    return {
        "id": c.id,
        "incarnation_id": c.incarnation_id,
        "zk_migration_ready": c.zk_migration_ready,
        "endpoints": [_endpoint(e) for e in c.listeners],
        "features": {n: {"min": r.min, "max": r.max} for n, r in c.supported_features},
    }


def partition_json(pid: int, p: PartitionRegistration) -> JsonObject:
    return {
        "partition": pid,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "removing_replicas": list(p.removing_replicas),
        "adding_replicas": list(p.adding_replicas),
        "leader": p.leader,
        "leader_recovery_state": p.leader_recovery_state,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "directories": list(p.directories),
        "eligible_leader_replicas": list(p.elr),
        "last_known_elr": list(p.last_known_elr),
    }


def image_json(image: MetadataImage) -> JsonObject:
    """The image as one JSON-ready document (the shape of issue 4; everything sorted)."""
    prov = image.provenance
    provenance: JsonObject = {"offset": prov.offset, "epoch": prov.epoch, "timestamp": prov.timestamp}
    txn = image.transaction
    if txn is not None:
        provenance["open_transaction"] = {
            "name": txn.name,
            "begin_offset": txn.begin_offset,
            "pending_records": len(txn.records),
        }
    topics = []
    for name in sorted(image.topics_by_name):
        t = image.topics_by_name[name]
        topics.append(
            {
                "name": t.name,
                "topic_id": t.id,
                "partitions": [partition_json(pid, t.partitions[pid]) for pid in sorted(t.partitions)],
            }
        )
    configs = [
        {
            "resource_type": CONFIG_RESOURCE_TYPES.get(rt, str(rt)),
            "resource_name": rn,
            "configs": dict(sorted(image.configs[(rt, rn)].items())),
        }
        for rt, rn in sorted(image.configs)
    ]
    quotas = [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "quotas": dict(sorted(image.client_quotas[entity].items())),
        }
        for entity in sorted(image.client_quotas, key=repr)
    ]
    acls = []
    for acl_id in sorted(image.acls):
        a = image.acls[acl_id]
        acls.append(
            {
                "id": acl_id,
                "resource_type": a.resource_type,
                "resource_name": a.resource_name,
                "pattern_type": a.pattern_type,
                "principal": a.principal,
                "host": a.host,
                "operation": a.operation,
                "permission_type": a.permission_type,
            }
        )
    scram = [
        {
            "user": user,
            "mechanism": SCRAM_MECHANISMS.get(mech, str(mech)),
            "salt": _b64(s.salt),
            "stored_key": _b64(s.stored_key),
            "server_key": _b64(s.server_key),
            "iterations": s.iterations,
        }
        for (mech, user), s in sorted(image.scram.items())
    ]
    tokens = [
        {
            "token_id": d.token_id,
            "owner": d.owner,
            "requester": d.requester,
            "renewers": list(d.renewers),
            "issue_timestamp": d.issue_timestamp,
            "max_timestamp": d.max_timestamp,
            "expiration_timestamp": d.expiration_timestamp,
        }
        for _, d in sorted(image.delegation_tokens.items())
    ]
    return {
        "provenance": provenance,
        "features": dict(sorted(image.features.items())),
        "brokers": [_broker(image.brokers[b]) for b in sorted(image.brokers)],
        "controllers": [_controller(image.controllers[c]) for c in sorted(image.controllers)],
        "topics": topics,
        "configs": configs,
        "client_quotas": quotas,
        "producer_ids": {"next_producer_id": image.next_producer_id},
        "acls": acls,
        "scram": scram,
        "delegation_tokens": tokens,
    }


# -- kafka-metadata-shell layout --------------------------------------------------------------------------


def _java_list(items: Iterable[object]) -> str:
    return "[" + ", ".join(str(i) for i in items) + "]"


def _java_opt_list(items: Iterable[object] | None) -> str:
    return "null" if items is None else _java_list(items)


def _java_endpoint(e: Endpoint) -> str:
    proto = SECURITY_PROTOCOLS.get(e.security_protocol, str(e.security_protocol))
    return f"Endpoint(listenerName='{e.name}', securityProtocol={proto}, host='{e.host}', port={e.port})"


def _java_range(r: VersionRange) -> str:
    """Kafka's ``VersionRange.toString``: one number when the range holds one version (a migrating ZooKeeper
    broker's ``metadata.version``)."""
    return str(r.min) if r.min == r.max else f"{r.min}-{r.max}"


def _java_features(features: tuple[tuple[str, VersionRange], ...]) -> str:
    return "{" + ", ".join(f"{n}: {_java_range(r)}" for n, r in features) + "}"


def token_string(d: DelegationToken) -> str:
    """Kafka 4.3.1's shell line of a delegation token (``DelegationTokenDataNode``: its parentheses unbalanced
    as Kafka prints them, the renewers joined by spaces)."""
    return (
        f"DelegationTokenDatatokenId={d.token_id}(owner={d.owner}(tokenRequester={d.requester}"
        f"(renewers={' '.join(d.renewers)}, issueTimestamp={d.issue_timestamp}, maxTimestamp={d.max_timestamp})"
        f", expiryTimestamp={d.expiration_timestamp}"
    )


def broker_string(b: BrokerRegistration) -> str:
    """Kafka 4.3.1's ``BrokerRegistration.toString``."""
    rack = "Optional.empty" if b.rack is None else f"Optional[{b.rack}]"
    return (
        f"BrokerRegistration(id={b.id}, epoch={b.epoch}, incarnationId={b.incarnation_id}, "
        f"listeners=[{', '.join(_java_endpoint(e) for e in b.listeners)}], "
        f"supportedFeatures={_java_features(b.supported_features)}, rack={rack}, "
        f"fenced={str(b.fenced).lower()}, inControlledShutdown={str(b.in_controlled_shutdown).lower()}, "
        f"isMigratingZkBroker={str(b.is_migrating_zk_broker).lower()}, directories={_java_list(b.directories)}, "
        f"cordonedDirectories={_java_opt_list(b.cordoned_directories)})"
    )


def controller_string(c: ControllerRegistration) -> str:
    return (
        f"ControllerRegistration(id={c.id}, incarnationId={c.incarnation_id}, "
        f"zkMigrationReady={str(c.zk_migration_ready).lower()}, "
        f"listeners=[{', '.join(_java_endpoint(e) for e in c.listeners)}], "
        f"supportedFeatures={_java_features(c.supported_features)})"
    )


def partition_string(p: PartitionRegistration) -> str:
    """Kafka's ``PartitionRegistration.toString``."""
    return (
        f"PartitionRegistration(replicas={_java_list(p.replicas)}, directories={_java_list(p.directories)}, "
        f"isr={_java_list(p.isr)}, removingReplicas={_java_list(p.removing_replicas)}, "
        f"addingReplicas={_java_list(p.adding_replicas)}, elr={_java_list(p.elr)}, "
        f"lastKnownElr={_java_list(p.last_known_elr)}, leader={p.leader}, "
        f"leaderRecoveryState={LEADER_RECOVERY_STATES.get(p.leader_recovery_state)}, "
        f"leaderEpoch={p.leader_epoch}, partitionEpoch={p.partition_epoch})"
    )


def _quota_entity_node(entity: tuple[tuple[str, str | None], ...]) -> str:
    """Kafka's ``ClientQuotasImageNode.clientQuotaEntityToString`` (a default entity name is left out)."""
    names = dict(entity)
    parts = []
    for etype, label in (("client-id", "clientId"), ("ip", "ip"), ("user", "user")):
        value = names.get(etype)
        if value is not None:
            escaped = value.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            parts.append(f"{label}({escaped})")
    return "_".join(parts)


def _java_time(ms: int) -> str:
    t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
    frac = ms % 1000
    base = t.strftime("%Y-%m-%dT%H:%M:%S")
    # Java's ISO format prints the fraction without trailing zeros (830 ms -> ".83")
    return f"{base}{f'.{frac:03d}'.rstrip('0') if frac else ''}Z[UTC]"


def shell_lines(image: MetadataImage) -> list[str]:
    """The leaves of ``kafka-metadata-shell``'s ``/image`` tree as ``path: value`` lines, sorted by path."""
    out: list[tuple[str, str]] = []
    p = image.provenance
    out.append(("/image/provenance", f"offset {p.offset}, epoch {p.epoch}, time {_java_time(p.timestamp)}"))
    for name, level in image.features.items():
        if name == METADATA_VERSION:
            out.append(
                ("/image/features/metadataVersion", f"Optional[{METADATA_VERSIONS.get(level, level)}]")
            )
        else:
            out.append((f"/image/features/finalized_{name}", str(level)))
    for bid, b in image.brokers.items():
        out.append((f"/image/cluster/brokers/{bid}", broker_string(b)))
    for cid, c in image.controllers.items():
        out.append((f"/image/cluster/controllers/{cid}", controller_string(c)))
    for t in image.topics_by_id.values():
        for root in (f"/image/topics/byName/{t.name}", f"/image/topics/byId/{t.id}"):
            out.append((f"{root}/name", t.name))
            out.append((f"{root}/id", t.id))
            for pid, part in t.partitions.items():
                out.append((f"{root}/{pid}", partition_string(part)))
    for (rt, rn), data in image.configs.items():
        rtype = CONFIG_RESOURCE_TYPES.get(rt, str(rt))
        node = rtype if rn == "" else f"{rtype}:{rn}"
        for k, v in data.items():
            out.append((f"/image/configs/{node}/{k}", v))
    for entity, quotas in image.client_quotas.items():
        ename = _quota_entity_node(entity)
        for k, q in quotas.items():
            out.append((f"/image/clientQuotas/{ename}/{k}", repr(float(q))))
    out.append(("/image/producerIds/nextProducerId", str(image.next_producer_id)))
    for acl_id, a in image.acls.items():
        out.append((f"/image/acls/byId/{acl_id}", _standard_acl(a)))
    for (mech, user), s in image.scram.items():
        out.append(
            (
                f"/image/scram/{SCRAM_MECHANISMS.get(mech, mech)}/{user}",
                (
                    f"ScramCredentialData(salt={s.salt.hex()}, storedKey={s.stored_key.hex()}, "
                    f"serverKey={s.server_key.hex()}, iterations={s.iterations})"
                ),
            )
        )
    for token_id, d in image.delegation_tokens.items():
        out.append((f"/image/delegationToken/{token_id}", token_string(d)))
    out.sort()
    return [f"{path}: {value}" for path, value in out]


_EMPTY_DIRS = (
    "/image/acls/byId",
    "/image/clientQuotas",
    "/image/cluster/brokers",
    "/image/cluster/controllers",
    "/image/configs",
    "/image/delegationToken",
    "/image/features",
    "/image/producerIds",
    "/image/scram/SCRAM-SHA-256",
    "/image/scram/SCRAM-SHA-512",
    "/image/topics/byId",
    "/image/topics/byName",
)


# Kafka's enums by code (ResourceType, PatternType, AclOperation, AclPermissionType), as StandardAcl prints them
ACL_RESOURCE_TYPES = (
    "UNKNOWN",
    "ANY",
    "TOPIC",
    "GROUP",
    "CLUSTER",
    "TRANSACTIONAL_ID",
    "DELEGATION_TOKEN",
    "USER",
)
ACL_PATTERN_TYPES = ("UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED")
ACL_OPERATIONS = (
    "UNKNOWN",
    "ANY",
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "CREATE_TOKENS",
    "DESCRIBE_TOKENS",
    "TWO_PHASE_COMMIT",
)
ACL_PERMISSION_TYPES = ("UNKNOWN", "ANY", "DENY", "ALLOW")


def enum_name(names: tuple[str, ...], code: int) -> str:
    return names[code] if 0 <= code < len(names) else "UNKNOWN"


def _standard_acl(a: Acl) -> str:
    """``StandardAcl.toString()``, what the metadata shell prints for an ACL."""
    return (
        f"StandardAcl[resourceType={enum_name(ACL_RESOURCE_TYPES, a.resource_type)}, "
        f"resourceName={a.resource_name}, patternType={enum_name(ACL_PATTERN_TYPES, a.pattern_type)}, "
        f"principal={a.principal}, host={a.host}, operation={enum_name(ACL_OPERATIONS, a.operation)}, "
        f"permissionType={enum_name(ACL_PERMISSION_TYPES, a.permission_type)}]"
    )


def shell_tree(image: MetadataImage) -> str:
    """The image as ``kafka-metadata-shell``'s ``tree /image`` prints it (children sorted by name)."""
    # a directory maps names to directories or leaf strings; built with setdefault, walked without a type test
    # per step, hence Any
    root: dict[str, Any] = {}
    for d in _EMPTY_DIRS:
        node = root
        for part in d.split("/")[2:]:
            node = node.setdefault(part, {})
    for line in shell_lines(image):
        path, _, value = line.partition(": ")
        node = root
        parts = path.split("/")[2:]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    out: list[str] = []

    def emit(node: dict[str, Any], depth: int) -> None:
        for name in sorted(node):
            child = node[name]
            out.append("  " * depth + name + ":")
            if isinstance(child, dict):
                emit(child, depth + 1)
            else:
                out.append("  " * (depth + 1) + child)

    emit(root, 0)
    return "".join(line + "\n" for line in out)
