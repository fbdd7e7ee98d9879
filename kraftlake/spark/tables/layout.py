"""The warehouse's tables: their names, schemas (Spark and Arrow), Delta layouts and paths, and the key format
of ``closes``."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from kraftlake.history import ENTITIES
from kraftlake.spark.structs import metadata_log_struct_type

# one class of refusal whichever reader refuses (Spark's or kraftlake's own)
from kraftlake.warehouse.tables import WarehouseError as WarehouseError

APP_ID = "kraftlake"
#: The column naming the Kafka cluster a row belongs to: the first column of every warehouse table, always filled
#: (nullable in the schema only because Delta cannot add a NOT NULL column to a table that has rows).
CLUSTER = "cluster"
#: The registry of the clusters a warehouse holds (:mod:`kraftlake.spark.tables.clusters`).
CLUSTERS = "clusters"
CLUSTERS_DDL = "name STRING NOT NULL, cluster_id STRING, first_seen_ms BIGINT NOT NULL, source STRING"
LOG = "metadata_log"
SNAPSHOTS = "snapshots"
OFFSETS = "offsets"
#: Ends of history versions not yet written into their tables
#: (see :func:`kraftlake.spark.tables.writes.write_history`).
CLOSES = "closes"
#: What the SQL functions answer for: the commit point published after each commit and the retained-from offset
#: (see :func:`kraftlake.spark.tables.bounds.publish_commit_point`,
#: :func:`kraftlake.spark.tables.bounds.retained_from`), one small table that a query's guard reads at once.
BOUNDS = "bounds"
#: Rows the stream's record-level checks set aside (:mod:`kraftlake.spark.record_rules`), made when the first one is.
QUARANTINE = "quarantine"
#: Where warehouses made before ``bounds`` kept the retained-from offset (read once, to fill ``bounds``).
RETENTION = "retention"
SNAPSHOTS_DDL = (
    "snapshot_offset BIGINT NOT NULL, epoch INT, timestamp BIGINT, seq INT NOT NULL, type STRING, "
    "version INT, raw BINARY"
)
OFFSETS_DDL = "offset BIGINT NOT NULL, epoch INT NOT NULL, timestamp BIGINT NOT NULL"
CLOSES_DDL = "entity STRING NOT NULL, key STRING NOT NULL, to_offset BIGINT NOT NULL"
RETENTION_DDL = "retained_from BIGINT NOT NULL, recorded_at_ms BIGINT NOT NULL"
BOUNDS_DDL = "committed_to BIGINT, retained_from BIGINT, recorded_at_ms BIGINT NOT NULL, gap_from BIGINT, gap_to BIGINT"
#: The state of each cluster a fleet's streams follow, one row per change (a plain append: the newest row of a
#: cluster is its state; :mod:`kraftlake.warehouse.fleet_status` reads it without Spark).
FLEET_STATUS = "fleet_status"
FLEET_STATUS_DDL = (
    "state STRING NOT NULL, lag BIGINT, last_offset BIGINT, last_commit_ms BIGINT, last_error STRING, "
    "updated_ms BIGINT NOT NULL, pid INT"
)
#: ``fleet_status`` is compacted every few minutes (:mod:`kraftlake.spark.tables.fleet_compaction`): its
#: replaced files' tombstones and its old commits are kept an hour, not Delta's week and month, or its
#: checkpoints and ``_delta_log`` would grow with every row ever appended.
FLEET_STATUS_PROPERTIES = {
    "delta.deletedFileRetentionDuration": "interval 1 hours",
    "delta.logRetentionDuration": "interval 1 hours",
}
HISTORY_TABLES = tuple(ENTITIES)
_ENDPOINTS = "ARRAY<STRUCT<name: STRING, host: STRING, port: INT, security_protocol: STRING>>"
_FEATURES = "ARRAY<STRUCT<name: STRING, min: INT, max: INT>>"
#: The Spark type of every attribute column of the history tables (``kraftlake.history.ENTITIES`` names them).
HISTORY_TYPES: dict[str, dict[str, str]] = {
    "brokers": {
        "id": "INT",
        "epoch": "BIGINT",
        "incarnation_id": "STRING",
        "endpoints": _ENDPOINTS,
        "rack": "STRING",
        "fenced": "BOOLEAN",
        "in_controlled_shutdown": "BOOLEAN",
        "is_migrating_zk_broker": "BOOLEAN",
        "log_dirs": "ARRAY<STRING>",
        "cordoned_log_dirs": "ARRAY<STRING>",
        "features": _FEATURES,
    },
    "controllers": {
        "id": "INT",
        "incarnation_id": "STRING",
        "zk_migration_ready": "BOOLEAN",
        "endpoints": _ENDPOINTS,
        "features": _FEATURES,
    },
    "topics": {"name": "STRING", "topic_id": "STRING"},
    "partitions": {
        "topic": "STRING",
        "topic_id": "STRING",
        "partition": "INT",
        "replicas": "ARRAY<INT>",
        "isr": "ARRAY<INT>",
        "removing_replicas": "ARRAY<INT>",
        "adding_replicas": "ARRAY<INT>",
        "leader": "INT",
        "leader_recovery_state": "INT",
        "leader_epoch": "INT",
        "partition_epoch": "INT",
        "directories": "ARRAY<STRING>",
        "eligible_leader_replicas": "ARRAY<INT>",
        "last_known_elr": "ARRAY<INT>",
    },
    "configs": {"resource_type": "STRING", "resource_name": "STRING", "name": "STRING", "value": "STRING"},
    "features": {"name": "STRING", "level": "INT"},
    "client_quotas": {
        "entity": "ARRAY<STRUCT<entity_type: STRING, entity_name: STRING>>",
        "entity_key": "STRING",
        "key": "STRING",
        "value": "DOUBLE",
    },
    "producer_ids": {"next_producer_id": "BIGINT"},
    "acls": {
        "id": "STRING",
        "resource_type": "INT",
        "resource_name": "STRING",
        "pattern_type": "INT",
        "principal": "STRING",
        "host": "STRING",
        "operation": "INT",
        "permission_type": "INT",
    },
    "scram": {
        "user": "STRING",
        "mechanism": "STRING",
        "salt": "STRING",
        "stored_key": "STRING",
        "server_key": "STRING",
        "iterations": "INT",
    },
    "delegation_tokens": {
        "token_id": "STRING",
        "owner": "STRING",
        "requester": "STRING",
        "renewers": "ARRAY<STRING>",
        "issue_timestamp": "BIGINT",
        "max_timestamp": "BIGINT",
        "expiration_timestamp": "BIGINT",
    },
}
LOG_STATS_COLUMNS = "offset,epoch,timestamp,batch_offset,type,api_key"


def table_path(warehouse: str | Path, name: str) -> str:
    return str(Path(warehouse).resolve() / name)


def table_ref(warehouse: str | Path, name: str) -> str:
    """The SQL name of a warehouse table: ``delta.`/abs/path```."""
    return f"delta.`{table_path(warehouse, name)}`"


def cluster_rows(warehouse: str | Path, name: str, cluster: str) -> str:
    """The SQL of a table's rows of one cluster, a parenthesized query (Delta skips the other clusters' files)."""
    return f"(SELECT * FROM {table_ref(warehouse, name)} WHERE {CLUSTER} = {sql_string(cluster)})"


def history_columns(table: str) -> list[tuple[str, str]]:
    """A history table's attribute columns in order, each with its Spark type (the validity range not included)."""
    types = HISTORY_TYPES[table]
    return [(n, types[n]) for n in ENTITIES[table].names]


def app_id(cluster: str) -> str:
    """The Delta ``txnAppId`` of a cluster's writes: one per cluster, so that the slices of two clusters (their
    ``txnVersion`` each a cluster's own offset) never skip each other's appends."""
    return f"{APP_ID}/{cluster}"


def sql_string(value: str) -> str:
    """``value`` as an SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def table_ddl(name: str) -> str:
    """A warehouse table's columns: ``cluster`` first (the registry has its own layout)."""
    if name == CLUSTERS:
        return CLUSTERS_DDL
    return f"{CLUSTER} STRING, {_own_ddl(name)}"


def _own_ddl(name: str) -> str:
    if name in ENTITIES:
        cols = [f"{n} {t}" for n, t in history_columns(name)]
        return ", ".join([*cols, "from_offset BIGINT NOT NULL", "to_offset BIGINT"])
    if name == SNAPSHOTS:
        return SNAPSHOTS_DDL
    if name == OFFSETS:
        return OFFSETS_DDL
    if name == CLOSES:
        return CLOSES_DDL
    if name == RETENTION:
        return RETENTION_DDL
    if name == BOUNDS:
        return BOUNDS_DDL
    if name == FLEET_STATUS:
        return FLEET_STATUS_DDL
    raise KeyError(name)


#: Columns besides the key that the SQL functions filter a history table by.
_FILTERED = {"partitions": ("topic",), "topics": ("name",)}


def table_layout(spark: SparkSession, name: str) -> tuple[T.StructType, list[str], dict[str, str]]:
    """A warehouse table's schema, clustering columns and Delta properties."""
    # every table clusters on the cluster first: one cluster's queries skip the files of the others (Delta's
    # min/max statistics on `cluster`)
    if name == LOG:
        # file statistics only on the envelope: by default Delta collects them for the first 32 leaf columns,
        # deep inside the record structs, which no query prunes on and which halves the append speed
        props = {
            "delta.dataSkippingStatsColumns": f"{CLUSTER},{LOG_STATS_COLUMNS}",
            "delta.enableDeletionVectors": "true",
        }
        return schema_of(LOG), [CLUSTER, "offset"], props
    if name == CLUSTERS:
        return schema_of(name), ["name"], {}
    # a version is found by the interval [from_offset, to_offset): cluster on both ends for data skipping
    cluster = {
        SNAPSHOTS: ["snapshot_offset"],
        OFFSETS: ["offset"],
        CLOSES: ["entity", "to_offset"],
        RETENTION: ["retained_from"],
        BOUNDS: ["committed_to"],
        FLEET_STATUS: ["updated_ms"],
    }.get(name, ["from_offset", "to_offset"])
    props = {}
    if name == FLEET_STATUS:
        props = dict(FLEET_STATUS_PROPERTIES)
    if name in ENTITIES:
        # deletion vectors: a fold's MERGE (fold_closes) marks the old row instead of rewriting every file it
        # touches; statistics only on what queries filter by: on every column (arrays included) they cost a
        # third of a small append
        stats = ",".join(
            dict.fromkeys(
                [CLUSTER, *ENTITIES[name].key, *_FILTERED.get(name, ()), "from_offset", "to_offset"]
            )
        )
        props = {"delta.dataSkippingStatsColumns": stats, "delta.enableDeletionVectors": "true"}
    return schema_of(name), [CLUSTER, *cluster], props


def never_written(warehouse: str | Path, name: str) -> bool:
    """Whether a table is as created: no commit after its version 0 (any write is version 1 or later, and Delta
    removes old commits only once a checkpoint covers them). Such a table is empty: the queries that would say
    so cost seconds on a cold JVM, two file lookups do not."""
    log = Path(table_path(warehouse, name), "_delta_log")
    return not (log / f"{1:020d}.json").exists() and not (log / "_last_checkpoint").exists()


def _nullable_inside(t: T.DataType) -> T.DataType:
    """``t`` with every nested field nullable: Delta keeps no NOT NULL inside arrays or maps."""
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable_inside(f.dataType), True) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(_nullable_inside(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(t.keyType, _nullable_inside(t.valueType), True)
    return t


#: Parquet cannot store a struct without fields; a record type without fields (NoOpRecord,
#: EndTransactionRecord, ...) is stored as ``STRUCT<present: BOOLEAN>``, set when the row is of that type.
PRESENT = T.StructType([T.StructField("present", T.BooleanType(), True)])


def _stored(t: T.DataType) -> T.DataType:
    if isinstance(t, T.StructType) and not t.fields:
        return PRESENT
    return _nullable_inside(t)


def log_table_schema() -> T.StructType:
    """The ``metadata_log`` schema as stored: the envelope as in the layout, the record structs relaxed."""
    return T.StructType(
        [
            T.StructField(CLUSTER, T.StringType(), True),
            *(
                T.StructField(f.name, _stored(f.dataType), f.nullable)
                for f in metadata_log_struct_type().fields
            ),
        ]
    )


def to_stored_log(df: DataFrame, cluster: str) -> DataFrame:
    """``metadata_log`` rows (as the source yields them) of ``cluster`` in the stored layout (see
    :data:`PRESENT`)."""
    return df.selectExpr(*stored_log_exprs(df.schema, cluster))


def stored_log_exprs(schema: T.StructType, cluster: str) -> list[str]:
    """The SQL expressions of :func:`to_stored_log` for rows of ``schema``: one ``selectExpr`` (a Column built
    per field is a py4j round trip each, which a fleet's micro-batches pay under one GIL)."""
    out = [f"{sql_string(cluster)} AS {CLUSTER}"]
    for f in schema.fields:
        name = "`" + f.name.replace("`", "``") + "`"
        if isinstance(f.dataType, T.StructType) and not f.dataType.fields:
            out.append(f"CASE WHEN {name} IS NOT NULL THEN named_struct('present', true) END AS {name}")
        else:
            out.append(name)
    return out


@cache
def schema_json(name: str) -> str:
    """:func:`schema_of` as Delta's schema string (serialized once: ``metadata_log``'s takes milliseconds of
    Python, which every live micro-batch's appends paid under the GIL)."""
    return schema_of(name).json()


def stored_log_rows(records: Any, cluster: str, schema: Any) -> Any:
    """:func:`to_stored_log` without Spark: ``MetadataRecord`` s of ``cluster`` as a ``pyarrow.Table`` of the
    stored ``metadata_log`` schema ``schema`` (its :func:`arrow_schema_of`), the same rows."""
    import pyarrow as pa

    from kraftlake.records.arrow import record_batch

    decoded = record_batch(records)
    n = decoded.num_rows
    arrays = []
    for f in schema:
        if f.name == CLUSTER:
            arrays.append(pa.array([cluster] * n, type=f.type))
            continue
        col = decoded.column(f.name)
        if pa.types.is_struct(col.type) and col.type.num_fields == 0:
            col = pa.StructArray.from_arrays(
                [pa.array([True] * n, type=pa.bool_())], names=["present"], mask=col.is_null()
            )
        arrays.append(col.cast(f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


@cache
def schema_of(name: str) -> T.StructType:
    """A warehouse table's schema (its DDL parsed by Spark: a session must be active)."""
    if name == LOG:
        return log_table_schema()
    schema = T._parse_datatype_string(table_ddl(name))
    assert isinstance(schema, T.StructType)
    return schema


@cache
def arrow_schema_of(name: str) -> Any:
    """A warehouse table's schema as a ``pyarrow.Schema`` (what its Parquet files hold)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema_of(name))


def arrow_rows(name: str, rows: list[dict[str, Any]], cluster: str | None = None, schema: Any = None) -> Any:
    """Rows (dicts by column name) of a table as a ``pyarrow.Table`` of its schema, built column by column;
    ``cluster`` fills the ``cluster`` column of every row. ``schema``: the table's :func:`arrow_schema_of`,
    given where no Spark session parses its DDL (an executor's Python worker)."""
    import pyarrow as pa

    arrow_schema = arrow_schema_of(name) if schema is None else schema
    arrays = [
        pa.array([cluster] * len(rows), type=f.type)
        if f.name == CLUSTER and name != CLUSTERS
        else pa.array([r.get(f.name) for r in rows], type=f.type)
        for f in arrow_schema
    ]
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


def arrow_frame(
    spark: SparkSession, name: str, rows: list[dict[str, Any]], cluster: str | None = None
) -> DataFrame:
    """Rows (dicts by column name) of a table as a DataFrame, through Arrow (no per-row conversion in Spark)."""
    return spark.createDataFrame(arrow_rows(name, rows, cluster), schema=schema_of(name))


#: Separates the values of an entity key in ``closes.key`` (a byte no key value holds).
KEY_SEP = "\x01"


def close_key(values: Iterable[Any]) -> str:
    """An entity key as ``closes.key`` stores it: the values as Spark casts them to strings, joined."""
    return KEY_SEP.join(str(v) for v in values)


def key_sql(table: str, alias: str) -> str:
    """The SQL of :func:`close_key` over a history table's key columns."""
    cols = [f"CAST({alias}.`{k}` AS STRING)" for k in ENTITIES[table].key]
    return f"concat_ws('{KEY_SEP}', {', '.join(cols)})" if cols else "''"


def engine_info(spark: SparkSession) -> str:
    """The ``engineInfo`` of the commits kraftlake writes."""
    return f"kraftlake Apache-Spark/{spark.version}"
