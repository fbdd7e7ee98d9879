"""Compacting ``fleet_status``: its many one-row files replaced by one file of the rows worth keeping.

A followed cluster appends a row at least every few seconds while its lag moves, one file and one commit each
(:class:`kraftlake.spark.tables.fleet_status.StatusBoard`). What an operator asks of that history is when
each cluster changed state ("when did c3 go unreachable, with what error") and where it is now; the lag
between two changes matters as a trend only. So a compaction keeps, per cluster (:func:`kept_rows`): every
row whose ``state`` or ``last_error`` differs from the cluster's row before it (a transition, the first row
included), the cluster's newest row, and one row per ``sample_ms`` window of the rows in between (the first
one of each window); it drops the others.

The rows kept are committed by kraftlake (:func:`kraftlake.delta.rewrite.replace`) as one Delta version that
removes every file read and adds one file of the kept rows, sorted by cluster and time. A file appended
meanwhile (this writer's next row, or another process's clusters) is not in the snapshot read, so it stays;
a compaction that loses a file it replaces to another writer's compaction raises
:class:`kraftlake.delta.append.CommitConflict` and is run again from a new snapshot
(:func:`kraftlake.spark.tables.writes.retry_conflicts`): rows are only ever dropped by the rule above.

Why the rule keeps its answers: the newest row of each cluster (what ``fleet_status()`` and ``kraftlake fleet
status`` show) is kept, and a row kept as a transition still differs from the row before it once the rows in
between are gone (they all had its predecessor's state and error), so compacting again drops no transition.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pyspark.sql import SparkSession

from kraftlake.delta import rewrite as delta_rewrite
from kraftlake.spark.tables.layout import CLUSTER, FLEET_STATUS, arrow_schema_of, engine_info, table_path
from kraftlake.spark.tables.writes import checkpoint_later

_log = logging.getLogger(__name__)
#: A cluster's row is a transition when one of these differs from its row before.
TRANSITION_COLUMNS = ("state", "last_error")


@dataclass(frozen=True)
class Compacted:
    """What one compaction did: the files it replaced (their paths in the table), the rows they held and the
    rows kept; ``version`` is its Delta version, None when there was nothing to compact."""

    removed: tuple[str, ...]
    rows_read: int
    rows_kept: int
    version: int | None


def kept_rows(rows: list[dict[str, Any]], sample_ms: int) -> list[dict[str, Any]]:
    """The rows of ``fleet_status`` a compaction keeps (see the module), sorted by cluster and
    ``updated_ms``."""
    ordered = sorted(rows, key=lambda r: (r[CLUSTER], r["updated_ms"]))
    out: list[dict[str, Any]] = []
    for i, row in enumerate(ordered):
        before = ordered[i - 1] if i else None
        after = ordered[i + 1] if i + 1 < len(ordered) else None
        if (
            before is None
            or before[CLUSTER] != row[CLUSTER]
            or after is None
            or after[CLUSTER] != row[CLUSTER]
            or any((before[c] or "") != (row[c] or "") for c in TRANSITION_COLUMNS)
            or before["updated_ms"] // sample_ms != row["updated_ms"] // sample_ms
        ):
            out.append(row)
    return out


def compact_fleet_status(
    spark: SparkSession, warehouse: str | Path, sample_ms: int, snap: delta_rewrite.Snapshot | None = None
) -> Compacted:
    """Replace the live files of ``fleet_status`` (of ``snap``, else of its latest version) with one file of
    :func:`kept_rows`, in one commit; nothing is done when there is one file or none. Raises
    :class:`~kraftlake.delta.append.CommitConflict` when another writer removed one of those files first (run
    it again) and :class:`~kraftlake.delta.append.Unsupported` when the table needs more of a writer."""
    import pyarrow as pa

    if snap is None:
        snap = delta_rewrite.snapshot(table_path(warehouse, FLEET_STATUS))
    files = sorted(snap.files.values(), key=lambda a: str(a["path"]))
    if len(files) < 2:
        return Compacted((), 0, 0, None)
    schema = arrow_schema_of(FLEET_STATUS)
    rows: list[dict[str, Any]] = []
    for add in files:
        rows.extend(delta_rewrite.read_file(snap, add, schema.names).to_pylist())
    kept = kept_rows(rows, sample_ms)
    table = pa.Table.from_pylist(kept, schema=schema)
    done = delta_rewrite.replace(
        snap,
        files,
        [table],
        operation="OPTIMIZE",
        parameters={"predicate": "fleet_status thinned to transitions, newest rows and samples"},
        engine_info=engine_info(spark),
    )
    if done.checkpoint_due:
        checkpoint_later(spark, str(snap.path))
    _log.debug("fleet_status: %d files, %d rows compacted to %d", len(files), len(rows), len(kept))
    return Compacted(tuple(str(a["path"]) for a in files), len(rows), len(kept), done.version)


def remove_replaced(table: str | Path, paths: list[str]) -> None:
    """Delete data files a compaction replaced (paths relative to ``table``), once no reader can still be at
    a version that holds them (the caller's retention); a file already gone is skipped."""
    root = Path(table)
    for rel in paths:
        try:
            (root / unquote(rel)).unlink(missing_ok=True)
        except OSError as exc:
            _log.warning("fleet_status: cannot delete the replaced file %s: %s", root / rel, exc)
