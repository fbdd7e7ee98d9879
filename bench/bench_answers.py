"""Answers without a JVM against the same answers through Spark, each a user's command run cold (a process each).

The warehouse: ``bench.bench_image``'s synthetic cluster log of ``RECORDS`` records over ``TOPICS``
topics of 100 partitions (env ``KRAFTLAKE_BENCH_ANSWERS_RECORDS`` / ``..._TOPICS``, default 1M over 1,000; the
figures report the size used) ingested once under the bench work dir (an ingest over a warehouse that holds
the log already adds nothing).

Figures (medians of ``RUNS`` runs, wall time of the whole process):

- ``state_brokers_s`` / ``state_partitions_s``: ``kraftlake state --offset N --entity brokers|partitions``
  (no JVM), and ``state_brokers_spark_s`` / ``state_partitions_spark_s``, the same with ``--spark`` (a local
  JVM, Delta, the SQL functions); ``state_speedup`` the brokers ratio. The outputs must be equal, else the
  benchmark fails.
- ``sql_remote_s``: ``kraftlake sql --warehouse W`` while a ``kraftlake serve`` of that warehouse runs (it
  finds the endpoint's record and answers through its SQL route), against ``sql_local_s``, the same with
  ``--local``, and ``sql_connect_s``, the same with ``--remote`` (through Spark Connect); equal outputs again.
  ``sql_route_floor_s``: ``SELECT 1`` through the route (the client's and the round trip's share).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RECORDS = int(os.environ.get("KRAFTLAKE_BENCH_ANSWERS_RECORDS", "1000000"))
TOPICS = int(os.environ.get("KRAFTLAKE_BENCH_ANSWERS_TOPICS", "1000"))
RUNS = int(os.environ.get("KRAFTLAKE_BENCH_ANSWERS_RUNS", "3"))


class BenchAnswerError(AssertionError):
    """The path without a JVM (or the endpoint) printed something else than the Spark path."""


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str, str]:
    from pipelines.serve import REPO, command_env

    t = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kraftlake.cli", *argv],
        cwd=REPO,
        env=command_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    took = time.monotonic() - t
    if done.returncode != 0:
        raise RuntimeError(f"kraftlake {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return took, done.stdout, done.stderr


def _median_run(argv: list[str]) -> tuple[float, str, str]:
    """The median wall time of ``RUNS`` runs, what they printed (the same each time) and the first's stderr."""
    runs = [_timed(argv) for _ in range(RUNS)]
    if len({out for _, out, _ in runs}) != 1:
        raise BenchAnswerError(f"kraftlake {' '.join(argv)} printed different answers run to run")
    return statistics.median(t for t, _, _ in runs), runs[0][1], runs[0][2]


def warehouse_of(work: Path, days: float | None = None) -> tuple[Path, int]:
    """The bench's warehouse (ingested on first use) and its last offset; with ``days``, of the same log on a
    real cluster's clock over about that many days (``cached_log``), in a warehouse of its own."""
    from bench.bench_image import cached_log
    from kraftlake.spark.session import build_session
    from pipelines.ingest import ingest

    log_dir = cached_log(work, RECORDS, TOPICS, days)
    warehouse = work / f"warehouse-{RECORDS}-{TOPICS}{'' if days is None else f'-{days:g}d'}"
    spark = build_session("kraftlake-bench-answers")
    try:
        ingest(spark, log_dir, warehouse)
        row = spark.sql(f"SELECT max(offset) FROM delta.`{(warehouse / 'offsets').resolve()}`").first()
    finally:
        spark.stop()
    assert row is not None and row[0] is not None, f"{warehouse} holds no offsets"
    return warehouse, int(row[0])


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    from pipelines.serve import serve_process

    work = Path(ctx["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    warehouse, last = warehouse_of(work)
    prepare_s = time.monotonic() - t
    at = str(last * 2 // 3)
    figures: dict[str, Any] = {"records": last + 1, "warehouse_prepare_s": round(prepare_s, 1)}
    for entity in ("brokers", "partitions"):
        argv = [
            "state",
            "--warehouse",
            str(warehouse),
            "--offset",
            at,
            "--entity",
            entity,
            "--format",
            "jsonl",
        ]
        fast, printed, _ = _median_run(argv)
        slow, expected, _ = _median_run([*argv, "--spark"])
        if printed != expected:
            raise BenchAnswerError(f"state --entity {entity}: the answer without a JVM differs from Spark's")
        figures[f"state_{entity}_s"] = round(fast, 2)
        figures[f"state_{entity}_spark_s"] = round(slow, 2)
        figures[f"state_{entity}_rows"] = printed.count("\n")
    figures["state_speedup"] = round(figures["state_brokers_spark_s"] / figures["state_brokers_s"], 1)
    query = f"SELECT count(*) AS n, max(leader) AS l FROM partitions_at({at})"
    sql = ["sql", "--warehouse", str(warehouse), "--format", "jsonl"]
    local, expected, _ = _median_run([*sql, "--local", query])
    with serve_process(warehouse, work / "serve.log", "--port", "0") as (_, urls):
        remote, printed, said = _median_run([*sql, query])
        connect, via_connect, _ = _median_run([*sql, "--remote", urls["Spark Connect"], query])
        floor, one, _ = _median_run([*sql, "SELECT 1 AS x"])
    if "on the running `kraftlake serve`" not in said:
        raise BenchAnswerError(f"sql did not find the running endpoint: {said[-2000:]}")
    if not printed == via_connect == expected or one != '{"x":1}\n':
        raise BenchAnswerError("sql through the running endpoint differs from the local session's answer")
    figures["sql_remote_s"] = round(remote, 2)
    figures["sql_connect_s"] = round(connect, 2)
    figures["sql_route_floor_s"] = round(floor, 2)
    figures["sql_local_s"] = round(local, 2)
    figures["load_average_1m"] = round(os.getloadavg()[0], 1)
    return figures
