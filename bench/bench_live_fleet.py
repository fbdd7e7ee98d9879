"""A fleet live: commit-to-queryable of ``CLUSTERS`` clusters, each written at a real cluster's rate, all followed
by one fleet stream into one warehouse (issue 27's "Live" goal: p99 under 5 s per cluster with 8 clusters).

Each cluster is a 3-voter kraftlake quorum (fsync on) in a process of its own (:mod:`bench.live_source`),
which the stream follows over the network exactly as it follows Kafka's controllers: ``stream --source kafka``
(:func:`pipelines.fleet.stream_fleet`, one streaming query per cluster in one Spark session, each with its own
follower and mirror, 1 s trigger). Why kraftlake's quorums and not Kafka nodes: they serve the same
DescribeCluster, DescribeQuorum and observer Fetch, and 24 voters cost less than one of the 8 Kafka JVMs
(~300 MB each) this 2-core machine would otherwise run beside Spark's; the stream's side, which is what is
measured, is the same code either way.

Each cluster writes as ``bench_stream.live_cluster`` does (:mod:`bench.cluster_rate`, its own
synthetic log, one seed a cluster): its creation (``PARTITIONS`` partitions) at once, then ``SECONDS`` of
steady state (a NoOp every 500 ms plus ``CHURN_RATE`` changes/s), then a burst of ``BURST`` changes; a phase
starts when the one before is queryable for that cluster. A record's latency is from its append (its batch's
timestamp, read back from ``metadata_log``) to the commit of the micro-batch holding it
(:mod:`bench.commit_latency`).

Figures per cluster: the steady state's p50/p99/max commit-to-queryable, the records appended but not queryable
when its steady state ended (``behind``), the micro-batch time p50 during the steady state, the creation's and
the burst's last record queryable after; and the fleet's worst steady p99 against the 5 s goal. Sizes through
``KRAFTLAKE_BENCH_LIVE_FLEET_*`` (``CLUSTERS``, ``PARTITIONS``, ``SECONDS``, ``CHURN_RATE``, ``BURST``,
``TRIGGER``); the defaults run in a few minutes.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.commit_latency import Commit, behind_at, latencies, summary

if TYPE_CHECKING:
    from pipelines.stream import StreamProgress

_ENV = "KRAFTLAKE_BENCH_LIVE_FLEET_"
CLUSTERS = int(os.environ.get(_ENV + "CLUSTERS", "8"))
PARTITIONS = int(os.environ.get(_ENV + "PARTITIONS", "2000"))
SECONDS = float(os.environ.get(_ENV + "SECONDS", "60"))
CHURN_RATE = float(os.environ.get(_ENV + "CHURN_RATE", "20"))
BURST = int(os.environ.get(_ENV + "BURST", "5000"))
TRIGGER = float(os.environ.get(_ENV + "TRIGGER", "1.0"))
GOAL_P99_S = 5.0
#: Seconds the sources may take to elect their leaders.
READY_S = 120.0
#: Seconds between two reads of the queries' progress (Spark keeps each query's last 100).
SAMPLE_S = 5.0


def _logs(work: Path) -> list[tuple[str, Path]]:
    from bench.bench_fleet import fleet_logs
    from kraftlake.sim.workloads.churn import PARTITIONS_PER_TOPIC

    topics = max(1, PARTITIONS // PARTITIONS_PER_TOPIC)
    # the creation (a topic record and its partitions, the brokers) and the churn, with room for the log's
    # other records among them
    records = int((topics * (PARTITIONS_PER_TOPIC + 1) + CHURN_RATE * SECONDS + BURST) * 1.3) + 1000
    return fleet_logs(work, CLUSTERS, records, topics)


class _Sources:
    """The source processes, their reports and the commit points the driver tells them."""

    def __init__(self, work: Path, logs: list[tuple[str, Path]]) -> None:
        from bench.live_source import serve_cluster

        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no JVM gateway or threads inherited
        self.reports: Any = ctx.Queue()
        self.stop = ctx.Event()
        self.committed = {name: ctx.Value("q", -1) for name, _ in logs}
        self.processes = []
        for i, (name, log_dir) in enumerate(logs):
            quorum = work / "quorums" / name
            shutil.rmtree(quorum, ignore_errors=True)
            args = (name, f"bench-live-fleet-{i:02d}", str(quorum), str(log_dir), int(CHURN_RATE * SECONDS))
            p = ctx.Process(
                target=serve_cluster,
                args=(*args, CHURN_RATE, BURST, self.committed[name], self.reports, self.stop),
                name=f"kraftlake-bench-source-{name}",
                daemon=True,
            )
            p.start()
            self.processes.append(p)
        self.bootstrap: dict[str, str] = {}
        self.phases: dict[str, dict[str, tuple[int, int, float]]] = {name: {} for name, _ in logs}
        self.done: set[str] = set()
        self.failed: dict[str, str] = {}

    def take(self, timeout: float) -> bool:
        """Take one report (False when none came within ``timeout``)."""
        try:
            report = self.reports.get(timeout=timeout)
        except queue.Empty:
            return False
        kind, name, *rest = report
        if kind == "ready":
            self.bootstrap[name] = rest[0]
        elif kind == "phase":
            self.phases[name][rest[0]] = (rest[1], rest[2], rest[3])
        elif kind == "done":
            self.done.add(name)
        else:
            self.failed[name] = rest[0]
        return True

    def close(self) -> None:
        self.stop.set()
        for p in self.processes:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)


def _follow(sources: _Sources, stop: threading.Event, deadline: float, sample: Callable[[], None]) -> None:
    """Read the sources' reports until every one is done or failed (then stop the fleet) or the deadline;
    ``sample()`` every few seconds meanwhile."""
    sampled = 0.0
    while time.monotonic() < deadline and len(sources.done) + len(sources.failed) < len(sources.processes):
        sources.take(1.0)
        if time.monotonic() - sampled >= SAMPLE_S:
            sample()
            sampled = time.monotonic()
    sample()
    stop.set()


class _EngineTimes:
    """The streaming engine's own timings of the fleet's micro-batches (Spark's ``durationMs`` of each query's
    progress: ``addBatch`` is the ``foreachBatch`` commit, ``latestOffset`` and ``queryPlanning`` the planning,
    ``walCommit`` and ``commitOffsets`` the checkpoint's files), read from the active queries' recent progress
    before it rolls over. A progress without ``addBatch`` is a trigger that found no data; ``numInputRows`` does
    not tell, since Spark counts 0 for a micro-batch the driver read itself (``pipelines.stream``)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.seen: dict[tuple[str, int], dict[str, int]] = {}

    def sample(self) -> None:
        for q in self.spark.streams.active:
            try:
                progresses = q.recentProgress
            except Exception:  # a query stopping meanwhile
                continue
            for p in progresses:
                if "addBatch" in p.durationMs:
                    self.seen[(p.id, p.batchId)] = dict(p.durationMs)

    def figures(self) -> dict[str, float]:
        keys = sorted({k for d in self.seen.values() for k in d})
        return {
            f"{k}_ms_p50": round(statistics.median(d.get(k, 0) for d in self.seen.values())) for k in keys
        }


def _cluster_figures(
    name: str,
    commits: list[Commit],
    batches: list[tuple[float, StreamProgress]],
    appended: dict[int, float],
    s: _Sources,
) -> dict[str, Any]:
    lat = latencies(commits, appended)
    phases = s.phases[name]
    out: dict[str, Any] = {"batches": len(commits)}
    if "steady" in phases:
        first, last, ended = phases["steady"]
        steady = [lat[o] for o in range(first, last + 1) if o in lat]
        out["steady_records"] = len(steady)
        out.update(summary(steady, "steady_"))
        out["behind"] = behind_at(commits, appended, ended)
        start = appended.get(first, 0.0)
        during = [p for at, p in batches if start <= at <= ended]
        if during:
            out["steady_batch_seconds_p50"] = round(statistics.median(p.seconds for p in during), 2)
            out["steady_batch_seconds_max"] = round(max(p.seconds for p in during), 2)
            out["steady_batch_records_p50"] = round(statistics.median(p.records for p in during))
            # where a micro-batch's time goes (the phases of pipelines.stream.StreamProgress)
            for phase in sorted({k for p in during for k in p.phases}):
                seconds = [p.phases.get(phase, 0.0) for p in during]
                out[f"steady_{phase}_seconds_p50"] = round(statistics.median(seconds), 2)
    for phase in ("creation", "burst"):
        if phase in phases:
            last = phases[phase][1]
            out[f"{phase}_records"] = last - phases[phase][0] + 1
            out[f"{phase}_queryable_s"] = round(lat[last], 2) if last in lat else None
    if name in s.failed:
        out["error"] = s.failed[name].strip().splitlines()[-1]
    return out


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    from kraftlake.spark.session import build_session
    from kraftlake.spark.tables.creation import ensure_tables
    from kraftlake.spark.tables.layout import CLUSTER, LOG, table_ref
    from kraftlake.warehouse.fleet import FleetMember
    from pipelines.fleet import stream_fleet

    work = Path(ctx["work_dir"]).resolve()
    work.mkdir(parents=True, exist_ok=True)
    logs = _logs(work)
    warehouse = work / "warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    sources = _Sources(work, logs)
    commits: dict[str, list[Commit]] = {name: [] for name, _ in logs}
    batches: dict[str, list[tuple[float, StreamProgress]]] = {name: [] for name, _ in logs}
    loads: list[float] = []

    def progress(name: str, p: StreamProgress) -> None:
        at = time.time()
        commits[name].append(Commit(p.first_offset, p.last_offset, at))
        batches[name].append((at, p))
        sources.committed[name].value = p.last_offset

    try:
        deadline = time.monotonic() + READY_S
        while len(sources.bootstrap) + len(sources.failed) < len(logs) and time.monotonic() < deadline:
            sources.take(1.0)
        if sources.failed or len(sources.bootstrap) < len(logs):
            raise RuntimeError(f"sources not ready: {sources.failed or 'timed out'}")
        spark = build_session("kraftlake-bench-live-fleet")
        ensure_tables(spark, warehouse)  # a one-off, not streaming
        members = [FleetMember(name, sources.bootstrap[name]) for name, _ in logs]
        stop = threading.Event()
        limit = SECONDS + 1200
        engine = _EngineTimes(spark)
        watcher = threading.Thread(
            target=_follow,
            args=(sources, stop, time.monotonic() + limit, engine.sample),
            name="bench-live-fleet",
            daemon=True,
        )
        watcher.start()
        t0 = time.monotonic()
        result = stream_fleet(
            spark,
            members,
            warehouse,
            trigger_interval_s=TRIGGER,
            timeout_s=limit + 60,
            stop=stop,
            progress=progress,
        )
        wall = time.monotonic() - t0
        loads.append(os.getloadavg()[0])
        watcher.join(timeout=10)
    finally:
        sources.close()
    rows = spark.sql(f"SELECT {CLUSTER}, offset, timestamp FROM {table_ref(warehouse, LOG)}").collect()
    appended: dict[str, dict[int, float]] = {name: {} for name, _ in logs}
    for r in rows:
        appended[r[CLUSTER]][r["offset"]] = r["timestamp"] / 1000
    clusters = {
        name: _cluster_figures(name, commits[name], batches[name], appended[name], sources)
        for name, _ in logs
    }
    for name, outcome in result.clusters.items():
        if outcome.error:
            clusters[name]["stream_error"] = outcome.error
    p99s = [c.get("steady_p99_s") for c in clusters.values()]
    worst = None if None in p99s or not p99s else max(p for p in p99s if p is not None)
    return {
        "live_fleet_clusters": CLUSTERS,
        "live_fleet_partitions_per_cluster": PARTITIONS,
        "live_fleet_steady_seconds": SECONDS,
        "live_fleet_churn_records_per_s": CHURN_RATE,
        "live_fleet_burst_records": BURST,
        "live_fleet_trigger_s": TRIGGER,
        "live_fleet_run_s": round(wall, 1),
        "live_fleet_by_cluster": clusters,
        "live_fleet_engine": engine.figures(),
        "live_fleet_worst_steady_p99_s": worst,
        "live_fleet_goal_p99_s": GOAL_P99_S,
        "live_fleet_goal_met": worst is not None and worst < GOAL_P99_S,
        "load_average_1m": loads,
    }
