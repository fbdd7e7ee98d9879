"""``kraftlake simulate``: write a simulated cluster's metadata log (segments + snapshots) to a data dir.

By default the records go through a 3-voter KRaft quorum in this process (``kraftlake.service``): the active
quorum controller runs on the raft leader, standbys replay, snapshots follow the service's policy, and every
voter writes Kafka's layout under ``<data dir>/node-<id>``. ``--through local`` skips the quorum: one local
log writer (a one-voter leader, committed on write) appends under ``<data dir>``; it is faster for large runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from kraftlake.commands._args import directory, non_negative_int, positive_int
from kraftlake.sim.cluster import DEFAULT_WEIGHTS, ClusterSimConfig, ClusterSimulator, scaled_weights
from kraftlake.sim.cluster_log import DEFAULT_SNAPSHOT_BYTES, LocalMetadataLog


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=positive_int, default=5)
    parser.add_argument("--topics", type=non_negative_int, default=10, help="topics created at startup")
    parser.add_argument("--partitions-per-topic", type=positive_int, default=3)
    parser.add_argument(
        "--replication-factor", type=positive_int, default=3, help="replicas per partition, at most --brokers"
    )
    parser.add_argument(
        "--events", type=non_negative_int, default=1000, help="random cluster events after startup"
    )
    parser.add_argument("--data-dir", required=True, type=directory)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-insync-replicas", type=positive_int, default=2)
    parser.add_argument(
        "--snapshot-bytes",
        type=positive_int,
        default=DEFAULT_SNAPSHOT_BYTES,
        help="bytes appended between snapshots (Kafka's default 20 MiB)",
    )
    parser.add_argument(
        "--check-every",
        type=non_negative_int,
        default=0,
        help="check image invariants every N events (0: only at start and end)",
    )
    parser.add_argument("--cluster-id", default="kraftlake-simulated0")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--through",
        choices=("quorum", "local"),
        default="quorum",
        help="append through a 3-voter quorum (default) or a single local log writer",
    )
    parser.add_argument("--no-fsync", action="store_true", help="quorum: do not fsync the voters' logs")
    parser.add_argument(
        "--weights",
        type=_weights,
        default=None,
        metavar="KIND=W,...",
        help="relative rates of event kinds, over the defaults for the cluster's size "
        f"(kinds: {', '.join(DEFAULT_WEIGHTS)})",
    )
    parser.add_argument(
        "--fetch-timeout-ms",
        type=positive_int,
        default=None,
        help="quorum: controller.quorum.fetch.timeout.ms (default: Kafka's 2000, raised to 1 ms "
        "per 6 replicas a broker holds beyond that, e.g. 10000 at 2M partitions on 100 "
        "brokers). The voters share one Python thread: a broker's fencing at that size "
        "holds it for seconds, and with Kafka's timeout every try ends in an election",
    )


def _weights(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, sep, value = part.partition("=")
        if not sep or kind not in DEFAULT_WEIGHTS:
            raise argparse.ArgumentTypeError(
                f"{part!r}: expected KIND=WEIGHT with KIND one of {', '.join(DEFAULT_WEIGHTS)}"
            )
        try:
            weights[kind] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r}: weight {value!r} is not a number") from None
        if weights[kind] < 0:
            raise argparse.ArgumentTypeError(f"{part!r}: a weight must be >= 0")
    return weights


class _Progress:
    """A one-line progress bar on stderr, redrawn at most ten times a second."""

    def __init__(self, total: int, enabled: bool, unit: str = "events") -> None:
        self.total = max(total, 1)
        self.unit = unit
        self.enabled = enabled and total > 0
        self.start = time.perf_counter()
        self.last = 0.0

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last < 0.1 and done != self.total:
            return
        self.last = now
        frac = done / self.total
        bar = "#" * int(30 * frac)
        rate = done / max(now - self.start, 1e-9)
        sys.stderr.write(f"\r[{bar:<30}] {done}/{self.total} {self.unit} {rate:,.0f}/s")
        if done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    weights = scaled_weights(args.brokers, args.topics * args.partitions_per_topic, args.replication_factor)
    weights.update(args.weights or {})
    config = ClusterSimConfig(
        brokers=args.brokers,
        topics=args.topics,
        partitions_per_topic=args.partitions_per_topic,
        replication_factor=args.replication_factor,
        events=args.events,
        seed=args.seed,
        min_insync_replicas=args.min_insync_replicas,
        check_every=args.check_every,
        standby=True,
        weights=weights,
    )
    if args.through == "quorum":
        return _run_on_quorum(args, config)
    log = LocalMetadataLog(args.data_dir, cluster_id=args.cluster_id, snapshot_bytes=args.snapshot_bytes)
    sim = ClusterSimulator(config, log)
    sys.stderr.write(
        f"setting up {args.brokers} brokers, {args.topics} topics x {args.partitions_per_topic} "
        f"partitions ...\n"
    )
    setup_progress = _Progress(args.topics, not args.no_progress, "topics")
    started = time.perf_counter()

    def after_event(s: ClusterSimulator) -> None:
        log.maybe_snapshot(s.active.committed_image)

    def topics_created(count: int) -> None:
        setup_progress(count)
        log.maybe_snapshot(sim.active.committed_image)

    sim.after_event = after_event
    sim.setup_progress = topics_created
    summary = sim.run(progress=_Progress(args.events, not args.no_progress))
    final = log.maybe_snapshot(sim.active.committed_image, force=True)
    log.close()
    elapsed = time.perf_counter() - started
    img = sim.active.committed_image
    out = sys.stdout
    out.write(
        f"wrote {args.data_dir / '__cluster_metadata-0'} through a single local log writer (one voter, "
        "committed on write)\n"
    )
    out.write(
        f"offsets: 0..{log.end_offset() - 1} in {log.batches} batches, epochs {[e.epoch for e in log.epochs]}\n"
    )
    out.write(
        f"segments: {len(log.segments())}, snapshots: {len(log.snapshots)} "
        f"(last {final.name if final else (log.snapshots[-1].name if log.snapshots else '-')})\n"
    )
    _write_image_and_events(out, img, summary, config.weights or {})
    out.write(f"failovers: {summary.failovers}, invariant checks: {summary.invariant_checks}\n")
    _write_records(out, log.records_by_type, elapsed)
    setup_records = summary.setup_end_offset
    event_records = log.end_offset() - setup_records
    event_wall = max(summary.seconds - summary.setup_seconds, 1e-9)
    out.write(
        f"setup: {summary.setup_seconds:.1f} s wall, {summary.setup_cpu_seconds:.1f} s CPU, "
        f"{setup_records:,} records ({setup_records / max(summary.setup_cpu_seconds, 1e-9):,.0f} "
        f"records/CPU-s)\n"
    )
    cpu = max(summary.events_cpu_seconds, 1e-9)
    out.write(
        f"events: {event_wall:.1f} s wall, {summary.events_cpu_seconds:.1f} s CPU, {event_records:,} records; "
        f"{summary.events / cpu:,.1f} events/CPU-s, {event_records / cpu:,.0f} records/CPU-s "
        f"(snapshots included)\n"
    )
    return 0


def _write_image_and_events(out: TextIO, img: Any, summary: Any, weights: dict[str, float]) -> None:
    out.write(
        f"image: {len(img.brokers)} brokers, {len(img.topics_by_id)} topics, {img.partition_count()} partitions\n"
    )
    out.write(
        f"events: {summary.events} ({', '.join(f'{k}={v}' for k, v in sorted(summary.event_counts.items()))})\n"
    )
    out.write(f"event weights: {', '.join(f'{k}={v:.3g}' for k, v in weights.items())}\n")
    if summary.errors:
        out.write(f"rejected commands: {', '.join(f'{k}={v}' for k, v in sorted(summary.errors.items()))}\n")


def _write_records(out: TextIO, records_by_type: dict[str, int], seconds: float) -> None:
    """The records written, by type, and the rate."""
    out.write("records appended, by type:\n")
    for name, count in sorted(records_by_type.items(), key=lambda kv: -kv[1]):
        out.write(f"  {name:<34} {count:>12,}\n")
    total = sum(records_by_type.values())
    out.write(f"  {'total':<34} {total:>12,}\n")
    out.write(f"time: {seconds:.1f} s ({total / max(seconds, 1e-9):,.0f} records/s)\n")


def _run_on_quorum(args: argparse.Namespace, config: ClusterSimConfig) -> int:
    from kraftlake.sim.quorum_cluster import sim_quorum_config, simulate_on_quorum

    quorum = sim_quorum_config(config, fetch_timeout_ms=args.fetch_timeout_ms)
    sys.stderr.write(
        f"setting up {args.brokers} brokers, {args.topics} topics x {args.partitions_per_topic} "
        f"partitions through a 3-voter quorum (fetch timeout {quorum.fetch_timeout_ms} ms) ...\n"
    )
    result = simulate_on_quorum(
        config,
        args.data_dir,
        _Progress(args.events, not args.no_progress),
        cluster_id=args.cluster_id,
        snapshot_bytes=args.snapshot_bytes,
        fsync=not args.no_fsync,
        quorum=quorum,
        setup_progress=_Progress(args.topics, not args.no_progress, "topics"),
    )
    summary, img, out = result.summary, result.image, sys.stdout
    out.write(
        f"wrote {len(result.node_dirs)} voters' logs under {args.data_dir} through a 3-voter quorum "
        f"(leader at the end: node {result.leader_id}, log {result.log_dir})\n"
    )
    out.write(f"offsets: 0..{result.log_end_offset - 1} ({result.batches} batches appended)\n")
    for node_id in sorted(result.node_dirs):
        out.write(
            f"node {node_id}: segments {len(result.segments[node_id])}, "
            f"snapshots {len(result.snapshots[node_id])}\n"
        )
    _write_image_and_events(out, img, summary, config.weights or {})
    failovers = ", ".join(f"{s:.2f}" for s in result.failover_seconds) or "-"
    out.write(f"controller failovers: {summary.failovers} (seconds to a serving standby: {failovers})\n")
    _write_records(out, result.records_by_type, result.seconds)
    events_s = max(result.seconds - summary.setup_seconds, 1e-9)
    out.write(
        f"setup: {summary.setup_seconds:.1f} s, {summary.setup_end_offset:,} records; events: {events_s:.1f} s "
        f"({summary.events / events_s:,.0f} events/s, "
        f"{(result.log_end_offset - summary.setup_end_offset) / events_s:,.0f} records/s)\n"
    )
    if result.records_lost > 10:  # an estimate: the log's control records are counted as one an epoch
        out.write(
            f"not committed: about {result.records_lost:,} of the records above were appended by a controller "
            "whose raft leadership moved first (the voters share one thread; at this scale a long command "
            "can outlast the fetch timeout: --fetch-timeout-ms)\n"
        )
    return 0
