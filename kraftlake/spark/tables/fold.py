"""Folding the pending closes into the history tables' ``to_offset``: committed by kraftlake (the files holding a
version to end rewritten), or through Spark (a MERGE per table) when a table needs more of a writer.

Why closes wait to be folded: ending a version in place rewrites every file that holds an open version of the
table, whatever the slice. So a slice only appends the ends of the versions it closes to ``closes``
(:func:`kraftlake.spark.tables.writes.write_history`), and a fold writes many at once: at the end of ``ingest``
(per cluster in a fleet's, as its slices are committed) and of a ``stream`` run, in a stream once
``pipelines.stream.FOLD_AT`` are pending, and in ``compact`` before its deletes. Until then every reader applies
them (:func:`kraftlake.spark.tables.queries.state_query` and ``history_query``,
:mod:`kraftlake.warehouse.versions`), so an answer is the same before, during and after a fold.

A file with a deletion vector (left by ``compact``'s DELETEs) is read less the rows it marks and replaced by a
file without one (:mod:`kraftlake.delta.rewrite`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.delta import append as delta_append
from kraftlake.delta import rewrite as delta_rewrite
from kraftlake.history import ENTITIES
from kraftlake.spark.tables.bounds import rows_without_jvm
from kraftlake.spark.tables.layout import (
    CLOSES,
    CLUSTER,
    KEY_SEP,
    engine_info,
    key_sql,
    never_written,
    table_path,
    table_ref,
)
from kraftlake.spark.tables.queries import pending_closes_sql
from kraftlake.spark.tables.writes import WRITE_THREADS, checkpoint_later, retry_conflicts

_log = logging.getLogger(__name__)


def pending_closes(spark: SparkSession, warehouse: str | Path) -> int:
    """How many closes wait in ``closes`` to be folded."""
    if never_written(warehouse, CLOSES):
        return 0
    held = rows_without_jvm(warehouse, CLOSES, (), ["entity"])
    if held is not None:
        return int(held.num_rows)
    row = spark.sql(f"SELECT count(*) AS n FROM {table_ref(warehouse, CLOSES)}").first()
    return 0 if row is None else int(row["n"])


def fold_closes(
    spark: SparkSession,
    warehouse: str | Path,
    retry: Callable[[Callable[[], Any]], Any] | None = None,
    cluster: str | None = None,
) -> int:
    """Write the pending closes into the history tables' ``to_offset`` and empty ``closes`` of them.

    Per table with pending closes, one commit sets the ``to_offset`` of each still-open version a close ends
    (the first close of its key after its ``from_offset``); then one commit removes the closes folded. Readers
    see the same answers before, during and after (a version ended in the table and by a pending close ends at
    the same offset), and each step is idempotent: a fold cut short is completed by the next one. Returns the
    closes folded. ``retry`` runs the fold (default :func:`kraftlake.spark.tables.writes.retry_conflicts`).

    kraftlake commits the fold itself (:func:`_fold_here`: the files holding a version to end rewritten,
    no Spark job); through Spark (a MERGE per table, a DELETE) when a table needs more of a writer.

    ``cluster``: fold only that cluster's closes, those in files holding its closes alone (as a fleet's tasks
    write them), reading only the history files whose statistics may hold its versions; the folds of
    different clusters touch different files and run side by side. A table that needs more of a writer is
    then left to the next fold of every cluster.
    """
    retry = retry or retry_conflicts
    if never_written(warehouse, CLOSES):
        return 0
    try:
        return int(retry(partial(_fold_here, spark, warehouse, cluster)))
    except delta_append.Unsupported as exc:
        if cluster is not None:
            _log.info("the closes of %s are left to the next fold: %s", cluster, exc)
            return 0
        _log.info("folding the pending closes through Spark: %s", exc)
        return _fold_with_spark(spark, warehouse, retry)


def _of_cluster(add: dict[str, Any], cluster: str, alone: bool) -> bool:
    """Whether a file's statistics say it holds rows of ``cluster`` only (``alone``), or may hold some."""
    stats = delta_rewrite.stats_of(add)
    if stats is None:
        return not alone
    low = (stats.get("minValues") or {}).get(CLUSTER)
    high = (stats.get("maxValues") or {}).get(CLUSTER)
    if low is None or high is None:
        return not alone and (stats.get("nullCount") or {}).get(CLUSTER) != stats.get("numRecords")
    return low == high == cluster if alone else bool(low <= cluster <= high)


def _fold_here(spark: SparkSession, warehouse: str | Path, cluster: str | None = None) -> int:
    """:func:`fold_closes` committed by kraftlake (:mod:`kraftlake.delta.rewrite`): the closes read from
    their files, per history table the files holding an open version a close ends rewritten with its
    ``to_offset`` (one commit per table), then the folded closes' files removed (one commit)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    closes_snap = delta_rewrite.snapshot(table_path(warehouse, CLOSES))
    files = [f for f in closes_snap.files.values() if cluster is None or _of_cluster(f, cluster, alone=True)]
    parts = [delta_rewrite.read_file(closes_snap, f, [CLUSTER, "entity", "key", "to_offset"]) for f in files]
    closes = pa.concat_tables(parts) if parts else None
    if closes is None or closes.num_rows == 0:
        return 0
    # a close ends a version of its own cluster: matched on (cluster, key)
    keyed = pa.table(
        {
            "entity": closes.column("entity"),
            "key": pc.binary_join_element_wise(closes.column(CLUSTER), closes.column("key"), KEY_SEP),
            "to_offset": closes.column("to_offset"),
        }
    )
    tables = sorted(pc.unique(keyed.column("entity")).to_pylist())
    # the tables are independent, and Parquet and Arrow's kernels run outside the GIL: folded side by side
    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="kraftlake-fold") as pool:
        folds = [
            pool.submit(
                _fold_table_here,
                spark,
                warehouse,
                table,
                keyed.filter(pc.equal(keyed.column("entity"), table)).select(["key", "to_offset"]),
                cluster,
            )
            for table in tables
        ]
        for fold in folds:
            fold.result()
    # every row of these files is folded now (the closes appended since are in files of later versions)
    _replace(spark, closes_snap, files, [], "DELETE", "folded")
    return int(closes.num_rows)


def _replace(
    spark: SparkSession,
    snap: Any,
    removed: list[dict[str, Any]],
    added: list[Any],
    operation: str,
    predicate: str,
) -> None:
    """:func:`kraftlake.delta.rewrite.replace`, with Delta's checkpoint when the version is due one."""
    done = delta_rewrite.replace(
        snap,
        removed,
        added,
        operation=operation,
        parameters={"predicate": predicate},
        engine_info=engine_info(spark),
    )
    if done.checkpoint_due:
        checkpoint_later(spark, str(snap.path))


def _fold_table_here(
    spark: SparkSession, warehouse: str | Path, table: str, closes: Any, cluster: str | None = None
) -> None:
    """Set the ``to_offset`` of the open versions of ``table`` that a pending close (``closes``: ``key``, the
    cluster and the entity key joined, and ``to_offset``) ends: the first close of the version's cluster and key
    after its ``from_offset``. Only the files holding such a version are rewritten, every other row of them (of
    any cluster) as it was; the matching is Arrow's: the open versions of every file joined to the closes at
    once (the join's cost is building the closes' hash table, not probing it), the minimum per row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    path = table_path(warehouse, table)
    snap = delta_rewrite.snapshot(path)
    key = ENTITIES[table].key
    candidates: list[tuple[dict[str, Any], Any, Any]] = []
    versions = []
    for add in snap.files.values():
        stats = delta_rewrite.stats_of(add)
        if stats is not None and (stats.get("nullCount") or {}).get("to_offset") == 0:
            continue  # every version of the file is closed
        if cluster is not None and not _of_cluster(add, cluster, alone=False):
            continue
        rows = delta_rewrite.read_file(snap, add)
        open_ = pc.is_null(rows.column("to_offset"))
        at = pc.indices_nonzero(open_)
        if not len(at):
            continue
        opened = rows.select([CLUSTER, *key, "from_offset"]).take(at)
        versions.append(
            pa.table(
                {
                    "key": pc.binary_join_element_wise(
                        opened.column(CLUSTER), _close_keys(opened, key), KEY_SEP
                    ),
                    "from": opened.column("from_offset"),
                    "file": pa.array(np.full(len(at), len(candidates), dtype=np.int32)),
                    "row": at.cast(pa.int64()),
                }
            )
        )
        candidates.append((add, rows, open_))
    if not versions:
        return
    matched = pa.concat_tables(versions).join(closes.rename_columns(["key", "end"]), "key", join_type="inner")
    matched = matched.filter(pc.greater(matched.column("end"), matched.column("from")))
    if not matched.num_rows:
        return
    first = matched.group_by(["file", "row"]).aggregate([("end", "min")])
    files = first.column("file").to_numpy()
    where_all, ends_all = first.column("row").to_numpy(), first.column("end_min").to_numpy()
    removed: list[dict[str, Any]] = []
    added: list[Any] = []
    for i in np.unique(files):
        add, rows, open_ = candidates[int(i)]
        mine = files == i
        to = rows.column("to_offset")
        values = np.asarray(to.fill_null(0).to_numpy(), dtype=np.int64).copy()
        missing = np.asarray(open_.to_numpy(zero_copy_only=False)).copy()
        values[where_all[mine]] = ends_all[mine]
        missing[where_all[mine]] = False
        index = rows.schema.get_field_index("to_offset")
        removed.append(add)
        added.append(
            rows.set_column(index, rows.schema.field(index), pa.array(values, type=to.type, mask=missing))
        )
    _replace(spark, snap, removed, added, "MERGE", "pending closes")


def _close_keys(rows: Any, key: tuple[str, ...]) -> Any:
    """:func:`kraftlake.spark.tables.layout.close_key` of every row of a ``pyarrow.Table`` (integers and strings cast as Spark casts them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not key:
        return pa.array([""] * rows.num_rows, pa.string())
    cols = [pc.cast(rows.column(k), pa.string()) for k in key]
    return cols[0] if len(cols) == 1 else pc.binary_join_element_wise(*cols, KEY_SEP)


def _fold_with_spark(
    spark: SparkSession, warehouse: str | Path, retry: Callable[[Callable[[], Any]], Any]
) -> int:
    """:func:`fold_closes` through Spark: a MERGE per history table, then a DELETE of the folded closes."""
    by_table = spark.sql(
        f"SELECT entity, count(*) AS n, max(to_offset) AS m FROM {table_ref(warehouse, CLOSES)} "
        "GROUP BY entity"
    ).collect()
    if not by_table:
        return 0
    # a bound, so that closes a concurrent slice appends meanwhile stay pending (not deleted unfolded)
    upto = max(int(r["m"]) for r in by_table)
    tables = [r["entity"] for r in by_table]

    def merge(table: str) -> None:
        key = ENTITIES[table].key
        keys = ", ".join(f"m.`{k}`" for k in key)
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key) or "TRUE"
        source = (
            f"SELECT {keys + ', ' if keys else ''}m.from_offset, "
            f"array_min(filter(c.tos, x -> x > m.from_offset)) AS to_offset, "
            f"m.{CLUSTER} FROM {table_ref(warehouse, table)} m "
            f"JOIN ({pending_closes_sql(warehouse, table, None, str(upto))}) c "
            f"ON m.to_offset IS NULL AND m.{CLUSTER} = c.{CLUSTER} AND {key_sql(table, 'm')} = c.key"
        )
        spark.sql(f"""
            MERGE INTO {table_ref(warehouse, table)} t USING ({source}) s
            ON s.to_offset IS NOT NULL AND t.to_offset IS NULL AND t.{CLUSTER} = s.{CLUSTER}
            AND t.from_offset = s.from_offset AND {on}
            WHEN MATCHED THEN UPDATE SET t.to_offset = s.to_offset""")

    # the tables are independent: their MERGEs run side by side, as a slice's appends do
    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="kraftlake-fold") as pool:
        for f in [pool.submit(retry, partial(merge, t)) for t in tables]:
            f.result()
    retry(lambda: spark.sql(f"DELETE FROM {table_ref(warehouse, CLOSES)} WHERE to_offset <= {upto}"))
    return sum(int(r["n"]) for r in by_table)
