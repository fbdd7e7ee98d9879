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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.errors import KraftlakeError
from kraftlake.history import HistoryBatch, HistoryBuilder
from kraftlake.image import EMPTY
from kraftlake.image.gaps import gap_resolver
from kraftlake.image.source import log_records, partition_dir
from kraftlake.spark import logsource
from kraftlake.spark.tables.bounds import last_offsets, max_from_offsets, publish_commit_point, write_snapshot
from kraftlake.spark.tables.clusters import log_dir_cluster_id
from kraftlake.spark.tables.creation import open_for_writers
from kraftlake.spark.tables.fold import fold_closes
from kraftlake.spark.tables.layout import LOG, to_stored_log
from kraftlake.spark.tables.writes import append, retry_conflicts, wait_checkpoints, write_history
from kraftlake.warehouse import images
from pipelines.commit import LogLeg, Resume, commit_slice, crossed_gaps, starting_point
from pipelines.reconstruct import image_at_offset


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
    fold_s: float = 0.0
    """Seconds the fold of the cluster's closes took (a fleet's first result: with the fold of what was left)."""
    checkpoints_s: float = 0.0
    """Seconds spent waiting at the end for the Delta checkpoints written in the background."""


def slices(records: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(islice(records, size)):
        yield chunk


_RESUME: dict[tuple[int, str, str], Resume] = {}
"""A cluster's replayed state kept between ``ingest`` calls of one process."""


@dataclass
class ClusterWriter:
    """One cluster's writer of an ingest: where it resumes, its log leg and its slices' commit, which counts
    what it committed in ``result``."""

    spark: SparkSession
    warehouse: str | Path
    log_dir: Path
    committed: int
    """The commit point (one before ``start`` on a warehouse seeded from a snapshot; -1: nothing)."""
    start: int
    """The first offset to read."""
    log: LogLeg
    builder: HistoryBuilder | None
    """The history builder at the commit point; None until :meth:`history_builder` rebuilds it (a fleet's
    task rebuilds its image where it runs instead)."""
    written: dict[str, int] | None
    batch_records: int
    result: IngestResult
    t0: float
    progress: Callable[[IngestResult], None] | None = None
    key: tuple[int, str, str] = (0, "", "")

    def history_builder(self) -> HistoryBuilder:
        """The builder at the commit point, its image rebuilt from the warehouse the first time
        (:func:`pipelines.reconstruct.image_at_offset`)."""
        if self.builder is None:
            image = image_at_offset(self.spark, self.warehouse, self.result.cluster, self.committed)
            self.builder = HistoryBuilder(image, gap_resolver(self.log_dir))
        return self.builder

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
        self.log.append(first, last, self._append_log)

    def commit(self, batch: HistoryBatch, records: int) -> None:
        """Commit one slice (:func:`pipelines.commit.commit_slice`), then report the result so far."""
        commit_slice(self.spark, self.warehouse, self.result.cluster, batch, self._write_log, self.written)
        self.counted(batch.first_offset, batch.last_offset, crossed_gaps(batch), records)

    def counted(self, first: int, last: int, gaps: list[tuple[int, int]], records: int) -> None:
        """Count a slice committed up to its commit point ``last``, then report the result so far."""
        result = self.result
        result.gaps.extend(gaps)
        self.committed = last
        result.records += records
        result.slices += 1
        if result.first_offset < 0:
            result.first_offset = first
        result.last_offset = last
        result.seconds = time.monotonic() - self.t0
        if self.progress is not None:
            self.progress(result)


def open_writers(
    spark: SparkSession,
    log_dirs: Sequence[tuple[str | None, str | Path]],
    warehouse: str | Path,
    batch_records: int,
    progress: Callable[[IngestResult], None] | None = None,
    *,
    rebuild: bool = True,
) -> tuple[list[ClusterWriter], KraftlakeError | None]:
    """The writers of log dirs ``(cluster name or None, dir)`` opened together, each resumed at its cluster's
    commit point: the clusters named, checked and the new ones registered in one pass
    (:func:`kraftlake.spark.tables.creation.open_for_writers`: a name, else the cluster id of the log dir's
    ``meta.properties``), every commit point read at once from the Delta logs
    (:func:`kraftlake.spark.tables.bounds.last_offsets`) and published. Returns the writers up to the first
    one refused or that cannot start (a log no snapshot covers), and that error (its cluster and those after
    it are not opened, nothing of them written).

    ``rebuild``: rebuild each resumed cluster's image here (:meth:`ClusterWriter.history_builder`); else it
    is left to where the replay runs (a fleet's task), and only a new cluster's starting image is read.
    """
    t0 = time.monotonic()
    dirs = [partition_dir(d) for _, d in log_dirs]
    logsource.register(spark)
    wanted = [(n, log_dir_cluster_id(d), f"log dir {d}") for (n, _), d in zip(log_dirs, dirs, strict=True)]
    names, refused = open_for_writers(spark, warehouse, wanted)
    committed = last_offsets(spark, warehouse, names)
    logged = last_offsets(spark, warehouse, names, LOG)
    writers: list[ClusterWriter] = []
    for name, d in zip(names, dirs, strict=False):
        try:
            writer = _resumed(spark, warehouse, name, d, committed[name], logged[name], batch_records)
        except KraftlakeError as exc:  # e.g. a log no snapshot covers: the writers before it go on
            return writers, exc
        writer.t0, writer.progress = t0, progress
        writers.append(writer)
    if not rebuild and any(w.builder is None for w in writers) and not images.readable(warehouse):
        rebuild = True  # tables kraftlake's reader cannot read: a task could not rebuild its image
    if rebuild:
        for w in writers:
            w.history_builder()
    return writers, refused


def _resumed(
    spark: SparkSession,
    warehouse: str | Path,
    name: str,
    d: Path,
    done: int,
    logged: int,
    batch_records: int,
) -> ClusterWriter:
    """The writer of cluster ``name`` (log dir ``d``) at its commit point ``done`` (published first), its image
    not rebuilt yet unless this process kept it or the cluster is new (its starting image, a snapshot's stored
    as its seed)."""
    if done >= 0:
        # a writer killed between a commit and its publication left the SQL functions behind it
        retry_conflicts(partial(publish_commit_point, spark, warehouse, name, done))
    key = (id(spark), str(Path(warehouse).resolve()), name)
    kept = _RESUME.pop(key, None)
    builder = kept.builder if kept is not None and done >= 0 and kept.committed == done else None
    start = done + 1
    if done < 0:
        image, start = starting_point(d)
        builder = HistoryBuilder(image, gap_resolver(d))
        if image is not EMPTY:  # a snapshot's image is stored as the cluster's seed
            write_snapshot(spark, warehouse, image, name)
            write_history(spark, warehouse, builder.seed(), name)
    log = LogLeg(logged)
    # a killed run's writes past the commit point: the history is appended only above them (without_written)
    written = max_from_offsets(spark, warehouse, name) if log.logged > start - 1 else None
    result = IngestResult(cluster=name)
    return ClusterWriter(
        spark,
        warehouse,
        d,
        start - 1,
        start,
        log,
        builder,
        written,
        batch_records,
        result,
        time.monotonic(),
        key=key,
    )


def open_writer(
    spark: SparkSession,
    log_dir: str | Path,
    warehouse: str | Path,
    batch_records: int,
    cluster: str | None,
    progress: Callable[[IngestResult], None] | None = None,
) -> ClusterWriter:
    """The writer of a log dir's cluster (named ``cluster``, else by the cluster id of its ``meta.properties``),
    resumed at its commit point: :func:`open_writers` of one, its refusal raised."""
    writers, refused = open_writers(spark, [(cluster, log_dir)], warehouse, batch_records, progress)
    if refused is not None:
        raise refused
    return writers[0]


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
    result, builder = writer.result, writer.history_builder()
    # one writer thread: slice k is written while the driver replays slice k+1; commits stay in order
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftlake-ingest") as pool:
        pending: Future[None] | None = None
        for chunk in slices(log_records(writer.log_dir, writer.start), batch_records):
            batch = builder.feed(chunk)
            if pending is not None:
                pending.result()
            pending = pool.submit(writer.commit, batch, len(chunk))
        if pending is not None:
            pending.result()
    # the slices appended their closes; one fold writes them all into the tables (one MERGE per table)
    if fold:
        result.folded = fold_closes(spark, warehouse)
    wait_checkpoints()
    _RESUME[writer.key] = Resume(builder, writer.committed, writer.committed + 1, writer.log)
    result.seconds = time.monotonic() - writer.t0
    return result
