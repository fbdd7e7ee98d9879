"""The record-level rules: SQL predicates a single ``metadata_log`` row must satisfy (:data:`RECORD_RULES`), and
the quarantine where the stream sets aside the rows that fail them.

:func:`validate_records` splits a micro-batch into good rows and bad rows (with the failed rules as the
reason); :func:`quarantine` appends the bad ones to the ``quarantine`` Delta table. The warehouse's
``metadata_log`` suite (:mod:`kraftlake.spark.validate`) checks the same predicates.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kraftlake.spark.tables.creation import add_cluster_column
from kraftlake.spark.tables.layout import CLUSTER, QUARANTINE, table_ref

#: (check name, SQL predicate true for a valid ``metadata_log`` row). Array fields absent from a change record
#: are NULL, and ``PartitionChangeRecord.leader`` is -2 for "no change", so the change-record rules apply only
#: to what the record sets.
RECORD_RULES: tuple[tuple[str, str], ...] = (
    ("record_offset_valid", "offset IS NOT NULL AND offset >= 0"),
    ("record_epoch_valid", "epoch IS NOT NULL AND epoch >= 0"),
    ("record_type_known", "type IS NOT NULL AND type <> ''"),
    ("record_batch_offset_valid", "batch_offset IS NOT NULL AND batch_offset <= offset"),
    (
        "record_partition_isr_subset_of_replicas",
        "partition_record IS NULL OR size(array_except(partition_record.isr, partition_record.replicas)) = 0",
    ),
    (
        "record_partition_leader_in_isr_or_none",
        "partition_record IS NULL OR partition_record.leader = -1 "
        "OR array_contains(partition_record.isr, partition_record.leader)",
    ),
    (
        "record_partition_change_isr_subset_of_replicas",
        "partition_change_record IS NULL OR partition_change_record.isr IS NULL "
        "OR partition_change_record.replicas IS NULL "
        "OR size(array_except(partition_change_record.isr, partition_change_record.replicas)) = 0",
    ),
    (
        "record_partition_change_leader_in_isr",
        "partition_change_record IS NULL OR partition_change_record.isr IS NULL "
        "OR partition_change_record.leader IN (-1, -2) "
        "OR array_contains(partition_change_record.isr, partition_change_record.leader)",
    ),
    (
        "record_broker_epoch_valid",
        "register_broker_record IS NULL OR register_broker_record.broker_epoch >= 0",
    ),
)

QUARANTINE_DDL = (
    "cluster STRING, offset BIGINT, epoch INT, timestamp BIGINT, type STRING, raw BINARY, "
    "reasons ARRAY<STRING>, reason STRING, quarantined_at TIMESTAMP"
)


def _rules_for(columns: Iterable[str]) -> list[tuple[str, str]]:
    """The rules whose columns are among ``columns`` (a rule over a record type the frame lacks cannot fail)."""
    cols = set(columns)
    out = []
    for name, expr in RECORD_RULES:
        needed = {
            c for c in ("partition_record", "partition_change_record", "register_broker_record") if c in expr
        }
        if needed <= cols:
            out.append((name, expr))
    return out


def reasons_sql(columns: Iterable[str]) -> str:
    """The SQL of an ``ARRAY<STRING>`` of the rules a row of a frame with ``columns`` fails (empty when valid);
    a NULL predicate counts as a failure. One expression: a Column built per rule is several py4j round trips
    each, which a fleet's micro-batches pay under one GIL."""
    rules = _rules_for(columns)
    if not rules:
        return "CAST(array() AS ARRAY<STRING>)"
    failed = ", ".join(f"CASE WHEN NOT coalesce(({expr}), false) THEN '{name}' END" for name, expr in rules)
    return f"filter(array({failed}), x -> x IS NOT NULL)"


def _reasons(df: DataFrame) -> Column:
    return F.expr(reasons_sql(df.columns))


#: The column of the rules a row fails, beside the rows :func:`reasons_sql` checks.
REASONS = "_reasons"


def validate_records(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Split ``metadata_log`` rows into ``(good, bad)``: ``bad`` has ``reasons`` and ``reason`` columns.

    Both are lazy filters of one projection; callers writing both should ``persist`` ``df`` first.
    """
    checked = df.withColumn("_reasons", _reasons(df))
    good = checked.filter(F.size("_reasons") == 0).drop("_reasons")
    bad = (
        checked.filter(F.size("_reasons") > 0)
        .withColumnRenamed("_reasons", "reasons")
        .withColumn("reason", F.array_join("reasons", "; "))
    )
    return good, bad


def ensure_quarantine(spark: SparkSession, warehouse: str | Path, cluster: str) -> None:
    """Create ``quarantine``; one made before it held clusters (its rows are of the warehouse's one cluster,
    the one writing now) gains the ``cluster`` column, filled."""
    ref = table_ref(warehouse, QUARANTINE)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {ref} ({QUARANTINE_DDL}) USING DELTA")
    add_cluster_column(spark, warehouse, QUARANTINE, cluster)


def quarantine(spark: SparkSession, warehouse: str | Path, bad: DataFrame, cluster: str) -> int:
    """Add ``bad`` rows (from :func:`validate_records`) of ``cluster`` to ``quarantine``; returns how many were
    new.

    Idempotent by content (a MERGE on the cluster and the offset), so a micro-batch replayed after a crash, even
    cut differently, adds nothing twice, and another cluster's row at the same offset is another row; a batch
    without bad rows writes nothing.
    """
    rows = bad.select(
        F.lit(cluster).alias(CLUSTER),
        "offset",
        "epoch",
        "timestamp",
        "type",
        "raw",
        "reasons",
        "reason",
        F.current_timestamp().alias("quarantined_at"),
    ).persist()
    try:
        if rows.isEmpty():
            return 0
        ensure_quarantine(spark, warehouse, cluster)
        view = "_kraftlake_quarantine"
        # the view lives in the rows' own session (a foreachBatch frame's session is the query's clone)
        session = rows.sparkSession
        rows.createOrReplaceTempView(view)
        out = session.sql(
            f"MERGE INTO {table_ref(warehouse, QUARANTINE)} t USING {view} s "
            f"ON t.{CLUSTER} = s.{CLUSTER} AND t.offset = s.offset WHEN NOT MATCHED THEN INSERT *"
        ).first()
        session.catalog.dropTempView(view)
        return int(out["num_inserted_rows"]) if out is not None else 0
    finally:
        rows.unpersist()
