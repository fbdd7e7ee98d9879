"""``compact``: a snapshot at N, retention deletes, OPTIMIZE and VACUUM; idempotent, so it can be scheduled.

The snapshot is taken at N, or just before the metadata transaction open at N. Retention keeps every state from
the *retention snapshot* S on: the newest stored snapshot at or below the oldest offset the policy keeps
(``N - retain_offsets``, or the first offset of the last ``retain_hours``). Below S the tables then hold nothing a
query at an offset >= S needs: ``metadata_log`` rows at or below S, history versions that ended at or before S
and older snapshots are deleted. Queries at offsets before S are outside the retained history: S is recorded in
the ``bounds`` table before the deletes, and ``reconstruct``, the ``<entity>_at(N)`` / ``_at_time`` SQL
functions and the commands over them say so rather than answer with what outlived the cut.

Before the deletes it folds the pending ``closes`` (the ends of versions the stream appended rather than
wrote in place) into the history tables.

Lean when scheduled often: every step that would change nothing is skipped and reported in
``CompactResult.skipped``:

- a DELETE runs only if the table's smallest value of the deleted column is within the cut (one Spark action
  for every table's minimum);
- OPTIMIZE runs only on a table that got data commits since its last OPTIMIZE, read from the table's Delta
  history (commits of VACUUM, or whose metrics show no file added or removed, are not data commits; an OPTIMIZE
  that found nothing to rewrite commits nothing, so the version it saw is remembered in
  ``<warehouse>/_compact/state.json``);
- VACUUM runs only when it has files to delete: a commit removed files (or replaced deletion vectors) and is
  now older than the retention, with no VACUUM since (kept as hours with removals in the state file, bounded
  by the retention), or when the last VACUUM is older than max(retention, 1 day) (files no commit knows of,
  left by a failed writer, are found only by listing). A table created less than the retention ago holds no
  file old enough to go, whatever its history: never vacuumed, it is not listed either.

Safe while the stream runs, and never failed by it. Delta OSS commits data changes at the table's
``delta.isolationLevel``, Serializable unless set (the appends' commits record it), and checks concurrent
appends against a reader's *partition* predicates only: on these unpartitioned (clustered) tables any append
committed while a DELETE runs conflicts with it (``ConcurrentAppendException``), whatever the offsets. OPTIMIZE
and VACUUM change no data (snapshot isolation: appends never conflict with them; a fold's MERGE rewriting a
file OPTIMIZE compacted does). A step that loses such a race is retried with backoff (counted in ``retries``);
one still losing after that is *deferred* (``CompactResult.deferred``) for the next run instead of failing this
one: each step is idempotent, and the deletes go log first, snapshots last, so a deferred step never leaves a
retained offset without its snapshot.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.progress import Progress
from kraftlake.spark.tables.bounds import has_snapshot, last_offset, record_retained_from, write_snapshot
from kraftlake.spark.tables.creation import open_cluster
from kraftlake.spark.tables.fold import fold_closes
from kraftlake.spark.tables.layout import (
    BOUNDS,
    CLOSES,
    HISTORY_TABLES,
    LOG,
    OFFSETS,
    SNAPSHOTS,
    sql_string,
    table_path,
    table_ref,
)
from kraftlake.spark.tables.writes import conflict_errors, retry_conflicts
from pipelines.reconstruct import image_at_offset

COMPACTED = (LOG, *HISTORY_TABLES, CLOSES, SNAPSHOTS, OFFSETS, BOUNDS)
#: Commits read back from a table's history; with no OPTIMIZE among them the table counts as unoptimized.
HISTORY_LIMIT = 200
STATE_FILE = Path("_compact") / "state.json"
#: OPTIMIZEs run side by side
OPTIMIZE_THREADS = 4
#: Operations that never change a table's data files.
_NO_DATA = frozenset(
    {
        "VACUUM START",
        "VACUUM END",
        "SET TBLPROPERTIES",
        "UNSET TBLPROPERTIES",
        "CHANGE COLUMN",
        "ADD CONSTRAINT",
        "DROP CONSTRAINT",
    }
)


@dataclass
class CompactResult:
    snapshot_offset: int
    snapshot_rows: int
    retained_from: int | None
    deleted: dict[str, int] = field(default_factory=dict)
    checkpoint: str | None = None
    seconds: float = 0.0
    optimized: list[str] = field(default_factory=list)
    vacuumed: list[str] = field(default_factory=list)
    #: step (``delete``, ``optimize``, ``vacuum``) -> tables it was skipped on, having nothing to do
    skipped: dict[str, list[str]] = field(default_factory=dict)
    #: Delta commit conflicts with concurrent writers that a step was retried after
    retries: int = 0
    #: the cluster compacted
    cluster: str = ""
    #: step -> tables where it kept losing to concurrent commits: left for the next run
    deferred: dict[str, list[str]] = field(default_factory=dict)
    #: pending ``closes`` written into the history tables (:func:`kraftlake.spark.tables.fold_closes`)
    folded: int = 0


@dataclass(frozen=True)
class Commit:
    version: int
    timestamp_ms: int
    operation: str
    parameters: dict[str, str]
    metrics: dict[str, str]

    def _count(self, *needles: str) -> int:
        return sum(
            int(v)
            for k, v in self.metrics.items()
            if any(n in k.lower() for n in needles) and str(v).lstrip("-").isdigit()
        )

    @property
    def changes_data(self) -> bool:
        """Whether the commit added or removed data files or deletion vectors (what OPTIMIZE may rework)."""
        if self.operation in _NO_DATA:
            return False
        if (
            self.operation in ("CREATE TABLE", "CREATE OR REPLACE TABLE", "REPLACE TABLE")
            and not self.metrics
        ):
            return False
        if not self.metrics:
            return True
        return self._count("added", "removed", "numfiles", "numoutputrows", "deletionvectors") > 0

    @property
    def removes_files(self) -> bool:
        """Whether the commit left files behind that VACUUM deletes once they are older than the retention."""
        if self.operation in _NO_DATA or self.operation == "CREATE TABLE":
            return False
        if (
            self.operation in ("WRITE", "STREAMING UPDATE")
            and self.parameters.get("mode", "").strip('"') == "Append"
        ):
            return False
        if not self.metrics:
            return True  # an operation we know nothing of: assume it did
        return self._count("removed", "deletionvectorsupdated") > 0


def table_history(path: str, limit: int = HISTORY_LIMIT) -> list[Commit]:
    """The table's last ``limit`` commits, newest first, from the ``commitInfo`` of its ``_delta_log`` files.

    Read straight from the log (Delta's protocol: commit ``v`` is ``_delta_log/<v as 20 digits>.json``; delta-spark
    writes a ``commitInfo`` action into each) rather than through ``DeltaTable.history``: no Spark job, and a
    session that wrote commits itself was seen listing its history with some of them missing. A commit whose
    commitInfo cannot be read counts as an unknown operation (it may have done anything).
    """
    log = Path(path) / "_delta_log"
    versions = sorted(
        (int(p.name[:20]) for p in log.glob("*.json") if len(p.name) == 25 and p.name[:20].isdigit()),
        reverse=True,
    )[:limit]
    out = []
    for v in versions:
        info: dict[str, Any] = {}
        try:
            with open(log / f"{v:020d}.json", encoding="utf-8") as f:
                for line in f:
                    if line.startswith('{"commitInfo"'):
                        info = json.loads(line)["commitInfo"]
                        break
        except (OSError, ValueError):
            pass
        out.append(
            Commit(
                v,
                int(info.get("inCommitTimestamp") or info.get("timestamp") or 0),
                str(info.get("operation", "UNKNOWN")),
                {k: str(x) for k, x in (info.get("operationParameters") or {}).items()},
                {k: str(x) for k, x in (info.get("operationMetrics") or {}).items()},
            )
        )
    return out


def created_ms(path: str) -> int | None:
    """When the table was created: the commit timestamp of its version 0, None once Delta's log cleanup
    removed that commit (the table is older than the log retention, 30 days unless set) or it cannot be read."""
    try:
        with open(Path(path) / "_delta_log" / f"{0:020d}.json", encoding="utf-8") as f:
            for line in f:
                if line.startswith('{"commitInfo"'):
                    info = json.loads(line)["commitInfo"]
                    stamp = info.get("inCommitTimestamp") or info.get("timestamp")
                    return int(stamp) if stamp else None
    except (OSError, ValueError):
        return None
    return None


def needs_optimize(history: list[Commit], optimized_version: int | None) -> bool:
    """Whether a data commit came after the last OPTIMIZE (or after ``optimized_version``, OPTIMIZE's no-op)."""
    for c in history:  # newest first
        if c.operation == "OPTIMIZE" or (optimized_version is not None and c.version <= optimized_version):
            return False
        if c.changes_data:
            return True
    # the whole history without a data commit (an empty table), or a longer one than we read: only the former
    # is certain to need nothing
    return bool(history) and history[-1].version > 0


HOUR_MS = 3_600_000


def note_removals(mine: dict[str, Any], history: list[Commit]) -> None:
    """Record, per hour, the removals of commits not seen before (what a later VACUUM will have to delete).

    ``mine`` is the table's entry of the compaction state: ``seen_version`` (the newest commit looked at),
    ``removal_hours`` (hours, since the epoch, in which files were removed and no VACUUM deleted them yet).
    """
    seen = mine.get("seen_version")
    hours = set(mine.get("removal_hours", []))
    if history:
        oldest = history[-1]
        if seen is not None and oldest.version > seen + 1:
            # more commits came than we read: some removal may hide among them, no earlier than the last look
            hours.add(int(mine.get("seen_at_ms", oldest.timestamp_ms)) // HOUR_MS)
        for c in history:
            if (seen is None or c.version > seen) and c.removes_files:
                hours.add(c.timestamp_ms // HOUR_MS)
        mine["seen_version"], mine["seen_at_ms"] = history[0].version, history[0].timestamp_ms
    mine["removal_hours"] = sorted(hours)


def needs_vacuum(mine: dict[str, Any], now_ms: int, retain_ms: int, created_at_ms: int | None = None) -> bool:
    """Whether VACUUM has files to delete: a removal older than the retention that no VACUUM followed.

    Never on a table created (``created_at_ms``) less than the retention ago: every file in it, removed or
    never committed, is younger than the table, so younger than the retention. Otherwise without a VACUUM in the
    state it runs (a first compaction), and once the last one is older than max(retention, 1 day): files no
    commit knows of (a writer that failed before committing) are found only by listing the directory.
    """
    if created_at_ms is not None and created_at_ms > now_ms - retain_ms:
        return False
    last = mine.get("vacuumed_at_ms")
    if last is None or int(last) < now_ms - max(retain_ms, 24 * HOUR_MS):
        return True
    hours = mine.get("removal_hours", [])
    # an hour's removals have all aged once its end is past the retention (the test `vacuumed` keeps hours by)
    return bool(hours) and (int(hours[0]) + 1) * HOUR_MS <= now_ms - retain_ms


def vacuumed(mine: dict[str, Any], now_ms: int, retain_ms: int) -> None:
    """A VACUUM started at ``now_ms`` deleted what was removed before ``now_ms - retain_ms``."""
    mine["vacuumed_at_ms"] = now_ms
    mine["removal_hours"] = [
        h for h in mine.get("removal_hours", []) if (h + 1) * HOUR_MS > now_ms - retain_ms
    ]


def _of(cluster: str) -> str:
    return f"cluster = {sql_string(cluster)}"


def _retention_offset(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    offset: int,
    retain_offsets: int | None,
    retain_hours: float | None,
) -> int | None:
    if retain_offsets is not None:
        return offset - retain_offsets
    if retain_hours is not None:
        cutoff = int(time.time() * 1000 - retain_hours * 3_600_000)
        row = spark.sql(
            f"SELECT min(offset) AS o FROM {table_ref(warehouse, OFFSETS)} "
            f"WHERE {_of(cluster)} AND timestamp >= {cutoff}"
        ).first()
        return offset if row is None or row["o"] is None else int(row["o"])
    return None


def _delete(spark: SparkSession, warehouse: str | Path, table: str, condition: str) -> int:
    """``DELETE`` rows in one statement (Delta returns the deleted count; no separate count scan)."""
    row = spark.sql(f"DELETE FROM {table_ref(warehouse, table)} WHERE {condition}").first()
    if row is None or "num_affected_rows" not in row.asDict():
        return 0
    return int(row["num_affected_rows"] or 0)


def _run_sql(spark: SparkSession, statement: str) -> None:
    spark.sql(statement).collect()


def _deletions(cluster: str, s: int) -> dict[str, tuple[str, str, Callable[[int], bool]]]:
    """table -> (column whose minimum decides, DELETE condition, whether that minimum means rows to delete),
    the rows of ``cluster`` only."""
    # in this order: older snapshots go last, once nothing retained can need them
    of = _of(cluster)
    out: dict[str, tuple[str, str, Callable[[int], bool]]] = {
        LOG: ("offset", f"{of} AND offset <= {s}", lambda m: m <= s)
    }
    for table in HISTORY_TABLES:
        out[table] = ("to_offset", f"{of} AND to_offset IS NOT NULL AND to_offset <= {s}", lambda m: m <= s)
    out[SNAPSHOTS] = ("snapshot_offset", f"{of} AND snapshot_offset < {s}", lambda m: m < s)
    return out


def _minima(
    spark: SparkSession, warehouse: str | Path, cluster: str, columns: Iterable[tuple[str, str]]
) -> dict[str, int | None]:
    """Each table's minimum of a column among the rows of ``cluster``, in one Spark action."""
    parts = [
        f"SELECT '{t}' AS t, min({c}) AS m FROM {table_ref(warehouse, t)} WHERE {_of(cluster)}"
        for t, c in columns
    ]
    return {
        r["t"]: None if r["m"] is None else int(r["m"])
        for r in spark.sql(" UNION ALL ".join(parts)).collect()
    }


def _load_state(warehouse: str | Path) -> dict[str, Any]:
    path = Path(warehouse) / STATE_FILE
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def _save_state(warehouse: str | Path, state: dict[str, Any]) -> None:
    path = Path(warehouse) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    tmp.replace(path)


_Retry = Callable[[Callable[[], Any]], Any]


def compact(
    spark: SparkSession,
    warehouse: str | Path,
    offset: int | None = None,
    retain_offsets: int | None = None,
    retain_hours: float | None = None,
    checkpoint_dir: str | Path | None = None,
    vacuum_hours: float = 168.0,
    optimize: bool = True,
    retry_backoff_s: float = 0.5,
    progress: bool | None = None,
    cluster: str | None = None,
) -> CompactResult:
    """Compact the cluster ``cluster`` (else the one cluster the warehouse holds): its snapshot, its retention
    deletes (of its rows only: another cluster keeps its whole history); the fold, OPTIMIZE and VACUUM are of the
    whole tables.

    ``retry_backoff_s``: the first wait after a lost commit conflict (doubling, at most 8 s, 8 tries a step).

    A progress line (snapshot, deletes, then OPTIMIZE/VACUUM table by table) on stderr when it is a terminal;
    ``progress`` forces it on or off."""
    t0 = time.monotonic()
    # steps: the snapshot, the deletes, the OPTIMIZEs, then each table's VACUUM decision
    bar = Progress("compact", 3 + len(COMPACTED), unit="steps", enabled=progress)
    bar.update(0, note="snapshot")
    retried: list[int] = []  # one entry per retry after a lost Delta commit conflict
    retry = partial(retry_conflicts, on_retry=retried.append, backoff_s=retry_backoff_s)
    conflicts = conflict_errors()
    name = open_cluster(spark, warehouse, cluster)
    result = _snapshot_step(spark, warehouse, name, offset, checkpoint_dir, retry)
    result.cluster = name
    try:
        # before the deletes, so that versions ended by a pending close are seen as ended
        result.folded = fold_closes(spark, warehouse, retry)
    except conflicts:
        result.deferred.setdefault("fold", []).append(CLOSES)
    bar.advance(1, note="deletes")
    keep = _retention_offset(spark, warehouse, name, result.snapshot_offset, retain_offsets, retain_hours)
    if keep is not None:
        _delete_step(spark, warehouse, name, keep, result, retry, conflicts)
    state = _load_state(warehouse)
    bar.advance(1, note="optimize")
    histories = {table: table_history(table_path(warehouse, table)) for table in COMPACTED}
    _optimize_step(spark, warehouse, optimize, state, histories, result, retry, conflicts, bar)
    bar.advance(1)
    _vacuum_step(spark, warehouse, vacuum_hours, state, histories, result, retry, conflicts, bar)
    bar.close()
    _save_state(warehouse, state)
    result.retries = len(retried)
    result.seconds = time.monotonic() - t0
    return result


def _snapshot_step(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    offset: int | None,
    checkpoint_dir: str | Path | None,
    retry: _Retry,
) -> CompactResult:
    """The snapshot at ``offset`` (the last one when None) written, and its ``.checkpoint`` when asked."""
    n = last_offset(spark, warehouse, cluster) if offset is None else offset
    if checkpoint_dir is None and has_snapshot(spark, warehouse, cluster, n):
        # nothing committed since the snapshot at n (a scheduled run with nothing new): no image to rebuild.
        # Only images without an open transaction are stored, so n needs no moving back either.
        return CompactResult(n, 0, None)
    image = image_at_offset(spark, warehouse, cluster, n)
    if image.transaction is not None:
        # a snapshot holds committed state only: take the offset before the open transaction began
        n = image.transaction.begin_offset - 1
        image = image_at_offset(spark, warehouse, cluster, n)
    rows = retry(lambda: write_snapshot(spark, warehouse, image, cluster))
    result = CompactResult(n, rows, None)
    if checkpoint_dir is not None:
        from kraftlake.image import write_snapshot as write_checkpoint

        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        result.checkpoint = str(write_checkpoint(image, checkpoint_dir))
    return result


def _delete_step(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    keep: int,
    result: CompactResult,
    retry: _Retry,
    conflicts: tuple[type[BaseException], ...],
) -> None:
    """Delete what the newest snapshot at or before ``keep`` makes unneeded."""
    row = spark.sql(
        f"SELECT max(snapshot_offset) AS s FROM {table_ref(warehouse, SNAPSHOTS)} "
        f"WHERE {_of(cluster)} AND snapshot_offset <= {int(keep)}"
    ).first()
    s = None if row is None else row["s"]
    if s is None:
        return
    result.retained_from = int(s)
    # before anything below S goes: from now on the SQL functions refuse the offsets below S
    retry(partial(record_retained_from, spark, warehouse, cluster, int(s)))
    plan = _deletions(cluster, int(s))
    minima = _minima(spark, warehouse, cluster, ((t, c) for t, (c, _, _) in plan.items()))
    for table, (_, condition, due) in plan.items():
        m = minima.get(table)
        if m is None or not due(m):
            result.deleted[table] = 0
            result.skipped.setdefault("delete", []).append(table)
            continue
        try:
            result.deleted[table] = retry(partial(_delete, spark, warehouse, table, condition))
        except conflicts:
            result.deleted[table] = 0
            result.deferred.setdefault("delete", []).append(table)
            if table == LOG:
                # the older snapshots stay while the log rows they cover do: the rest waits too
                result.deferred["delete"].extend(t for t in plan if t != LOG)
                break


def _optimize_step(
    spark: SparkSession,
    warehouse: str | Path,
    optimize: bool,
    state: dict[str, Any],
    histories: dict[str, list[Commit]],
    result: CompactResult,
    retry: _Retry,
    conflicts: tuple[type[BaseException], ...],
    bar: Progress,
) -> None:
    """OPTIMIZE the tables written to since their last OPTIMIZE (``histories``/``state`` follow)."""
    to_optimize = [
        t
        for t in COMPACTED
        if optimize and needs_optimize(histories[t], state.setdefault(t, {}).get("optimized_version"))
    ]
    if optimize:
        result.skipped["optimize"] = [t for t in COMPACTED if t not in to_optimize]

    def _optimize(table: str) -> str:
        retry(partial(_run_sql, spark, f"OPTIMIZE delta.`{table_path(warehouse, table)}`"))
        return table

    # one table's OPTIMIZE is a few small Spark jobs and a commit, mostly driver-side waits: side by side they
    # overlap (the tables are independent, so no commit of one conflicts with another's)
    with ThreadPoolExecutor(max_workers=OPTIMIZE_THREADS, thread_name_prefix="kraftlake-optimize") as pool:
        futures = {pool.submit(_optimize, table): table for table in to_optimize}
        for future in as_completed(futures):
            table = futures[future]
            try:
                future.result()
            except conflicts:
                result.deferred.setdefault("optimize", []).append(table)
            else:
                result.optimized.append(table)
                history = table_history(table_path(warehouse, table))
                # OPTIMIZE with nothing to rewrite commits nothing: remember the version it saw
                state[table]["optimized_version"] = history[0].version if history else None
                histories[table] = history
            bar.update(bar.done, note=f"optimized {table}")
    # reported in the table order, whichever finished first
    result.optimized.sort(key=COMPACTED.index)


def _vacuum_step(
    spark: SparkSession,
    warehouse: str | Path,
    vacuum_hours: float,
    state: dict[str, Any],
    histories: dict[str, list[Commit]],
    result: CompactResult,
    retry: _Retry,
    conflicts: tuple[type[BaseException], ...],
    bar: Progress,
) -> None:
    """VACUUM each table whose removed files have outlived the retention."""
    retain_ms = int(vacuum_hours * HOUR_MS)
    for table in COMPACTED:
        bar.update(bar.done, note=table)
        path = table_path(warehouse, table)
        mine = state.setdefault(table, {})
        note_removals(mine, histories[table])
        now_ms = int(time.time() * 1000)
        if needs_vacuum(mine, now_ms, retain_ms, created_ms(path)):
            try:
                retry(partial(_run_sql, spark, f"VACUUM delta.`{path}` RETAIN {vacuum_hours} HOURS"))
            except conflicts:
                result.deferred.setdefault("vacuum", []).append(table)
            else:
                vacuumed(mine, now_ms, retain_ms)
                result.vacuumed.append(table)
        else:
            result.skipped.setdefault("vacuum", []).append(table)
        bar.advance(1)
