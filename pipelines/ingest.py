"""``ingest``: a Kafka ``__cluster_metadata-0`` directory into the warehouse, slice by slice, exactly once.

Each slice of about ``batch_records`` records is written as: its ``metadata_log`` rows (decoded by the
``kraftlake-log`` source in executors, from the files) and, side by side, the history versions it creates and
the closes of those it ends (one append per touched table, computed in the driver by
:class:`kraftlake.history.HistoryBuilder`, which replays the records with the image), and finally its
``offsets`` rows, the commit point. The closes are folded into the tables once, at the end. Tables the slice does not touch are not written.

Every write carries the slice's last offset as Delta ``txnVersion``, so a run killed anywhere and started again
resumes after the last committed slice and replays the unfinished one without duplicates. A resumed run may cut
its slices differently from the killed one; when the killed run left writes past the commit point
(``metadata_log`` rows beyond it), the resumed run appends only versions above each table's highest
``from_offset`` and turns the versions it leaves out into closes (a repeated close changes no answer).

Speed: the history of slice k is written by one writer thread while the driver replays slice k+1 (the JVM
and the Python replay overlap; commits stay in order), and the replayed image is kept in the process between
calls on the same warehouse (the streaming pipeline's micro-batches), checked against the commit point.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.history import HistoryBatch
from kraftlake.image.gaps import gap_resolver
from kraftlake.image.source import log_records, partition_dir
from kraftlake.spark import logsource
from kraftlake.spark.tables.bounds import max_from_offsets
from kraftlake.spark.tables.clusters import log_dir_cluster_id
from kraftlake.spark.tables.creation import open_for_writer
from kraftlake.spark.tables.fold import fold_closes
from kraftlake.spark.tables.layout import LOG, to_stored_log
from kraftlake.spark.tables.writes import append, wait_checkpoints
from pipelines.commit import Resume, commit_slice, crossed_gaps, resume, starting_point


@dataclass
class IngestResult:
    cluster: str = ""
    """The cluster the log dir was ingested as."""
    records: int = 0
    slices: int = 0
    first_offset: int = -1
    last_offset: int = -1
    seconds: float = 0.0
    folded: int = 0
    """Pending closes folded into the history tables at the end (see :func:`kraftlake.spark.tables.writes.write_history`)."""
    gaps: list[tuple[int, int]] = field(default_factory=list)
    """The offsets (first, last) at which no state is known: holes of the log crossed from a snapshot."""
    task_s: float = 0.0
    """A fleet's replay on the executors (:mod:`pipelines.fleet_ingest`): seconds the driver waited for the
    cluster's task (replay and files)."""
    replay_s: float = 0.0
    """Of the task's time, the seconds spent reading and replaying the records."""
    write_s: float = 0.0
    """Of the task's time, the seconds spent building and writing the slices' files."""
    commit_s: float = 0.0
    """Seconds the driver spent committing the slices the task wrote."""


def slices(records: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(islice(records, size)):
        yield chunk


_RESUME: dict[tuple[int, str, str], Resume] = {}
"""A cluster's replayed state kept between ``ingest`` calls of one process."""


@dataclass
class ClusterWriter:
    """One cluster's writer of an ingest: its resume state, its log leg and its slices' commit, which counts
    what it committed in ``result``."""

    spark: SparkSession
    warehouse: str | Path
    log_dir: Path
    state: Resume
    written: dict[str, int] | None
    batch_records: int
    result: IngestResult
    t0: float
    progress: Callable[[IngestResult], None] | None = None
    key: tuple[int, str, str] = (0, "", "")

    def _append_log(self, first: int, last: int) -> None:
        df = (
            self.spark.read.format("kraftlake-log")
            .option("startOffset", first)
            .option("endOffset", last)
            .option("recordsPerPartition", max(self.batch_records // 2, 1))
            .load(str(self.log_dir))
        )
        append(to_stored_log(df, self.result.cluster), self.warehouse, LOG, last, self.result.cluster)

    def _write_log(self, first: int, last: int) -> None:
        self.state.log.append(first, last, self._append_log)

    def commit(self, batch: HistoryBatch, records: int) -> None:
        """Commit one slice (:func:`pipelines.commit.commit_slice`), then report the result so far."""
        commit_slice(self.spark, self.warehouse, self.result.cluster, batch, self._write_log, self.written)
        self.counted(batch.first_offset, batch.last_offset, crossed_gaps(batch), records)

    def counted(self, first: int, last: int, gaps: list[tuple[int, int]], records: int) -> None:
        """Count a slice committed up to its commit point ``last``, then report the result so far."""
        result = self.result
        result.gaps.extend(gaps)
        self.state.committed = last
        result.records += records
        result.slices += 1
        if result.first_offset < 0:
            result.first_offset = first
        result.last_offset = last
        result.seconds = time.monotonic() - self.t0
        if self.progress is not None:
            self.progress(result)


def open_writer(
    spark: SparkSession,
    log_dir: str | Path,
    warehouse: str | Path,
    batch_records: int,
    cluster: str | None,
    progress: Callable[[IngestResult], None] | None = None,
) -> ClusterWriter:
    """The writer of a log dir's cluster (named ``cluster``, else by the cluster id of its ``meta.properties``:
    :func:`kraftlake.spark.tables.creation.open_for_writer`, which refuses a name or an id that would mix two
    clusters before anything is written), resumed at its commit point."""
    t0 = time.monotonic()
    d = partition_dir(log_dir)
    logsource.register(spark)
    name = open_for_writer(spark, warehouse, cluster, log_dir_cluster_id(d), f"log dir {d}")
    key = (id(spark), str(Path(warehouse).resolve()), name)
    state = resume(
        spark, warehouse, name, partial(starting_point, d), gap_resolver(d), _RESUME.pop(key, None)
    )
    # a killed run's writes past the commit point: the history is appended only above them (without_written)
    written = max_from_offsets(spark, warehouse, name) if state.log.logged > state.committed else None
    return ClusterWriter(
        spark, warehouse, d, state, written, batch_records, IngestResult(cluster=name), t0, progress, key
    )


def ingest(
    spark: SparkSession,
    log_dir: str | Path,
    warehouse: str | Path,
    batch_records: int = 500_000,
    progress: Callable[[IngestResult], None] | None = None,
    fold: bool = True,
    cluster: str | None = None,
) -> IngestResult:
    """Import (or resume importing) a metadata log directory into ``warehouse``, as the cluster ``cluster``
    (see :func:`open_writer`), the history replayed in the driver.

    ``progress`` is called with the result so far after each slice's commit point.
    ``fold``: fold the slices' closes into the history tables at the end (else they stay pending in ``closes``).
    """
    writer = open_writer(spark, log_dir, warehouse, batch_records, cluster, progress)
    state, result = writer.state, writer.result
    # one writer thread: slice k is written while the driver replays slice k+1; commits stay in order
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftlake-ingest") as pool:
        pending: Future[None] | None = None
        for chunk in slices(log_records(writer.log_dir, state.start), batch_records):
            batch = state.builder.feed(chunk)
            if pending is not None:
                pending.result()
            pending = pool.submit(writer.commit, batch, len(chunk))
        if pending is not None:
            pending.result()
    # the slices appended their closes; one fold writes them all into the tables (one MERGE per table)
    if fold:
        result.folded = fold_closes(spark, warehouse)
    wait_checkpoints()
    _RESUME[writer.key] = state
    result.seconds = time.monotonic() - writer.t0
    return result
