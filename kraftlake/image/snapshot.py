"""Writing an image as a Kafka snapshot: the minimal records that rebuild it, in a ``.checkpoint`` file.

Records come in the order of Kafka's ``MetadataImage.write``: features (metadata.version first), brokers,
controllers, topics (each TopicRecord followed by its PartitionRecords), configs, client quotas, producer ids,
ACLs, SCRAM credentials, delegation tokens. Each record is written at the lowest version that holds all of
its data. The file is Kafka's layout: a control batch with the SnapshotHeader, data batches, a control batch
with the SnapshotFooter; batch offsets start at 0 and every batch carries the snapshot's epoch and the
image's timestamp. The KRaftVersion/Voters control records are not written: an image holds no voter set.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from kraftlake.image.delta import METADATA_VERSION
from kraftlake.image.errors import SnapshotWriteError
from kraftlake.image.image import MetadataImage
from kraftlake.image.model import MIGRATING_DIR, PartitionRegistration, uuid_sort_key
from kraftlake.logformat.batch import build_control_batch, build_data_batch
from kraftlake.protocol import messages as m
from kraftlake.protocol.control import ControlRecordType, encode_control_body
from kraftlake.records.serde import encode_metadata_record

RECORDS_PER_BATCH = 1000


def _partition_record(topic_id: str, pid: int, p: PartitionRegistration) -> tuple[m.PartitionRecord, int]:
    elr = bool(p.elr or p.last_known_elr)
    dirs = any(d != MIGRATING_DIR for d in p.directories)
    version = 2 if elr else 1 if dirs else 0
    rec = m.PartitionRecord(
        partition_id=pid,
        topic_id=topic_id,
        replicas=p.replicas,
        isr=p.isr,
        removing_replicas=p.removing_replicas,
        adding_replicas=p.adding_replicas,
        leader=p.leader,
        leader_recovery_state=p.leader_recovery_state,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        directories=p.directories if version >= 1 else (),
        eligible_leader_replicas=p.elr if p.elr else None,
        last_known_elr=p.last_known_elr if p.last_known_elr else None,
    )
    return rec, version


class _TopicPartitions(NamedTuple):
    """A topic's partitions, in the record order of a snapshot, not yet turned into PartitionRecords."""

    topic_id: str
    partitions: list[tuple[int, PartitionRegistration]]


def _first(item: tuple[int, PartitionRegistration]) -> int:
    return item[0]


def snapshot_records(image: MetadataImage) -> Iterator[tuple[m.Record, int]]:
    """The ``(record, version)`` pairs that rebuild ``image`` from nothing."""
    for item in _snapshot_items(image):
        if isinstance(item, _TopicPartitions):
            for pid, p in item.partitions:
                yield _partition_record(item.topic_id, pid, p)
        else:
            yield item


class SnapshotValues:
    """Encodes the snapshots of one evolving image, reusing the PartitionRecord bytes of the previous one.

    Images are persistent: a partition no record touched since the last snapshot is the same immutable
    `PartitionRegistration` object in the next image, so its encoded record is the same. At 2M partitions a
    snapshot taken 20 MiB of records after the previous one re-encodes about a tenth of them; building and
    encoding 2M PartitionRecords took most of a quorum's CPU (a snapshot there went from ~49 s to ~11 s). The
    cost is memory: the encoded records of the last snapshot (about 700 MB per voter at 2M partitions).
    """

    def __init__(self) -> None:
        # id(partition) -> (partition, topic id, partition id, value): the entry keeps its object alive, so
        # the id cannot name another object meanwhile. Entries of partitions that changed stay until the
        # cache holds a quarter more than the last image's partitions, then it starts over.
        self._cache: dict[int, tuple[PartitionRegistration, str, int, bytes]] = {}
        self.reused = 0
        self.encoded = 0

    def values(self, image: MetadataImage) -> Iterator[bytes]:
        """The values of `snapshot_records(image)`, encoded."""
        cache = self._cache
        encode = encode_metadata_record
        reused = encoded = 0
        get = cache.get
        for item in _snapshot_items(image):
            if not isinstance(item, _TopicPartitions):
                yield encode(*item)
                continue
            topic_id = item.topic_id
            for pid, p in item.partitions:
                key = id(p)
                hit = get(key)
                if hit is not None and hit[2] == pid and hit[1] == topic_id:
                    value = hit[3]
                    reused += 1
                else:
                    value = encode(*_partition_record(topic_id, pid, p))
                    encoded += 1
                    cache[key] = (p, topic_id, pid, value)
                yield value
        live = reused + encoded
        if len(cache) > live + live // 4:
            self._cache = {}
        self.reused, self.encoded = reused, encoded


def _snapshot_items(image: MetadataImage) -> Iterator[tuple[m.Record, int] | _TopicPartitions]:
    """`snapshot_records` with each topic's partitions as one `_TopicPartitions`."""
    if image.transaction is not None:
        raise SnapshotWriteError(
            f"the image at offset {image.provenance.offset} is inside an open metadata transaction"
        )
    yield from _feature_items(image)
    yield from _broker_items(image)
    yield from _controller_items(image)
    yield from _topic_items(image)
    yield from _config_and_quota_items(image)
    if image.next_producer_id >= 0:
        yield m.ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id), 0
    yield from _security_items(image)


def _feature_items(image: MetadataImage) -> Iterator[tuple[m.Record, int]]:
    """The feature levels, ``metadata.version`` first."""
    features = dict(image.features)
    if METADATA_VERSION in features:
        yield m.FeatureLevelRecord(name=METADATA_VERSION, feature_level=features.pop(METADATA_VERSION)), 0
    for name in sorted(features):
        yield m.FeatureLevelRecord(name=name, feature_level=features[name]), 0


def _broker_items(image: MetadataImage) -> Iterator[tuple[m.Record, int]]:
    """One ``RegisterBrokerRecord`` per broker, at the lowest version that holds its fields."""
    for bid in sorted(image.brokers):
        b = image.brokers[bid]
        version = (
            4
            if b.cordoned_directories is not None
            else 3
            if b.directories
            else 2
            if b.is_migrating_zk_broker
            else (1 if b.in_controlled_shutdown else 0)
        )
        yield (
            m.RegisterBrokerRecord(
                broker_id=b.id,
                is_migrating_zk_broker=b.is_migrating_zk_broker,
                incarnation_id=b.incarnation_id,
                broker_epoch=b.epoch,
                end_points=tuple(
                    m.RegisterBrokerRecord.BrokerEndpoint(
                        name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol
                    )
                    for e in b.listeners
                ),
                features=tuple(
                    m.RegisterBrokerRecord.BrokerFeature(
                        name=n, min_supported_version=r.min, max_supported_version=r.max
                    )
                    for n, r in b.supported_features
                ),
                rack=b.rack,
                fenced=b.fenced,
                in_controlled_shutdown=b.in_controlled_shutdown,
                log_dirs=b.directories,
                cordoned_log_dirs=b.cordoned_directories,
            ),
            version,
        )


def _controller_items(image: MetadataImage) -> Iterator[tuple[m.Record, int]]:
    """One ``RegisterControllerRecord`` per controller."""
    for cid in sorted(image.controllers):
        c = image.controllers[cid]
        yield (
            m.RegisterControllerRecord(
                controller_id=c.id,
                incarnation_id=c.incarnation_id,
                zk_migration_ready=c.zk_migration_ready,
                end_points=tuple(
                    m.RegisterControllerRecord.ControllerEndpoint(
                        name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol
                    )
                    for e in c.listeners
                ),
                features=tuple(
                    m.RegisterControllerRecord.ControllerFeature(
                        name=n, min_supported_version=r.min, max_supported_version=r.max
                    )
                    for n, r in c.supported_features
                ),
            ),
            0,
        )


def _topic_items(image: MetadataImage) -> Iterator[tuple[m.Record, int] | _TopicPartitions]:
    """Each topic's ``TopicRecord`` followed by its partitions."""
    for topic_id in sorted(image.topics_by_id, key=uuid_sort_key):
        t = image.topics_by_id[topic_id]
        yield m.TopicRecord(name=t.name, topic_id=t.id), 0
        yield _TopicPartitions(t.id, sorted(t.partitions.items(), key=_first))


def _config_and_quota_items(image: MetadataImage) -> Iterator[tuple[m.Record, int]]:
    """The configs, then the client quotas."""
    for rtype, rname in sorted(image.configs):
        data = image.configs[(rtype, rname)]
        for key in sorted(data):
            yield m.ConfigRecord(resource_type=rtype, resource_name=rname, name=key, value=data[key]), 0
    for entity in sorted(image.client_quotas, key=repr):
        ents = tuple(m.ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity)
        quotas = image.client_quotas[entity]
        for key in sorted(quotas):
            yield m.ClientQuotaRecord(entity=ents, key=key, value=quotas[key], remove=False), 0


def _security_items(image: MetadataImage) -> Iterator[tuple[m.Record, int]]:
    """The ACLs, SCRAM credentials and delegation tokens."""
    for acl_id in sorted(image.acls, key=uuid_sort_key):
        a = image.acls[acl_id]
        yield (
            m.AccessControlEntryRecord(
                id=acl_id,
                resource_type=a.resource_type,
                resource_name=a.resource_name,
                pattern_type=a.pattern_type,
                principal=a.principal,
                host=a.host,
                operation=a.operation,
                permission_type=a.permission_type,
            ),
            0,
        )
    for mech, user in sorted(image.scram):
        s = image.scram[(mech, user)]
        yield (
            m.UserScramCredentialRecord(
                name=user,
                mechanism=mech,
                salt=s.salt,
                stored_key=s.stored_key,
                server_key=s.server_key,
                iterations=s.iterations,
            ),
            0,
        )
    for token_id in sorted(image.delegation_tokens):
        d = image.delegation_tokens[token_id]
        yield (
            m.DelegationTokenRecord(
                owner=d.owner,
                requester=d.requester,
                renewers=d.renewers,
                issue_timestamp=d.issue_timestamp,
                max_timestamp=d.max_timestamp,
                expiration_timestamp=d.expiration_timestamp,
                token_id=d.token_id,
            ),
            0,
        )


def snapshot_bytes(
    image: MetadataImage, records_per_batch: int = RECORDS_PER_BATCH, encoder: SnapshotValues | None = None
) -> bytes:
    """The bytes of a ``.checkpoint`` file holding ``image`` (`encoder`: the writer of the previous ones)."""
    epoch = max(image.provenance.epoch, 0)
    ts = max(image.provenance.timestamp, 0)
    out = bytearray()
    header = m.SnapshotHeaderRecord(version=0, last_contained_log_timestamp=image.provenance.timestamp)
    out += build_control_batch(
        0, epoch, ts, [(ControlRecordType.SNAPSHOT_HEADER, encode_control_body(header))]
    )
    offset = 1
    values: list[bytes] = []
    encoded = (
        encoder.values(image)
        if encoder is not None
        else (encode_metadata_record(rec, version) for rec, version in snapshot_records(image))
    )
    for value in encoded:
        values.append(value)
        if len(values) == records_per_batch:
            out += build_data_batch(offset, epoch, ts, values)
            offset += len(values)
            values = []
    if values:
        out += build_data_batch(offset, epoch, ts, values)
        offset += len(values)
    footer = m.SnapshotFooterRecord(version=0)
    out += build_control_batch(
        offset, epoch, ts, [(ControlRecordType.SNAPSHOT_FOOTER, encode_control_body(footer))]
    )
    return bytes(out)


def snapshot_name(image: MetadataImage) -> str:
    """Kafka's file name for a snapshot of ``image``: ``<offset + 1 %020d>-<epoch %010d>.checkpoint``."""
    return f"{image.provenance.offset + 1:020d}-{max(image.provenance.epoch, 0):010d}.checkpoint"


def write_snapshot(
    image: MetadataImage, directory: str | os.PathLike[str], encoder: SnapshotValues | None = None
) -> Path:
    """Write ``image`` as a snapshot into ``directory`` (atomically, via a ``.part`` file); return its path."""
    d = Path(directory)
    path = d / snapshot_name(image)
    part = d / (path.name + ".part")
    data = snapshot_bytes(image, encoder=encoder)
    with open(part, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)
    return path
