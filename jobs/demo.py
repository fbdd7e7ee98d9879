"""The main job: ``spark-submit jobs/demo.py [--warehouse W]`` (what ``make run`` runs as ``kraftlake demo``).

Starts a 3-voter KRaft quorum with quorum controllers in the driver, drives it with a simulated cluster, streams
the committed metadata log into a Delta warehouse, compacts it, and prints answers by offset with their SQL.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from jobs._cli import add_warehouse, main_of, session


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from pipelines.demo import DemoConfig

    d = DemoConfig()
    add_warehouse(parser)
    parser.add_argument("--brokers", type=int, default=d.brokers)
    parser.add_argument("--topics", type=int, default=d.topics)
    parser.add_argument("--partitions-per-topic", type=int, default=d.partitions_per_topic)
    parser.add_argument("--replication-factor", type=int, default=d.replication_factor)
    parser.add_argument("--events", type=int, default=d.events, help="simulated cluster events")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument(
        "--stream-round",
        type=float,
        default=d.stream_rounds_s,
        help="seconds each streaming run lasts before it is restarted from its checkpoint",
    )


def run(args: argparse.Namespace) -> int:
    from pipelines.demo import DemoConfig, run_demo

    config = DemoConfig(
        warehouse=Path(args.warehouse),
        brokers=args.brokers,
        topics=args.topics,
        partitions_per_topic=args.partitions_per_topic,
        replication_factor=args.replication_factor,
        events=args.events,
        seed=args.seed,
        stream_rounds_s=args.stream_round,
    )
    spark = session("demo", args.warehouse, args.verbose)
    report = run_demo(spark, config, say=lambda line: print(line, flush=True))
    timings = ", ".join(f"{k} {v:.0f}s" for k, v in report.timings.items())
    print(
        f"\ndone: {report.streamed_records} records streamed in {report.stream_batches} micro-batches over "
        f"{report.stream_runs} streaming runs, last offset {report.last_offset} ({timings})"
    )
    print(
        f'try: kraftlake sql --warehouse {args.warehouse} "SELECT * FROM partitions_at({report.last_offset}) '
        'WHERE size(isr) < 2"'
    )
    if report.plots:
        print(f"open the pictures in a browser: {' '.join(str(p) for p in report.plots)}")
    if not report.ok:
        print(
            "FAILED: the oracle disagrees with SQL or a validation suite failed (see above)", file=sys.stderr
        )
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("demo", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
