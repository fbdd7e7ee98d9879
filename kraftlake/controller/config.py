"""Controller configuration and the record versions Kafka writes at each ``metadata.version``."""

from __future__ import annotations

from dataclasses import dataclass, field

# metadata.version feature levels (Kafka 4.3.1 ``MetadataVersion``; read from its jar)
MV_3_3_IV0 = 4
MV_3_3_IV2 = 6
MV_3_3_IV3 = 7
MV_3_4_IV0 = 8
MV_3_6_IV1 = 13
MV_3_7_IV2 = 17
MV_4_0_IV1 = 23
MV_4_3_IV0 = 30
MV_4_4_IV0 = 31
LATEST_PRODUCTION = MV_4_3_IV0
"""Kafka 4.3.1's ``MetadataVersion.LATEST_PRODUCTION`` (4.3-IV0)."""

# The other finalized features a 4.3 cluster is formatted with (``Feature.defaultLevel(LATEST_PRODUCTION)``;
# kraft.version is a KRaftVersionRecord, not a FeatureLevelRecord).
DEFAULT_FEATURES: dict[str, int] = {
    "eligible.leader.replicas.version": 1,
    "group.version": 1,
    "share.version": 1,
    "streams.version": 1,
    "transaction.version": 2,
}
# The highest level of each feature this controller (and the simulated brokers) support.
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "metadata.version": (7, MV_4_4_IV0),
    "eligible.leader.replicas.version": (0, 1),
    "group.version": (0, 1),
    "share.version": (0, 1),
    "streams.version": (0, 1),
    "transaction.version": (0, 2),
    "kraft.version": (0, 1),
}
METADATA_VERSION = "metadata.version"
ELR_FEATURE = "eligible.leader.replicas.version"


def partition_record_version(mv: int) -> int:
    """``MetadataVersion.partitionRecordVersion`` (also PartitionChangeRecord's): 2 with ELR, 1 with dirs."""
    return 2 if mv >= MV_4_0_IV1 else 1 if mv >= MV_3_7_IV2 else 0


def register_broker_record_version(mv: int) -> int:
    """``MetadataVersion.registerBrokerRecordVersion``."""
    if mv >= MV_4_3_IV0:
        return 4
    if mv >= MV_3_7_IV2:
        return 3
    if mv >= MV_3_4_IV0:
        return 2
    return 1 if mv >= MV_3_3_IV3 else 0


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The controller's settings (Kafka's names in the comments).

    Attributes
    ----------
    session_timeout_ms : int
        ``broker.session.timeout.ms``: an unfenced broker silent this long is fenced.
    default_replication_factor, default_num_partitions : int
        ``default.replication.factor`` / ``num.partitions`` for CreateTopics with -1.
    min_insync_replicas : int
        the cluster default of ``min.insync.replicas`` (a topic config overrides it).
    unclean_leader_election : bool
        ``unclean.leader.election.enable`` cluster default (a topic config overrides it).
    metadata_version : int
        the ``metadata.version`` the bootstrap records finalize.
    features : dict
        the other features finalized at bootstrap.
    max_records_per_batch : int
        Kafka's ``MAX_RECORDS_PER_BATCH``; a larger result is appended as a metadata transaction in
        batches of this size.
    """

    session_timeout_ms: int = 9000
    default_replication_factor: int = 1
    default_num_partitions: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    metadata_version: int = LATEST_PRODUCTION
    features: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_FEATURES))
    max_records_per_batch: int = 10_000
    producer_id_block_size: int = 1000
