"""The SQL functions' fixed cost on a small warehouse, warm, in one process: what a call costs beyond its answer.

The warehouse: every risk scenario run on one cluster (``kraftlake.sim.risk_scenarios``, seed 11: 76 records),
ingested in slices of 40 records (what the Spark tests read), once under the bench work dir. One local session;
after a warm-up, each way of calling a function is timed ``RUNS`` times, the ways alternating (so that the
machine's load weighs on each alike), one ``collect()`` a call:

- ``sql``: the SQL functions (:func:`udfs.sql.register_sql_functions` in a ``newSession()``), which read
  ``clusters``, ``bounds`` and ``closes`` in the query (what a catalog's functions and ``serve``'s clients pay);
- ``udtf``: :func:`udfs.sql.register`'s Python UDTFs in another ``newSession()``, over the answers read without a
  JVM (what a user's ``spark.sql`` after ``register`` and the ``sql`` and ``state`` commands run).

Figures per function and way: ``<function>_<way>_s`` (median wall seconds a call), ``..._jobs`` (Spark jobs a
call, by job group) and ``..._tables`` (the Delta tables its executed plan scans, subqueries included); the
answers of the two ways must be equal, else the benchmark fails. ``register_<way>_s``: registering every
function that way, warm.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUNS = int(os.environ.get("KRAFTLAKE_BENCH_SQL_COST_RUNS", "7"))
#: The scanned tables in an executed plan's text (``Location: PreparedDeltaFileIndex(1 paths)[file:/w/bounds]``).
_LOCATION = re.compile(r"Location: \w+\(\d+ paths?\)\[([^\],]+)")


class BenchAnswerError(AssertionError):
    """The two ways of calling a function answered differently."""


def small_warehouse(work: Path, spark: Any) -> tuple[Path, str, int]:
    """The bench's warehouse (built on first use), its one cluster and its commit point."""
    from kraftlake.sim.cluster_log import LocalMetadataLog
    from kraftlake.sim.risk_scenarios import SCRIPTS, run_scenario
    from kraftlake.warehouse.guard_values import read_guard_values
    from pipelines.ingest import ingest

    warehouse = work / "warehouse"
    if not (warehouse / "bounds" / "_delta_log").is_dir():
        log = LocalMetadataLog(work / "log", cluster_id="risk-scenarios-0001")
        run_scenario(list(SCRIPTS), 11, log)
        log.close()
        ingest(spark, log.partition_dir, warehouse, batch_records=40)
    values = read_guard_values(warehouse)
    (cluster,) = values.clusters
    committed = values.limits_of(cluster).committed
    assert committed is not None, f"{warehouse} has no commit point"
    return warehouse, cluster, committed


def _tables(df: Any) -> list[str]:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return sorted({Path(p).name for p in _LOCATION.findall(plan)})


def _call(
    session: Any, run: Callable[[str], Any], query: str, group: str
) -> tuple[float, int, list[str], Any]:
    sc = session.sparkContext
    sc.setJobGroup(group, group)
    try:
        t = time.monotonic()
        df = run(query)
        rows = df.collect()
        took = time.monotonic() - t
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    jobs = len(sc.statusTracker().getJobIdsForGroup(group))
    return took, jobs, _tables(df), sorted(repr(sorted(r.asDict().items())) for r in rows)


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    from kraftlake.spark.session import build_session
    from udfs.sql import register, register_sql_functions

    work = Path(ctx["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    spark = build_session("kraftlake-bench-sql-cost", verbose=False, log_file=work / "spark.log")
    try:
        warehouse, cluster, last = small_warehouse(work, spark)
        sessions = {"sql": spark.newSession(), "udtf": spark.newSession()}
        registers: dict[str, Callable[[Any, Path], list[str]]] = {
            "sql": register_sql_functions,
            "udtf": register,
        }
        register_s = {}
        for way, session in sessions.items():
            registers[way](session, warehouse)  # warm-up: the JVM, Delta's snapshots
            t = time.monotonic()
            registers[way](session, warehouse)
            register_s[way] = time.monotonic() - t
        at = last * 2 // 3
        row = spark.sql(
            f"SELECT timestamp_millis(max(timestamp)) FROM delta.`{(warehouse / 'offsets').resolve()}` "
            f"WHERE offset <= {at}"
        ).first()
        assert row is not None
        time_at = row[0]
        calls = {
            "partitions_at": f"SELECT * FROM partitions_at({at})",
            "brokers_at": f"SELECT * FROM brokers_at({at}, '{cluster}')",
            "partitions_at_time": f"SELECT * FROM partitions_at_time(TIMESTAMP '{time_at}')",
            "partition_history": "SELECT * FROM partition_history('jepsen', 0)",
        }
        ways: dict[str, tuple[Any, Callable[[str], Any]]] = {
            way: (session, session.sql) for way, session in sessions.items()
        }
        timed: dict[tuple[str, str], list[float]] = {}
        seen: dict[tuple[str, str], tuple[int, list[str], Any]] = {}
        for round_ in range(RUNS + 1):
            for name, query in calls.items():
                for way, (session, call) in ways.items():
                    took, jobs, tables, rows = _call(session, call, query, f"sql-cost-{name}-{way}-{round_}")
                    if round_ == 0:
                        continue  # warm-up
                    timed.setdefault((name, way), []).append(took)
                    seen[(name, way)] = (jobs, tables, rows)
        figures: dict[str, Any] = {"records": last + 1}
        figures.update({f"register_{way}_s": round(took, 2) for way, took in register_s.items()})
        for name in calls:
            if seen[(name, "sql")][2] != seen[(name, "udtf")][2]:
                raise BenchAnswerError(f"{name}: the UDTF's answer differs from the SQL function's")
            for way in ways:
                jobs, tables, _ = seen[(name, way)]
                figures[f"{name}_{way}_s"] = round(statistics.median(timed[(name, way)]), 3)
                figures[f"{name}_{way}_jobs"] = jobs
                figures[f"{name}_{way}_tables"] = ",".join(tables)
        figures["load_average_1m"] = round(os.getloadavg()[0], 1)
        return figures
    finally:
        spark.stop()
