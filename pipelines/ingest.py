"""``ingest``: a Kafka ``__cluster_metadata-0`` directory into the warehouse, slice by slice, exactly once.

Each slice of about ``batch_records`` records is written as: its ``metadata_log`` rows (decoded by the
``kraftlake-log`` source in executors, from the files), the history versions it creates or ends (computed in
the driver by :class:`kraftlake.spark.history.HistoryBuilder`, which replays the records with the image), and
finally its ``offsets`` rows, the commit point. Every write carries the slice's last offset as Delta
``txnVersion``, so a run killed anywhere and started again resumes after the last committed slice and
replays the unfinished one without duplicates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.image import EMPTY, MetadataImage, load_snapshot
from kraftlake.image.source import log_records, partition_dir, segments, snapshots
from kraftlake.spark import logsource
from kraftlake.spark.history import HistoryBatch, HistoryBuilder
from kraftlake.spark.tables import (
    LOG,
    append,
    ensure_tables,
    last_offset,
    merge_history,
    table_ref,
    to_stored_log,
    write_offsets,
    write_snapshot,
)
from pipelines.reconstruct import image_at_offset


@dataclass
class IngestResult:
    records: int = 0
    slices: int = 0
    first_offset: int = -1
    last_offset: int = -1
    seconds: float = 0.0


def starting_point(log_dir: str | Path) -> tuple[MetadataImage, int]:
    """The image to start from and the first offset to read: a snapshot when the log does not start at 0."""
    d = partition_dir(log_dir)
    segs = segments(d)
    base = segs[0][0] if segs else 0
    if base == 0:
        return EMPTY, 0
    usable = [s for s in snapshots(d) if s.end_offset >= base]
    if not usable:
        from kraftlake.spark.tables import WarehouseError

        raise WarehouseError(f"{d}: the log starts at offset {base} and no snapshot covers it")
    return load_snapshot(usable[0].path), usable[0].end_offset


def log_max(spark: SparkSession, warehouse: str | Path) -> int:
    row = spark.sql(f"SELECT max(offset) AS m FROM {table_ref(warehouse, LOG)}").first()
    return -1 if row is None or row["m"] is None else int(row["m"])


def slices(records: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(islice(records, size)):
        yield chunk


def commit_slice(spark: SparkSession, warehouse: str | Path, batch: HistoryBatch,
                 write_log: Callable[[int, int], None]) -> None:
    """Write one slice to every table, ``offsets`` last (the commit point)."""
    write_log(batch.first_offset, batch.last_offset)
    for table in batch.tables():
        merge_history(spark, warehouse, table, batch)
    write_offsets(spark, warehouse, batch)


def ingest(spark: SparkSession, log_dir: str | Path, warehouse: str | Path, batch_records: int = 500_000,
           progress: Callable[[str], None] | None = None) -> IngestResult:
    """Import (or resume importing) a metadata log directory into ``warehouse``."""
    t0 = time.monotonic()
    d = partition_dir(log_dir)
    logsource.register(spark)
    ensure_tables(spark, warehouse)
    done = last_offset(spark, warehouse)
    if done >= 0:
        builder, start = HistoryBuilder(image_at_offset(spark, warehouse, done)), done + 1
    else:
        image, start = starting_point(d)
        builder = HistoryBuilder(image)
        if image is not EMPTY:
            write_snapshot(spark, warehouse, image)
            seed = builder.seed()
            for table in seed.tables():
                merge_history(spark, warehouse, table, seed)

    # a run killed after its metadata_log append but before its commit point left rows past `done`: a resumed
    # run may slice differently, so it appends only what is not there yet (each append is atomic)
    logged = [log_max(spark, warehouse)]

    def write_log(first: int, last: int) -> None:
        first = max(first, logged[0] + 1)
        if first > last:
            return
        logged[0] = last
        df = (spark.read.format("kraftlake-log").option("startOffset", first).option("endOffset", last)
              .option("recordsPerPartition", max(batch_records // 2, 1)).load(str(d)))
        append(to_stored_log(df), warehouse, LOG, last)

    result = IngestResult()
    for chunk in slices(log_records(d, start), batch_records):
        batch = builder.feed(chunk)
        commit_slice(spark, warehouse, batch, write_log)
        result.records += len(chunk)
        result.slices += 1
        if result.first_offset < 0:
            result.first_offset = batch.first_offset
        result.last_offset = batch.last_offset
        if progress is not None:
            progress(f"slice {result.slices}: offsets {batch.first_offset}..{batch.last_offset} "
                     f"({result.records} records, {time.monotonic() - t0:.1f}s)")
    result.seconds = time.monotonic() - t0
    return result
