"""``ingest`` of a fleet: several log dirs into one warehouse, each cluster's history replayed on the executors.

The clusters' writers are opened in the driver in one pass (:func:`pipelines.ingest.open_writers`: the names
checked against the registry read once, the new ones registered in one commit, every commit point read from
the Delta logs). Each cluster goes to one Spark task (:mod:`pipelines.replay_task`) with its resume image
pickled in the task's row when the driver has it (a new cluster's starting image), else with its commit point,
at which the task rebuilds the image from the warehouse (so the resumed clusters' rebuilds run side by side on
the executors, not one after another in the driver). The task replays the cluster's log serially where it runs
and writes each slice's data files into the warehouse's tables there (:mod:`pipelines.slice_files`), as Spark's
own Delta writer has its executors write the files; what comes back per slice is the files' Delta ``add``
actions. The driver commits the slices of each cluster in order (:func:`pipelines.slice_files.commit_written`:
``txnAppId`` per cluster, ``txnVersion`` = the slice's last offset, ``offsets`` last), so its share of a slice
is a few small commits, not the rows; one driver thread per cluster submits its task and commits what it
returns, so N clusters replay and write on N cores at once. The slices are cut at the same offsets as the
driver's replay cuts them, so both give the same tables.

A cluster whose replay fails (a record the image refuses, a hole no snapshot covers) keeps the slices committed
before the failure; the other clusters go on, and the first failure is raised once all have finished.
"""

from __future__ import annotations

import logging
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.image.source import partition_dir
from kraftlake.spark.tables.fold import fold_closes
from kraftlake.spark.tables.layout import LOG, WarehouseError
from kraftlake.spark.tables.writes import wait_checkpoints
from pipelines.commit import gaps_of_jumps
from pipelines.ingest import ClusterWriter, IngestResult, open_writers
from pipelines.replay_task import replay_tasks, warm_worker
from pipelines.slice_files import TableFormat, WrittenSlice, commit_written, table_formats

_log = logging.getLogger(__name__)

#: Clusters replayed at once (one driver thread and one Spark task each).
MAX_PARALLEL = 16


def ingest_fleet(
    spark: SparkSession,
    log_dirs: Sequence[tuple[str | None, str | Path]],
    warehouse: str | Path,
    batch_records: int = 500_000,
    progress: Callable[[IngestResult], None] | None = None,
    fold: bool = True,
) -> list[IngestResult]:
    """Import (or resume importing) the log dirs ``(cluster name or None, dir)`` into ``warehouse``, each as its
    cluster, the histories replayed on the executors; the results in the order of ``log_dirs``.

    ``progress`` is called (from one thread at a time) with a cluster's result after each of its commits.
    ``fold``: fold each cluster's closes into the history tables once its slices are committed, and what is
    left once all are (counted on the first result).
    Raises :class:`WarehouseError` for a log dir or a name given twice (before anything is opened); a cluster
    refused when the writers open (:func:`pipelines.ingest.open_writers`: e.g. a cluster id that another log
    dir has as well) writes nothing, nor do those after it, and its refusal is raised once the clusters before
    it have finished.
    """
    lock = threading.Lock()

    def report(result: IngestResult) -> None:
        if progress is not None:
            with lock:
                progress(result)

    dirs = [partition_dir(d).resolve() for _, d in log_dirs]
    names = [n for n, _ in log_dirs if n is not None]
    twice = [x for seq in (dirs, names) for i, x in enumerate(seq) if x in seq[:i]]
    if twice:
        raise WarehouseError(f"{twice[0]} is given twice: one log dir a cluster, one name a log dir")
    warming = threading.Thread(target=warm_workers, args=(spark,), name="kraftlake-warm", daemon=True)
    warming.start()
    formats = table_formats()
    # every writer opened in one pass (one registry read and append, the commit points from the Delta logs);
    # the resumed clusters' images are rebuilt in their tasks, side by side
    writers, refused = open_writers(spark, log_dirs, warehouse, batch_records, report, rebuild=False)
    errors: list[BaseException] = [] if refused is None else [refused]
    with ThreadPoolExecutor(
        max_workers=max(1, min(len(log_dirs), MAX_PARALLEL)), thread_name_prefix="kraftlake-fleet"
    ) as pool:
        futures = [pool.submit(replay_and_commit, spark, w, formats, fold) for w in writers]
        for future in futures:
            failed = future.exception()
            if failed is not None:
                errors.append(failed)
    warming.join()
    if errors:
        raise errors[0]
    results = [w.result for w in writers]
    if fold and results:
        # what the clusters' own folds left: none but a table that needs Spark's MERGE
        t = time.monotonic()
        results[0].folded += fold_closes(spark, warehouse)
        results[0].fold_s += time.monotonic() - t
    t = time.monotonic()
    wait_checkpoints()
    if results:
        results[0].checkpoints_s = time.monotonic() - t
    for w in writers:
        w.result.seconds = time.monotonic() - w.t0
    return results


def warm_workers(spark: SparkSession) -> None:
    """Start the executors' Python workers with the replay's modules imported (:func:`pipelines.replay_task.warm_worker`,
    a task a core), while the driver opens the clusters' writers: a worker's cold start (the interpreter, pyarrow,
    kraftlake) is seconds, and Spark reuses the worker for the replay tasks queued behind. Best effort: a
    failure here costs the replay nothing but that start."""
    try:
        spark.sparkContext.setLocalProperty("spark.job.description", "kraftlake: start the Python workers")
        cores = max(1, spark.sparkContext.defaultParallelism)
        spark.sparkContext.parallelize(range(cores), cores).mapPartitions(warm_worker).collect()
    except Exception as exc:  # the replay tasks start their workers themselves
        _log.info("the Python workers were not started ahead: %s", exc)


def task_row(writer: ClusterWriter, formats: dict[str, TableFormat]) -> dict[str, Any]:
    """The task row of a writer's cluster: where its replay starts, with its resume image when the driver has
    it (a new cluster's starting image, one kept in this process) or else the commit point the task rebuilds
    it at, and what its slices' files need (:class:`pipelines.slice_files.SliceWriter`)."""
    builder = writer.builder
    return {
        "cluster": writer.result.cluster,
        "log_dir": str(writer.log_dir),
        "start": writer.start,
        "batch_records": writer.batch_records,
        "image": None if builder is None else pickle.dumps(builder.image, pickle.HIGHEST_PROTOCOL),
        "rebuild_at": writer.committed if builder is None else None,
        "warehouse": str(Path(writer.warehouse).resolve()),
        "formats": pickle.dumps(formats, pickle.HIGHEST_PROTOCOL),
        "written": None if writer.written is None else pickle.dumps(writer.written),
        "logged": writer.log.logged,
    }


def replay_and_commit(
    spark: SparkSession, writer: ClusterWriter, formats: dict[str, TableFormat], fold: bool = True
) -> None:
    """One cluster: its replay in one Spark task, then each slice it wrote committed in order, then (``fold``)
    its closes folded into the history tables while the other clusters still replay; a replay that failed
    raises its error after the slices before it are committed."""
    cluster = writer.result.cluster
    sc = spark.sparkContext
    sc.setLocalProperty("spark.job.description", f"kraftlake replay {cluster}")
    t0 = time.monotonic()
    replayed = sc.parallelize([task_row(writer, formats)], 1).mapPartitions(replay_tasks).collect()
    writer.result.task_s = time.monotonic() - t0
    for row in sorted(replayed, key=lambda r: int(r["slice"])):
        if row["error"] is not None:
            raise row["error"]
        files: WrittenSlice = row["files"]
        t = time.monotonic()
        commit_written(spark, writer.warehouse, cluster, files)
        writer.result.commit_s += time.monotonic() - t
        writer.result.write_s += files.write_s
        writer.result.replay_s += files.replay_s
        if LOG in files.tables:
            writer.log.logged = files.last_offset
        writer.counted(files.first_offset, files.last_offset, gaps_of_jumps(files.jumps), int(row["records"]))
    if fold:
        t = time.monotonic()
        writer.result.folded = fold_closes(spark, writer.warehouse, cluster=cluster)
        writer.result.fold_s = time.monotonic() - t
