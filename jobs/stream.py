"""``stream --source service|log-dir|kafka ... --warehouse W``: the streaming pipeline with progress reporting.

Progress goes to stderr as one JSON line per committed micro-batch (records, offsets, records/s, lag,
commit latency); the total to stdout at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from jobs._cli import add_cluster, add_warehouse, main_of, session
from kraftlake.errors import KraftlakeError
from kraftlake.progress import Progress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", choices=("log-dir", "service", "kafka"), default="log-dir")
    parser.add_argument("--log-dir", help="the metadata log directory to tail (--source log-dir)")
    parser.add_argument("--bootstrap", help="voters' host:port, comma-separated (--source service)")
    parser.add_argument(
        "--cluster-id",
        help="the service's cluster id (--source service); with --source kafka, "
        "refuse a quorum of another cluster",
    )
    parser.add_argument(
        "--bootstrap-controller",
        help="a Kafka cluster's controller listener(s) HOST:PORT,... (--source kafka)",
    )
    parser.add_argument(
        "--command-config", help="Kafka client properties: security.protocol, ssl.*, sasl.* (--source kafka)"
    )
    parser.add_argument(
        "--data-dir", help="where --source kafka mirrors the metadata log (default <warehouse>/_kafka_mirror)"
    )
    parser.add_argument("--observer-id", type=int, help="the replica id --source kafka fetches as")
    parser.add_argument(
        "--give-up",
        default="60",
        help="--source kafka: fail when no controller answered, or no answer let following go on, for this "
        "many seconds; 'never' retries for ever (default 60)",
    )
    add_warehouse(parser)
    add_cluster(
        parser,
        "the name of the cluster streamed (default: the cluster id its source reports); one warehouse holds "
        "many clusters",
    )
    parser.add_argument("--trigger-interval", type=float, default=1.0, help="seconds between micro-batches")
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="commit what is available at start (in batches of --max-records-per-batch), then stop",
    )
    parser.add_argument("--max-records-per-batch", type=int, default=100_000)
    parser.add_argument("--records-per-partition", type=int, default=50_000)
    parser.add_argument(
        "--max-batches", type=int, default=None, help="stop after this many committed batches"
    )
    parser.add_argument(
        "--idle-stop",
        type=float,
        default=None,
        help="stop after this many seconds in which nothing but NoOp records was committed",
    )
    parser.add_argument(
        "--until-offset",
        type=int,
        default=None,
        help="stop once the warehouse is committed up to this offset (a backfill to a known point)",
    )
    parser.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    parser.add_argument(
        "--fold-at",
        type=int,
        default=None,
        help="fold the pending closes into the history tables once this many wait (default "
        "1,000,000; 0: only at the end of the run and in compact)",
    )


def run(args: argparse.Namespace) -> int:
    options = {"recordsPerPartition": str(args.records_per_partition)}
    if args.source == "kafka":
        if not args.bootstrap_controller:
            raise KraftlakeError("stream --source kafka needs --bootstrap-controller")
        options.update(
            bootstrapController=args.bootstrap_controller,
            commandConfig=args.command_config or "",
            dataDir=args.data_dir or "",
            clusterId=args.cluster_id or "",
            observerId="" if args.observer_id is None else str(args.observer_id),
            giveUp=args.give_up,
        )
    elif args.source == "service":
        if not args.bootstrap or not args.cluster_id:
            raise KraftlakeError("stream --source service needs --bootstrap and --cluster-id")
        options.update(bootstrap=args.bootstrap, clusterId=args.cluster_id)
    else:
        if not args.log_dir:
            raise KraftlakeError("stream --source log-dir needs --log-dir")
        options["path"] = args.log_dir
    from pipelines.stream import FOLD_AT, StreamProgress, stream

    spark = session("stream", args.warehouse, args.verbose)
    # on a terminal a progress line (committed records against what the source has); elsewhere a JSON line
    # per committed micro-batch
    bar = Progress("stream", unit="records")
    streamed = [0]

    def report(p: StreamProgress) -> None:
        streamed[0] += p.records
        if bar.enabled:
            total = streamed[0] + p.lag if p.lag >= 0 else None
            bar.update(streamed[0], total=total, note=f"offset {p.last_offset}, batch {p.batch}")
        else:
            print(json.dumps(asdict(p)), file=sys.stderr, flush=True)

    with bar:
        result = stream(
            spark,
            args.source,
            options,
            args.warehouse,
            trigger_interval_s=args.trigger_interval,
            available_now=args.available_now,
            max_records_per_batch=args.max_records_per_batch,
            max_batches=args.max_batches,
            idle_stop_s=args.idle_stop,
            until_offset=args.until_offset,
            timeout_s=args.timeout,
            fold_at=FOLD_AT if args.fold_at is None else args.fold_at or None,
            progress=report,
            cluster=args.cluster,
        )
    print(
        f"streamed {result.records} records in {result.batches} batches up to offset {result.last_offset}; "
        f"folded {result.folded} closes in {result.fold_seconds:.1f}s"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("stream", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
