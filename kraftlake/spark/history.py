"""Entity versions from committed records: the pure heart of the history tables (no pyspark import here).

A :class:`HistoryBuilder` holds the image at the last record it was fed (the oracle, ``kraftlake.image``) and
turns each further record into the entity versions it creates or ends. A version of an entity is valid on
``[from_offset, to_offset)``: it starts at the record that made it visible (state at N includes the record at
N) and ends at the record that changed or removed it. The builder is incremental: feeding a log in slices gives
the same versions as feeding it whole, which is what lets the batch import and the streaming pipeline share it.

Why replay with the image instead of grouping records by entity: a partition's state depends on more than its
own records (metadata transactions make records visible at EndTransaction or never, RemoveTopicRecord ends
every partition and topic config of the topic, ClearElrRecord touches every partition). Re-deriving those
rules per entity would be a second implementation of the replay; this one *is* the oracle. ``replay`` costs
what a record touches, so the cost is linear in records, and only the changed entities are compared.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kraftlake.image import EMPTY, MetadataImage, replay
from kraftlake.image.delta import MetadataDelta
from kraftlake.image.model import (
    BrokerRegistration,
    ControllerRegistration,
    Endpoint,
    PartitionRegistration,
    Provenance,
)
from kraftlake.image.render import CONFIG_RESOURCE_TYPES, SCRAM_MECHANISMS, SECURITY_PROTOCOLS

TOPIC_RESOURCE = 2

_ENDPOINTS = "ARRAY<STRUCT<name: STRING, host: STRING, port: INT, security_protocol: STRING>>"
_FEATURES = "ARRAY<STRUCT<name: STRING, min: INT, max: INT>>"


@dataclass(frozen=True)
class Entity:
    """A history table: its name, key columns and attribute columns (``name TYPE`` Spark DDL)."""

    table: str
    key: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]

    def ddl(self) -> str:
        """The table's columns as Spark DDL, the validity range last."""
        cols = [f"{n} {t}" for n, t in self.columns]
        return ", ".join([*cols, "from_offset BIGINT NOT NULL", "to_offset BIGINT"])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.columns)


ENTITIES: dict[str, Entity] = {
    e.table: e
    for e in (
        Entity(
            "brokers",
            ("id",),
            (
                ("id", "INT"),
                ("epoch", "BIGINT"),
                ("incarnation_id", "STRING"),
                ("endpoints", _ENDPOINTS),
                ("rack", "STRING"),
                ("fenced", "BOOLEAN"),
                ("in_controlled_shutdown", "BOOLEAN"),
                ("is_migrating_zk_broker", "BOOLEAN"),
                ("log_dirs", "ARRAY<STRING>"),
                ("cordoned_log_dirs", "ARRAY<STRING>"),
                ("features", _FEATURES),
            ),
        ),
        Entity(
            "controllers",
            ("id",),
            (
                ("id", "INT"),
                ("incarnation_id", "STRING"),
                ("zk_migration_ready", "BOOLEAN"),
                ("endpoints", _ENDPOINTS),
                ("features", _FEATURES),
            ),
        ),
        Entity("topics", ("topic_id",), (("name", "STRING"), ("topic_id", "STRING"))),
        Entity(
            "partitions",
            ("topic_id", "partition"),
            (
                ("topic", "STRING"),
                ("topic_id", "STRING"),
                ("partition", "INT"),
                ("replicas", "ARRAY<INT>"),
                ("isr", "ARRAY<INT>"),
                ("removing_replicas", "ARRAY<INT>"),
                ("adding_replicas", "ARRAY<INT>"),
                ("leader", "INT"),
                ("leader_recovery_state", "INT"),
                ("leader_epoch", "INT"),
                ("partition_epoch", "INT"),
                ("directories", "ARRAY<STRING>"),
                ("eligible_leader_replicas", "ARRAY<INT>"),
                ("last_known_elr", "ARRAY<INT>"),
            ),
        ),
        Entity(
            "configs",
            ("resource_type", "resource_name", "name"),
            (
                ("resource_type", "STRING"),
                ("resource_name", "STRING"),
                ("name", "STRING"),
                ("value", "STRING"),
            ),
        ),
        Entity("features", ("name",), (("name", "STRING"), ("level", "INT"))),
        Entity(
            "client_quotas",
            ("entity_key", "key"),
            (
                ("entity", "ARRAY<STRUCT<entity_type: STRING, entity_name: STRING>>"),
                ("entity_key", "STRING"),
                ("key", "STRING"),
                ("value", "DOUBLE"),
            ),
        ),
        Entity("producer_ids", (), (("next_producer_id", "BIGINT"),)),
        Entity(
            "acls",
            ("id",),
            (
                ("id", "STRING"),
                ("resource_type", "INT"),
                ("resource_name", "STRING"),
                ("pattern_type", "INT"),
                ("principal", "STRING"),
                ("host", "STRING"),
                ("operation", "INT"),
                ("permission_type", "INT"),
            ),
        ),
        Entity(
            "scram",
            ("user", "mechanism"),
            (
                ("user", "STRING"),
                ("mechanism", "STRING"),
                ("salt", "STRING"),
                ("stored_key", "STRING"),
                ("server_key", "STRING"),
                ("iterations", "INT"),
            ),
        ),
        Entity(
            "delegation_tokens",
            ("token_id",),
            (
                ("token_id", "STRING"),
                ("owner", "STRING"),
                ("requester", "STRING"),
                ("renewers", "ARRAY<STRING>"),
                ("issue_timestamp", "BIGINT"),
                ("max_timestamp", "BIGINT"),
                ("expiration_timestamp", "BIGINT"),
            ),
        ),
    )
}


# -- entity rows (the image JSON's names) ------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _endpoints(listeners: tuple[Endpoint, ...]) -> list[dict[str, Any]]:
    return [
        {
            "name": e.name,
            "host": e.host,
            "port": e.port,
            "security_protocol": SECURITY_PROTOCOLS.get(e.security_protocol, str(e.security_protocol)),
        }
        for e in listeners
    ]


def _features(features: Any) -> list[dict[str, Any]]:
    return [{"name": n, "min": r.min, "max": r.max} for n, r in features]


def broker_row(b: BrokerRegistration) -> dict[str, Any]:
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


def controller_row(c: ControllerRegistration) -> dict[str, Any]:
    return {
        "id": c.id,
        "incarnation_id": c.incarnation_id,
        "zk_migration_ready": c.zk_migration_ready,
        "endpoints": _endpoints(c.listeners),
        "features": _features(c.supported_features),
    }


def partition_row(topic: str, topic_id: str, pid: int, p: PartitionRegistration) -> dict[str, Any]:
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


def quota_entity_key(entity: tuple[tuple[str, str | None], ...]) -> str:
    """A stable text key of a client quota entity (``user=alice,client-id=<default>``)."""
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def _config_rows(key: tuple[int, str], values: dict[str, str]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    rt = CONFIG_RESOURCE_TYPES.get(key[0], str(key[0]))
    for name, value in values.items():
        yield (rt, key[1], name), {"resource_type": rt, "resource_name": key[1], "name": name, "value": value}


def entity_rows(image: MetadataImage) -> dict[str, list[dict[str, Any]]]:
    """Every entity of ``image`` as rows of the history tables (without the validity range)."""
    return {table: [row for _, row in rows] for table, rows in _all_rows(image).items()}


def _all_rows(image: MetadataImage) -> dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]]:
    out: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {t: [] for t in ENTITIES}
    out["brokers"] = [((i,), broker_row(b)) for i, b in sorted(image.brokers.items())]
    out["controllers"] = [((i,), controller_row(c)) for i, c in sorted(image.controllers.items())]
    for tid, t in sorted(image.topics_by_id.items()):
        out["topics"].append(((tid,), {"name": t.name, "topic_id": tid}))
        for pid, p in sorted(t.partitions.items()):
            out["partitions"].append(((tid, pid), partition_row(t.name, tid, pid, p)))
    for key, values in sorted(image.configs.items()):
        out["configs"].extend(_config_rows(key, values))
    out["features"] = [((n,), {"name": n, "level": v}) for n, v in sorted(image.features.items())]
    for entity, quotas in image.client_quotas.items():
        out["client_quotas"].extend(_quota_rows(entity, quotas))
    if image.next_producer_id != -1:
        out["producer_ids"] = [((), {"next_producer_id": image.next_producer_id})]
    out["acls"] = [((i,), _acl_row(i, a)) for i, a in sorted(image.acls.items())]
    out["scram"] = [(_scram_key(k), _scram_row(k, s)) for k, s in sorted(image.scram.items())]
    out["delegation_tokens"] = [((i,), _token_row(d)) for i, d in sorted(image.delegation_tokens.items())]
    return out


def _quota_rows(entity: Any, quotas: dict[str, float]) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    ek = quota_entity_key(entity)
    parts = [{"entity_type": t, "entity_name": n} for t, n in entity]
    for k, v in quotas.items():
        yield (ek, k), {"entity": parts, "entity_key": ek, "key": k, "value": v}


def _acl_row(acl_id: str, a: Any) -> dict[str, Any]:
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


def _scram_key(k: tuple[int, str]) -> tuple[str, str]:
    return (k[1], SCRAM_MECHANISMS.get(k[0], str(k[0])))


def _scram_row(k: tuple[int, str], s: Any) -> dict[str, Any]:
    user, mech = _scram_key(k)
    return {
        "user": user,
        "mechanism": mech,
        "salt": _b64(s.salt),
        "stored_key": _b64(s.stored_key),
        "server_key": _b64(s.server_key),
        "iterations": s.iterations,
    }


def _token_row(d: Any) -> dict[str, Any]:
    return {
        "token_id": d.token_id,
        "owner": d.owner,
        "requester": d.requester,
        "renewers": list(d.renewers),
        "issue_timestamp": d.issue_timestamp,
        "max_timestamp": d.max_timestamp,
        "expiration_timestamp": d.expiration_timestamp,
    }


# -- changes between two images ------------------------------------------------------------------------------

Change = tuple[str, tuple[Any, ...], "dict[str, Any] | None", bool]
"""(table, entity key, new row or None when the entity is gone, whether the entity existed before)."""


def _diff_dict(table: str, old: Any, new: Any, key: Any, row: Any) -> Iterator[Change]:
    if old is new:
        return
    for k in set(old) | set(new):
        a, b = old.get(k), new.get(k)
        if a is b or (a is not None and b is not None and a == b):
            continue
        yield table, key(k), None if b is None else row(k, b), a is not None


def _diff_multi(table: str, old_rows: list[Any], new_rows: list[Any]) -> Iterator[Change]:
    before = dict(old_rows)
    after = dict(new_rows)
    for k in before.keys() | after.keys():
        a, b = before.get(k), after.get(k)
        if a != b:
            yield table, k, b, a is not None


def changes(old: MetadataImage, new: MetadataImage, records: Iterable[tuple[Any, str]]) -> Iterator[Change]:
    """The entity changes from ``old`` to ``new``, the image after the metadata ``records`` (record, type).

    Small maps are compared whole (by identity first: a delta copies only what it changes); the large
    persistent maps (topics, configs, ACLs) only at the keys the records name.
    """
    yield from _diff_dict("brokers", old.brokers, new.brokers, lambda k: (k,), lambda k, b: broker_row(b))
    yield from _diff_dict(
        "controllers", old.controllers, new.controllers, lambda k: (k,), lambda k, c: controller_row(c)
    )
    yield from _diff_dict(
        "features", old.features, new.features, lambda k: (k,), lambda k, v: {"name": k, "level": v}
    )
    yield from _diff_dict(
        "delegation_tokens",
        old.delegation_tokens,
        new.delegation_tokens,
        lambda k: (k,),
        lambda k, d: _token_row(d),
    )
    if old.scram is not new.scram:
        yield from _diff_dict("scram", old.scram, new.scram, _scram_key, _scram_row)
    if old.client_quotas is not new.client_quotas:
        for entity in set(old.client_quotas) | set(new.client_quotas):
            a, b = old.client_quotas.get(entity) or {}, new.client_quotas.get(entity) or {}
            if a != b:
                yield from _diff_multi(
                    "client_quotas", list(_quota_rows(entity, a)), list(_quota_rows(entity, b))
                )
    if old.next_producer_id != new.next_producer_id:
        yield (
            "producer_ids",
            (),
            (None if new.next_producer_id == -1 else {"next_producer_id": new.next_producer_id}),
            old.next_producer_id != -1,
        )
    topics: dict[str, set[int] | None] = {}  # topic id -> partitions named, None = compare all
    configs: set[tuple[int, str]] = set()
    acls: set[str] = set()
    for rec, kind in records:
        if kind == "PartitionRecord" or kind == "PartitionChangeRecord":
            named = topics.setdefault(rec.topic_id, set())
            if named is not None:
                named.add(rec.partition_id)
        elif kind == "TopicRecord" or kind == "RemoveTopicRecord":
            topics[rec.topic_id] = None
            t = old.topics_by_id.get(rec.topic_id) or new.topics_by_id.get(rec.topic_id)
            configs.add((TOPIC_RESOURCE, t.name if t is not None else getattr(rec, "name", "")))
        elif kind == "ClearElrRecord":
            for tid in set(old.topics_by_id) | set(new.topics_by_id):
                topics[tid] = None
        elif kind == "ConfigRecord":
            configs.add((rec.resource_type, rec.resource_name))
        elif kind == "AccessControlEntryRecord" or kind == "RemoveAccessControlEntryRecord":
            acls.add(rec.id)
    for tid, named in topics.items():
        t0, t1 = old.topics_by_id.get(tid), new.topics_by_id.get(tid)
        if t0 is t1:
            continue
        if t0 is None or t1 is None or t0.name != t1.name:
            yield "topics", (tid,), None if t1 is None else {"name": t1.name, "topic_id": tid}, t0 is not None
        p0 = t0.partitions if t0 is not None else {}
        p1 = t1.partitions if t1 is not None else {}
        pids = (set(p0) | set(p1)) if named is None else named
        for pid in pids:
            pa_, pb = p0.get(pid), p1.get(pid)
            if pa_ is pb or (pa_ is not None and pb is not None and pa_ == pb):
                continue
            yield (
                "partitions",
                (tid, pid),
                None if pb is None or t1 is None else partition_row(t1.name, tid, pid, pb),
                pa_ is not None,
            )
    for key in configs:
        ca, cb = old.configs.get(key) or {}, new.configs.get(key) or {}
        if ca != cb:
            yield from _diff_multi("configs", list(_config_rows(key, ca)), list(_config_rows(key, cb)))
    for acl_id in acls:
        a, b = old.acls.get(acl_id), new.acls.get(acl_id)
        if a != b:
            yield "acls", (acl_id,), None if b is None else _acl_row(acl_id, b), a is not None


Event = tuple[int, str, tuple[Any, ...], "dict[str, Any] | None", bool]
"""(offset, table, entity key, new row or None, whether the entity existed before the record)."""

# -- versions ----------------------------------------------------------------------------------------------


@dataclass
class HistoryBatch:
    """What one slice of records adds to the history tables.

    ``versions[table]`` are new rows with ``from_offset`` and ``to_offset`` (None while current);
    ``closes[table]`` end versions begun before this slice: key columns and ``to_offset``, applied to the
    version of that key that is still open and began before ``to_offset`` (so re-applying is a no-op).
    """

    first_offset: int = -1
    last_offset: int = -1
    versions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    closes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    offsets: list[tuple[int, int, int]] = field(default_factory=list)

    def tables(self) -> list[str]:
        """The tables this slice changes."""
        return sorted(set(self.versions) | set(self.closes))


class HistoryBuilder:
    """Feeds committed records through the image and returns the entity versions each slice creates."""

    def __init__(self, image: MetadataImage = EMPTY) -> None:
        self.image = image

    def seed(self) -> HistoryBatch:
        """Versions for every entity of the starting image (a snapshot), valid from its offset."""
        batch = HistoryBatch(self.image.offset, self.image.offset)
        events: list[Event] = [
            (self.image.offset, t, k, row, False)
            for t, rows in _all_rows(self.image).items()
            for k, row in rows
        ]
        _versions(events, batch, closes=False)
        return batch

    def feed(self, records: Iterable[Any]) -> HistoryBatch:
        """Replay ``records`` (``MetadataRecord`` s in log order, following the current image).

        Runs of partition, config and broker records outside transactions (the bulk of a log: ISR and leader
        changes, fencing, configs) go into one ``MetadataDelta`` (the image's own replay), which is read back
        per record for the entity's new state and becomes an image once when the run ends: a persistent-map
        update per touched topic and run instead of per record. Every other record (topics, transactions, ...)
        is replayed on its own and compared with ``changes``.
        """
        batch = HistoryBatch()
        events: list[Event] = []
        add = events.append
        image = self.image
        offsets = batch.offsets
        delta: MetadataDelta | None = None
        last: Any = None  # the last record of the delta's run
        for mr in records:
            offsets.append((mr.offset, mr.epoch, mr.timestamp))
            kind = mr.type
            if image._txn is None and (mr.is_control or kind in _RUN):
                run = None if mr.is_control else _RUN[kind]
                if run is not None:  # None: the record changes nothing but the provenance
                    if delta is None:
                        delta = MetadataDelta(image)
                    run(delta, mr.record, mr.offset, add)
                last = mr
                continue
            if last is not None:
                image = _end_run(image, delta, last)
                delta, last = None, None
            new = replay(image, mr)
            if mr.is_control or new._txn is not None:
                pass
            else:
                if kind == "EndTransactionRecord":
                    txn = image.transaction
                    recs = [(r, type(r).__name__) for r in (txn.records if txn else ())]
                else:
                    recs = [(mr.record, kind)]
                if recs:
                    events.extend((mr.offset, *c) for c in changes(image, new, recs))
            image = new
        if last is not None:
            image = _end_run(image, delta, last)
        if offsets:
            batch.first_offset = offsets[0][0]
            batch.last_offset = offsets[-1][0]
        self.image = image
        _versions(events, batch)
        return batch


def _end_run(image: MetadataImage, delta: MetadataDelta | None, last: Any) -> MetadataImage:
    """The image at the end of a run whose last record is ``last``."""
    prov = Provenance(last.offset, last.epoch, last.timestamp)
    return delta.apply(prov) if delta is not None else image.with_provenance(prov)


def _run_partition(delta: MetadataDelta, rec: Any, offset: int, add: Any) -> None:
    tid = rec.topic_id
    td = delta._topics.get(tid)
    if td is None:
        td = delta._topic_delta(tid, type(rec).__name__)  # raises as replay does for an unknown topic
    pid = rec.partition_id
    p0 = td.partition(pid)
    if type(rec).__name__ == "PartitionChangeRecord":
        delta._partition_change(rec)
    else:
        delta._partition(rec)
    p1 = td.changes[pid]
    if p0 is None or p0 != p1:
        add((offset, "partitions", (tid, pid), partition_row(td.name, tid, pid, p1), p0 is not None))


def _run_config(delta: MetadataDelta, rec: Any, offset: int, add: Any) -> None:
    # a ConfigRecord sets (or with a null value deletes) one name of one resource
    key = (rec.resource_type, rec.resource_name)
    pending = delta._configs.get(key)
    old = (
        pending[rec.name]
        if pending is not None and rec.name in pending
        else (delta.image.configs.get(key) or {}).get(rec.name)
    )
    delta._config(rec)
    new = rec.value
    if old != new:
        rt = CONFIG_RESOURCE_TYPES.get(key[0], str(key[0]))
        row = (
            None
            if new is None
            else {"resource_type": rt, "resource_name": key[1], "name": rec.name, "value": new}
        )
        add((offset, "configs", (rt, key[1], rec.name), row, old is not None))


def _run_broker(delta: MetadataDelta, rec: Any, offset: int, add: Any) -> None:
    bid = rec.id if type(rec).__name__ in ("FenceBrokerRecord", "UnfenceBrokerRecord") else rec.broker_id
    b0 = delta.broker(bid)
    delta.replay(rec)
    b1 = delta.broker(bid)
    if b0 is not b1 and (b0 is None or b1 is None or b0 != b1):
        add((offset, "brokers", (bid,), None if b1 is None else broker_row(b1), b0 is not None))


#: The records a run of the delta takes (outside transactions), each with what turns it into its events (None:
#: the record only advances the provenance).
_RUN: dict[str, Any] = {
    "PartitionChangeRecord": _run_partition,
    "PartitionRecord": _run_partition,
    "ConfigRecord": _run_config,
    "BrokerRegistrationChangeRecord": _run_broker,
    "FenceBrokerRecord": _run_broker,
    "UnfenceBrokerRecord": _run_broker,
    "RegisterBrokerRecord": _run_broker,
    "UnregisterBrokerRecord": _run_broker,
    "NoOpRecord": None,
}


def _versions(events: list[Event], batch: HistoryBatch, closes: bool = True) -> None:
    open_: dict[tuple[str, tuple[Any, ...]], dict[str, Any]] = {}
    seen: set[tuple[str, tuple[Any, ...]]] = set()  # keys whose version from before the slice is closed
    for offset, table, key, row, existed in events:
        prev = open_.pop((table, key), None)
        if prev is not None:
            prev["to_offset"] = offset
        elif closes and existed and (table, key) not in seen:
            # the key's first change in the slice ends a version begun before it, unless the entity is new
            ent = ENTITIES[table]
            close = dict(zip(ent.key, key, strict=True))
            close["to_offset"] = offset
            batch.closes.setdefault(table, []).append(close)
        seen.add((table, key))
        if row is not None:
            # rows are built fresh for each event: the version is the row itself, no copy
            row["from_offset"] = offset
            row["to_offset"] = None
            batch.versions.setdefault(table, []).append(row)
            open_[(table, key)] = row
