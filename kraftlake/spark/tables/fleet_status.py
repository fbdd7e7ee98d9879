"""Writing ``fleet_status``: each followed cluster's state, appended when it changes.

The streams of a fleet set their cluster's state in memory (:meth:`StatusBoard.set`, no I/O: it is called from
the micro-batch's progress report); a thread of the board appends what changed, at once for a new state or
error, at most every ``interval_s`` for a moved lag or offset alone. Each append is a few rows in one Parquet
file committed by kraftlake (:func:`kraftlake.spark.tables.writes.append_arrow`, no Spark job), once per
cluster and ``updated_ms`` (the Delta transaction version of the cluster's app id in this table), so the
reader without a JVM (:mod:`kraftlake.warehouse.fleet_status`) reads it as it reads the other tables.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.spark.tables.creation import create_table
from kraftlake.spark.tables.layout import FLEET_STATUS, arrow_rows
from kraftlake.spark.tables.writes import append_arrow

_log = logging.getLogger(__name__)
#: What makes a row worth appending at once; the other columns wait for the interval.
_AT_ONCE = ("state", "last_error")
_MOVING = ("lag", "last_offset", "last_commit_ms")


def ensure_fleet_status(spark: SparkSession, warehouse: str | Path) -> None:
    """Create ``fleet_status`` (empty) unless it exists."""
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    create_table(spark, warehouse, FLEET_STATUS)


class StatusBoard:
    """The clusters' states in memory and the thread that appends them to ``fleet_status``; `close` writes
    what is left and stops it."""

    def __init__(self, spark: SparkSession, warehouse: str | Path, interval_s: float = 5.0) -> None:
        ensure_fleet_status(spark, warehouse)
        self.spark = spark
        self.warehouse = warehouse
        self.interval_s = interval_s
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
        due = self._due(force)
        for cluster, row in due:
            append_arrow(
                self.spark,
                self.warehouse,
                FLEET_STATUS,
                arrow_rows(FLEET_STATUS, [row], cluster),
                row["updated_ms"],
                cluster,
            )
        return len(due)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(min(self.interval_s, 1.0))
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # a status that cannot be written must not stop the streams
                _log.warning("fleet_status: an append failed", exc_info=True)

    def close(self) -> None:
        """Stop the thread and append every change not written yet."""
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self.flush(force=True)
