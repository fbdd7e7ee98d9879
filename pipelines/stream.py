"""``stream --source log-dir``: tail a live metadata log directory into the warehouse, micro-batch by micro-batch.

Each trigger reads the records appended since the commit point (``max(offset)`` of ``offsets``) and commits
them as :func:`pipelines.ingest.ingest` commits slices (same idempotent writes, same history builder), so a run
killed at any point and restarted produces the tables an uninterrupted run produces. The source polls the
segment files (a live Kafka controller appends to them); only complete batches are read, a torn tail waits for
the next trigger.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from pipelines.ingest import ingest


@dataclass
class StreamProgress:
    batch: int
    records: int
    last_offset: int
    seconds: float
    records_per_s: float


def stream_log_dir(spark: SparkSession, log_dir: str | Path, warehouse: str | Path, *,
                   interval_s: float = 1.0, max_batch_records: int = 100_000, max_batches: int | None = None,
                   idle_stop_s: float | None = None,
                   progress: Callable[[StreamProgress], None] | None = None) -> int:
    """Run micro-batches until ``max_batches`` ran or nothing arrived for ``idle_stop_s``; returns records."""
    total, batch, idle_since = 0, 0, time.monotonic()
    while max_batches is None or batch < max_batches:
        t0 = time.monotonic()
        result = ingest(spark, log_dir, warehouse, batch_records=max_batch_records)
        if result.records:
            batch += 1
            total += result.records
            idle_since = time.monotonic()
            if progress is not None:
                dt = time.monotonic() - t0
                progress(StreamProgress(batch, result.records, result.last_offset, dt,
                                        result.records / dt if dt else 0.0))
        elif idle_stop_s is not None and time.monotonic() - idle_since >= idle_stop_s:
            break
        else:
            time.sleep(interval_s)
    return total
