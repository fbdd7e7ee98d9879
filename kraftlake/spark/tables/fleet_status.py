"""Writing ``fleet_status``: each followed cluster's state, appended when it changes.

The streams of a fleet set their cluster's state in memory (:meth:`StatusBoard.set`, no I/O: it is called from
the micro-batch's progress report); a thread of the board appends what changed, at once for a new state or
error, at most every ``interval_s`` for a moved lag or offset alone. Each append is a few rows in one Parquet
file committed by kraftlake (:func:`kraftlake.spark.tables.writes.append_arrow`, no Spark job), once per
cluster and ``updated_ms`` (the Delta transaction version of the cluster's app id in this table), so the
reader without a JVM (:mod:`kraftlake.warehouse.fleet_status`) reads it as it reads the other tables.

Every ``compact_every`` appends and at `close`, the board compacts the table
(:mod:`kraftlake.spark.tables.fleet_compaction`: one commit replacing its files with one of the transitions,
the newest rows and a sample of the rows between), so its files stay a few hundred however long the fleet
runs; the files it replaced are deleted ``retention_s`` later (readers at an older version may still read
them until then), Delta's checkpoints written as after any commit.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.delta import append as delta_append
from kraftlake.spark.tables.creation import create_table
from kraftlake.spark.tables.fleet_compaction import Compacted, compact_fleet_status, remove_replaced
from kraftlake.spark.tables.layout import (
    FLEET_STATUS,
    FLEET_STATUS_PROPERTIES,
    arrow_rows,
    table_path,
    table_ref,
)
from kraftlake.spark.tables.writes import append_arrow, retry_conflicts

_log = logging.getLogger(__name__)
#: What makes a row worth appending at once; the other columns wait for the interval.
_AT_ONCE = ("state", "last_error")
_MOVING = ("lag", "last_offset", "last_commit_ms")


def ensure_fleet_status(spark: SparkSession, warehouse: str | Path) -> None:
    """Create ``fleet_status`` (empty) unless it exists; one made without its short retentions
    (:data:`~kraftlake.spark.tables.layout.FLEET_STATUS_PROPERTIES`) gets them."""
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    if create_table(spark, warehouse, FLEET_STATUS):
        return
    _, metadata = delta_append.table_metadata(table_path(warehouse, FLEET_STATUS))
    config = metadata.get("configuration") or {}
    missing = {k: v for k, v in FLEET_STATUS_PROPERTIES.items() if config.get(k) != v}
    if missing:
        settings = ", ".join(f"'{k}' = '{v}'" for k, v in missing.items())
        spark.sql(f"ALTER TABLE {table_ref(warehouse, FLEET_STATUS)} SET TBLPROPERTIES ({settings})")


class StatusBoard:
    """The clusters' states in memory and the thread that appends them to ``fleet_status``; `close` writes
    what is left and stops it.

    ``compact_every``: appends between two compactions; ``sample_s``: the window of which one row is kept
    between two transitions of a cluster; ``retention_s``: how long a replaced file stays on disk."""

    def __init__(
        self,
        spark: SparkSession,
        warehouse: str | Path,
        interval_s: float = 5.0,
        *,
        compact_every: int = 100,
        sample_s: float = 3600.0,
        retention_s: float = 3600.0,
    ) -> None:
        if compact_every < 1 or sample_s <= 0 or retention_s < 0:
            raise ValueError(
                f"fleet_status: compact_every {compact_every} must be >= 1, sample_s {sample_s} > 0 and "
                f"retention_s {retention_s} >= 0"
            )
        ensure_fleet_status(spark, warehouse)
        self.spark = spark
        self.warehouse = warehouse
        self.interval_s = interval_s
        self.compact_every = compact_every
        self.sample_s = sample_s
        self.retention_s = retention_s
        self._appended = 0
        self._replaced: list[tuple[float, tuple[str, ...]]] = []
        self._compacting = threading.Lock()
        # held by whoever appends (the thread or a caller's flush): a flush returns when what was set before it
        # is in the table, even the rows the thread had taken and was still committing
        self._appending = threading.Lock()
        self._lock = threading.Lock()
        self._now: dict[str, dict[str, Any]] = {}
        self._written: dict[str, dict[str, Any]] = {}
        self._last_ms: dict[str, int] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kraftlake-fleet-status", daemon=True)
        self._thread.start()

    def set(self, cluster: str, state: str, **values: Any) -> None:
        """``cluster``'s state now, with any of ``lag``, ``last_offset``, ``last_commit_ms``, ``error``; the
        values not given keep what they were."""
        with self._lock:
            row = self._now.setdefault(
                cluster, {"lag": None, "last_offset": None, "last_commit_ms": None, "last_error": ""}
            )
            row["state"] = state
            if "error" in values:
                row["last_error"] = values.pop("error")
            row.update(values)
            written = self._written.get(cluster)
            urgent = written is None or any(written.get(k) != row[k] for k in _AT_ONCE)
        if urgent:
            self._wake.set()

    def _due(self, force: bool) -> list[tuple[str, dict[str, Any]]]:
        now = int(time.time() * 1000)
        out = []
        with self._lock:
            for cluster, row in self._now.items():
                written = self._written.get(cluster)
                if written is not None and all(written.get(k) == row[k] for k in (*_AT_ONCE, *_MOVING)):
                    continue
                urgent = written is None or any(written.get(k) != row[k] for k in _AT_ONCE)
                if not (urgent or force or now - self._last_ms.get(cluster, 0) >= self.interval_s * 1000):
                    continue
                # one Delta transaction version per append of the cluster: strictly increasing
                updated = max(now, self._last_ms.get(cluster, 0) + 1)
                self._last_ms[cluster] = updated
                self._written[cluster] = dict(row)
                out.append((cluster, {**row, "updated_ms": updated, "pid": os.getpid()}))
        return out

    def flush(self, force: bool = False) -> int:
        """Append the rows due (all that changed when ``force``); returns how many."""
        with self._appending:
            return self._append_due(force)

    def _append_due(self, force: bool) -> int:
        due = self._due(force)
        for cluster, row in due:
            # a conflict is another writer changing the table's properties (ensure_fleet_status): try again
            retry_conflicts(
                partial(
                    append_arrow,
                    self.spark,
                    self.warehouse,
                    FLEET_STATUS,
                    arrow_rows(FLEET_STATUS, [row], cluster),
                    row["updated_ms"],
                    cluster,
                )
            )
        with self._lock:
            self._appended += len(due)
            compact = self._appended >= self.compact_every
        if compact:
            self.compact()
        return len(due)

    def compact(self) -> Compacted | None:
        """Compact ``fleet_status`` now (:func:`~kraftlake.spark.tables.fleet_compaction.compact_fleet_status`,
        run again from a new snapshot when another writer's compaction won), and delete the files replaced
        ``retention_s`` ago or more. None when the table needs more of a writer than kraftlake's commits."""
        sample_ms = max(1, int(self.sample_s * 1000))
        with self._compacting:
            with self._lock:
                self._appended = 0
            try:
                done = retry_conflicts(partial(compact_fleet_status, self.spark, self.warehouse, sample_ms))
            except delta_append.Unsupported as exc:
                _log.info("fleet_status is not compacted: %s", exc)
                return None
            now = time.monotonic()
            if done.removed:
                self._replaced.append((now, done.removed))
            expired = [p for at, paths in self._replaced if now - at >= self.retention_s for p in paths]
            self._replaced = [(at, paths) for at, paths in self._replaced if now - at < self.retention_s]
            remove_replaced(table_path(self.warehouse, FLEET_STATUS), expired)
            return done

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(min(self.interval_s, 1.0))
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # a status that cannot be written must not stop the streams
                _log.warning("fleet_status: an append failed", exc_info=True)

    def close(self) -> None:
        """Stop the thread, append every change not written yet and compact the table."""
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self.flush(force=True)
        try:
            self.compact()
        except Exception:  # the rows are all there uncompacted: the next board compacts them
            _log.warning("fleet_status: the compaction at close failed", exc_info=True)
