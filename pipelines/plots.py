"""The data behind ``kraftlake plot``'s figures, computed from the warehouse, and the figures written.

Every frame is Spark SQL over the history tables as readers see them (``kraftlake.spark.tables.queries.history_query``:
the pending ``closes`` of a running stream applied), joined with the ``offsets`` table for the wall-clock time of
each offset, then handed as a pandas frame to :mod:`kraftlake.plot.figures` (which never sees Spark). A frame
holds one row per change, not per offset: a step line's points are the offsets where a count changes, a Gantt's
bars the runs of versions in which a value stayed the same.

A range ``[lo, hi]`` (offsets, both included) bounds every figure; it never reaches below the retained history
(``compact`` deleted the versions that ended before it, so counts and segments there would be a part of the
truth): a bound there is refused as the SQL functions refuse it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

from kraftlake.plot import figures
from kraftlake.plot.frames import PlotRange, PlotResult, frame_of, running_counts
from kraftlake.plot.frames import figure_data as figure_of
from kraftlake.plot.options import Bound, PlotError, PlotRequest
from kraftlake.plot.output import save
from kraftlake.spark.tables.creation import open_cluster
from kraftlake.spark.tables.layout import OFFSETS, WarehouseError, cluster_rows
from kraftlake.spark.tables.queries import bounds_relation, cluster_sql, history_query
from kraftlake.warehouse.plot_frames import WarehouseFrames, range_offsets
from kraftlake.warehouse.plot_frames import resolve_range as resolve_range_without_jvm
from kraftlake.warehouse.tables import Warehouse


def resolve_range(
    spark: SparkSession,
    warehouse: str | Path,
    start: Bound | None = None,
    end: Bound | None = None,
    cluster: str | None = None,
) -> PlotRange:
    """The offsets ``[lo, hi]`` of the cluster ``cluster`` (else the one the warehouse holds) that
    ``start``/``end`` name (default: all the warehouse answers for).

    Raises ``WarehouseError`` for an empty warehouse, a bound below the retained history or past the last
    offset, and a range whose start lies after its end; ``ClusterError`` for a cluster not held, or none named
    where the warehouse holds several.
    """
    name = open_cluster(spark, warehouse, cluster)
    offsets = cluster_rows(warehouse, OFFSETS, name)
    times = {
        f"t{i}": b.time_ms for i, b in enumerate((start, end)) if b is not None and b.time_ms is not None
    }
    at_time = "".join(
        f", (SELECT max(`offset`) FROM {offsets} WHERE timestamp <= {int(ms)}) AS {name}"
        for name, ms in times.items()
    )
    row = spark.sql(
        f"SELECT (SELECT min(`offset`) FROM {offsets}) AS first, (SELECT max(`offset`) FROM {offsets}) "
        f"AS last, (SELECT g.r FROM {bounds_relation(warehouse, cluster_sql(name))}) AS r{at_time}"
    ).first()
    assert row is not None
    if row["last"] is None:
        raise WarehouseError(f"{warehouse} holds no records yet")
    first, last = int(row["first"]), int(row["last"])
    retained = None if row["r"] < 0 else int(row["r"])
    first = max(first, retained or 0)

    def at(name: str) -> int | None:
        value = row.asDict().get(name)
        return None if value is None else int(value)

    lo, hi = range_offsets(start, end, first, last, retained, (at("t0"), at("t1")), WarehouseError)
    stamps = {
        int(r["offset"]): int(r["timestamp"])
        for r in spark.sql(
            f"SELECT `offset`, timestamp FROM {offsets} WHERE `offset` IN ({lo}, {hi})"
        ).collect()
    }
    return PlotRange(name, lo, hi, stamps.get(lo), stamps.get(hi))


def _text(value: str) -> str:
    """A Spark SQL string literal. (Not a named parameter: Spark 4.2 leaves one unbound inside a CTE that is
    itself inside a subquery, as these queries are once clipped.)"""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _frame(spark: SparkSession, sql: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """The rows of ``sql`` as a frame of ``columns`` (:func:`kraftlake.plot.frames.frame_of`)."""
    return frame_of((tuple(r) for r in spark.sql(sql).collect()), columns)


def _clipped(warehouse: str | Path, segments: str, rng: PlotRange, columns: tuple[str, ...]) -> str:
    """``segments`` (a query with ``from_offset``, ``to_offset``) cut to the range, with the times of the
    clipped ends: a segment still open, or ending after ``hi``, is drawn up to ``hi``."""
    offsets = cluster_rows(warehouse, OFFSETS, rng.cluster)
    cols = ", ".join(f"s.`{c}`" for c in columns if not c.endswith("_ms"))
    return (
        f"SELECT {cols}, o1.timestamp AS start_ms, o2.timestamp AS end_ms FROM ("
        f"SELECT *, greatest(from_offset, {rng.lo}) AS _s, CASE WHEN to_offset IS NULL OR to_offset > {rng.hi} "
        f"THEN {rng.hi} ELSE to_offset END AS _e FROM ({segments}) "
        f"WHERE from_offset <= {rng.hi} AND (to_offset IS NULL OR to_offset > {rng.lo})) s "
        f"LEFT JOIN {offsets} o1 ON o1.`offset` = s._s LEFT JOIN {offsets} o2 ON o2.`offset` = s._e "
        f"ORDER BY {', '.join(f's.`{c}`' for c in columns[:2])}, s.from_offset"
    )


def under_replicated(spark: SparkSession, warehouse: str | Path, rng: PlotRange) -> pd.DataFrame:
    """Under-replicated (``size(isr) < size(replicas)``) and offline (``leader = -1``) partitions, and all
    partitions, from each offset in ``[lo, hi]`` where one of the counts changes, plus ``lo`` and ``hi``.

    Spark sums per offset +1 where a version starts and -1 where it ends (the flags as the demo's SQL over
    ``partitions_at`` tests them), everything up to ``lo`` folded into ``lo``: one pass over the history, not a
    state per offset. The running sum over those rows (one per change) is taken here: in SQL it is a window
    without a partition, which Spark runs on one task (and warns about). Versions that compaction deleted
    ended before the retained history, so their +1 and -1 both went and the sums from there on are whole.
    """
    lo, hi = rng.lo, rng.hi
    # (`offset` is a keyword that Spark reads as an OFFSET clause after WHERE: the column is `at` here)
    sql = f"""
        WITH v AS (SELECT from_offset, to_offset, CASE WHEN size(isr) < size(replicas) THEN 1 ELSE 0 END AS ur,
                          CASE WHEN leader = -1 THEN 1 ELSE 0 END AS off
                   FROM ({history_query(warehouse, "partitions", cluster_sql(rng.cluster))}) WHERE from_offset <= {hi}),
        d AS (SELECT from_offset AS at, ur, off, 1 AS n FROM v
              UNION ALL SELECT to_offset, -ur, -off, -1 FROM v WHERE to_offset IS NOT NULL AND to_offset <= {hi}),
        g AS (SELECT greatest(at, {lo}) AS at, sum(ur) AS ur, sum(off) AS off, sum(n) AS n FROM d GROUP BY 1
              UNION ALL SELECT {lo}, 0, 0, 0 UNION ALL SELECT {hi}, 0, 0, 0)
        SELECT g.at, o.timestamp, sum(g.ur), sum(g.off), sum(g.n)
        FROM g LEFT JOIN {cluster_rows(warehouse, OFFSETS, rng.cluster)} o ON o.`offset` = g.at GROUP BY g.at, o.timestamp"""
    # a point where a count changed, and both ends (lo and hi: the zero rows above make sure they are there)
    return running_counts(_frame(spark, sql, figures.COUNT_COLUMNS), lo, hi)


def partition_segments(
    spark: SparkSession, warehouse: str | Path, topic: str, partition: int, rng: PlotRange
) -> pd.DataFrame:
    """A partition's leader runs (``role`` leader, ``broker`` -1 while it had none) and each ISR member's runs
    (``role`` isr), as ``leader_history``/``isr_history`` merge versions: consecutive versions with the same
    leader, or in which the broker stayed in the ISR, are one segment. A topic deleted and created again under
    the same name is a new topic id: its segments start anew."""
    sql = f"""
        WITH v AS (SELECT topic_id, leader, isr, from_offset, to_offset FROM ({history_query(warehouse, "partitions", cluster_sql(rng.cluster))})
                   WHERE topic = {_text(topic)} AND `partition` = {int(partition)}),
        l AS (SELECT *, lag(leader) OVER w AS prev, lag(to_offset) OVER w AS prev_to FROM v
              WINDOW w AS (PARTITION BY topic_id ORDER BY from_offset)),
        li AS (SELECT *, sum(CASE WHEN prev = leader AND prev_to = from_offset THEN 0 ELSE 1 END)
                         OVER (PARTITION BY topic_id ORDER BY from_offset) AS island FROM l),
        m AS (SELECT topic_id, member, from_offset, to_offset FROM v LATERAL VIEW explode(isr) e AS member),
        ml AS (SELECT *, lag(to_offset) OVER (PARTITION BY topic_id, member ORDER BY from_offset) AS prev_to FROM m),
        mi AS (SELECT *, sum(CASE WHEN prev_to = from_offset THEN 0 ELSE 1 END)
                         OVER (PARTITION BY topic_id, member ORDER BY from_offset) AS island FROM ml)
        SELECT 'leader' AS role, leader AS broker, min(from_offset) AS from_offset,
               max_by(to_offset, from_offset) AS to_offset FROM li GROUP BY topic_id, leader, island
        UNION ALL
        SELECT 'isr', member, min(from_offset), max_by(to_offset, from_offset) FROM mi
        GROUP BY topic_id, member, island"""
    return _frame(spark, _clipped(warehouse, sql, rng, figures.PARTITION_COLUMNS), figures.PARTITION_COLUMNS)


def broker_segments(
    spark: SparkSession, warehouse: str | Path, rng: PlotRange, broker: int | None = None
) -> pd.DataFrame:
    """Each broker's runs of one state (``figures.BROKER_STATES``): registered (unfenced), fenced, in
    controlled shutdown (unfenced, handing over), and unregistered from an ``UnregisterBrokerRecord`` (a
    version ended with no next one at its end) until it registers again. A new registration (a restart's new
    epoch) in the same state continues the run."""
    where = f"WHERE id = {int(broker)}" if broker is not None else ""
    sql = f"""
        WITH b AS (SELECT id, CASE WHEN fenced THEN 'fenced' WHEN in_controlled_shutdown
                                   THEN 'in controlled shutdown' ELSE 'registered' END AS state,
                          from_offset, to_offset FROM ({history_query(warehouse, "brokers", cluster_sql(rng.cluster))}) {where}),
        bl AS (SELECT *, lag(state) OVER w AS prev, lag(to_offset) OVER w AS prev_to,
                         lead(from_offset) OVER w AS next_from FROM b
               WINDOW w AS (PARTITION BY id ORDER BY from_offset)),
        bi AS (SELECT *, sum(CASE WHEN prev = state AND prev_to = from_offset THEN 0 ELSE 1 END)
                         OVER (PARTITION BY id ORDER BY from_offset) AS island FROM bl)
        SELECT id AS broker, state, min(from_offset) AS from_offset, max_by(to_offset, from_offset) AS to_offset
        FROM bi GROUP BY id, state, island
        UNION ALL
        SELECT id, 'unregistered', to_offset, next_from FROM bl
        WHERE to_offset IS NOT NULL AND (next_from IS NULL OR next_from > to_offset)"""
    return _frame(spark, _clipped(warehouse, sql, rng, figures.BROKER_COLUMNS), figures.BROKER_COLUMNS)


def config_segments(
    spark: SparkSession, warehouse: str | Path, resource_type: str, resource_name: str, rng: PlotRange
) -> pd.DataFrame:
    """Each key's values of one config resource: a segment per version (per change), none while it is unset."""
    sql = (
        f"SELECT name AS key, value, from_offset, to_offset FROM ({history_query(warehouse, 'configs', cluster_sql(rng.cluster))}) "
        f"WHERE resource_type = {_text(resource_type)} AND resource_name = {_text(resource_name)}"
    )
    return _frame(spark, _clipped(warehouse, sql, rng, figures.CONFIG_COLUMNS), figures.CONFIG_COLUMNS)


@dataclass(frozen=True)
class SparkFrames:
    """The figures' frames through Spark SQL (:class:`kraftlake.plot.frames.FrameSource`)."""

    spark: SparkSession
    warehouse: str | Path

    def under_replicated(self, rng: PlotRange) -> pd.DataFrame:
        return under_replicated(self.spark, self.warehouse, rng)

    def partition_segments(self, topic: str, partition: int, rng: PlotRange) -> pd.DataFrame:
        return partition_segments(self.spark, self.warehouse, topic, partition, rng)

    def broker_segments(self, rng: PlotRange, broker: int | None = None) -> pd.DataFrame:
        return broker_segments(self.spark, self.warehouse, rng, broker)

    def config_segments(self, resource_type: str, resource_name: str, rng: PlotRange) -> pd.DataFrame:
        return config_segments(self.spark, self.warehouse, resource_type, resource_name, rng)


def figure_data(
    spark: SparkSession, warehouse: str | Path, request: PlotRequest, rng: PlotRange
) -> tuple[pd.DataFrame, Any, str]:
    """The frame behind ``request``'s figure, the figure, and its title (:func:`kraftlake.plot.frames.figure_data`
    over Spark's frames)."""
    return figure_of(SparkFrames(spark, warehouse), request, rng)


def write_plot(
    spark: SparkSession,
    warehouse: str | Path,
    request: PlotRequest,
    out: str | Path,
    cluster: str | None = None,
) -> PlotResult:
    """Compute ``request``'s data over the warehouse (of the cluster ``cluster``, else the one it holds) and
    write its figure to ``out`` (.html, .png or .svg)."""
    request.check()
    rng = resolve_range(spark, warehouse, request.start, request.end, cluster)
    data, chart, title = figure_data(spark, warehouse, request, rng)
    return PlotResult(save(chart, out, title), request.kind, rng, data, title)


def busiest_config_resource(warehouse: str | Path, cluster: str) -> tuple[str, str] | None:
    """The config resource of ``cluster`` changed most often (the most telling config figure), None without
    configs; read without Spark."""
    rows = Warehouse(Path(warehouse), cluster).read("configs", columns=["resource_type", "resource_name"])
    if rows.num_rows == 0:
        return None
    counts = rows.to_pandas().value_counts().rename("n").reset_index()
    top = counts.sort_values(["n", "resource_type", "resource_name"], ascending=[False, True, True]).iloc[0]
    return str(top["resource_type"]), str(top["resource_name"])


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def write_overview(
    warehouse: str | Path,
    out_dir: str | Path,
    partition: tuple[str, int] | None = None,
    cluster: str | None = None,
) -> list[PlotResult]:
    """One figure of each kind over the whole warehouse into ``out_dir`` (what ``make run`` writes): the
    under-replicated counts, every broker's states, the leader/ISR timeline of ``partition`` (default: the
    partition whose leader changed most) and the configs of the resource changed most. A kind with nothing to
    draw is left out. Read as ``kraftlake plot`` reads by default: without a JVM
    (:mod:`kraftlake.warehouse.plot_frames`); a warehouse that needs Spark is refused (``NeedsSpark``)."""
    from pipelines.answers import busiest_partition

    out = Path(out_dir)
    wh = Warehouse(Path(warehouse), cluster)
    frames, rng = WarehouseFrames(wh), resolve_range_without_jvm(wh, where=str(warehouse))
    requests = [
        (PlotRequest("under-replicated"), "under-replicated.html"),
        (PlotRequest("brokers"), "brokers.html"),
    ]
    partition = partition or busiest_partition(warehouse, rng.cluster)
    if partition is not None:
        requests.append(
            (
                PlotRequest("partition", topic=partition[0], partition=partition[1]),
                f"partition-{_file_part(partition[0])}-{partition[1]}.html",
            )
        )
    resource = busiest_config_resource(warehouse, rng.cluster)
    if resource is not None:
        requests.append(
            (
                PlotRequest("configs", resource=resource),
                f"configs-{resource[0].lower()}-{_file_part(resource[1]) or 'default'}.html",
            )
        )
    results = []
    for request, name in requests:
        try:
            data, chart, title = figure_of(frames, request, rng)
        except PlotError:
            continue
        results.append(PlotResult(save(chart, out / name, title), request.kind, rng, data, title))
    return results
