"""Questions answered by offset over a warehouse: the SQL `make run` prints, each with its answer.

Every question is plain SQL over the table functions of `udfs.sql` (registered for the session),
so what the demo prints can be pasted into `kraftlake sql`. Each `Answer` keeps the exact SQL that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.warehouse.answers import limits
from kraftlake.warehouse.cluster_ranges import column_ranges
from kraftlake.warehouse.tables import Warehouse, WarehouseError
from kraftlake.warehouse.versions import versions
from pipelines.output import is_epoch_ms_column, with_time


@dataclass(frozen=True)
class Answer:
    """A question, the SQL that answers it, and the rows it returned."""

    question: str
    sql: str
    columns: list[str]
    rows: list[tuple[Any, ...]]


def ask(spark: SparkSession, question: str, sql: str) -> Answer:
    df = spark.sql(sql)
    return Answer(question, sql, df.columns, [tuple(r) for r in df.collect()])


def offset_range(warehouse: str | Path, cluster: str) -> tuple[int, int]:
    """The first and last offset of ``cluster`` the warehouse still answers for (compaction moves the first),
    read from its Delta tables without Spark."""
    wh = Warehouse(Path(warehouse), cluster)
    lim = limits(wh)
    if lim.committed is None:
        raise WarehouseError(f"{warehouse} holds no committed records of cluster {cluster}")
    # versions that outlived a retention cut start below it: the first answerable offset is the cut; the last is
    # the commit point the SQL functions answer up to
    first = column_ranges(wh.snapshot("partitions"), "from_offset").get(cluster, (0, 0))[0]
    return max(first, lim.retained), lim.committed


def sample_offsets(lo: int, hi: int, points: int) -> list[int]:
    """`points` offsets spread evenly over [lo, hi], both ends included."""
    if hi <= lo or points < 2:
        return [hi]
    step = (hi - lo) / (points - 1)
    return sorted({lo + round(i * step) for i in range(points)})


def under_replicated_over_time(spark: SparkSession, points: list[int]) -> Answer:
    values = ", ".join(f"({p})" for p in points)
    sql = (
        "SELECT at.offset, count_if(size(p.isr) < size(p.replicas)) AS under_replicated,\n"
        "       count_if(p.leader = -1) AS offline, count(*) AS partitions\n"
        f"FROM (VALUES {values}) AS at(offset),\n"
        "     LATERAL partitions_at(at.offset) AS p\n"
        "GROUP BY at.offset ORDER BY at.offset"
    )
    return ask(spark, "Under-replicated partitions over time", sql)


def under_replicated_at(spark: SparkSession, offset: int, limit: int = 10) -> Answer:
    sql = (
        f"SELECT topic, partition, replicas, isr, leader FROM partitions_at({offset})\n"
        f"WHERE size(isr) < size(replicas) ORDER BY topic, partition LIMIT {limit}"
    )
    return ask(spark, f"Under-replicated partitions at offset {offset}", sql)


def busiest_partition(warehouse: str | Path, cluster: str) -> tuple[str, int] | None:
    """The partition of ``cluster`` whose leader changed most often (the most interesting leader history), among
    those whose whole history the warehouse holds (the history views refuse the others after a cut); read
    without Spark."""
    wh = Warehouse(Path(warehouse), cluster)
    rows = wh.read("partitions", columns=["topic", "partition", "leader_epoch", "from_offset"]).to_pandas()
    if rows.empty:
        return None
    by = rows.groupby(["topic", "partition"])
    counts = by.agg(n=("leader_epoch", "nunique"), first=("from_offset", "min")).reset_index()
    held = counts[counts["first"] >= limits(wh).retained]
    if held.empty:
        return None
    top = held.sort_values(["n", "topic", "partition"], ascending=[False, True, True]).iloc[0]
    return str(top["topic"]), int(top["partition"])


def leader_history(spark: SparkSession, topic: str, partition: int) -> Answer:
    sql = (
        f"SELECT leader, from_offset, to_offset FROM leader_history('{topic}', {partition})\n"
        "ORDER BY from_offset"
    )
    return ask(spark, f"Leader history of {topic}-{partition}", sql)


def most_fenced_offset(warehouse: str | Path, cluster: str, points: list[int]) -> int:
    """Of ``points``, the offset at which the most brokers of ``cluster`` were fenced (the last one on a tie);
    read without Spark."""
    brokers = versions(Warehouse(Path(warehouse), cluster), "brokers", columns=["id", "fenced"]).to_pandas()
    fenced = brokers[brokers["fenced"].fillna(False).astype(bool)]
    starts, ends = fenced["from_offset"], fenced["to_offset"]

    def count(at: int) -> int:
        return int(((starts <= at) & (ends.isna() | (ends > at))).sum())

    return max(points, key=lambda at: (count(at), at)) if points else -1


def fenced_brokers_at(spark: SparkSession, offset: int) -> Answer:
    sql = (
        f"SELECT id, epoch, fenced, in_controlled_shutdown, from_offset FROM brokers_at({offset})\n"
        "WHERE fenced OR in_controlled_shutdown ORDER BY id"
    )
    return ask(spark, f"Brokers fenced or shutting down at offset {offset}", sql)


def format_answer(answer: Answer, max_rows: int = 20) -> str:
    """The question, its SQL, and its rows as an aligned text table."""
    timed = [is_epoch_ms_column(c) for c in answer.columns]
    cells = [answer.columns] + [
        [with_time(v) if t else "NULL" if v is None else str(v) for v, t in zip(r, timed, strict=True)]
        for r in answer.rows[:max_rows]
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(answer.columns))]
    lines = [f"== {answer.question}", *("   " + s for s in answer.sql.splitlines()), ""]
    for n, row in enumerate(cells):
        lines.append("   " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("   " + "  ".join("-" * w for w in widths))
    if len(answer.rows) > max_rows:
        lines.append(f"   ... {len(answer.rows) - max_rows} more rows")
    if not answer.rows:
        lines.append("   (no rows)")
    return "\n".join(lines)
