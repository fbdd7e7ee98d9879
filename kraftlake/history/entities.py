"""The history tables' entities: one table per kind of metadata entity, its key and its attribute columns.

The column names are the image JSON's snake_case attribute names; every table also has the validity range
``[from_offset, to_offset)``. The columns' Spark types live with the tables (``kraftlake.spark.tables``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entity:
    """A history table: its name, the columns that identify an entity, and its attribute columns in order."""

    table: str
    key: tuple[str, ...]
    names: tuple[str, ...]


ENTITIES: dict[str, Entity] = {
    e.table: e
    for e in (
        Entity(
            "brokers",
            ("id",),
            (
                "id",
                "epoch",
                "incarnation_id",
                "endpoints",
                "rack",
                "fenced",
                "in_controlled_shutdown",
                "is_migrating_zk_broker",
                "log_dirs",
                "cordoned_log_dirs",
                "features",
            ),
        ),
        Entity(
            "controllers", ("id",), ("id", "incarnation_id", "zk_migration_ready", "endpoints", "features")
        ),
        Entity("topics", ("topic_id",), ("name", "topic_id")),
        Entity(
            "partitions",
            ("topic_id", "partition"),
            (
                "topic",
                "topic_id",
                "partition",
                "replicas",
                "isr",
                "removing_replicas",
                "adding_replicas",
                "leader",
                "leader_recovery_state",
                "leader_epoch",
                "partition_epoch",
                "directories",
                "eligible_leader_replicas",
                "last_known_elr",
            ),
        ),
        Entity(
            "configs",
            ("resource_type", "resource_name", "name"),
            ("resource_type", "resource_name", "name", "value"),
        ),
        Entity("features", ("name",), ("name", "level")),
        Entity("client_quotas", ("entity_key", "key"), ("entity", "entity_key", "key", "value")),
        Entity("producer_ids", (), ("next_producer_id",)),
        Entity(
            "acls",
            ("id",),
            (
                "id",
                "resource_type",
                "resource_name",
                "pattern_type",
                "principal",
                "host",
                "operation",
                "permission_type",
            ),
        ),
        Entity(
            "scram",
            ("user", "mechanism"),
            ("user", "mechanism", "salt", "stored_key", "server_key", "iterations"),
        ),
        Entity(
            "delegation_tokens",
            ("token_id",),
            (
                "token_id",
                "owner",
                "requester",
                "renewers",
                "issue_timestamp",
                "max_timestamp",
                "expiration_timestamp",
            ),
        ),
    )
}
