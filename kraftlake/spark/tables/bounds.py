"""What the SQL functions answer for: the commit point (``offsets``, published to ``bounds``), the retained-from
offset, the gaps of the log, and the snapshots stored at offsets.

Rows are only ever appended to ``bounds``: a row holds a published commit point (``committed_to``), a
retained-from offset or a gap (``gap_from``, ``gap_to``). Readers take the maxima, and the first and the last gap,
of one cluster's rows in one scan that Delta's file statistics answer
(:func:`kraftlake.spark.tables.queries.bounds_relation`). So a log with three holes or more has the ones between
its first and its last unguarded. The commit point is
published after ``offsets`` is written: a writer killed between the two leaves the functions behind until it
starts again and publishes it (:func:`pipelines.commit.resume_point`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from kraftlake.delta.append import Unsupported
from kraftlake.delta.scan import Bound, arrow_schema, read_rows, table_snapshot
from kraftlake.history import HistoryBatch
from kraftlake.spark.tables.layout import (
    BOUNDS,
    CLUSTER,
    HISTORY_TABLES,
    OFFSETS,
    SNAPSHOTS,
    arrow_frame,
    never_written,
    table_path,
    table_ref,
)
from kraftlake.spark.tables.queries import bounds_relation, cluster_sql
from kraftlake.spark.tables.writes import append_rows
from kraftlake.warehouse.cluster_ranges import column_ranges


def last_offset(spark: SparkSession, warehouse: str | Path, cluster: str, table: str = OFFSETS) -> int:
    """A cluster's commit point: its highest offset in ``offsets`` (-1 when none); of ``metadata_log`` with
    ``table`` = LOG (past the commit point when a run was killed between the two). Read as
    :func:`last_offsets` reads it."""
    return last_offsets(spark, warehouse, [cluster], table)[cluster]


def last_offsets(
    spark: SparkSession, warehouse: str | Path, clusters: Sequence[str], table: str = OFFSETS
) -> dict[str, int]:
    """:func:`last_offset` of each of ``clusters`` at once: from the table's Delta log (its files' statistics,
    :func:`kraftlake.warehouse.cluster_ranges.column_ranges`), through Spark when kraftlake's reader cannot
    read the table."""
    if never_written(warehouse, table):
        return {c: -1 for c in clusters}
    try:
        ranges = column_ranges(table_snapshot(table_path(warehouse, table)), "offset")
    except Unsupported:
        return {c: _last_offset_in_spark(spark, warehouse, c, table) for c in clusters}
    return {c: ranges[c][1] if c in ranges else -1 for c in clusters}


def _last_offset_in_spark(spark: SparkSession, warehouse: str | Path, cluster: str, table: str) -> int:
    row = spark.sql(
        f"SELECT max(offset) AS m FROM {table_ref(warehouse, table)} WHERE {CLUSTER} = {cluster_sql(cluster)}"
    ).first()
    return -1 if row is None or row["m"] is None else int(row["m"])


def bounds_of(spark: SparkSession, warehouse: str | Path, cluster: str) -> tuple[int | None, int | None]:
    """(retained-from offset, published commit point) of a cluster in ``bounds``: what the SQL functions answer
    for; each None when not recorded (the whole log is held; nothing is committed)."""
    row = spark.sql(f"SELECT g.r, g.m FROM {bounds_relation(warehouse, cluster_sql(cluster))}").first()
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


def append_bounds(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    committed: int | None,
    retained: int | None,
    gap: tuple[int, int] | None = None,
) -> None:
    rows = _bounds_rows(committed, retained, gap)
    arrow_frame(spark, BOUNDS, rows, cluster).write.format("delta").mode("append").save(
        table_path(warehouse, BOUNDS)
    )


def publish_commit_point(spark: SparkSession, warehouse: str | Path, cluster: str, offset: int) -> None:
    """Make the states of ``cluster`` up to ``offset`` answerable by the SQL functions: append it to ``bounds`` once it is
    committed (``offsets`` written), skipped when already published (``txnVersion`` = ``offset``).

    The functions read it there rather than as ``max(offset)`` of ``offsets`` because one small table answers
    both of their bounds in one scan. It trails the commit point by one small append; a writer killed between
    the two publishes it when it starts again (:func:`pipelines.commit.resume_point`), and until then the functions refuse the
    offsets above it as past the commit point.
    """
    append_rows(spark, warehouse, BOUNDS, _bounds_rows(int(offset), None), int(offset), cluster)


def retained_from(spark: SparkSession, warehouse: str | Path, cluster: str) -> int | None:
    """The offset from which the history tables hold every state of ``cluster``, None when they hold all of its
    log's.

    Recorded (in ``bounds``) by ``compact`` when retention deletes the history below a snapshot S (versions that
    ended at or before S go, so a state below S would come back as a part of itself), and when a warehouse is
    seeded from a snapshot (a log that does not start at 0: the history starts there). Only ever raised.
    """
    return bounds_of(spark, warehouse, cluster)[0]


def record_retained_from(spark: SparkSession, warehouse: str | Path, cluster: str, offset: int) -> bool:
    """Record that the history tables hold the states from ``offset`` on (before deleting anything below it).

    An append (no conflict with the stream's writes or compaction's deletes), made only when ``offset`` is above
    what is recorded. Returns whether it was appended.
    """
    current = retained_from(spark, warehouse, cluster)
    if current is not None and current >= offset:
        return False
    append_bounds(spark, warehouse, cluster, None, int(offset))
    return True


def record_gap(spark: SparkSession, warehouse: str | Path, cluster: str, first: int, last: int) -> bool:
    """Record that no state is known at offsets ``first..last`` (inclusive): the log ingested skips records there
    and goes on from a snapshot (:meth:`kraftlake.history.HistoryBuilder.feed`'s ``on_gap``); the SQL functions
    refuse those offsets (:func:`kraftlake.spark.tables.queries.offset_guard`). Appended once (before the commit point of the slice that
    crossed it); returns whether it was. ``first`` = ``last + 1`` records a hole of the snapshot's offset alone
    (no offset without a state, but ``offsets`` lacks one: what ``validate`` checks)."""
    if (first, last) in gaps_of(spark, warehouse, cluster):
        return False
    append_bounds(spark, warehouse, cluster, None, None, (int(first), int(last)))
    return True


def gaps_of(spark: SparkSession, warehouse: str | Path, cluster: str) -> list[tuple[int, int]]:
    """A cluster's recorded gaps (:func:`record_gap`), oldest first: ``(first, last)`` offsets without a known
    state."""
    rows = spark.sql(
        f"SELECT DISTINCT gap_from, gap_to FROM {table_ref(warehouse, BOUNDS)} "
        f"WHERE gap_from IS NOT NULL AND {CLUSTER} = {cluster_sql(cluster)}"
    ).collect()
    return sorted((int(r["gap_from"]), int(r["gap_to"])) for r in rows)


def max_from_offsets(spark: SparkSession, warehouse: str | Path, cluster: str) -> dict[str, int]:
    """A cluster's highest ``from_offset`` in every history table (-1 when none), in one Spark action."""
    of = f"{CLUSTER} = {cluster_sql(cluster)}"
    parts = [
        f"SELECT '{t}' AS t, max(from_offset) AS m FROM {table_ref(warehouse, t)} WHERE {of}"
        for t in HISTORY_TABLES
    ]
    rows = spark.sql(" UNION ALL ".join(parts)).collect()
    return {r["t"]: -1 if r["m"] is None else int(r["m"]) for r in rows}


def offsets_rows(batch: HistoryBatch) -> list[dict[str, Any]]:
    """A slice's ``offsets`` rows: one per offset it committed."""
    return [{"offset": o, "epoch": e, "timestamp": t} for o, e, t in batch.offsets]


def write_offsets(spark: SparkSession, warehouse: str | Path, batch: HistoryBatch, cluster: str) -> None:
    rows = offsets_rows(batch)
    if rows:
        append_rows(spark, warehouse, OFFSETS, rows, batch.last_offset, cluster)


def has_snapshot(spark: SparkSession, warehouse: str | Path, cluster: str, offset: int) -> bool:
    """Whether the snapshot of ``cluster`` at ``offset`` is stored."""
    held = rows_without_jvm(
        warehouse,
        SNAPSHOTS,
        (Bound(CLUSTER, "==", cluster), Bound("snapshot_offset", "==", int(offset))),
        ["snapshot_offset"],
    )
    if held is not None:
        return bool(held.num_rows > 0)
    row = spark.sql(
        f"SELECT count(*) AS n FROM {table_ref(warehouse, SNAPSHOTS)} "
        f"WHERE {CLUSTER} = {cluster_sql(cluster)} AND snapshot_offset = {int(offset)}"
    ).first()
    return row is not None and row["n"] > 0


def rows_without_jvm(
    warehouse: str | Path, table: str, bounds: tuple[Bound, ...], columns: list[str]
) -> pa.Table | None:
    """The live rows of ``table`` satisfying ``bounds`` read by kraftlake's Delta reader (a lookup costs
    milliseconds there, a second or more as a Spark query); None when that reader cannot read the table."""
    try:
        snap = table_snapshot(table_path(warehouse, table))
        return read_rows(snap, arrow_schema(snap), bounds, columns)
    except Unsupported:
        return None


def write_snapshot(
    spark: SparkSession, warehouse: str | Path, image: Any, cluster: str, *, seeds: bool = True
) -> int:
    """Store a full image of ``cluster`` as its snapshot records at its offset (idempotent on the offset).
    Returns rows.

    On a cluster with no committed offset yet the snapshot is its starting point: its offset is recorded as
    the retained-from offset (:func:`record_retained_from`), unless ``seeds`` is false (a snapshot past a gap
    that a slice crosses, the log before it ingested by that slice).
    """
    from kraftlake.image import snapshot_records
    from kraftlake.records import encode_metadata_record

    prov = image.provenance
    if seeds and last_offset(spark, warehouse, cluster) < 0:
        # a snapshot stored before any offset is committed seeds the cluster: its history starts there
        record_retained_from(spark, warehouse, cluster, prov.offset)
    if has_snapshot(spark, warehouse, cluster, prov.offset):
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
    df = arrow_frame(spark, SNAPSHOTS, rows, cluster)
    df.write.format("delta").mode("append").save(table_path(warehouse, SNAPSHOTS))
    return len(rows)
