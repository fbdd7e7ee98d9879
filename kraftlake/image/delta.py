"""``MetadataDelta``: changes accumulated from metadata records, applied to an image in one step.

Follows Kafka's ``org.apache.kafka.image.MetadataDelta`` and its per-area deltas (``FeaturesDelta``,
``ClusterDelta``, ``TopicsDelta``/``TopicDelta``, ``ConfigurationsDelta``, ``ClientQuotasDelta``,
``ProducerIdsDelta``, ``AclsDelta``, ``ScramDelta``, ``DelegationTokenDelta``) as of Kafka 4.4.0.
A delta only records what changed; ``apply`` copies only the touched parts of the image, so replaying a
batch of records costs in proportion to what they touch, not to the size of the image.

Where Kafka's result would depend on where delta boundaries fall, this delta does what record-by-record
replay does, so that applying records one by one and in one batch always agree:

- RemoveTopicRecord deletes every config of the topic, including keys set earlier in the same delta (Kafka
  deletes only the keys present in the delta's base image).
- Removing the last SCRAM user of a mechanism and adding another in the same delta keeps the new user
  (Kafka's ``ScramDelta.apply`` may drop it depending on hash order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kraftlake.image.errors import ReplayError, TopicIdReusedError
from kraftlake.image.image import ConfigKey, MetadataImage, QuotaEntity, ScramKey
from kraftlake.image.model import (
    LEADER_RECOVERY_NO_CHANGE,
    LEADER_RECOVERY_STATES,
    MIGRATING_DIR,
    NO_LEADER_CHANGE,
    Acl,
    BrokerRegistration,
    ControllerRegistration,
    DelegationToken,
    Endpoint,
    PartitionRegistration,
    Provenance,
    ScramCredential,
    TopicImage,
    VersionRange,
    uuid_sort_key,
)
from kraftlake.image.pmap import PMap
from kraftlake.protocol import messages as m

TOPIC_RESOURCE = 2
METADATA_VERSION = "metadata.version"

# records that only advance the provenance (Kafka 4.x ignores ZkMigrationStateRecord: ZooKeeper is gone)
IGNORED_RECORDS = frozenset({"NoOpRecord", "ZkMigrationStateRecord"})
TRANSACTION_RECORDS = frozenset({"BeginTransactionRecord", "EndTransactionRecord", "AbortTransactionRecord"})


def _migrating_dirs(dirs: tuple[str, ...] | None) -> bool:
    return dirs is None or all(d == MIGRATING_DIR for d in dirs)


def _default_to_migrating(dirs: tuple[str, ...] | None, n: int) -> tuple[str, ...]:
    """Kafka's ``defaultToMigrating``: unknown (null, empty or all-MIGRATING) directories become MIGRATING."""
    if _migrating_dirs(dirs):
        return (MIGRATING_DIR,) * n
    assert dirs is not None
    return dirs


def _leader_recovery(value: int) -> int:
    if value not in LEADER_RECOVERY_STATES:
        raise ReplayError(f"Value {value} is not a valid leader recovery state")
    return value


# Canonical tuples of replicas, ISRs and directories. In a large cluster a few thousand distinct replica sets
# (and their directories) cover millions of partitions; sharing one tuple object per value instead of three per
# partition roughly halves the image's memory. Bounded so that an adversarial log cannot grow it without end.
_CANONICAL: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_CANONICAL_MAX = 1 << 20


def _canonical(t: tuple[Any, ...]) -> tuple[Any, ...]:
    c = _CANONICAL.get(t)
    if c is not None:
        return c
    if len(_CANONICAL) < _CANONICAL_MAX:
        _CANONICAL[t] = t
    return t


_DIRS: dict[tuple[int, Any], tuple[str, ...]] = {}


def partition_from_record(record: m.PartitionRecord) -> PartitionRegistration:
    """A ``PartitionRegistration`` built from a PartitionRecord (Kafka's constructor from the record)."""
    replicas = _canonical(tuple(record.replicas))
    dirs = record.directories
    if dirs and len(dirs) != len(replicas):
        raise ReplayError(
            f"PartitionRecord {record.topic_id}:{record.partition_id}: {len(replicas)} replicas "
            f"but {len(dirs)} directories"
        )
    elr = record.eligible_leader_replicas
    lke = record.last_known_elr
    # the directories of a PartitionRecord repeat across partitions (a few per broker set): converted once
    key = (len(replicas), dirs)
    canonical_dirs = _DIRS.get(key)
    if canonical_dirs is None:
        canonical_dirs = _canonical(
            _default_to_migrating(tuple(dirs) if dirs is not None else None, len(replicas))
        )
        if len(_DIRS) < _CANONICAL_MAX:
            _DIRS[key] = canonical_dirs
    return PartitionRegistration(
        replicas,
        canonical_dirs,
        _canonical(tuple(record.isr)),
        tuple(record.removing_replicas),
        tuple(record.adding_replicas),
        record.leader,
        _leader_recovery(record.leader_recovery_state),
        record.leader_epoch,
        record.partition_epoch,
        _canonical(tuple(elr)) if elr else (),
        _canonical(tuple(lke)) if lke else (),
    )


def merge_partition(p: PartitionRegistration, record: m.PartitionChangeRecord) -> PartitionRegistration:
    """Kafka's ``PartitionRegistration.merge``: apply a PartitionChangeRecord.

    A null list leaves the field unchanged (an empty list empties it); Leader -2 leaves leader and leader
    epoch unchanged, any other value (even the current leader) sets it and bumps the leader epoch;
    LeaderRecoveryState -1 is unchanged; the partition epoch is bumped on every change.
    """
    if record.replicas is None and record.directories is None:
        # the common case (an ISR or leader change): the current replicas and directories are already valid
        replicas, dirs = p.replicas, p.directories
    else:
        replicas = p.replicas if record.replicas is None else _canonical(tuple(record.replicas))
        if record.directories is None:
            dirs = p.directories
        else:
            dirs = tuple(record.directories)
            if record.replicas is not None and dirs and len(dirs) != len(replicas):
                raise ReplayError(
                    f"PartitionChangeRecord {record.topic_id}:{record.partition_id}: {len(replicas)} replicas "
                    f"but {len(dirs)} directories"
                )
        dirs = _default_to_migrating(dirs, len(replicas))
        if dirs and len(dirs) != len(replicas):
            raise ReplayError(
                f"PartitionChangeRecord {record.topic_id}:{record.partition_id}: the lengths of replicas "
                f"({len(replicas)}) and directories ({len(dirs)}) do not match"
            )
        dirs = _canonical(dirs)
    leader = record.leader
    if leader == NO_LEADER_CHANGE:
        leader, leader_epoch = p.leader, p.leader_epoch
    else:
        leader_epoch = p.leader_epoch + 1
    lrs = record.leader_recovery_state
    lrs = p.leader_recovery_state if lrs == LEADER_RECOVERY_NO_CHANGE else _leader_recovery(lrs)
    isr = record.isr
    elr = record.eligible_leader_replicas
    lke = record.last_known_elr
    return PartitionRegistration(
        replicas,
        dirs,
        p.isr if isr is None else _canonical(tuple(isr)),
        p.removing_replicas if record.removing_replicas is None else tuple(record.removing_replicas),
        p.adding_replicas if record.adding_replicas is None else tuple(record.adding_replicas),
        leader,
        lrs,
        leader_epoch,
        p.partition_epoch + 1,
        p.elr if elr is None else _canonical(tuple(elr)),
        p.last_known_elr if lke is None else _canonical(tuple(lke)),
    )


def clear_elr(p: PartitionRegistration) -> PartitionRegistration:
    """A ClearElrRecord's effect on one partition: merge with ELR and last known ELR set to empty."""
    return PartitionRegistration(
        p.replicas,
        p.directories,
        p.isr,
        p.removing_replicas,
        p.adding_replicas,
        p.leader,
        p.leader_recovery_state,
        p.leader_epoch,
        p.partition_epoch + 1,
        (),
        (),
    )


def _features(
    items: Iterable[m.RegisterBrokerRecord.BrokerFeature | m.RegisterControllerRecord.ControllerFeature],
) -> tuple[tuple[str, VersionRange], ...]:
    ranges = {f.name: VersionRange(f.min_supported_version, f.max_supported_version) for f in items}
    return tuple(sorted(ranges.items()))


def _endpoints(
    items: Iterable[m.RegisterBrokerRecord.BrokerEndpoint | m.RegisterControllerRecord.ControllerEndpoint],
) -> tuple[Endpoint, ...]:
    by_name = {e.name: Endpoint(e.name, e.host, e.port, e.security_protocol) for e in items}
    return tuple(by_name[n] for n in sorted(by_name))


def _opt_tuple(items: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if items is None else tuple(items)


def broker_from_record(record: m.RegisterBrokerRecord) -> BrokerRegistration:
    """Kafka's ``BrokerRegistration.fromRecord``."""
    return BrokerRegistration(
        id=record.broker_id,
        epoch=record.broker_epoch,
        incarnation_id=record.incarnation_id,
        listeners=_endpoints(record.end_points),
        supported_features=_features(record.features),
        rack=record.rack,
        fenced=record.fenced,
        in_controlled_shutdown=record.in_controlled_shutdown,
        is_migrating_zk_broker=record.is_migrating_zk_broker,
        directories=tuple(sorted(record.log_dirs or (), key=uuid_sort_key)),
        cordoned_directories=_opt_tuple(getattr(record, "cordoned_log_dirs", None)),
    )


def controller_from_record(record: m.RegisterControllerRecord) -> ControllerRegistration:
    return ControllerRegistration(
        id=record.controller_id,
        incarnation_id=record.incarnation_id,
        zk_migration_ready=record.zk_migration_ready,
        listeners=_endpoints(record.end_points),
        supported_features=_features(record.features),
    )


def quota_entity(entity: Iterable[m.ClientQuotaRecord.EntityData]) -> QuotaEntity:
    pairs = {e.entity_type: e.entity_name for e in entity}
    return tuple(sorted(pairs.items()))


class _TopicDelta:
    """Changes to one topic: its (possibly new) identity and changed partitions."""

    __slots__ = ("base", "changes", "created", "name", "topic_id")

    def __init__(
        self, name: str, topic_id: str, base: dict[int, PartitionRegistration], created: bool = False
    ) -> None:
        self.name = name
        self.topic_id = topic_id
        self.base = base
        self.changes: dict[int, PartitionRegistration] = {}
        self.created = created  # by a TopicRecord of this delta (else a live topic of the base image)

    def partition(self, pid: int) -> PartitionRegistration | None:
        p = self.changes.get(pid)
        return p if p is not None else self.base.get(pid)

    def apply(self) -> TopicImage:
        if not self.changes:
            return TopicImage(self.name, self.topic_id, self.base)
        parts = dict(self.base)
        parts.update(self.changes)
        return TopicImage(self.name, self.topic_id, parts)


_Removed = None  # a change to None means "removed"


def _apply_dict(base: Any, changes: dict[Any, Any]) -> dict[Any, Any]:
    if not changes:
        return base  # type: ignore[no-any-return,unused-ignore]
    out = dict(base)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def _is_none(v: object) -> bool:
    return v is None


class MetadataDelta:
    """The changes of a sequence of metadata records on top of a base image (Kafka's ``MetadataDelta``).

    Feed records with ``replay(record)`` (typed record classes of ``kraftlake.protocol``, dispatched by class
    name), then ``apply(provenance)`` for the new image. Transaction records are not handled here (see
    ``kraftlake.image.loader``). A delta raises ``ReplayError`` for records Kafka's loader would reject.
    """

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._controllers: dict[int, ControllerRegistration | None] = {}
        self._topics: dict[str, _TopicDelta] = {}
        self._created_by_name: dict[str, str] = {}
        self._deleted_topics: set[str] = set()
        self._configs: dict[ConfigKey, dict[str, str | None]] = {}
        self._quotas: dict[QuotaEntity, dict[str, float | None]] = {}
        self._next_producer_id: int | None = None
        self._acls: dict[str, Acl | None] = {}
        self._scram: dict[ScramKey, ScramCredential | None] = {}
        self._tokens: dict[str, DelegationToken | None] = {}

    # -- dispatch -----------------------------------------------------------------------------------------

    def replay(self, record: m.Record, type_name: str | None = None) -> None:
        """Apply one metadata record (not a transaction or control record) to this delta."""
        name = type_name or type(record).__name__
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, record)
        elif name not in IGNORED_RECORDS:
            raise ReplayError(f"Unknown metadata record type {name}")

    # -- features -----------------------------------------------------------------------------------------

    def _feature_level(self, r: m.FeatureLevelRecord) -> None:
        if r.name == METADATA_VERSION and r.feature_level < 1:
            raise ReplayError(f"Unknown metadata.version feature level {r.feature_level}")
        self._features[r.name] = None if r.feature_level == 0 else r.feature_level

    # -- state as of the records replayed so far (what a reader of the delta record by record asks) ------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        """The broker's registration after the records replayed so far, None if it is not registered."""
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def topic_name(self, topic_id: str) -> str | None:
        """The name of a live topic after the records replayed so far, None if there is none with that id."""
        td = self._topics.get(topic_id)
        if td is not None:
            return td.name
        if topic_id in self._deleted_topics:
            return None
        t = self.image.topics_by_id.get(topic_id)
        return None if t is None else t.name

    def partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        """A partition's registration after the records replayed so far, None if it does not exist."""
        td = self._topics.get(topic_id)
        if td is not None:
            return td.partition(partition_id)
        if topic_id in self._deleted_topics:
            return None
        t = self.image.topics_by_id.get(topic_id)
        return None if t is None else t.partitions.get(partition_id)

    def partitions(self, topic_id: str) -> dict[int, PartitionRegistration]:
        """A live topic's partitions after the records replayed so far (a new dict), empty if there is none."""
        td = self._topics.get(topic_id)
        if td is not None:
            parts = dict(td.base)
            parts.update(td.changes)
            return parts
        if topic_id in self._deleted_topics:
            return {}
        t = self.image.topics_by_id.get(topic_id)
        return {} if t is None else dict(t.partitions)

    def configs(self, resource_type: int, resource_name: str) -> dict[str, str]:
        """A resource's config values after the records replayed so far (not to be changed)."""
        key = (resource_type, resource_name)
        return _apply_dict(self.image.configs.get(key) or {}, self._configs.get(key) or {})

    def config(self, resource_type: int, resource_name: str, name: str) -> str | None:
        """One config value of a resource after the records replayed so far, None if it is not set."""
        key = (resource_type, resource_name)
        pending = self._configs.get(key)
        if pending is not None and name in pending:
            return pending[name]
        return (self.image.configs.get(key) or {}).get(name)

    # -- cluster ------------------------------------------------------------------------------------------

    def _register_broker(self, r: m.RegisterBrokerRecord) -> None:
        self._brokers[r.broker_id] = broker_from_record(r)

    def _unregister_broker(self, r: m.UnregisterBrokerRecord) -> None:
        # Kafka's ClusterDelta removes the broker whatever the epoch: the controller checked it before writing.
        self._brokers[r.broker_id] = None

    def _register_controller(self, r: m.RegisterControllerRecord) -> None:
        self._controllers[r.controller_id] = controller_from_record(r)

    def _unregister_controller(self, r: m.UnregisterControllerRecord) -> None:
        # Kafka 4.4's ClusterDelta removes the controller, registered or not: its controller checked it (and
        # metadata.version 4.4-IV2) before writing the record
        self._controllers[r.controller_id] = None

    def _broker_or_raise(self, broker_id: int, epoch: int, action: str) -> BrokerRegistration:
        b = self.broker(broker_id)
        if b is None:
            raise ReplayError(f"Tried to {action} broker {broker_id}, but that broker was not registered.")
        if b.epoch != epoch:
            raise ReplayError(
                f"Tried to {action} broker {broker_id}, but the given epoch, {epoch}, did not match the "
                f"current broker epoch, {b.epoch}"
            )
        return b

    def _set_broker(self, b: BrokerRegistration, **changes: Any) -> None:
        from dataclasses import replace

        nb = replace(b, **changes)
        if nb != b:
            self._brokers[b.id] = nb

    def _fence(self, r: m.FenceBrokerRecord) -> None:
        self._set_broker(self._broker_or_raise(r.id, r.epoch, "fence"), fenced=True)

    def _unfence(self, r: m.UnfenceBrokerRecord) -> None:
        self._set_broker(self._broker_or_raise(r.id, r.epoch, "unfence"), fenced=False)

    def _broker_change(self, r: m.BrokerRegistrationChangeRecord) -> None:
        b = self._broker_or_raise(r.broker_id, r.broker_epoch, "change")
        changes: dict[str, Any] = {}
        if r.fenced == 1:
            changes["fenced"] = True
        elif r.fenced == -1:
            changes["fenced"] = False
        elif r.fenced != 0:
            raise ReplayError(f"Unable to replay {r}: unknown value for fenced field: {r.fenced}")
        if r.in_controlled_shutdown == 1:
            changes["in_controlled_shutdown"] = True
        elif r.in_controlled_shutdown != 0:
            raise ReplayError(
                f"Unable to replay {r}: unknown value for inControlledShutdown field: {r.in_controlled_shutdown}"
            )
        if r.log_dirs:
            changes["directories"] = tuple(sorted(r.log_dirs, key=uuid_sort_key))
        cordoned = getattr(r, "cordoned_log_dirs", None)
        if cordoned is not None:
            changes["cordoned_directories"] = tuple(cordoned)
        self._set_broker(b, **changes)

    # -- topics -------------------------------------------------------------------------------------------

    def _topic(self, r: m.TopicRecord) -> None:
        topic_id = r.topic_id
        live = self._topics.get(topic_id)
        if live is not None:
            name: str | None = live.name
        else:
            t = self.image.topics_by_id.get(topic_id)
            name = t.name if t is not None and topic_id not in self._deleted_topics else None
        if name is not None and name != r.name:
            raise TopicIdReusedError(
                f"TopicRecord creates topic {r.name!r} with the id {topic_id} of the live topic {name!r}"
            )
        self._topics[topic_id] = _TopicDelta(r.name, topic_id, {}, created=True)
        self._created_by_name[r.name] = topic_id

    def _topic_delta(self, topic_id: str, what: str) -> _TopicDelta:
        td = self._topics.get(topic_id)
        if td is None:
            t = self.image.topics_by_id.get(topic_id)
            if t is None or topic_id in self._deleted_topics:
                raise ReplayError(f"Unable to apply {what}: no topic with id {topic_id}")
            td = _TopicDelta(t.name, t.id, t.partitions)
            self._topics[topic_id] = td
        return td

    def _partition(self, r: m.PartitionRecord) -> None:
        self._topic_delta(r.topic_id, "PartitionRecord").changes[r.partition_id] = partition_from_record(r)

    def _partition_change(self, r: m.PartitionChangeRecord) -> None:
        # the hot path of a controlled shutdown's replay (60k records per voter): lookups inlined
        td = self._topics.get(r.topic_id)
        if td is None:
            td = self._topic_delta(r.topic_id, "PartitionChangeRecord")
        pid = r.partition_id
        changes = td.changes
        p = changes.get(pid)
        if p is None:
            p = td.base.get(pid)
            if p is None:
                raise ReplayError(f"Unable to find partition {r.topic_id}:{r.partition_id}")
        changes[pid] = merge_partition(p, r)

    def _remove_topic(self, r: m.RemoveTopicRecord) -> None:
        td = self._topics.pop(r.topic_id, None)
        if td is not None:
            name = td.name
            if r.topic_id in self.image.topics_by_id:
                self._deleted_topics.add(r.topic_id)
        else:
            t = self.image.topics_by_id.get(r.topic_id)
            if t is None or r.topic_id in self._deleted_topics:
                raise ReplayError(f"Unable to delete topic with id {r.topic_id}: no such topic found.")
            name = t.name
            self._deleted_topics.add(r.topic_id)
        if self._created_by_name.get(name) == r.topic_id:
            del self._created_by_name[name]
        key = (TOPIC_RESOURCE, name)
        base = self.image.configs.get(key) or {}
        changes = self._configs.get(key)
        if base or changes:
            self._configs[key] = dict.fromkeys(base)

    def _clear_elr(self, r: m.ClearElrRecord) -> None:
        if r.topic_name:
            topic_id = self._created_by_name.get(r.topic_name)
            if topic_id is None:
                t = self.image.topics_by_name.get(r.topic_name)
                if t is None:
                    raise ReplayError(f"Cannot clear ELR of unknown topic {r.topic_name}")
                topic_id = t.id
            self._clear_topic_elr(topic_id)
        else:
            for topic_id in list(self.image.topics_by_id):
                self._clear_topic_elr(topic_id)
            for topic_id in list(self._created_by_name.values()):
                self._clear_topic_elr(topic_id)

    def _clear_topic_elr(self, topic_id: str) -> None:
        # an id deleted and then created again in this delta is the new topic's (its delta is in _topics)
        if topic_id in self._deleted_topics and topic_id not in self._topics:
            return
        td = self._topic_delta(topic_id, "ClearElrRecord")
        for pid, p in list(td.changes.items()):
            if p.elr or p.last_known_elr:
                td.changes[pid] = clear_elr(p)
        for pid, p in td.base.items():
            if pid not in td.changes and (p.elr or p.last_known_elr):
                td.changes[pid] = clear_elr(p)

    # -- configs, quotas, producer ids --------------------------------------------------------------------

    def _config(self, r: m.ConfigRecord) -> None:
        key = (r.resource_type, r.resource_name)
        self._configs.setdefault(key, {})[r.name] = r.value

    def _client_quota(self, r: m.ClientQuotaRecord) -> None:
        entity = quota_entity(r.entity)
        self._quotas.setdefault(entity, {})[r.key] = None if r.remove else float(r.value)

    def _producer_ids(self, r: m.ProducerIdsRecord) -> None:
        self._next_producer_id = r.next_producer_id

    # -- security -----------------------------------------------------------------------------------------

    def _acl(self, r: m.AccessControlEntryRecord) -> None:
        self._acls[r.id] = Acl(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            r.principal,
            r.host,
            r.operation,
            r.permission_type,
        )

    def _remove_acl(self, r: m.RemoveAccessControlEntryRecord) -> None:
        if r.id in self.image.acls:
            self._acls[r.id] = None
        elif self._acls.get(r.id) is not None:
            del self._acls[r.id]
        else:
            raise ReplayError(f"Failed to find existing ACL with ID {r.id} in either image or changes")

    def _scram_credential(self, r: m.UserScramCredentialRecord) -> None:
        self._scram[(r.mechanism, r.name)] = ScramCredential(
            bytes(r.salt), bytes(r.stored_key), bytes(r.server_key), r.iterations
        )

    def _remove_scram(self, r: m.RemoveUserScramCredentialRecord) -> None:
        self._scram[(r.mechanism, r.name)] = None

    def _delegation_token(self, r: m.DelegationTokenRecord) -> None:
        self._tokens[r.token_id] = DelegationToken(
            r.token_id,
            r.owner,
            r.requester,
            tuple(r.renewers),
            r.issue_timestamp,
            r.max_timestamp,
            r.expiration_timestamp,
        )

    def _remove_token(self, r: m.RemoveDelegationTokenRecord) -> None:
        self._tokens[r.token_id] = None

    # -- apply --------------------------------------------------------------------------------------------

    def apply(self, provenance: Provenance) -> MetadataImage:
        """The image with every change of this delta, stamped with ``provenance``."""
        img = self.image
        topics_by_id, topic_ids = img.topics_by_id, img.topic_ids
        for topic_id in self._deleted_topics:
            old = topics_by_id[topic_id]
            topics_by_id = topics_by_id.delete(topic_id)
            if topic_ids.get(old.name) == topic_id:
                topic_ids = topic_ids.delete(old.name)
        changed = {}
        for topic_id, td in self._topics.items():
            t = changed[topic_id] = td.apply()
            # a live topic of the base image already owns its name
            if td.created and topic_ids.get(t.name) != topic_id:
                topic_ids = topic_ids.set(t.name, topic_id)
        if changed:
            topics_by_id = topics_by_id.set_many(changed)
        configs = img.configs
        for key, changes in self._configs.items():
            new = _apply_dict(img.configs.get(key) or {}, changes)
            configs = configs.set(key, new) if new else configs.delete(key)
        quotas: Any = img.client_quotas
        if self._quotas:
            quotas = dict(quotas)
            for entity, qchanges in self._quotas.items():
                newq = _apply_dict(quotas.get(entity) or {}, qchanges)
                if newq:
                    quotas[entity] = newq
                else:
                    quotas.pop(entity, None)
        return MetadataImage(
            provenance=provenance,
            features=_apply_dict(img.features, self._features),
            brokers=_apply_dict(img.brokers, self._brokers),
            controllers=_apply_dict(img.controllers, self._controllers),
            topics_by_id=topics_by_id,
            topic_ids=topic_ids,
            configs=configs,
            client_quotas=quotas,
            next_producer_id=img.next_producer_id
            if self._next_producer_id is None
            else self._next_producer_id,
            acls=img.acls.update(self._acls, _is_none) if self._acls else img.acls,
            scram=_apply_dict(img.scram, self._scram),
            delegation_tokens=_apply_dict(img.delegation_tokens, self._tokens),
        )


# Unbound handlers in a module table: a per-delta table of bound methods would make every delta a reference
# cycle, left to the cyclic GC, whose collections then walk the whole image (millions of objects).
# Each handler takes its own record class, which the type name selects: ``Any`` is the union mypy cannot pair
# with the key.
_HANDLERS: dict[str, Callable[[MetadataDelta, Any], None]] = {
    "RegisterBrokerRecord": MetadataDelta._register_broker,
    "UnregisterBrokerRecord": MetadataDelta._unregister_broker,
    "TopicRecord": MetadataDelta._topic,
    "PartitionRecord": MetadataDelta._partition,
    "ConfigRecord": MetadataDelta._config,
    "PartitionChangeRecord": MetadataDelta._partition_change,
    "FenceBrokerRecord": MetadataDelta._fence,
    "UnfenceBrokerRecord": MetadataDelta._unfence,
    "RemoveTopicRecord": MetadataDelta._remove_topic,
    "DelegationTokenRecord": MetadataDelta._delegation_token,
    "UserScramCredentialRecord": MetadataDelta._scram_credential,
    "FeatureLevelRecord": MetadataDelta._feature_level,
    "ClientQuotaRecord": MetadataDelta._client_quota,
    "ProducerIdsRecord": MetadataDelta._producer_ids,
    "BrokerRegistrationChangeRecord": MetadataDelta._broker_change,
    "AccessControlEntryRecord": MetadataDelta._acl,
    "RemoveAccessControlEntryRecord": MetadataDelta._remove_acl,
    "RemoveUserScramCredentialRecord": MetadataDelta._remove_scram,
    "RemoveDelegationTokenRecord": MetadataDelta._remove_token,
    "RegisterControllerRecord": MetadataDelta._register_controller,
    "UnregisterControllerRecord": MetadataDelta._unregister_controller,
    "ClearElrRecord": MetadataDelta._clear_elr,
}

__all__ = ["MetadataDelta", "PMap", "merge_partition", "partition_from_record"]
