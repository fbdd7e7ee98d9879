"""A fleet slice's data files: written by the Spark task that replayed the slice (:mod:`pipelines.replay_task`),
committed by the driver (:mod:`pipelines.fleet_ingest`), as Spark's own Delta writer splits a write.

In the task, :class:`SliceWriter` turns each slice into the rows of every table it touches, built by the driver
path's own row builders (:func:`kraftlake.spark.tables.layout.arrow_rows`, ``closes_rows``, ``offsets_rows``,
:func:`kraftlake.spark.tables.layout.stored_log_rows`) with the driver's schemas (:func:`table_formats`, shipped
in the task row: no Spark session parses a DDL there), and writes one Parquet file per table into the table's
directory (:func:`kraftlake.delta.append.write_data_file`). The warehouse is a path the executors and the driver
share, as it is for Spark's own writers. What goes back to the driver is small: the files' Delta ``add`` actions
(:class:`WrittenSlice`), the images of the gaps it crossed, and the rows of a table kraftlake's writer refuses.

The driver then commits a slice as :func:`pipelines.commit.commit_slice` does (:func:`commit_written`): the gaps'
snapshots, every table's files side by side (``txnAppId`` per cluster, ``txnVersion`` = the slice's last offset),
``offsets`` last (the commit point), then the commit point published. A slice never committed leaves orphan
files that ``VACUUM`` removes, as Delta's own aborted writes do; a resumed ingest starts at the commit point
as the driver's replay does, and a table that already holds the slice's ``txn`` version skips it.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from kraftlake.delta import append as delta_append
from kraftlake.history import HistoryBatch, without_written
from kraftlake.spark.tables.bounds import offsets_rows, publish_commit_point
from kraftlake.spark.tables.layout import (
    CLOSES,
    HISTORY_TABLES,
    LOG,
    OFFSETS,
    app_id,
    arrow_rows,
    arrow_schema_of,
    engine_info,
    schema_of,
    stored_log_rows,
    table_path,
)
from kraftlake.spark.tables.writes import (
    WRITE_THREADS,
    append_arrow,
    checkpoint_later,
    closes_rows,
    retry_conflicts,
)
from pipelines.commit import Jump, write_jumps


@dataclass(frozen=True)
class TableFormat:
    """A table's schema as its Parquet files hold it and as its Delta log stores it."""

    arrow: pa.Schema
    schema_string: str


def table_formats() -> dict[str, TableFormat]:
    """The formats of every table a slice writes (in the driver: Spark parses the tables' DDL)."""
    return {
        t: TableFormat(arrow_schema_of(t), schema_of(t).json())
        for t in (LOG, *HISTORY_TABLES, CLOSES, OFFSETS)
    }


@dataclass
class TableFiles:
    """What a slice wrote to one table: its files' ``add`` actions, or its rows (Arrow IPC stream) when the table
    needs more of a writer than kraftlake's (:class:`kraftlake.delta.append.Unsupported`): the driver appends
    those through Spark."""

    adds: list[dict[str, Any]] = field(default_factory=list)
    rows: bytes | None = None


@dataclass
class WrittenSlice:
    """One replayed slice as the driver commits it."""

    first_offset: int
    last_offset: int
    has_offsets: bool
    """Whether the slice holds an offset (else it moves no commit point)."""
    jumps: list[Jump]
    tables: dict[str, TableFiles]
    """Per table its files; ``offsets`` among them, committed last."""
    write_s: float = 0.0
    """Seconds the task took to build and write the slice's files."""
    replay_s: float = 0.0
    """Seconds the task took to read and replay the slice's records."""


class SliceWriter:
    """The task's side: each slice of one cluster written as files into the warehouse's tables.

    ``written``: each history table's highest ``from_offset`` when a killed run may have written past the commit
    point (:func:`kraftlake.history.without_written`, as the driver's commit applies it); ``logged``: the highest
    offset ``metadata_log`` holds (only the rows past it are written, as :class:`pipelines.commit.LogLeg`).
    """

    def __init__(
        self,
        warehouse: str,
        cluster: str,
        formats: dict[str, TableFormat],
        written: dict[str, int] | None,
        logged: int,
    ) -> None:
        self.warehouse = warehouse
        self.cluster = cluster
        self.formats = formats
        self.written = written
        self.logged = logged
        self.app_id = app_id(cluster)

    def write(self, batch: HistoryBatch, records: list[Any]) -> WrittenSlice:
        """Write the files of a slice: ``batch`` replayed from ``records``."""
        t0 = time.monotonic()
        jumps = batch.jumps
        if self.written is not None:
            batch = without_written(batch, self.written)
        txn = batch.last_offset
        tables: dict[str, TableFiles] = {}
        start = max(batch.first_offset, self.logged + 1)
        if start <= batch.last_offset:
            log_rows = [r for r in records if start <= r.offset <= batch.last_offset]
            tables[LOG] = self._file(
                LOG, stored_log_rows(log_rows, self.cluster, self.formats[LOG].arrow), txn
            )
            self.logged = batch.last_offset
        for table in sorted(batch.versions):
            if batch.versions[table]:
                tables[table] = self._file(table, self._rows(table, batch.versions[table]), txn)
        closes = closes_rows(batch)
        if closes:
            tables[CLOSES] = self._file(CLOSES, self._rows(CLOSES, closes), txn)
        if batch.offsets:
            tables[OFFSETS] = self._file(OFFSETS, self._rows(OFFSETS, offsets_rows(batch)), txn)
        return WrittenSlice(
            batch.first_offset,
            batch.last_offset,
            bool(batch.offsets),
            jumps,
            tables,
            time.monotonic() - t0,
        )

    def _rows(self, table: str, rows: list[dict[str, Any]]) -> pa.Table:
        return arrow_rows(table, rows, self.cluster, self.formats[table].arrow)

    def _file(self, table: str, rows: pa.Table, txn: int) -> TableFiles:
        path = table_path(self.warehouse, table)
        if delta_append.committed_version(path, self.app_id) >= txn:
            return TableFiles()  # a killed run committed this table's part of the slice
        try:
            add = delta_append.write_data_file(path, rows, schema_string=self.formats[table].schema_string)
        except delta_append.Unsupported:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, rows.schema) as out:
                out.write_table(rows)
            return TableFiles(rows=sink.getvalue().to_pybytes())
        return TableFiles(adds=[add])


def commit_written(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    written: WrittenSlice,
    phases: dict[str, float] | None = None,
) -> None:
    """Commit a slice a task wrote: the gaps it crossed (:func:`pipelines.commit.write_jumps`), every table's
    files side by side, ``offsets`` last (the commit point), then the commit point published. ``phases``: gets
    the seconds of ``tables`` (all but ``offsets``) and ``offsets``."""
    t0 = time.monotonic()
    write_jumps(spark, warehouse, cluster, written.jumps)
    jobs = [
        partial(commit_table, spark, warehouse, t, files, written.last_offset, cluster)
        for t, files in sorted(written.tables.items())
        if t != OFFSETS
    ]
    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="kraftlake-history") as pool:
        for f in [pool.submit(retry_conflicts, job) for job in jobs]:
            f.result()
    t1 = time.monotonic()
    offsets = written.tables.get(OFFSETS)
    if offsets is not None:
        retry_conflicts(
            lambda: commit_table(spark, warehouse, OFFSETS, offsets, written.last_offset, cluster)
        )
    if written.has_offsets:
        retry_conflicts(lambda: publish_commit_point(spark, warehouse, cluster, written.last_offset))
    if phases is not None:
        phases.update(tables=t1 - t0, offsets=time.monotonic() - t1)


def commit_table(
    spark: SparkSession,
    warehouse: str | Path,
    table: str,
    files: TableFiles,
    txn_version: int,
    cluster: str,
) -> None:
    """Commit one table's part of a slice (skipped when the table holds ``txn_version``): its files, or its rows
    through :func:`kraftlake.spark.tables.writes.append_arrow`, also when the table needs more of a writer
    than it had when the task wrote them."""
    path = table_path(warehouse, table)
    if files.rows is not None:
        rows = pa.ipc.open_stream(files.rows).read_all()
        append_arrow(spark, warehouse, table, rows, txn_version, cluster)
        return
    if not files.adds:
        return
    try:
        done = delta_append.commit_files(
            path,
            files.adds,
            schema_string=schema_of(table).json(),
            app_id=app_id(cluster),
            txn_version=txn_version,
            engine_info=engine_info(spark),
        )
    except delta_append.Unsupported:
        data = [Path(path, a["path"]) for a in files.adds]
        append_arrow(
            spark, warehouse, table, pa.concat_tables(map(pq.read_table, data)), txn_version, cluster
        )
        for d in data:
            d.unlink(missing_ok=True)
        return
    if done.checkpoint_due:
        checkpoint_later(spark, path)
