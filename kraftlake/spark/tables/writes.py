"""Idempotent appends to the warehouse (Delta ``txnVersion`` = a slice's last offset), Delta's checkpoints in the
background, a slice's history versions and closes, and retries of commit conflicts.

Who commits: rows built in the driver (history versions, closes, ``offsets``, the published commit point, a small
micro-batch's ``metadata_log`` rows) are committed by kraftlake itself (:func:`append_arrow`:
:mod:`kraftlake.delta.append`, no Spark job). The bulk ``metadata_log`` appends (an ingest's slices, a large
micro-batch) stay with Spark's writer (:func:`append`), in the executors that decode the records, and so does
any append to a table that needs more of a writer than a blind append."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession

from kraftlake.delta import append as delta_append
from kraftlake.delta import checkpoint as delta_checkpoint
from kraftlake.history import ENTITIES, HistoryBatch
from kraftlake.spark.tables.layout import (
    CLOSES,
    app_id,
    arrow_rows,
    arrow_schema_of,
    close_key,
    engine_info,
    schema_json,
    schema_of,
    table_path,
)

_log = logging.getLogger(__name__)
R = TypeVar("R")


def append(df: DataFrame, warehouse: str | Path, name: str, txn_version: int, cluster: str) -> None:
    """Append ``df`` (rows of ``cluster``) to a table once through Spark: a second append of the cluster with
    the same or a lower ``txn_version`` is skipped."""
    (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id(cluster))
        .option("txnVersion", txn_version)
        .save(table_path(warehouse, name))
    )


def append_arrow(
    spark: SparkSession, warehouse: str | Path, name: str, rows: Any, txn_version: int, cluster: str
) -> None:
    """Append a ``pyarrow.Table`` of the table's schema (rows of ``cluster``) once (same ``txn_version`` rule
    as :func:`append`).

    Committed by kraftlake (:mod:`kraftlake.delta.append`: a Parquet file and a commit, no Spark job),
    through Spark when the table needs more of a writer than blind appends. A commit at which Delta writes a
    checkpoint gets one in the background (:func:`checkpoint_later`, :func:`wait_checkpoints`).
    """
    schema = schema_of(name)
    path = table_path(warehouse, name)
    try:
        done = delta_append.append(
            path,
            rows,
            schema_string=schema_json(name),
            app_id=app_id(cluster),
            txn_version=txn_version,
            engine_info=engine_info(spark),
        )
    except delta_append.Unsupported:
        append(spark.createDataFrame(rows, schema=schema), warehouse, name, txn_version, cluster)
        return
    if done.checkpoint_due:
        checkpoint_later(spark, path)


def append_frame(
    spark: SparkSession, df: DataFrame, warehouse: str | Path, name: str, txn_version: int, cluster: str
) -> None:
    """:func:`append_arrow` of a DataFrame's rows, collected to the driver: for small ones (a live micro-batch),
    where Spark's own Delta write costs more than the rows."""
    append_arrow(spark, warehouse, name, collect_rows(df, name)[0], txn_version, cluster)


def collect_rows(df: DataFrame, name: str, *extra: Any) -> tuple[Any, dict[str, Any]]:
    """A DataFrame's rows as a ``pyarrow.Table`` of table ``name``'s schema, collected to the driver, and the
    columns ``extra`` (``StructField`` s of ``df``) of the same collect apart (by name), row for row."""
    from pyspark.sql import types as T

    # to the table's schema first: pyspark's own conversion refuses a null struct whose fields are NOT NULL
    rows = df.to(T.StructType([*schema_of(name).fields, *extra])).toArrow()
    names = [f.name for f in extra]
    apart = {c: rows.column(c) for c in names}
    rows = rows.drop_columns(names)
    target = arrow_schema_of(name)
    if rows.schema != target:
        rows = rows.cast(target)
    return rows, apart


_CHECKPOINTER: ThreadPoolExecutor | None = None
_CHECKPOINTS: dict[str, Future[None]] = {}
"""The latest checkpoint asked per table path (done ones dropped as new ones are asked; one that is running
was asked before its table's latest commits, so the next one queues behind it)."""
_CHECKPOINTS_LOCK = threading.Lock()


def checkpoint_later(spark: SparkSession, path: str) -> None:
    """Write the table's checkpoint (and clean its expired log files) as Delta's own writers do after a commit
    at a checkpoint interval, on one background thread: a commit does not need it (readers only replay more
    JSON commits meanwhile). kraftlake writes it (:mod:`kraftlake.delta.checkpoint`); Delta does, through the
    session, for a table that needs more of a writer. A table whose previous checkpoint has not started yet
    gets no second one: that one will take the newest version."""
    global _CHECKPOINTER

    def run() -> None:
        try:
            delta_checkpoint.write_checkpoint(path)
            return
        except delta_append.Unsupported as exc:
            _log.info("Delta writes the checkpoint: %s", exc)
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        none = jvm.scala.Option.empty()
        # Delta reads the thread's active session; py4j runs this on a JVM thread of its own
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
        log.checkpointAndCleanUpDeltaLog(log.update(False, none, none), none)

    with _CHECKPOINTS_LOCK:
        for p in [p for p, f in _CHECKPOINTS.items() if f.done()]:
            del _CHECKPOINTS[p]
        waiting = _CHECKPOINTS.get(path)
        if waiting is not None and not waiting.running():
            return
        if _CHECKPOINTER is None:
            _CHECKPOINTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftlake-checkpoint")
        future = _CHECKPOINTER.submit(run)
        future.add_done_callback(_report_checkpoint)
        _CHECKPOINTS[path] = future


def _report_checkpoint(future: Future[None]) -> None:
    """A checkpoint that failed is logged and not retried: the table is whole without it, and the next
    interval writes one."""
    exc = future.exception()
    if exc is not None:
        _log.warning("kraftlake: a Delta checkpoint failed: %s", exc)


def wait_checkpoints() -> None:
    """Wait for the checkpoints asked by :func:`append_arrow` (before the session stops)."""
    with _CHECKPOINTS_LOCK:
        pending = list(_CHECKPOINTS.values())
        _CHECKPOINTS.clear()
    wait(pending)


#: History tables of one slice written at once.
WRITE_THREADS = 4


def closes_rows(batch: HistoryBatch) -> list[dict[str, Any]]:
    """A slice's closes as ``closes`` rows (every history table's in one list)."""
    return [
        {"entity": table, "key": close_key(c[k] for k in ENTITIES[table].key), "to_offset": c["to_offset"]}
        for table, cs in sorted(batch.closes.items())
        for c in cs
    ]


def write_history(spark: SparkSession, warehouse: str | Path, batch: HistoryBatch, cluster: str) -> None:
    """A slice of ``cluster``: its new versions (one append per history table it touches) and its closes (one ``closes`` append),
    side by side: a Delta commit mostly waits on the driver, and the tables are independent until the commit
    point. Every append carries ``txnVersion`` = the slice's last offset, so a replayed slice is skipped per
    table; each is retried if it loses a commit conflict (to a running compaction).

    Why closes are appended rather than applied: ending an open version in place is a MERGE that scans every
    open version of the table (all partitions), 14-20 s at 200k partitions however few it closes; an append is
    proportional to the slice. The ``closes`` rows are folded into the tables by :func:`kraftlake.spark.tables.fold.fold_closes`, and until
    then every reader sees them through :func:`kraftlake.spark.tables.queries.history_query` / :func:`kraftlake.spark.tables.queries.state_query`.
    """
    jobs: list[Callable[[], None]] = []
    for table in sorted(batch.versions):
        if batch.versions[table]:
            jobs.append(
                partial(
                    append_rows, spark, warehouse, table, batch.versions[table], batch.last_offset, cluster
                )
            )
    closes = closes_rows(batch)
    if closes:
        jobs.append(partial(append_rows, spark, warehouse, CLOSES, closes, batch.last_offset, cluster))
    if not jobs:
        return
    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="kraftlake-history") as pool:
        for f in [pool.submit(retry_conflicts, job) for job in jobs]:
            f.result()


def append_rows(
    spark: SparkSession,
    warehouse: str | Path,
    table: str,
    rows: list[dict[str, Any]],
    txn_version: int,
    cluster: str,
) -> None:
    append_arrow(spark, warehouse, table, arrow_rows(table, rows, cluster), txn_version, cluster)


def conflict_errors() -> tuple[type[BaseException], ...]:
    """Delta's commit-conflict exceptions, and kraftlake's own appends' (a concurrent writer won; the write may
    simply be tried again)."""
    import delta.exceptions as dx

    names = (
        "DeltaConcurrentModificationException",
        "ConcurrentWriteException",
        "MetadataChangedException",
        "ProtocolChangedException",
        "ConcurrentAppendException",
        "ConcurrentDeleteReadException",
        "ConcurrentDeleteDeleteException",
        "ConcurrentTransactionException",
    )
    return (*(getattr(dx, n) for n in names if hasattr(dx, n)), delta_append.CommitConflict)


def retry_conflicts(
    fn: Callable[[], R],
    attempts: int = 8,
    backoff_s: float = 0.5,
    max_backoff_s: float = 8.0,
    on_retry: Callable[[int], object] | None = None,
) -> R:
    """``fn()``, tried again with backoff when it loses a Delta commit conflict (e.g. to a scheduled compaction's
    DELETE or OPTIMIZE, or a compaction step to the stream's appends). Only for idempotent writes: a txn-id
    append or MERGE that did commit is skipped. ``on_retry(attempt)`` is called before each new try."""
    errors = conflict_errors()
    for attempt in range(attempts):
        try:
            return fn()
        except errors:
            if attempt == attempts - 1:
                raise
            if on_retry is not None:
                on_retry(attempt)
            time.sleep(min(max_backoff_s, backoff_s * (2**attempt)))
    raise AssertionError("unreachable")
