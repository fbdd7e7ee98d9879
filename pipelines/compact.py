"""``compact``: a snapshot at N, retention deletes, OPTIMIZE and VACUUM; idempotent, so it can be scheduled.

The snapshot is taken at N, or just before the metadata transaction open at N. Retention keeps every state from the *retention snapshot* S on: the newest stored snapshot at or below the
oldest offset the policy keeps (``N - retain_offsets``, or the first offset of the last ``retain_hours``).
Below S the tables then hold nothing a query at an offset >= S needs: ``metadata_log`` rows at or below S,
history versions that ended at or before S and older snapshots are deleted. Queries at offsets before S are
outside the retained history (``reconstruct`` says so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from kraftlake.spark.tables import (
    HISTORY_TABLES,
    LOG,
    OFFSETS,
    SNAPSHOTS,
    last_offset,
    table_ref,
    write_snapshot,
)
from pipelines.reconstruct import image_at_offset


@dataclass
class CompactResult:
    snapshot_offset: int
    snapshot_rows: int
    retained_from: int | None
    deleted: dict[str, int] = field(default_factory=dict)
    checkpoint: str | None = None
    seconds: float = 0.0


def _retention_offset(spark: SparkSession, warehouse: str | Path, offset: int, retain_offsets: int | None,
                      retain_hours: float | None) -> int | None:
    if retain_offsets is not None:
        return offset - retain_offsets
    if retain_hours is not None:
        cutoff = int(time.time() * 1000 - retain_hours * 3_600_000)
        row = spark.sql(f"SELECT min(offset) AS o FROM {table_ref(warehouse, OFFSETS)} "
                        f"WHERE timestamp >= {cutoff}").first()
        return offset if row is None or row["o"] is None else int(row["o"])
    return None


def _delete(spark: SparkSession, warehouse: str | Path, table: str, condition: str) -> int:
    """``DELETE`` rows in one statement (Delta returns the deleted count; no separate count scan)."""
    row = spark.sql(f"DELETE FROM {table_ref(warehouse, table)} WHERE {condition}").first()
    if row is None or "num_affected_rows" not in row.asDict():
        return 0
    return int(row["num_affected_rows"] or 0)


def compact(spark: SparkSession, warehouse: str | Path, offset: int | None = None,
            retain_offsets: int | None = None, retain_hours: float | None = None,
            checkpoint_dir: str | Path | None = None, vacuum_hours: float = 168.0,
            optimize: bool = True) -> CompactResult:
    t0 = time.monotonic()
    n = last_offset(spark, warehouse) if offset is None else offset
    image = image_at_offset(spark, warehouse, n)
    if image.transaction is not None:
        # a snapshot holds committed state only: take the offset before the open transaction began
        n = image.transaction.begin_offset - 1
        image = image_at_offset(spark, warehouse, n)
    rows = write_snapshot(spark, warehouse, image)
    result = CompactResult(n, rows, None)
    if checkpoint_dir is not None:
        from kraftlake.image import write_snapshot as write_checkpoint

        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        result.checkpoint = str(write_checkpoint(image, checkpoint_dir))
    keep = _retention_offset(spark, warehouse, n, retain_offsets, retain_hours)
    if keep is not None:
        row = spark.sql(f"SELECT max(snapshot_offset) AS s FROM {table_ref(warehouse, SNAPSHOTS)} "
                        f"WHERE snapshot_offset <= {int(keep)}").first()
        s = None if row is None else row["s"]
        if s is not None:
            result.retained_from = int(s)
            result.deleted[LOG] = _delete(spark, warehouse, LOG, f"offset <= {s}")
            result.deleted[SNAPSHOTS] = _delete(spark, warehouse, SNAPSHOTS, f"snapshot_offset < {s}")
            for table in HISTORY_TABLES:
                result.deleted[table] = _delete(spark, warehouse, table,
                                                f"to_offset IS NOT NULL AND to_offset <= {s}")
    for table in (LOG, *HISTORY_TABLES, SNAPSHOTS, OFFSETS):
        ref = table_ref(warehouse, table)
        if optimize:
            spark.sql(f"OPTIMIZE {ref}")
        spark.sql(f"VACUUM {ref} RETAIN {vacuum_hours} HOURS")
    result.seconds = time.monotonic() - t0
    return result
