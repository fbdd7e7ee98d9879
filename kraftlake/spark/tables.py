"""The warehouse: Delta tables by offset (DESIGN.md section 4) and their idempotent writes.

Every table lives at ``<warehouse>/<name>``. Writes of a slice of the log ending at offset ``L`` carry the Delta
transaction id ``(txnAppId=kraftlake, txnVersion=L)``: Delta skips a write whose version is not above the one it
recorded for the table, so replaying a slice after a crash never duplicates rows. ``offsets`` is written last
in every slice: its highest offset is the pipeline's commit point.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from kraftlake.errors import KraftlakeError
from kraftlake.spark.history import ENTITIES, HistoryBatch
from kraftlake.spark.structs import metadata_log_struct_type

APP_ID = "kraftlake"
LOG = "metadata_log"
SNAPSHOTS = "snapshots"
OFFSETS = "offsets"
SNAPSHOTS_DDL = ("snapshot_offset BIGINT NOT NULL, epoch INT, timestamp BIGINT, seq INT NOT NULL, type STRING, "
                 "version INT, raw BINARY")
OFFSETS_DDL = "offset BIGINT NOT NULL, epoch INT NOT NULL, timestamp BIGINT NOT NULL"
HISTORY_TABLES = tuple(ENTITIES)
R = TypeVar("R")
LOG_STATS_COLUMNS = "offset,epoch,timestamp,batch_offset,type,api_key"


class WarehouseError(KraftlakeError):
    """Raised when the warehouse cannot answer: missing tables, or an offset outside the retained history."""


def table_path(warehouse: str | Path, name: str) -> str:
    return str(Path(warehouse).resolve() / name)


def table_ref(warehouse: str | Path, name: str) -> str:
    """The SQL name of a warehouse table: ``delta.`/abs/path```."""
    return f"delta.`{table_path(warehouse, name)}`"


def table_ddl(name: str) -> str:
    if name in ENTITIES:
        return ENTITIES[name].ddl()
    if name == SNAPSHOTS:
        return SNAPSHOTS_DDL
    if name == OFFSETS:
        return OFFSETS_DDL
    raise KeyError(name)


#: Tables whose rows a slice updates in place (closes): deletion vectors let MERGE mark the old row instead of
#: rewriting every file it touches.
_DV = "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
_ENSURED: set[str] = set()


def ensure_tables(spark: SparkSession, warehouse: str | Path) -> None:
    """Create the tables that do not exist yet (empty, with their schemas); checked once per process."""
    from delta.tables import DeltaTable

    root = str(Path(warehouse).resolve())
    if root in _ENSURED and Path(table_path(warehouse, OFFSETS), "_delta_log").is_dir():
        return
    Path(warehouse).mkdir(parents=True, exist_ok=True)

    def create_log() -> None:
        log_path = table_path(warehouse, LOG)
        if not DeltaTable.isDeltaTable(spark, log_path):
            # file statistics only on the envelope: by default Delta collects them for the first 32 leaf columns,
            # deep inside the record structs, which no query prunes on and which halves the append speed
            (DeltaTable.createIfNotExists(spark).location(log_path).addColumns(log_table_schema())
             .clusterBy("offset").property("delta.enableDeletionVectors", "true")
             .property("delta.dataSkippingStatsColumns", LOG_STATS_COLUMNS).execute())

    def create(name: str) -> None:
        path = table_path(warehouse, name)
        if not DeltaTable.isDeltaTable(spark, path):
            # a version is found by the interval [from_offset, to_offset): cluster on both ends for data skipping
            cluster = ("snapshot_offset" if name == SNAPSHOTS else "offset" if name == OFFSETS
                       else "from_offset, to_offset")
            props = f" {_DV}" if name in ENTITIES else ""
            spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({table_ddl(name)}) USING DELTA "
                      f"CLUSTER BY ({cluster}){props}")

    # each creation is a Delta commit that mostly waits on the driver: four at a time take a third of the time
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="kraftlake-create") as pool:
        futures = [pool.submit(create_log), *(pool.submit(create, n) for n in (*HISTORY_TABLES, SNAPSHOTS, OFFSETS))]
        for f in futures:
            f.result()
    _ENSURED.add(root)


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
    return T.StructType([T.StructField(f.name, _stored(f.dataType), f.nullable)
                         for f in metadata_log_struct_type().fields])


def to_stored_log(df: DataFrame) -> DataFrame:
    """``metadata_log`` rows (as the source yields them) in the stored layout (see :data:`PRESENT`)."""
    from pyspark.sql import functions as F

    cols = []
    for f in df.schema.fields:
        if isinstance(f.dataType, T.StructType) and not f.dataType.fields:
            cols.append(F.when(F.col(f.name).isNotNull(), F.struct(F.lit(True).alias("present")))
                        .alias(f.name))
        else:
            cols.append(F.col(f.name))
    return df.select(*cols)


def schema_of(spark: SparkSession, name: str) -> T.StructType:
    schema = T._parse_datatype_string(table_ddl(name))
    assert isinstance(schema, T.StructType)
    return schema


def _arrow_frame(spark: SparkSession, schema: T.StructType, rows: list[dict[str, Any]],
                 given: dict[str, list[Any]] | None = None) -> DataFrame:
    """``rows`` (dicts by column name) as a DataFrame of ``schema``, through Arrow built column by column;
    ``given``: columns whose values come as lists instead of from the rows."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    given = given or {}
    arrays = [pa.array(given[f.name] if f.name in given else [r.get(f.name) for r in rows], type=f.type)
              for f in arrow_schema]
    return spark.createDataFrame(pa.Table.from_arrays(arrays, schema=arrow_schema), schema=schema)


def arrow_frame(spark: SparkSession, name: str, rows: list[dict[str, Any]]) -> DataFrame:
    """Rows of a table as a DataFrame, through Arrow (no per-row Python conversion in Spark)."""
    return _arrow_frame(spark, schema_of(spark, name), rows)


def append(df: DataFrame, warehouse: str | Path, name: str, txn_version: int) -> None:
    """Append ``df`` to a table once: a second append with the same or a lower ``txn_version`` is skipped."""
    (df.write.format("delta").mode("append").option("txnAppId", APP_ID).option("txnVersion", txn_version)
     .save(table_path(warehouse, name)))


@contextmanager
def delta_txn(spark: SparkSession, txn_version: int) -> Iterator[None]:
    """Session-level Delta transaction id for MERGE/UPDATE/DELETE (the writer options do not reach them).

    Also lets the history MERGEs skip materializing their source (local Arrow data, deterministic). The conf is
    the session's: writes running in threads share one ``delta_txn`` opened around all of them.
    """
    conf = {"spark.databricks.delta.write.txnAppId": APP_ID,
            "spark.databricks.delta.write.txnVersion": str(txn_version),
            "spark.databricks.delta.merge.materializeSource": "none"}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k in conf:
            spark.conf.unset(k)


#: The marker column of a MERGE source row that ends an open version (the other rows are new versions).
_CLOSE = "_kraftlake_close"
#: History tables of one slice written at once.
WRITE_THREADS = 4


def _merge_source(spark: SparkSession, table: str, versions: list[dict[str, Any]],
                  closes: list[dict[str, Any]]) -> DataFrame:
    """New versions and closes as one source: every table column nullable, plus the :data:`_CLOSE` marker."""
    schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in schema_of(spark, table).fields]
                          + [T.StructField(_CLOSE, T.BooleanType(), False)])
    return _arrow_frame(spark, schema, [*versions, *closes],
                        {_CLOSE: [False] * len(versions) + [True] * len(closes)})


def _write_table(spark: SparkSession, warehouse: str | Path, table: str, batch: HistoryBatch) -> None:
    """One slice into one history table in one Delta commit: end the versions it closes, add its new ones.

    A slice with closes is one MERGE (a close matches only the version of its key that is still open and began
    before the close; new versions never match and are inserted); a slice without closes is a plain append.
    Both carry ``txnVersion`` = the slice's last offset (the MERGE through :func:`delta_txn`, held by the
    caller), so a replayed slice is skipped as a whole, and the table never shows a slice's closes without its
    versions. The ``to_offset IS NULL`` and ``from_offset`` bounds let Delta skip files holding only closed or
    later versions.
    """
    closes = batch.closes.get(table, [])
    versions = batch.versions.get(table, [])
    if not closes:
        if versions:
            append(arrow_frame(spark, table, versions), warehouse, table, batch.last_offset)
        return
    ent = ENTITIES[table]
    view = f"_kraftlake_merge_{table}"
    _merge_source(spark, table, versions, closes).createOrReplaceTempView(view)
    bound = max(c["to_offset"] for c in closes)
    key = " AND ".join(f"t.`{k}` = s.`{k}`" for k in ent.key) or "TRUE"
    cols = [*ent.names, "from_offset", "to_offset"]
    spark.sql(f"""
        MERGE INTO {table_ref(warehouse, table)} t USING {view} s
        ON s.{_CLOSE} AND t.to_offset IS NULL AND t.from_offset < {int(bound)} AND {key}
           AND t.from_offset < s.to_offset
        WHEN MATCHED THEN UPDATE SET t.to_offset = s.to_offset
        WHEN NOT MATCHED AND NOT s.{_CLOSE} THEN
          INSERT ({", ".join(f"`{c}`" for c in cols)}) VALUES ({", ".join(f"s.`{c}`" for c in cols)})
    """)
    spark.catalog.dropTempView(view)


def write_history(spark: SparkSession, warehouse: str | Path, batch: HistoryBatch) -> None:
    """Every history table ``batch`` touches, side by side under one :func:`delta_txn` (a Delta commit mostly
    waits on the driver, and the tables are independent), each write retried if it loses a commit conflict
    (to a running compaction): each is idempotent on its own."""
    tables = batch.tables()
    if not tables:
        return
    with delta_txn(spark, batch.last_offset), \
            ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="kraftlake-history") as pool:
        futures = [pool.submit(retry_conflicts, partial(_write_table, spark, warehouse, t, batch)) for t in tables]
        for f in futures:
            f.result()


def max_from_offsets(spark: SparkSession, warehouse: str | Path) -> dict[str, int]:
    """The highest ``from_offset`` of every history table (-1 when empty), in one Spark action."""
    parts = [f"SELECT '{t}' AS t, max(from_offset) AS m FROM {table_ref(warehouse, t)}" for t in HISTORY_TABLES]
    rows = spark.sql(" UNION ALL ".join(parts)).collect()
    return {r["t"]: -1 if r["m"] is None else int(r["m"]) for r in rows}


def write_offsets(spark: SparkSession, warehouse: str | Path, batch: HistoryBatch) -> None:
    rows = [{"offset": o, "epoch": e, "timestamp": t} for o, e, t in batch.offsets]
    if rows:
        append(arrow_frame(spark, OFFSETS, rows), warehouse, OFFSETS, batch.last_offset)


def write_snapshot(spark: SparkSession, warehouse: str | Path, image: Any) -> int:
    """Store a full image as its snapshot records at its offset (idempotent on the offset). Returns rows."""
    from kraftlake.image import snapshot_records
    from kraftlake.records import encode_metadata_record

    prov = image.provenance
    existing = spark.sql(
        f"SELECT count(*) AS n FROM {table_ref(warehouse, SNAPSHOTS)} WHERE snapshot_offset = {prov.offset}"
    ).first()
    if existing is not None and existing["n"] > 0:
        return 0
    rows = [{"snapshot_offset": prov.offset, "epoch": prov.epoch, "timestamp": prov.timestamp, "seq": i,
             "type": type(rec).__name__, "version": version, "raw": encode_metadata_record(rec, version)}
            for i, (rec, version) in enumerate(snapshot_records(image))]
    df = arrow_frame(spark, SNAPSHOTS, rows)
    df.write.format("delta").mode("append").save(table_path(warehouse, SNAPSHOTS))
    return len(rows)


def conflict_errors() -> tuple[type[BaseException], ...]:
    """Delta's commit-conflict exceptions (a concurrent writer won; the write may simply be tried again)."""
    import delta.exceptions as dx

    names = ("DeltaConcurrentModificationException", "ConcurrentWriteException", "MetadataChangedException",
             "ProtocolChangedException", "ConcurrentAppendException", "ConcurrentDeleteReadException",
             "ConcurrentDeleteDeleteException", "ConcurrentTransactionException")
    return tuple(getattr(dx, n) for n in names if hasattr(dx, n))


def retry_conflicts(fn: Callable[[], R], attempts: int = 8, backoff_s: float = 0.5, max_backoff_s: float = 8.0,
                    on_retry: Callable[[int], object] | None = None) -> R:
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
            time.sleep(min(max_backoff_s, backoff_s * (2 ** attempt)))
    raise AssertionError("unreachable")


def last_offset(spark: SparkSession, warehouse: str | Path) -> int:
    """The commit point: the highest offset in ``offsets`` (-1 when empty)."""
    row = spark.sql(f"SELECT max(offset) AS m FROM {table_ref(warehouse, OFFSETS)}").first()
    return -1 if row is None or row["m"] is None else int(row["m"])
