"""Streaming: sustained throughput of ``stream`` and its commit-to-queryable latency.

Two runs, each into a fresh warehouse, in one Spark session:

- **throughput**: ``stream --source log-dir`` (AvailableNow, ``maxRecordsPerBatch`` = ``BATCH``) over the synthetic
  cluster log of :mod:`bench.bench_image` (``RECORDS`` records over ``PARTITIONS`` partitions), i.e. a
  backlog drained as fast as the pipeline goes. Figures: records/s over the whole run (JVM start and table
  creation excluded) and the median of the per-micro-batch rates.
- **latency**: a 3-voter ``LocalQuorum`` (fsync on) in the driver, a producer thread appending the same log's
  record values at ``RATE`` records/s for ``SECONDS``, and ``stream --source service`` with a 1 s trigger.
  A record's commit-to-queryable latency is the wall time from its append (the timestamp the leader gives its
  batch) to the commit point of the micro-batch that holds it (its ``offsets`` row is written and published to
  the SQL functions in ``bounds``: queries see it).
  Figures: p50/p99 over every record, and whether the stream kept up (records behind at the end); ``steady_``
  p50/p99 over the records appended after the first commit (the first micro-batch also holds what was appended
  while the query started), and the micro-batches' p50 time after the first.
- **cluster** (``KRAFTLAKE_BENCH_STREAM_CLUSTER=0`` leaves it out): the same quorum and stream at the rate a
  real cluster writes (:func:`live_cluster`): the creation of ``PARTITIONS`` partitions, a steady state of a
  NoOp every 500 ms plus ``CHURN_RATE`` changes/s, a burst of ``BURST`` changes.

Issue 15's goals: the full pipeline at >= 50% of the bare ``metadata_log`` append's records/s (``bare_ceiling``,
same run); commit-to-queryable p99 under 5 s in the steady state and the burst queryable within 30 s.
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from bench.commit_latency import quantile

RECORDS = int(os.environ.get("KRAFTLAKE_BENCH_STREAM_RECORDS", "1000000"))
PARTITIONS = int(os.environ.get("KRAFTLAKE_BENCH_STREAM_PARTITIONS", "200000"))
BATCH = int(os.environ.get("KRAFTLAKE_BENCH_STREAM_BATCH", "250000"))
RATE = int(os.environ.get("KRAFTLAKE_BENCH_STREAM_RATE", "5000"))
SECONDS = float(os.environ.get("KRAFTLAKE_BENCH_STREAM_SECONDS", "60"))
CHURN_RATE = int(os.environ.get("KRAFTLAKE_BENCH_STREAM_CHURN_RATE", "20"))
BURST = int(os.environ.get("KRAFTLAKE_BENCH_STREAM_BURST", "120000"))
#: The cluster run (:func:`live_cluster`, minutes at 200k partitions); ``0`` leaves it out.
CLUSTER_RUN = os.environ.get("KRAFTLAKE_BENCH_STREAM_CLUSTER", "1") == "1"
CLUSTER = "bench-stream-cluster-0001"


def throughput(spark: Any, log_dir: Path, warehouse: Path) -> dict[str, Any]:
    from kraftlake.spark.tables.creation import ensure_tables
    from pipelines.stream import stream

    shutil.rmtree(warehouse, ignore_errors=True)
    ensure_tables(spark, warehouse)  # table creation is a one-off, not streaming
    t = time.monotonic()
    result = stream(
        spark, "log-dir", {"path": str(log_dir)}, warehouse, available_now=True, max_records_per_batch=BATCH
    )
    wall = time.monotonic() - t
    rates = [p.records_per_s for p in result.progress]
    return {
        "stream_records": result.records,
        "stream_batches": result.batches,
        "stream_records_per_s": round(result.records / wall) if wall else 0,
        "stream_batch_records_per_s_p50": round(statistics.median(rates)) if rates else 0,
        "stream_batch_seconds_p50": round(statistics.median(p.seconds for p in result.progress), 2)
        if result.progress
        else 0,
        "stream_fold_seconds": round(result.fold_seconds, 2),
        "stream_folded_closes": result.folded,
        **{
            f"stream_{k}_seconds_p50": round(
                statistics.median(p.phases.get(k, 0.0) for p in result.progress), 2
            )
            for k in ("read", "feed", "log", "history", "offsets")
            if result.progress
        },
    }


def bare_ceiling(spark: Any, log_dir: Path, work: Path) -> dict[str, Any]:
    """The baseline: the same source and micro-batches with nothing but the ``metadata_log`` append (no history,
    no suite, no ``offsets``): what Structured Streaming and one Delta append per batch cost on this machine,
    an upper bound for any pipeline that keeps the log as a table."""
    from kraftlake.spark import logtail_source
    from kraftlake.spark.tables.creation import ensure_tables
    from kraftlake.spark.tables.layout import LOG, table_path, to_stored_log

    warehouse = work / "warehouse-bare"
    shutil.rmtree(warehouse, ignore_errors=True)
    ensure_tables(spark, warehouse)
    logtail_source.register(spark)
    seconds: list[float] = []

    def append(df: Any, _: int) -> None:
        t = time.monotonic()
        to_stored_log(df, CLUSTER).write.format("delta").mode("append").save(table_path(warehouse, LOG))
        seconds.append(time.monotonic() - t)

    t = time.monotonic()
    query = (
        spark.readStream.format("kraftlake-logdir")
        .option("path", str(log_dir))
        .option("startingOffset", "0")
        .option("maxRecordsPerBatch", str(BATCH))
        .load()
        .writeStream.foreachBatch(append)
        .option("checkpointLocation", str(warehouse / "_checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall = time.monotonic() - t
    total = spark.read.format("delta").load(table_path(warehouse, LOG)).count()
    full = seconds[: total // BATCH]  # the micro-batches of BATCH records (the last one holds the rest)
    return {
        "bare_log_append_records_per_s": round(total / wall) if wall else 0,
        "bare_log_append_batch_records_per_s_p50": round(BATCH / statistics.median(full)) if full else 0,
    }


def driver_ceiling(log_dir: Path, records: int) -> dict[str, Any]:
    """The serial part of every micro-batch, without Spark: decoding ``records`` records and feeding them to the
    :class:`~kraftlake.history.HistoryBuilder` (the image replay and the entity versions), per CPU second
    of this process. The driver does this once per record in order, so no micro-batch size or number of
    executors takes the stream past it."""
    from itertools import islice

    from kraftlake.history import HistoryBuilder
    from kraftlake.image.source import log_records

    builder = HistoryBuilder()
    start = time.process_time()
    decoded = 0
    feed_cpu = 0.0
    it = log_records(log_dir)
    while decoded < records and (chunk := list(islice(it, min(BATCH, records - decoded)))):
        t = time.process_time()
        builder.feed(chunk)
        feed_cpu += time.process_time() - t
        decoded += len(chunk)
    total = time.process_time() - start
    return {
        "driver_ceiling_records": decoded,
        "driver_ceiling_records_per_s": round(decoded / total) if total else 0,
        "history_feed_records_per_s": round(decoded / feed_cpu) if feed_cpu else 0,
    }


def latency(spark: Any, log_dir: Path, work: Path) -> dict[str, Any]:
    from kraftlake.image.source import log_records
    from kraftlake.service import LocalQuorum
    from kraftlake.spark.tables.creation import ensure_tables
    from kraftlake.spark.tables.layout import OFFSETS, table_ref
    from pipelines.stream import StreamProgress, stream

    warehouse = work / "warehouse-live"
    quorum_dir = work / "quorum"
    for d in (warehouse, quorum_dir):
        shutil.rmtree(d, ignore_errors=True)
    total = int(RATE * SECONDS)
    values = [mr.raw for _, mr in zip(range(total), log_records(log_dir), strict=False) if not mr.is_control]
    ensure_tables(spark, warehouse)
    q = LocalQuorum(3, quorum_dir, CLUSTER, fsync=True)
    q.start()
    stop = threading.Event()
    produced = [0]
    try:
        q.wait_for_leader()
        bootstrap = ",".join(f"{h}:{p}" for h, p in q.endpoints.values())

        def produce() -> None:
            # appends of 1/100 s worth of records on a fixed schedule: the rate holds even when acks are slow
            chunk = max(1, RATE // 100)
            start = time.monotonic()
            pending = []
            for i in range(0, len(values), chunk):
                if stop.is_set():
                    break
                due = start + i / RATE
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                pending.append(q.append(values[i : i + chunk]))
                produced[0] = i + chunk
            for f in pending:
                f.result(timeout=120)

        producer = threading.Thread(target=produce, name="bench-producer", daemon=True)
        commits: list[tuple[StreamProgress, float]] = []
        producer.start()
        result = stream(
            spark,
            "service",
            {"bootstrap": bootstrap, "clusterId": CLUSTER},
            warehouse,
            trigger_interval_s=1.0,
            idle_stop_s=30.0,
            timeout_s=SECONDS + 120,
            progress=lambda p: commits.append((p, time.time())),
        )
        stop.set()
        producer.join(timeout=120)
    finally:
        stop.set()
        q.stop()
    rows = spark.sql(f"SELECT offset, timestamp FROM {table_ref(warehouse, OFFSETS)}").collect()
    appended = {r["offset"]: r["timestamp"] / 1000 for r in rows}
    lat: list[float] = []
    steady: list[float] = []  # records appended after the first commit: the stream running, not starting
    started = commits[0][1] if commits else 0.0
    for p, at in commits:
        for o in range(p.first_offset, p.last_offset + 1):
            if o in appended:
                lat.append(at - appended[o])
                if appended[o] > started:
                    steady.append(at - appended[o])
    return {
        "live_rate_records_per_s": RATE,
        "live_seconds": SECONDS,
        "live_records": result.records,
        "live_batches": result.batches,
        "commit_to_queryable_p50_s": round(quantile(lat, 0.5), 2) if lat else None,
        "commit_to_queryable_p99_s": round(quantile(lat, 0.99), 2) if lat else None,
        "commit_to_queryable_max_s": round(max(lat), 2) if lat else None,
        "steady_commit_to_queryable_p50_s": round(quantile(steady, 0.5), 2) if steady else None,
        "steady_commit_to_queryable_p99_s": round(quantile(steady, 0.99), 2) if steady else None,
        "live_batch_seconds_p50": round(statistics.median(p.seconds for p, _ in commits[1:]), 2)
        if len(commits) > 1
        else None,
        "live_batch_records_p50": round(statistics.median(p.records for p, _ in commits)) if commits else 0,
    }


def live_cluster(spark: Any, log_dir: Path, work: Path) -> dict[str, Any]:
    """Commit-to-queryable at the rate a real cluster writes, and a burst, through ``stream --source service``.

    A 3-voter ``LocalQuorum`` (fsync on) gets, in order (:mod:`bench.cluster_rate`): the cluster's
    creation (the bench log's brokers, topics and ``PARTITIONS`` partitions) at once, waited for until queryable;
    ``SECONDS`` of steady state, a NoOp every 500 ms (as a controller writes them) plus ISR and config churn at
    ``CHURN_RATE`` records/s (the bench log's own churn records, in order); then ``BURST`` churn records at once
    (a broker failure at 2M partitions writes about 120k); a NoOp every 500 ms runs beside all of it until the
    burst is queryable. The stream runs throughout with its defaults (1 s trigger, no batch cap). Latency per
    record as in :func:`latency`. Figures: the steady state's p50/p99, the time until the burst's last record and
    the creation's last record were queryable (from their append).
    """
    from bench.cluster_rate import Phase, cluster_records, write_noops, write_phases
    from bench.commit_latency import Commit, latencies, summary
    from kraftlake.protocol import messages as m
    from kraftlake.records import encode_metadata_record
    from kraftlake.service import LocalQuorum
    from kraftlake.spark.tables.creation import ensure_tables
    from kraftlake.spark.tables.layout import OFFSETS, table_ref
    from pipelines.stream import StreamProgress, stream

    warehouse = work / "warehouse-cluster"
    quorum_dir = work / "quorum-cluster"
    for d in (warehouse, quorum_dir):
        shutil.rmtree(d, ignore_errors=True)
    steady = int(CHURN_RATE * SECONDS)
    creation, churn = cluster_records(log_dir, steady, BURST)
    noop = encode_metadata_record(m.NoOpRecord(), 0)
    ensure_tables(spark, warehouse)
    q = LocalQuorum(3, quorum_dir, CLUSTER, fsync=True)
    q.start()
    commits: list[tuple[StreamProgress, float]] = []
    phases: dict[str, Phase] = {}
    stop = threading.Event()
    noops_done = threading.Event()

    def committed_to(offset: int, timeout_s: float = 600.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not stop.is_set() and time.monotonic() < deadline:
            if commits and commits[-1][0].last_offset >= offset:
                return
            time.sleep(0.05)

    def produce() -> None:
        try:
            write_phases(
                q.append,
                committed_to,
                creation,
                churn,
                steady=steady,
                churn_rate=CHURN_RATE,
                stop=stop,
                phases=phases,
            )
        finally:
            noops_done.set()  # the stream then stops once idle

    try:
        q.wait_for_leader()
        bootstrap = ",".join(f"{h}:{p}" for h, p in q.endpoints.values())
        producer = threading.Thread(target=produce, name="bench-cluster-producer", daemon=True)
        noop_writer = threading.Thread(
            target=write_noops, args=(q.append, noops_done, noop), name="bench-cluster-noops", daemon=True
        )
        producer.start()
        noop_writer.start()
        result = stream(
            spark,
            "service",
            # the voters share this process (and its GIL) with the driver, which replays the creation meanwhile
            {"bootstrap": bootstrap, "clusterId": CLUSTER, "fetchTimeoutSeconds": "600"},
            warehouse,
            trigger_interval_s=1.0,
            idle_stop_s=30.0,
            timeout_s=SECONDS + 900,
            progress=lambda p: commits.append((p, time.time())),
        )
        stop.set()
        producer.join(timeout=120)
        noop_writer.join(timeout=120)
    finally:
        stop.set()
        noops_done.set()
        q.stop()
    rows = spark.sql(f"SELECT offset, timestamp FROM {table_ref(warehouse, OFFSETS)}").collect()
    appended = {r["offset"]: r["timestamp"] / 1000 for r in rows}
    queryable = latencies([Commit(p.first_offset, p.last_offset, at) for p, at in commits], appended)
    out: dict[str, Any] = {
        "cluster_partitions": PARTITIONS,
        "cluster_creation_records": len(creation),
        "cluster_steady_seconds": SECONDS,
        "cluster_churn_records_per_s": CHURN_RATE,
        "cluster_burst_records": BURST,
        "cluster_batches": result.batches,
    }
    for name, phase in phases.items():
        if name == "steady":
            lat = [queryable[o] for o in range(phase.first, phase.last + 1) if o in queryable]
            out["cluster_steady_records"] = len(lat)
            out.update(summary(lat, "cluster_commit_to_queryable_"))
        else:
            last = phase.last
            out[f"cluster_{name}_queryable_s"] = round(queryable[last], 2) if last in queryable else None
    out["cluster_batch_records_p50"] = (
        round(statistics.median(p.records for p, _ in commits)) if commits else 0
    )
    return out


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    from bench.bench_image import cached_log
    from kraftlake.sim.workloads.churn import PARTITIONS_PER_TOPIC
    from kraftlake.spark.session import build_session

    work = Path(ctx["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    topics = max(1, PARTITIONS // PARTITIONS_PER_TOPIC)
    log_dir = cached_log(work, RECORDS, topics)
    spark = build_session("kraftlake-bench-stream")
    figures: dict[str, Any] = {
        "records": RECORDS,
        "partitions": topics * PARTITIONS_PER_TOPIC,
        "max_records_per_batch": BATCH,
    }
    figures.update(driver_ceiling(log_dir, min(RECORDS, 1_000_000)))
    figures.update(bare_ceiling(spark, log_dir, work))
    figures.update(throughput(spark, log_dir, work / "warehouse"))
    if figures["bare_log_append_records_per_s"]:
        figures["stream_vs_bare_ratio"] = round(
            figures["stream_records_per_s"] / figures["bare_log_append_records_per_s"], 3
        )
    figures.update(latency(spark, log_dir, work))
    if CLUSTER_RUN:
        figures.update(live_cluster(spark, log_dir, work))
    figures["load_average_1m"] = round(os.getloadavg()[0], 1)
    return figures
