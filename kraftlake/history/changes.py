"""The entity changes between two images, the second being the first after some records."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from kraftlake.history.rows import (
    EntityKey,
    Keyed,
    Row,
    acl_row,
    broker_row,
    config_rows,
    controller_row,
    feature_row,
    partition_row,
    quota_rows,
    scram_key,
    scram_row,
    token_row,
    topic_row,
)
from kraftlake.image import MetadataImage
from kraftlake.protocol import messages as m

TOPIC_RESOURCE = 2

Change = tuple[str, EntityKey, "Row | None", bool]
"""(table, entity key, new row or None when the entity is gone, whether the entity existed before)."""

K = TypeVar("K")
V = TypeVar("V")


def _diff_dict(
    table: str,
    old: Mapping[K, V],
    new: Mapping[K, V],
    key: Callable[[K], EntityKey],
    row: Callable[[K, V], Row],
) -> Iterator[Change]:
    if old is new:
        return
    for k in set(old) | set(new):
        a, b = old.get(k), new.get(k)
        if a is b or (a is not None and b is not None and a == b):
            continue
        yield table, key(k), None if b is None else row(k, b), a is not None


def _diff_multi(table: str, old_rows: list[Keyed], new_rows: list[Keyed]) -> Iterator[Change]:
    before = dict(old_rows)
    after = dict(new_rows)
    for k in before.keys() | after.keys():
        a, b = before.get(k), after.get(k)
        if a != b:
            yield table, k, b, a is not None


def changes(old: MetadataImage, new: MetadataImage, records: Iterable[m.Record]) -> Iterator[Change]:
    """The entity changes from ``old`` to ``new``, the image after the metadata ``records``.

    Small maps are compared whole (by identity first: a delta copies only what it changes); the large
    persistent maps (topics, configs, ACLs) only at the keys the records name.
    """
    yield from _diff_dict("brokers", old.brokers, new.brokers, lambda k: (k,), lambda k, b: broker_row(b))
    yield from _diff_dict(
        "controllers", old.controllers, new.controllers, lambda k: (k,), lambda k, c: controller_row(c)
    )
    yield from _diff_dict("features", old.features, new.features, lambda k: (k,), feature_row)
    yield from _diff_dict(
        "delegation_tokens",
        old.delegation_tokens,
        new.delegation_tokens,
        lambda k: (k,),
        lambda k, d: token_row(d),
    )
    if old.scram is not new.scram:
        yield from _diff_dict("scram", old.scram, new.scram, scram_key, scram_row)
    if old.client_quotas is not new.client_quotas:
        for entity in set(old.client_quotas) | set(new.client_quotas):
            qa, qb = old.client_quotas.get(entity) or {}, new.client_quotas.get(entity) or {}
            if qa != qb:
                yield from _diff_multi(
                    "client_quotas", list(quota_rows(entity, qa)), list(quota_rows(entity, qb))
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
    # by class rather than by type name so that each branch knows its record's fields (these are the records
    # replayed one by one, not the runs of the hot path)
    for rec in records:
        if isinstance(rec, m.PartitionRecord | m.PartitionChangeRecord):
            named = topics.setdefault(rec.topic_id, set())
            if named is not None:
                named.add(rec.partition_id)
        elif isinstance(rec, m.TopicRecord | m.RemoveTopicRecord):
            topics[rec.topic_id] = None
            t = old.topics_by_id.get(rec.topic_id) or new.topics_by_id.get(rec.topic_id)
            configs.add(
                (
                    TOPIC_RESOURCE,
                    t.name if t is not None else rec.name if isinstance(rec, m.TopicRecord) else "",
                )
            )
        elif isinstance(rec, m.ClearElrRecord):
            for tid in set(old.topics_by_id) | set(new.topics_by_id):
                topics[tid] = None
        elif isinstance(rec, m.ConfigRecord):
            configs.add((rec.resource_type, rec.resource_name))
        elif isinstance(rec, m.AccessControlEntryRecord | m.RemoveAccessControlEntryRecord):
            acls.add(rec.id)
    for tid, named in topics.items():
        t0, t1 = old.topics_by_id.get(tid), new.topics_by_id.get(tid)
        if t0 is t1:
            continue
        if t0 is None or t1 is None or t0.name != t1.name:
            yield "topics", (tid,), None if t1 is None else topic_row(t1.name, tid), t0 is not None
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
            yield from _diff_multi("configs", list(config_rows(key, ca)), list(config_rows(key, cb)))
    for acl_id in acls:
        a, b = old.acls.get(acl_id), new.acls.get(acl_id)
        if a != b:
            yield "acls", (acl_id,), None if b is None else acl_row(acl_id, b), a is not None
