"""The main job (`make run`): a quorum, a simulated cluster, a Delta warehouse, and answers by offset.

1. A 3-voter KRaft quorum runs in this (driver) process with a quorum controller on every voter
   (`kraftlake.service.controller_host.ControllerQuorum`); each voter writes Kafka's on-disk layout under
   ``<warehouse>/_kraft/node-<id>``.
2. A seeded simulated cluster (`kraftlake.sim.quorum_cluster`) drives the active controller from a background
   thread: brokers register and heartbeat, topics come and go, ISRs churn, brokers crash and restart, and the
   active controller fails over.
3. Meanwhile Structured Streaming reads the committed records from the quorum as an observer (the
   ``kraftlake-service`` source) and commits them into the Delta warehouse, micro-batch by micro-batch, in
   runs of ``stream_rounds_s`` each restarted from its checkpoint until the cluster is done; a last
   AvailableNow run, restarted from the checkpoint again, catches up with the quorum's high watermark
   (exactly once across restarts).
4. Compaction stores a snapshot at the last offset and drops what the retention no longer needs.
5. Questions by offset are answered in SQL (printed with their SQL), and one answer is checked against the
   pure-Python image replayed from a voter's log files (the oracle); then the warehouse's validation suites
   (``pipelines.validate``: the rules the history must keep, such as partition epochs increasing per topic
   id) run over every table.
6. Beside the answers, the same history is drawn (``pipelines.plots``): under-replicated and offline partitions,
   broker states, the busiest partition's leader and ISR, the configs changed most, as HTML files under
   ``<warehouse>/_plots``.
"""

from __future__ import annotations

import io
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.controller import ControllerConfig
from kraftlake.image import image_at
from kraftlake.logformat import METADATA_PARTITION_DIR
from kraftlake.service.controller_host import ControllerQuorum
from kraftlake.sim.cluster import ClusterSimConfig, SimSummary
from kraftlake.sim.quorum_cluster import QuorumClusterSimulator
from kraftlake.spark.tables.creation import open_cluster
from kraftlake.spark.validate import ValidationReport
from pipelines import answers
from pipelines.compact import compact
from pipelines.plots import write_overview
from pipelines.stream import stream
from pipelines.validate import print_report, validate
from udfs import sql as warehouse_sql

CLUSTER_ID = "kraftlake-demo-cluster0"


@dataclass(frozen=True)
class DemoConfig:
    """How big the demo's cluster is and how the warehouse is kept."""

    warehouse: Path = Path("warehouse")
    brokers: int = 8
    topics: int = 24
    partitions_per_topic: int = 4
    replication_factor: int = 3
    events: int = 2500
    seed: int = 42
    stream_rounds_s: float = 25.0
    """How long each streaming run lasts while the cluster runs (the stream is restarted between runs)."""
    max_records_per_batch: int = 2000
    retain_fraction: float = 0.5
    """Compaction keeps this fraction of the offsets (the rest is answered only from the snapshot)."""
    sample_points: int = 8


@dataclass
class DemoReport:
    """What the demo did and found."""

    sim: SimSummary | None = None
    last_offset: int = -1
    streamed_records: int = 0
    stream_runs: int = 0
    stream_batches: int = 0
    retained_from: int | None = None
    answers: list[answers.Answer] = field(default_factory=list)
    oracle_offset: int = -1
    oracle_under_replicated: int = -1
    sql_under_replicated: int = -1
    plots: list[Path] = field(default_factory=list)
    validation: ValidationReport | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """The oracle agrees with SQL and every validation suite passed."""
        return (
            self.oracle_under_replicated == self.sql_under_replicated
            and self.validation is not None
            and self.validation.success
        )


def _bootstrap(cq: ControllerQuorum) -> str:
    return ",".join(f"{host}:{port}" for host, port in cq.local.endpoints.values())


def run_demo(spark: SparkSession, config: DemoConfig, say: Callable[[str], None] = print) -> DemoReport:
    """Run the whole demo; see the module docstring."""
    report = DemoReport()
    warehouse = config.warehouse.resolve()
    if warehouse.exists():
        say(f"removing the previous run's {warehouse}")
        shutil.rmtree(warehouse)
    t0 = time.monotonic()
    log_dir = _run_cluster(spark, config, warehouse, report, say, t0)
    warehouse_sql.register(spark, warehouse)
    _compact(spark, config, warehouse, report, say)
    worst, busiest = _ask(spark, config, warehouse, report, say)
    _draw(warehouse, busiest, report, say)
    _check_oracle(log_dir, worst, report, say)
    _validate(spark, warehouse, report, say)
    report.timings["total_s"] = time.monotonic() - t0
    return report


def _run_cluster(
    spark: SparkSession,
    config: DemoConfig,
    warehouse: Path,
    report: DemoReport,
    say: Callable[[str], None],
    t0: float,
) -> Path:
    """The quorum and the simulated cluster, streamed into the warehouse; the active voter's log directory."""
    kraft_dir = warehouse / "_kraft"
    sim_config = ClusterSimConfig(
        brokers=config.brokers,
        topics=config.topics,
        partitions_per_topic=config.partitions_per_topic,
        replication_factor=config.replication_factor,
        events=config.events,
        seed=config.seed,
        controller=ControllerConfig(),
    )
    quorum = ControllerQuorum(
        3, kraft_dir, CLUSTER_ID, config=sim_config.controller, seed=config.seed
    ).start()
    try:
        active = quorum.wait_active(timeout=60)
        say(f"quorum: 3 voters on {_bootstrap(quorum)}, active controller on node {active.node_id}")
        simulator = QuorumClusterSimulator(sim_config, quorum)
        outcome: dict[str, Any] = {}

        done = threading.Event()

        def drive() -> None:
            try:
                outcome["summary"] = simulator.run()
            except BaseException as exc:  # surfaced on the main thread below
                outcome["error"] = exc
            finally:
                done.set()  # the running stream round ends: the AvailableNow run catches up

        cluster = threading.Thread(target=drive, name="simulated-cluster", daemon=True)
        cluster.start()
        say(
            f"cluster: {config.brokers} brokers, {config.topics} topics x {config.partitions_per_topic} "
            f"partitions, RF {config.replication_factor}, {config.events} events (seed {config.seed})"
        )
        options = {"bootstrap": _bootstrap(quorum), "clusterId": CLUSTER_ID}

        def progress(p: Any) -> None:
            say(
                f"  stream batch {p.batch}: offsets {p.first_offset}..{p.last_offset} ({p.records} records, "
                f"{p.records_per_s:,.0f} rec/s, lag {p.lag})"
            )

        while cluster.is_alive():
            run = stream(
                spark,
                "service",
                options,
                warehouse,
                trigger_interval_s=1.0,
                max_records_per_batch=config.max_records_per_batch,
                timeout_s=config.stream_rounds_s,
                progress=progress,
                stop=done,
            )
            report.stream_runs += 1
            report.streamed_records += run.records
            report.stream_batches += run.batches
            say(
                f"stream run {report.stream_runs} stopped at offset {run.last_offset}; restarting from its "
                "checkpoint"
                if cluster.is_alive()
                else f"stream run {report.stream_runs} stopped"
            )
        cluster.join()
        if "error" in outcome:
            raise outcome["error"]

        report.sim = outcome["summary"]
        report.timings["cluster_s"] = time.monotonic() - t0
        say(f"cluster done: {report.sim.events} events, {report.sim.failovers} controller failovers")
        final = stream(
            spark,
            "service",
            options,
            warehouse,
            available_now=True,
            max_records_per_batch=config.max_records_per_batch,
            progress=progress,
        )
        report.stream_runs += 1
        report.streamed_records += final.records
        report.stream_batches += final.batches
        report.timings["stream_s"] = time.monotonic() - t0
        return quorum.node_dir(active.node_id) / METADATA_PARTITION_DIR
    finally:
        quorum.stop()


def _compact(
    spark: SparkSession, config: DemoConfig, warehouse: Path, report: DemoReport, say: Callable[[str], None]
) -> None:
    """Compaction keeping ``config.retain_fraction`` of the offsets."""
    lo, hi = answers.offset_range(warehouse, open_cluster(spark, warehouse, None))
    report.last_offset = hi
    retain = max(1, int((hi - lo + 1) * config.retain_fraction))
    t1 = time.monotonic()
    compacted = compact(spark, warehouse, retain_offsets=retain)
    report.retained_from = compacted.retained_from
    report.timings["compact_s"] = time.monotonic() - t1
    kept = (
        "everything kept (no snapshot is old enough to answer for the dropped offsets yet)"
        if compacted.retained_from is None
        else f"history kept from offset {compacted.retained_from}"
    )
    say(f"compaction: snapshot at offset {compacted.snapshot_offset}, {kept}, {compacted.seconds:.1f}s")


def _ask(
    spark: SparkSession, config: DemoConfig, warehouse: Path, report: DemoReport, say: Callable[[str], None]
) -> tuple[tuple[Any, ...], tuple[str, int] | None]:
    """The questions by offset, printed; the (offset, count) row of the most under-replicated sample point
    and the busiest partition."""
    cluster = open_cluster(spark, warehouse, None)  # the demo's one cluster
    lo, hi = answers.offset_range(warehouse, cluster)
    points = answers.sample_offsets(lo, hi, config.sample_points)
    over_time = answers.under_replicated_over_time(spark, points)
    report.answers.append(over_time)
    worst = max(over_time.rows, key=lambda r: (r[1], r[0]))
    report.answers.append(answers.under_replicated_at(spark, int(worst[0])))
    busiest = answers.busiest_partition(warehouse, cluster)
    if busiest is not None:
        report.answers.append(answers.leader_history(spark, *busiest))
    report.answers.append(
        answers.fenced_brokers_at(spark, answers.most_fenced_offset(warehouse, cluster, points))
    )
    for answer in report.answers:
        say("")
        say(answers.format_answer(answer))
    return worst, busiest


def _draw(
    warehouse: Path,
    busiest: tuple[str, int] | None,
    report: DemoReport,
    say: Callable[[str], None],
) -> None:
    """The answers drawn over the whole retained history, from the warehouse just queried."""
    t2 = time.monotonic()
    say("")
    for plot in write_overview(warehouse, warehouse / "_plots", partition=busiest):
        report.plots.append(plot.path)
        say(f"plot: {plot.path} ({plot.title}, offsets {plot.range.lo}..{plot.range.hi})")
    report.timings["plots_s"] = time.monotonic() - t2


def _check_oracle(
    log_dir: Path, worst: tuple[Any, ...], report: DemoReport, say: Callable[[str], None]
) -> None:
    """The same question answered by replaying the voter's Kafka log files in pure Python."""
    report.oracle_offset = int(worst[0])
    image = image_at(log_dir.parent, report.oracle_offset)
    report.oracle_under_replicated = sum(
        1
        for topic in image.topics_by_id.values()
        for p in topic.partitions.values()
        if len(p.isr) < len(p.replicas)
    )
    report.sql_under_replicated = int(worst[1])
    verdict = "agrees" if report.oracle_under_replicated == report.sql_under_replicated else "DISAGREES"
    say("")
    say(
        f"oracle check: replaying {log_dir} to offset {report.oracle_offset} gives "
        f"{report.oracle_under_replicated} under-replicated partitions; SQL gave {report.sql_under_replicated}: "
        f"{verdict}"
    )


def _validate(spark: SparkSession, warehouse: Path, report: DemoReport, say: Callable[[str], None]) -> None:
    """The warehouse's validation suites, printed."""
    t3 = time.monotonic()
    report.validation = validate(spark, warehouse, build_docs=False)
    report.timings["validate_s"] = time.monotonic() - t3
    say("")
    out = io.StringIO()
    print_report(report.validation, out)
    for line in out.getvalue().splitlines():
        say(f"validation: {line}")
