"""One cluster's query in a fleet warehouse against the same query in a warehouse of that cluster alone.

``CLUSTERS`` synthetic logs (``bench_fleet``'s, the same cache) are ingested into one warehouse by
:func:`pipelines.fleet_ingest.ingest_fleet`, and the log of ``TARGET`` (``c3``) alone into another by the same
path, so the two hold the same rows of ``TARGET`` written the same way and differ only by the other clusters.
Each warehouse is served by its own ``kraftlake serve`` (a subprocess on a free loopback port, both running at
once); a Spark Connect client in this process runs ``SELECT count(*) FROM partitions_at(N, 'c3')`` on each,
after ``WARMUP`` warm-up queries, at ``QUERIES`` random N, the two endpoints alternating (which goes first
alternates too, so neither gets the quieter moments of a shared machine).

Figures: the median and p90 latency of each, ``fleet_query_over_alone`` (ratio of the medians; goal
``GOAL_RATIO``), and the files of the ``partitions`` table in each warehouse. Every N's answer (count and a
hash of every row) must be the same on both, else the benchmark fails. Sizes: ``KRAFTLAKE_BENCH_FLEETQ_CLUSTERS``
/ ``_RECORDS`` / ``_TOPICS`` / ``_QUERIES``.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.bench_fleet import fleet_logs
from bench.commit_latency import quantile

CLUSTERS = int(os.environ.get("KRAFTLAKE_BENCH_FLEETQ_CLUSTERS", "8"))
RECORDS = int(os.environ.get("KRAFTLAKE_BENCH_FLEETQ_RECORDS", "20000"))
TOPICS = int(os.environ.get("KRAFTLAKE_BENCH_FLEETQ_TOPICS", "200"))
QUERIES = int(os.environ.get("KRAFTLAKE_BENCH_FLEETQ_QUERIES", "20"))
TARGET = "c3"
WARMUP = 3
BATCH_RECORDS = 100_000
GOAL_RATIO = 1.2


class BenchAnswerError(AssertionError):
    """The fleet warehouse and the warehouse of the cluster alone answered a query differently."""


def _live_files(table: Path) -> int:
    from kraftlake.delta.rewrite import snapshot

    return len(snapshot(table).files)


def _answer(remote: Any, n: int) -> tuple[int, int]:
    row = remote.sql(
        f"SELECT count(*) AS n, bit_xor(xxhash64(*)) AS h FROM partitions_at({n}, '{TARGET}')"
    ).collect()[0]
    return int(row["n"]), int(row["h"] or 0)


def _count_s(remote: Any, n: int) -> float:
    t = time.monotonic()
    remote.sql(f"SELECT count(*) FROM partitions_at({n}, '{TARGET}')").collect()
    return time.monotonic() - t


def _ingest(work: Path, logs: list[tuple[str, Path]]) -> tuple[Path, Path, int, dict[str, float]]:
    """Both warehouses, ingested in this process; returns them, the target's last offset and the times."""
    from kraftlake.spark.session import build_session
    from pipelines.fleet_ingest import ingest_fleet

    fleet, alone = work / "warehouse-fleet", work / "warehouse-alone"
    for wh in (fleet, alone):
        shutil.rmtree(wh, ignore_errors=True)
    spark = build_session("kraftlake-bench-fleet-query", verbose=False)
    try:
        t = time.monotonic()
        results = ingest_fleet(spark, logs, fleet, BATCH_RECORDS)
        fleet_s = time.monotonic() - t
        t = time.monotonic()
        (mine,) = ingest_fleet(spark, [(TARGET, dict(logs)[TARGET])], alone, BATCH_RECORDS)
        alone_s = time.monotonic() - t
    finally:
        spark.stop()
    (theirs,) = [r for r in results if r.cluster == TARGET]
    if (theirs.records, theirs.last_offset) != (mine.records, mine.last_offset):
        raise BenchAnswerError(
            f"{TARGET} ingested {theirs.records} records to {theirs.last_offset} in the fleet, "
            f"{mine.records} to {mine.last_offset} alone"
        )
    return fleet, alone, mine.last_offset, {"fleet": fleet_s, "alone": alone_s}


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    from pipelines.serve import command_env, connect_session, serve_process

    work = Path(ctx["work_dir"]).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if int(TARGET[1:]) >= CLUSTERS:
        raise ValueError(f"KRAFTLAKE_BENCH_FLEETQ_CLUSTERS={CLUSTERS}: the fleet must hold {TARGET}")
    logs = fleet_logs(work.parent / "fleet", CLUSTERS, RECORDS, TOPICS)
    fleet, alone, last, ingest_s = _ingest(work, logs)
    rng = random.Random(3)
    offsets = [rng.randrange(last + 1) for _ in range(QUERIES)]
    lat: dict[str, list[float]] = {"fleet": [], "alone": []}
    with ExitStack() as stack:
        remotes = {}
        for key, wh in (("fleet", fleet), ("alone", alone)):
            _, endpoints = stack.enter_context(
                serve_process(wh, work / f"serve-{key}.log", "--port", "0", env=command_env())
            )
            remote = connect_session(endpoints["Spark Connect"], wh)
            stack.callback(remote.stop)
            remotes[key] = remote
        for _ in range(WARMUP):
            for remote in remotes.values():
                _count_s(remote, last)
        for i, n in enumerate(offsets):
            for key in ("fleet", "alone") if i % 2 == 0 else ("alone", "fleet"):
                lat[key].append(_count_s(remotes[key], n))
        for n in offsets:
            got = {key: _answer(remote, n) for key, remote in remotes.items()}
            if got["fleet"] != got["alone"]:
                raise BenchAnswerError(
                    f"partitions_at({n}, '{TARGET}'): fleet {got['fleet']}, alone {got['alone']}"
                )
    ratio = statistics.median(lat["fleet"]) / statistics.median(lat["alone"])
    return {
        "fleetq_clusters": CLUSTERS,
        "fleetq_records_per_cluster": RECORDS,
        "fleetq_topics_per_cluster": TOPICS,
        "fleetq_queries": QUERIES,
        "fleetq_ingest_fleet_s": round(ingest_s["fleet"], 1),
        "fleetq_ingest_alone_s": round(ingest_s["alone"], 1),
        "fleetq_partitions_files_fleet": _live_files(fleet / "partitions"),
        "fleetq_partitions_files_alone": _live_files(alone / "partitions"),
        "fleetq_fleet_p50_s": round(statistics.median(lat["fleet"]), 3),
        "fleetq_fleet_p90_s": round(quantile(lat["fleet"], 0.9), 3),
        "fleetq_alone_p50_s": round(statistics.median(lat["alone"]), 3),
        "fleetq_alone_p90_s": round(quantile(lat["alone"], 0.9), 3),
        "fleet_query_over_alone": round(ratio, 2),
        "fleetq_goal_ratio": GOAL_RATIO,
        "fleetq_goal_met": ratio <= GOAL_RATIO,
        "load_average_1m": round(os.getloadavg()[0], 1),
    }
