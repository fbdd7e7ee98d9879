"""The warehouse: Delta tables by offset (DESIGN.md section 4) and their idempotent writes.

Every table lives at ``<warehouse>/<name>``. Writes of a slice of the log ending at offset ``L`` carry the Delta
transaction id ``(txnAppId=kraftlake, txnVersion=L)``: Delta skips a write whose version is not above the one it
recorded for the table, so replaying a slice after a crash never duplicates rows. ``offsets`` is written last
in every slice: its highest offset is the pipeline's commit point.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import cache, partial
from pathlib import Path
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from kraftlake.errors import KraftlakeError
from kraftlake.history import ENTITIES, HistoryBatch
from kraftlake.spark import delta_append, delta_rewrite
from kraftlake.spark.structs import metadata_log_struct_type

APP_ID = "kraftlake"
_log = logging.getLogger(__name__)
LOG = "metadata_log"
SNAPSHOTS = "snapshots"
OFFSETS = "offsets"
#: Ends of history versions not yet written into their tables (see :func:`write_history`).
CLOSES = "closes"
#: What the SQL functions answer for: the commit point published after each commit and the retained-from offset
#: (see :func:`publish_commit_point`, :func:`retained_from`), one small table that a query's guard reads at once.
BOUNDS = "bounds"
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
R = TypeVar("R")
LOG_STATS_COLUMNS = "offset,epoch,timestamp,batch_offset,type,api_key"


class WarehouseError(KraftlakeError):
    """Raised when the warehouse cannot answer: missing tables, or an offset outside the retained history."""


def table_path(warehouse: str | Path, name: str) -> str:
    return str(Path(warehouse).resolve() / name)


def table_ref(warehouse: str | Path, name: str) -> str:
    """The SQL name of a warehouse table: ``delta.`/abs/path```."""
    return f"delta.`{table_path(warehouse, name)}`"


def history_columns(table: str) -> list[tuple[str, str]]:
    """A history table's attribute columns in order, each with its Spark type (the validity range not included)."""
    types = HISTORY_TYPES[table]
    return [(n, types[n]) for n in ENTITIES[table].names]


def table_ddl(name: str) -> str:
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
    raise KeyError(name)


#: Columns besides the key that the SQL functions filter a history table by.
_FILTERED = {"partitions": ("topic",), "topics": ("name",)}
_ENSURED: set[str] = set()


def table_layout(spark: SparkSession, name: str) -> tuple[T.StructType, list[str], dict[str, str]]:
    """A warehouse table's schema, clustering columns and Delta properties."""
    if name == LOG:
        # file statistics only on the envelope: by default Delta collects them for the first 32 leaf columns,
        # deep inside the record structs, which no query prunes on and which halves the append speed
        props = {"delta.dataSkippingStatsColumns": LOG_STATS_COLUMNS, "delta.enableDeletionVectors": "true"}
        return schema_of(LOG), ["offset"], props
    # a version is found by the interval [from_offset, to_offset): cluster on both ends for data skipping
    cluster = {
        SNAPSHOTS: ["snapshot_offset"],
        OFFSETS: ["offset"],
        CLOSES: ["entity", "to_offset"],
        RETENTION: ["retained_from"],
        BOUNDS: ["committed_to"],
    }.get(name, ["from_offset", "to_offset"])
    props = {}
    if name in ENTITIES:
        # deletion vectors: a fold's MERGE (fold_closes) marks the old row instead of rewriting every file it
        # touches; statistics only on what queries filter by: on every column (arrays included) they cost a
        # third of a small append
        stats = ",".join(
            dict.fromkeys([*ENTITIES[name].key, *_FILTERED.get(name, ()), "from_offset", "to_offset"])
        )
        props = {"delta.dataSkippingStatsColumns": stats, "delta.enableDeletionVectors": "true"}
    return schema_of(name), cluster, props


#: The protocol delta-spark 4.x gives a new clustered table (with deletion vectors, or without): the table
#: features clustering needs (domainMetadata) and the legacy ones writer version 7 lists (invariants, appendOnly).
_PROTOCOL_DV = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors", "domainMetadata", "invariants", "appendOnly", "clustering"],
}
_PROTOCOL = {
    "minReaderVersion": 1,
    "minWriterVersion": 7,
    "writerFeatures": ["domainMetadata", "clustering", "invariants", "appendOnly"],
}


def _has_commits(log: Path) -> bool:
    """Whether a ``_delta_log`` holds a table: a commit, a checkpoint (Delta removes commits older than its log
    retention once a checkpoint covers them), or the pointer to one."""
    if not log.is_dir():
        return False
    return any(
        p.name == "_last_checkpoint" or p.name.endswith(".json") or ".checkpoint" in p.name
        for p in log.iterdir()
    )


def create_table(spark: SparkSession, warehouse: str | Path, name: str) -> bool:
    """Create a warehouse table, empty, unless it exists; returns whether this call created it.

    Written as Delta's protocol defines a table: its version 0 (``_delta_log/00000000000000000000.json``: a
    ``commitInfo``, the ``metaData``, the ``protocol`` and the clustering columns as ``delta.clustering`` domain
    metadata), the very actions delta-spark's ``CREATE TABLE ... CLUSTER BY`` writes, put in place as any commit
    (:func:`kraftlake.spark.delta_append.put_commit`: a second creator finds it there). Through Spark each
    creation is a Delta transaction of a second or more on a cold JVM, and a warehouse has 16 tables.
    """
    log = Path(table_path(warehouse, name), "_delta_log")
    if _has_commits(log):
        return False
    schema, cluster, props = table_layout(spark, name)
    log.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    actions = [
        {
            "commitInfo": {
                "timestamp": now,
                "operation": "CREATE TABLE",
                "operationParameters": {
                    "partitionBy": "[]",
                    "clusterBy": json.dumps(cluster, separators=(",", ":")),
                    "description": None,
                    "isManaged": "false",
                    "properties": json.dumps(props, separators=(",", ":")),
                },
                "isolationLevel": "Serializable",
                "isBlindAppend": True,
                "operationMetrics": {},
                "engineInfo": _engine(spark),
                "txnId": str(uuid.uuid4()),
            }
        },
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema.jsonValue(), separators=(",", ":")),
                "partitionColumns": [],
                "configuration": props,
                "createdTime": now,
            }
        },
        {"protocol": _PROTOCOL_DV if props.get("delta.enableDeletionVectors") == "true" else _PROTOCOL},
        {
            "domainMetadata": {
                "domain": "delta.clustering",
                "configuration": json.dumps(
                    {"clusteringColumns": [[c] for c in cluster], "domainName": "delta.clustering"},
                    separators=(",", ":"),
                ),
                "removed": False,
            }
        },
    ]
    return delta_append.put_commit(log, 0, actions)


def ensure_tables(spark: SparkSession, warehouse: str | Path) -> None:
    """Create the tables that do not exist yet (empty, with their schemas: :func:`create_table`); checked once
    per process."""
    root = str(Path(warehouse).resolve())
    if root in _ENSURED and Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        return
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    for name in (LOG, *HISTORY_TABLES, CLOSES, SNAPSHOTS, OFFSETS, BOUNDS):
        if not create_table(spark, warehouse, name):
            add_missing_columns(spark, warehouse, name)
    ensure_bounds(spark, warehouse)
    _ENSURED.add(root)


def add_missing_columns(spark: SparkSession, warehouse: str | Path, name: str) -> bool:
    """Give a table made by an older kraftlake the columns its layout has gained since (``metadata_log`` gains a
    struct column with each record type a Kafka release adds); returns whether it did.

    One metadata-only commit (what ``ALTER TABLE ADD COLUMNS`` commits): the columns it has as they are, the new
    ones where the layout has them, so that appends to a table kraftlake created find its schema equal to their
    rows' again, and the rows already written read the new columns as null. A table holding a column the layout does not know
    (made by a newer kraftlake), or of another type, is left as it is: appends then refuse it.
    """
    path = table_path(warehouse, name)
    version, metadata = delta_append.table_metadata(path)
    stored = json.loads(metadata["schemaString"])
    schema, _, _ = table_layout(spark, name)
    wanted = schema.jsonValue()
    have = {f["name"]: f for f in stored["fields"]}
    names = {f["name"] for f in wanted["fields"]}
    added = [f["name"] for f in wanted["fields"] if f["name"] not in have]
    if (
        not added
        or not set(have) <= names
        or any(f["name"] in have and have[f["name"]]["type"] != f["type"] for f in wanted["fields"])
    ):
        return False
    # the columns it has stay as they are (nullability included), the new ones go where the layout has them
    merged = {**wanted, "fields": [have.get(f["name"], f) for f in wanted["fields"]]}
    actions = [
        {
            "commitInfo": {
                "timestamp": int(time.time() * 1000),
                "operation": "ADD COLUMNS",
                "operationParameters": {"columns": json.dumps(added)},
                "readVersion": version,
                "isolationLevel": "Serializable",
                "isBlindAppend": False,
                "operationMetrics": {},
                "engineInfo": _engine(spark),
                "txnId": str(uuid.uuid4()),
            }
        },
        {"metaData": {**metadata, "schemaString": json.dumps(merged, separators=(",", ":"))}},
    ]
    if not delta_append.put_commit(Path(path, "_delta_log"), version + 1, actions):
        return add_missing_columns(spark, warehouse, name)  # another writer committed first: look again
    _log.info("%s: added the columns %s", path, ", ".join(added))
    return True


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
        [T.StructField(f.name, _stored(f.dataType), f.nullable) for f in metadata_log_struct_type().fields]
    )


def to_stored_log(df: DataFrame) -> DataFrame:
    """``metadata_log`` rows (as the source yields them) in the stored layout (see :data:`PRESENT`)."""
    from pyspark.sql import functions as F

    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, T.StructType) and not f.dataType.fields:
            cols.append(
                F.when(F.col(f.name).isNotNull(), F.struct(F.lit(True).alias("present"))).alias(f.name)
            )
        else:
            cols.append(F.col(f.name))
    return df.select(*cols)


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


def arrow_rows(name: str, rows: list[dict[str, Any]]) -> Any:
    """Rows (dicts by column name) of a table as a ``pyarrow.Table`` of its schema, built column by column."""
    import pyarrow as pa

    arrow_schema = arrow_schema_of(name)
    arrays = [pa.array([r.get(f.name) for r in rows], type=f.type) for f in arrow_schema]
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


def arrow_frame(spark: SparkSession, name: str, rows: list[dict[str, Any]]) -> DataFrame:
    """Rows (dicts by column name) of a table as a DataFrame, through Arrow (no per-row conversion in Spark)."""
    return spark.createDataFrame(arrow_rows(name, rows), schema=schema_of(name))


def append(df: DataFrame, warehouse: str | Path, name: str, txn_version: int) -> None:
    """Append ``df`` to a table once through Spark: a second append with the same or a lower ``txn_version`` is
    skipped."""
    (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", APP_ID)
        .option("txnVersion", txn_version)
        .save(table_path(warehouse, name))
    )


def append_arrow(spark: SparkSession, warehouse: str | Path, name: str, rows: Any, txn_version: int) -> None:
    """Append a ``pyarrow.Table`` of the table's schema once (same ``txn_version`` rule as :func:`append`).

    Committed by kraftlake (:mod:`kraftlake.spark.delta_append`: a Parquet file and a commit, no Spark job),
    through Spark when the table needs more of a writer than blind appends. A commit at which Delta writes a
    checkpoint gets one written by Delta, in the background (:func:`wait_checkpoints`).
    """
    schema = schema_of(name)
    path = table_path(warehouse, name)
    try:
        done = delta_append.append(
            path,
            rows,
            schema_string=schema.json(),
            app_id=APP_ID,
            txn_version=txn_version,
            engine_info=_engine(spark),
        )
    except delta_append.Unsupported:
        append(spark.createDataFrame(rows, schema=schema), warehouse, name, txn_version)
        return
    if done.checkpoint_due:
        _checkpoint_later(spark, path)


def append_frame(
    spark: SparkSession, df: DataFrame, warehouse: str | Path, name: str, txn_version: int
) -> None:
    """:func:`append_arrow` of a DataFrame's rows, collected to the driver: for small ones (a live micro-batch),
    where Spark's own Delta write costs more than the rows."""
    # to the table's schema first: pyspark's own conversion refuses a null struct whose fields are NOT NULL
    rows = df.to(schema_of(name)).toArrow()
    target = arrow_schema_of(name)
    if rows.schema != target:
        rows = rows.cast(target)
    append_arrow(spark, warehouse, name, rows, txn_version)


_CHECKPOINTER: ThreadPoolExecutor | None = None
_CHECKPOINTS: dict[str, Future[None]] = {}
"""The latest checkpoint asked per table path (done ones dropped as new ones are asked; one that is running
was asked before its table's latest commits, so the next one queues behind it)."""
_CHECKPOINTS_LOCK = threading.Lock()


def _checkpoint_later(spark: SparkSession, path: str) -> None:
    """Have Delta write the table's checkpoint (and clean its expired log files) as its own writers do after a
    commit at a checkpoint interval, on one background thread: a checkpoint of a large table takes seconds,
    and a commit does not need it (readers only replay more JSON commits meanwhile). A table whose previous
    checkpoint has not started yet gets no second one: that one will take the newest version."""
    global _CHECKPOINTER

    def run() -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        none = jvm.scala.Option.empty()
        # Delta reads the thread's active session; py4j runs this on a JVM thread of its own
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
        log.checkpointAndCleanUpDeltaLog(log.update(False, none, none), none)

    with _CHECKPOINTS_LOCK:
        for p in [p for p, f in _CHECKPOINTS.items() if f.done()]:
            del _CHECKPOINTS[p]
        waiting = _CHECKPOINTS.get(path)
        if waiting is not None and not waiting.running():
            return
        if _CHECKPOINTER is None:
            _CHECKPOINTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftlake-checkpoint")
        future = _CHECKPOINTER.submit(run)
        future.add_done_callback(_report_checkpoint)
        _CHECKPOINTS[path] = future


def _report_checkpoint(future: Future[None]) -> None:
    """A checkpoint that failed is logged and not retried: the table is whole without it, and the next
    interval writes one."""
    exc = future.exception()
    if exc is not None:
        _log.warning("kraftlake: a Delta checkpoint failed: %s", exc)


def wait_checkpoints() -> None:
    """Wait for the checkpoints asked by :func:`append_arrow` (before the session stops)."""
    with _CHECKPOINTS_LOCK:
        pending = list(_CHECKPOINTS.values())
        _CHECKPOINTS.clear()
    wait(pending)


#: History tables of one slice written at once.
WRITE_THREADS = 4
#: Separates the values of an entity key in ``closes.key`` (a byte no key value holds).
KEY_SEP = "\x01"


def close_key(values: Iterable[Any]) -> str:
    """An entity key as ``closes.key`` stores it: the values as Spark casts them to strings, joined."""
    return KEY_SEP.join(str(v) for v in values)


def key_sql(table: str, alias: str) -> str:
    """The SQL of :func:`close_key` over a history table's key columns."""
    cols = [f"CAST({alias}.`{k}` AS STRING)" for k in ENTITIES[table].key]
    return f"concat_ws('{KEY_SEP}', {', '.join(cols)})" if cols else "''"


def closes_rows(batch: HistoryBatch) -> list[dict[str, Any]]:
    """A slice's closes as ``closes`` rows (every history table's in one list)."""
    return [
        {"entity": table, "key": close_key(c[k] for k in ENTITIES[table].key), "to_offset": c["to_offset"]}
        for table, cs in sorted(batch.closes.items())
        for c in cs
    ]


def write_history(spark: SparkSession, warehouse: str | Path, batch: HistoryBatch) -> None:
    """A slice's new versions (one append per history table it touches) and its closes (one ``closes`` append),
    side by side: a Delta commit mostly waits on the driver, and the tables are independent until the commit
    point. Every append carries ``txnVersion`` = the slice's last offset, so a replayed slice is skipped per
    table; each is retried if it loses a commit conflict (to a running compaction).

    Why closes are appended rather than applied: ending an open version in place is a MERGE that scans every
    open version of the table (all partitions), 14-20 s at 200k partitions however few it closes; an append is
    proportional to the slice. The ``closes`` rows are folded into the tables by :func:`fold_closes`, and until
    then every reader sees them through :func:`history_query` / :func:`state_query`.
    """
    jobs: list[Callable[[], None]] = []
    for table in sorted(batch.versions):
        if batch.versions[table]:
            jobs.append(
                partial(append_rows, spark, warehouse, table, batch.versions[table], batch.last_offset)
            )
    closes = closes_rows(batch)
    if closes:
        jobs.append(partial(append_rows, spark, warehouse, CLOSES, closes, batch.last_offset))
    if not jobs:
        return
    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="kraftlake-history") as pool:
        for f in [pool.submit(retry_conflicts, job) for job in jobs]:
            f.result()


def append_rows(
    spark: SparkSession, warehouse: str | Path, table: str, rows: list[dict[str, Any]], txn_version: int
) -> None:
    append_arrow(spark, warehouse, table, arrow_rows(table, rows), txn_version)


def _pending(warehouse: str | Path, table: str, at_most: str | None = None) -> str:
    """The pending closes of ``table`` as ``(key, tos)``: every close's ``to_offset`` per entity key."""
    bound = f" AND to_offset <= {at_most}" if at_most is not None else ""
    return (
        f"SELECT key, collect_list(to_offset) AS tos FROM {table_ref(warehouse, CLOSES)} "
        f"WHERE entity = '{table}'{bound} GROUP BY key"
    )


def _join_pending(warehouse: str | Path, table: str) -> str:
    """The pending closes of each still-open version of ``table`` (alias ``t``) as ``c.tos`` (NULL: none)."""
    return (
        f"LEFT JOIN ({_pending(warehouse, table)}) c ON t.to_offset IS NULL AND {key_sql(table, 't')} = c.key"
    )


def history_query(warehouse: str | Path, table: str) -> str:
    """A history table as readers see it: every version with its ``to_offset``, the pending ``closes`` applied.

    A version still open in the table ends at the first pending close of its key after its ``from_offset``.
    """
    cols = ", ".join(f"t.`{n}`" for n in ENTITIES[table].names)
    return (
        f"SELECT {cols}, t.from_offset, coalesce(t.to_offset, "
        f"array_min(filter(c.tos, x -> x > t.from_offset))) AS to_offset "
        f"FROM {table_ref(warehouse, table)} t {_join_pending(warehouse, table)}"
    )


def state_query(
    warehouse: str | Path, table: str, at: str, joined: str = "", guard: str | None = None
) -> str:
    """The versions of ``table`` valid at offset ``at`` (an SQL expression): ``from_offset <= at < to_offset``.

    The range filter is on the stored columns (Delta skips files by it); a version still open there is left out
    when a pending close of its key lies in ``(from_offset, at]``. ``joined``: a relation cross-joined to the
    table (alias ``t``) that ``at`` may refer to. ``guard``: a query of the same columns added with UNION ALL,
    which yields no row but may raise (:func:`offset_guard`, :func:`retention_guard_at_time`).
    """
    cols = ", ".join([*(f"t.`{n}`" for n in ENTITIES[table].names), "t.from_offset"])
    cross = f" CROSS JOIN {joined}" if joined else ""
    query = (
        f"SELECT {cols} FROM {table_ref(warehouse, table)} t{cross} "
        f"{_join_pending(warehouse, table)} WHERE t.from_offset <= {at} "
        f"AND (t.to_offset IS NULL OR t.to_offset > {at}) "
        f"AND (c.tos IS NULL OR NOT exists(c.tos, x -> x > t.from_offset AND x <= {at}))"
    )
    return f"{query} UNION ALL {guard}" if guard else query


#: In the message of the error the SQL functions raise for an offset outside the retained history.
BEFORE_RETAINED = "before the retained history"


def _no_row(table: str) -> str:
    """The SELECT list of a row of ``table``'s function columns, all NULL (typed, for UNION ALL)."""
    return "SELECT " + ", ".join(
        [*(f"CAST(NULL AS {t})" for _, t in history_columns(table)), "CAST(NULL AS BIGINT)"]
    )


def bounds_relation(warehouse: str | Path) -> str:
    """A one-row relation ``g``: ``r``, the retained-from offset (-1: the whole log), ``m``, the published
    commit point (NULL before the first commit), and the first and the last recorded gap (:func:`record_gap`)
    as ``f1..t1`` and ``f2..t2`` (NULL without one; the same one when there is one)."""
    # both from one small table: each table a query reads costs a Delta scan planning of its own (file
    # statistics and a Spark job or two), whatever the table's size
    # the gaps as the first (min) and the last (max) recorded one: holes of one log are ordered by both ends, and
    # minima and maxima are answered from the same statistics (a collect_list would read every file of bounds)
    return (
        f"(SELECT coalesce(max(retained_from), -1) AS r, max(committed_to) AS m, "
        f"min(gap_from) AS f1, min(gap_to) AS t1, max(gap_from) AS f2, max(gap_to) AS t2 "
        f"FROM {table_ref(warehouse, BOUNDS)}) g"
    )


#: In the message of the error the SQL functions raise for an offset past the warehouse's commit point.
AFTER_COMMITTED = "is after the last committed offset"
#: In the message of the error the SQL functions raise for a negative offset.
NEGATIVE = "is negative"
#: In the message of the error the SQL functions raise for an offset in a gap of the log (:func:`record_gap`).
IN_GAP = "lies in a gap of the log"
#: What the messages of the SQL functions' refusals hold (:func:`offset_guard`, :func:`retention_guard_at_time`).
REFUSALS = (NEGATIVE, BEFORE_RETAINED, AFTER_COMMITTED, IN_GAP)


def offset_guard(warehouse: str | Path, table: str, at: str) -> str:
    """A query of ``table``'s function columns that yields no row, and raises (``raise_error``, Spark's
    USER_RAISED_EXCEPTION) when offset ``at`` is negative, below the retained-from offset
    (:func:`retained_from`: there the history tables hold only the versions that outlived the cut, and the
    functions would answer with a part of the state), or past the published commit point
    (:func:`publish_commit_point`: the last state would answer for an offset the warehouse does not hold, or not
    yet), or inside the first or the last gap of the log (:func:`record_gap`: the state there is known nowhere;
    a log of three holes or more has the ones between unguarded).

    It is a branch of a UNION ALL (:func:`state_query`'s ``guard``): Spark runs every branch of a union, so it
    raises whatever the history table holds or Delta skips. (A filter or a cross join with the history table
    is never evaluated when that side is empty: after data skipping, at an offset below every version.)
    """
    return (
        f"{_no_row(table)} FROM {bounds_relation(warehouse)} WHERE CASE "
        f"WHEN {at} < 0 THEN raise_error(concat('offset ', {at}, ' {NEGATIVE}')) "
        f"WHEN {at} < g.r THEN raise_error(concat('offset ', {at}, ' lies {BEFORE_RETAINED}: the warehouse "
        f"holds the states from offset ', g.r, ' on')) "
        f"WHEN {at} > g.m THEN raise_error(concat('offset ', {at}, ' {AFTER_COMMITTED} (', g.m, ')')) "
        f"WHEN {at} BETWEEN g.f1 AND g.t1 OR {at} BETWEEN g.f2 AND g.t2 THEN raise_error(concat('offset ', {at}, "
        f"' {IN_GAP}: no state is known at ', "
        f"CASE WHEN {at} BETWEEN g.f1 AND g.t1 THEN concat(g.f1, '..', g.t1) ELSE concat(g.f2, '..', g.t2) END)) "
        f"ELSE false END"
    )


def offset_at_time(warehouse: str | Path, at_time: str) -> str:
    """A one-row relation ``(o)``: the last offset whose record is at or before the TIMESTAMP ``at_time`` (NULL
    before the first)."""
    return (
        f"(SELECT max(offset) AS o FROM {table_ref(warehouse, OFFSETS)} "
        f"WHERE timestamp_millis(timestamp) <= {at_time})"
    )


def retention_guard_at_time(warehouse: str | Path, table: str, at_time: str) -> str:
    """:func:`offset_guard` for a TIMESTAMP ``at_time``: raises when its offset (:func:`offset_at_time`) is
    below the retained-from offset, or when no offset is at or before it once the history was cut or seeded from
    a snapshot (before the first record of a warehouse that holds the whole log, the state is empty), or when
    that offset is the last before a gap (:func:`record_gap`: the times of the missing records are unknown)."""
    return (
        f"{_no_row(table)} FROM {offset_at_time(warehouse, at_time)} s CROSS JOIN {bounds_relation(warehouse)} "
        f"WHERE CASE WHEN (s.o IS NULL AND g.r >= 0) OR s.o < g.r THEN raise_error(concat('the time lies "
        f"{BEFORE_RETAINED} (its last offset is ', coalesce(cast(s.o AS STRING), 'none'), '): the warehouse "
        f"holds the states from offset ', g.r, ' on')) "
        # the last offset before a gap: the records after it have unknown times, the state then is unknown
        f"WHEN s.o + 1 IN (g.f1, g.f2) THEN raise_error(concat('the time {IN_GAP} (its last offset is ', s.o, "
        f"', after it no state is known up to ', CASE WHEN s.o + 1 = g.f1 THEN g.t1 ELSE g.t2 END, ')')) "
        f"ELSE false END"
    )


def bounds_of(spark: SparkSession, warehouse: str | Path) -> tuple[int | None, int | None]:
    """(retained-from offset, published commit point) of ``bounds``: what the SQL functions answer for; each
    None when not recorded (the whole log is held; nothing is committed)."""
    row = spark.sql(f"SELECT g.r, g.m FROM {bounds_relation(warehouse)}").first()
    assert row is not None  # an aggregate without GROUP BY: one row
    return (None if row["r"] < 0 else int(row["r"])), (None if row["m"] is None else int(row["m"]))


def _bounds_rows(
    committed: int | None, retained: int | None, gap: tuple[int, int] | None = None
) -> list[dict[str, Any]]:
    return [
        {
            "committed_to": committed,
            "retained_from": retained,
            "recorded_at_ms": int(time.time() * 1000),
            "gap_from": None if gap is None else gap[0],
            "gap_to": None if gap is None else gap[1],
        }
    ]


def _append_bounds(
    spark: SparkSession,
    warehouse: str | Path,
    committed: int | None,
    retained: int | None,
    gap: tuple[int, int] | None = None,
) -> None:
    rows = _bounds_rows(committed, retained, gap)
    arrow_frame(spark, BOUNDS, rows).write.format("delta").mode("append").save(table_path(warehouse, BOUNDS))


def ensure_bounds(spark: SparkSession, warehouse: str | Path) -> None:
    """Create ``bounds`` in a warehouse that has none, and fill it there from what the SQL functions read before
    it existed: the commit point (the highest offset in ``offsets``) and the ``retention`` table's retained-from
    offset. Two file lookups once done."""
    if not Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        return
    if not create_table(spark, warehouse, BOUNDS):
        add_missing_columns(spark, warehouse, BOUNDS)  # made before gaps were recorded: gap_from, gap_to
    if not never_written(warehouse, BOUNDS):
        return
    committed = last_offset(spark, warehouse)
    retained = None
    if not never_written(warehouse, RETENTION):
        row = spark.sql(f"SELECT max(retained_from) AS r FROM {table_ref(warehouse, RETENTION)}").first()
        retained = None if row is None or row["r"] is None else int(row["r"])
    if committed >= 0 or retained is not None:
        # a concurrent writer's publish may land first: bounds are read as maxima, so both rows stand
        _append_bounds(spark, warehouse, committed if committed >= 0 else None, retained)


def publish_commit_point(spark: SparkSession, warehouse: str | Path, offset: int) -> None:
    """Make the states up to ``offset`` answerable by the SQL functions: append it to ``bounds`` once it is
    committed (``offsets`` written), skipped when already published (``txnVersion`` = ``offset``).

    The functions read it there rather than as ``max(offset)`` of ``offsets`` because one small table answers
    both of their bounds in one scan. It trails the commit point by one small append; a writer killed between
    the two publishes it when it starts again (:func:`resume_point`), and until then the functions refuse the
    offsets above it as past the commit point.
    """
    append_rows(spark, warehouse, BOUNDS, _bounds_rows(int(offset), None), int(offset))


def resume_point(spark: SparkSession, warehouse: str | Path) -> int:
    """The commit point a writer resumes after (:func:`last_offset`), published to the SQL functions first: a
    writer killed between a commit and its publication left them behind it."""
    done = last_offset(spark, warehouse)
    if done >= 0:
        retry_conflicts(lambda: publish_commit_point(spark, warehouse, done))
    return done


def retained_from(spark: SparkSession, warehouse: str | Path) -> int | None:
    """The offset from which the history tables hold every state, None when they hold all of the log's.

    Recorded (in ``bounds``) by ``compact`` when retention deletes the history below a snapshot S (versions that
    ended at or before S go, so a state below S would come back as a part of itself), and when a warehouse is
    seeded from a snapshot (a log that does not start at 0: the history starts there). Only ever raised.
    """
    return bounds_of(spark, warehouse)[0]


def record_retained_from(spark: SparkSession, warehouse: str | Path, offset: int) -> bool:
    """Record that the history tables hold the states from ``offset`` on (before deleting anything below it).

    An append (no conflict with the stream's writes or compaction's deletes), made only when ``offset`` is above
    what is recorded. Returns whether it was appended.
    """
    current = retained_from(spark, warehouse)
    if current is not None and current >= offset:
        return False
    _append_bounds(spark, warehouse, None, int(offset))
    return True


def record_gap(spark: SparkSession, warehouse: str | Path, first: int, last: int) -> bool:
    """Record that no state is known at offsets ``first..last`` (inclusive): the log ingested skips records there
    and goes on from a snapshot (:meth:`kraftlake.history.HistoryBuilder.feed`'s ``on_gap``); the SQL functions
    refuse those offsets (:func:`offset_guard`). Appended once (before the commit point of the slice that
    crossed it); returns whether it was. ``first`` = ``last + 1`` records a hole of the snapshot's offset alone
    (no offset without a state, but ``offsets`` lacks one: what ``validate`` checks)."""
    if (first, last) in gaps_of(spark, warehouse):
        return False
    _append_bounds(spark, warehouse, None, None, (int(first), int(last)))
    return True


def gaps_of(spark: SparkSession, warehouse: str | Path) -> list[tuple[int, int]]:
    """The recorded gaps (:func:`record_gap`), oldest first: ``(first, last)`` offsets without a known state."""
    rows = spark.sql(
        f"SELECT DISTINCT gap_from, gap_to FROM {table_ref(warehouse, BOUNDS)} WHERE gap_from IS NOT NULL"
    ).collect()
    return sorted((int(r["gap_from"]), int(r["gap_to"])) for r in rows)


def pending_closes(spark: SparkSession, warehouse: str | Path) -> int:
    """How many closes wait in ``closes`` to be folded."""
    if never_written(warehouse, CLOSES):
        return 0
    row = spark.sql(f"SELECT count(*) AS n FROM {table_ref(warehouse, CLOSES)}").first()
    return 0 if row is None else int(row["n"])


def fold_closes(
    spark: SparkSession, warehouse: str | Path, retry: Callable[[Callable[[], Any]], Any] | None = None
) -> int:
    """Write the pending closes into the history tables' ``to_offset`` and empty ``closes`` of them.

    Per table with pending closes, one commit sets the ``to_offset`` of each still-open version a close ends
    (the first close of its key after its ``from_offset``); then one commit removes the closes folded. Readers
    see the same answers before, during and after (a version ended in the table and by a pending close ends at
    the same offset), and each step is idempotent: a fold cut short is completed by the next one. Returns the
    closes folded. ``retry`` runs the fold (default :func:`retry_conflicts`).

    kraftlake commits the fold itself (:func:`_fold_here`: the files holding a version to end rewritten,
    no Spark job); through Spark (a MERGE per table, a DELETE) when a table needs more of a writer.
    """
    retry = retry or retry_conflicts
    if never_written(warehouse, CLOSES):
        return 0
    try:
        return int(retry(partial(_fold_here, spark, warehouse)))
    except delta_append.Unsupported as exc:
        _log.info("folding the pending closes through Spark: %s", exc)
        return _fold_with_spark(spark, warehouse, retry)


def _fold_here(spark: SparkSession, warehouse: str | Path) -> int:
    """:func:`fold_closes` committed by kraftlake (:mod:`kraftlake.spark.delta_rewrite`): the closes read from
    their files, per history table the files holding an open version a close ends rewritten with its
    ``to_offset`` (one commit per table), then the folded closes' files removed (one commit)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    closes_snap = delta_rewrite.snapshot(table_path(warehouse, CLOSES))
    files = list(closes_snap.files.values())
    parts = [delta_rewrite.read_file(closes_snap, f, ["entity", "key", "to_offset"]) for f in files]
    closes = pa.concat_tables(parts) if parts else None
    if closes is None or closes.num_rows == 0:
        return 0
    for table in sorted(pc.unique(closes.column("entity")).to_pylist()):
        mine = closes.filter(pc.equal(closes.column("entity"), table))
        _fold_table_here(spark, warehouse, table, mine.select(["key", "to_offset"]))
    # every row of these files is folded now (the closes appended since are in files of later versions)
    _replace(spark, closes_snap, files, [], "DELETE", "folded")
    return int(closes.num_rows)


def _engine(spark: SparkSession) -> str:
    """The ``engineInfo`` of the commits kraftlake writes."""
    return f"kraftlake Apache-Spark/{spark.version}"


def _replace(
    spark: SparkSession,
    snap: Any,
    removed: list[dict[str, Any]],
    added: list[Any],
    operation: str,
    predicate: str,
) -> None:
    """:func:`kraftlake.spark.delta_rewrite.replace`, with Delta's checkpoint when the version is due one."""
    done = delta_rewrite.replace(
        snap,
        removed,
        added,
        operation=operation,
        parameters={"predicate": predicate},
        engine_info=_engine(spark),
    )
    if done.checkpoint_due:
        _checkpoint_later(spark, str(snap.path))


def _fold_table_here(spark: SparkSession, warehouse: str | Path, table: str, closes: Any) -> None:
    """Set the ``to_offset`` of the open versions of ``table`` that a pending close (``closes``: ``key``,
    ``to_offset``) ends: the first close of the version's key after its ``from_offset``. Only the files
    holding such a version are rewritten; the matching is Arrow's (a join on the key, the minimum per row)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    path = table_path(warehouse, table)
    snap = delta_rewrite.snapshot(path)
    key = ENTITIES[table].key
    ends = closes.rename_columns(["key", "end"])
    removed: list[dict[str, Any]] = []
    added: list[Any] = []
    for add in snap.files.values():
        stats = delta_rewrite.stats_of(add)
        if stats is not None and (stats.get("nullCount") or {}).get("to_offset") == 0:
            continue  # every version of the file is closed
        rows = delta_rewrite.read_file(snap, add)
        to = rows.column("to_offset")
        open_ = pc.is_null(to)
        at = pc.indices_nonzero(open_)
        if not len(at):
            continue
        opened = rows.select([*key, "from_offset"]).take(at)
        versions = pa.table(
            {
                "key": _close_keys(opened, key),
                "from": opened.column("from_offset"),
                "row": at.cast(pa.int64()),
            }
        )
        matched = versions.join(ends, "key", join_type="inner")
        matched = matched.filter(pc.greater(matched.column("end"), matched.column("from")))
        if not matched.num_rows:
            continue
        first = matched.group_by("row").aggregate([("end", "min")])
        values = np.asarray(to.fill_null(0).to_numpy(), dtype=np.int64).copy()
        missing = np.asarray(open_.to_numpy(zero_copy_only=False)).copy()
        where = first.column("row").to_numpy()
        values[where] = first.column("end_min").to_numpy()
        missing[where] = False
        index = rows.schema.get_field_index("to_offset")
        new_to = pa.array(values, type=to.type, mask=missing)
        removed.append(add)
        added.append(rows.set_column(index, rows.schema.field(index), new_to))
    if removed:
        _replace(spark, snap, removed, added, "MERGE", "pending closes")


def _close_keys(rows: Any, key: tuple[str, ...]) -> Any:
    """:func:`close_key` of every row of a ``pyarrow.Table`` (integers and strings cast as Spark casts them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not key:
        return pa.array([""] * rows.num_rows, pa.string())
    cols = [pc.cast(rows.column(k), pa.string()) for k in key]
    return cols[0] if len(cols) == 1 else pc.binary_join_element_wise(*cols, KEY_SEP)


def _fold_with_spark(
    spark: SparkSession, warehouse: str | Path, retry: Callable[[Callable[[], Any]], Any]
) -> int:
    """:func:`fold_closes` through Spark: a MERGE per history table, then a DELETE of the folded closes."""
    by_table = spark.sql(
        f"SELECT entity, count(*) AS n, max(to_offset) AS m FROM {table_ref(warehouse, CLOSES)} "
        "GROUP BY entity"
    ).collect()
    if not by_table:
        return 0
    # a bound, so that closes a concurrent slice appends meanwhile stay pending (not deleted unfolded)
    upto = max(int(r["m"]) for r in by_table)
    tables = [r["entity"] for r in by_table]

    def merge(table: str) -> None:
        key = ENTITIES[table].key
        keys = ", ".join(f"m.`{k}`" for k in key)
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key) or "TRUE"
        source = (
            f"SELECT {keys + ', ' if keys else ''}m.from_offset, "
            f"array_min(filter(c.tos, x -> x > m.from_offset)) AS to_offset "
            f"FROM {table_ref(warehouse, table)} m JOIN ({_pending(warehouse, table, str(upto))}) c "
            f"ON m.to_offset IS NULL AND {key_sql(table, 'm')} = c.key"
        )
        spark.sql(f"""
            MERGE INTO {table_ref(warehouse, table)} t USING ({source}) s
            ON s.to_offset IS NOT NULL AND t.to_offset IS NULL AND t.from_offset = s.from_offset AND {on}
            WHEN MATCHED THEN UPDATE SET t.to_offset = s.to_offset""")

    # the tables are independent: their MERGEs run side by side, as a slice's appends do
    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="kraftlake-fold") as pool:
        for f in [pool.submit(retry, partial(merge, t)) for t in tables]:
            f.result()
    retry(lambda: spark.sql(f"DELETE FROM {table_ref(warehouse, CLOSES)} WHERE to_offset <= {upto}"))
    return sum(int(r["n"]) for r in by_table)


def max_from_offsets(spark: SparkSession, warehouse: str | Path) -> dict[str, int]:
    """The highest ``from_offset`` of every history table (-1 when empty), in one Spark action."""
    parts = [
        f"SELECT '{t}' AS t, max(from_offset) AS m FROM {table_ref(warehouse, t)}" for t in HISTORY_TABLES
    ]
    rows = spark.sql(" UNION ALL ".join(parts)).collect()
    return {r["t"]: -1 if r["m"] is None else int(r["m"]) for r in rows}


def write_offsets(spark: SparkSession, warehouse: str | Path, batch: HistoryBatch) -> None:
    rows = [{"offset": o, "epoch": e, "timestamp": t} for o, e, t in batch.offsets]
    if rows:
        append_rows(spark, warehouse, OFFSETS, rows, batch.last_offset)


def has_snapshot(spark: SparkSession, warehouse: str | Path, offset: int) -> bool:
    """Whether the snapshot at ``offset`` is stored."""
    row = spark.sql(
        f"SELECT count(*) AS n FROM {table_ref(warehouse, SNAPSHOTS)} WHERE snapshot_offset = {int(offset)}"
    ).first()
    return row is not None and row["n"] > 0


def write_snapshot(spark: SparkSession, warehouse: str | Path, image: Any, *, seeds: bool = True) -> int:
    """Store a full image as its snapshot records at its offset (idempotent on the offset). Returns rows.

    On a warehouse with no committed offset yet the snapshot is its starting point: its offset is recorded as
    the retained-from offset (:func:`record_retained_from`), unless ``seeds`` is false (a snapshot past a gap
    that a slice crosses, the log before it ingested by that slice).
    """
    from kraftlake.image import snapshot_records
    from kraftlake.records import encode_metadata_record

    prov = image.provenance
    if seeds and last_offset(spark, warehouse) < 0:
        # a snapshot stored before any offset is committed seeds the warehouse: its history starts there
        record_retained_from(spark, warehouse, prov.offset)
    if has_snapshot(spark, warehouse, prov.offset):
        return 0
    rows = [
        {
            "snapshot_offset": prov.offset,
            "epoch": prov.epoch,
            "timestamp": prov.timestamp,
            "seq": i,
            "type": type(rec).__name__,
            "version": version,
            "raw": encode_metadata_record(rec, version),
        }
        for i, (rec, version) in enumerate(snapshot_records(image))
    ]
    df = arrow_frame(spark, SNAPSHOTS, rows)
    df.write.format("delta").mode("append").save(table_path(warehouse, SNAPSHOTS))
    return len(rows)


def conflict_errors() -> tuple[type[BaseException], ...]:
    """Delta's commit-conflict exceptions, and kraftlake's own appends' (a concurrent writer won; the write may
    simply be tried again)."""
    import delta.exceptions as dx

    names = (
        "DeltaConcurrentModificationException",
        "ConcurrentWriteException",
        "MetadataChangedException",
        "ProtocolChangedException",
        "ConcurrentAppendException",
        "ConcurrentDeleteReadException",
        "ConcurrentDeleteDeleteException",
        "ConcurrentTransactionException",
    )
    return (*(getattr(dx, n) for n in names if hasattr(dx, n)), delta_append.CommitConflict)


def retry_conflicts(
    fn: Callable[[], R],
    attempts: int = 8,
    backoff_s: float = 0.5,
    max_backoff_s: float = 8.0,
    on_retry: Callable[[int], object] | None = None,
) -> R:
    """``fn()``, tried again with backoff when it loses a Delta commit conflict (e.g. to a scheduled compaction's
    DELETE or OPTIMIZE, or a compaction step to the stream's appends). Only for idempotent writes: a txn-id
    append or MERGE that did commit is skipped. ``on_retry(attempt)`` is called before each new try."""
    errors = conflict_errors()
    for attempt in range(attempts):
        try:
            return fn()
        except errors:
            if attempt == attempts - 1:
                raise
            if on_retry is not None:
                on_retry(attempt)
            time.sleep(min(max_backoff_s, backoff_s * (2**attempt)))
    raise AssertionError("unreachable")


def last_offset(spark: SparkSession, warehouse: str | Path, table: str = OFFSETS) -> int:
    """The commit point: the highest offset in ``offsets`` (-1 when empty); of ``metadata_log`` with ``table``
    = LOG (past the commit point when a run was killed between the two)."""
    if never_written(warehouse, table):
        return -1
    row = spark.sql(f"SELECT max(offset) AS m FROM {table_ref(warehouse, table)}").first()
    return -1 if row is None or row["m"] is None else int(row["m"])
