"""``stream --source service|log-dir|kafka ... --warehouse W``: the streaming pipeline with progress reporting.

Progress goes to stderr as one JSON line per committed micro-batch (records, offsets, records/s, lag,
commit latency; a fleet's with its cluster); the total to stdout at the end.

A fleet (``--source kafka`` with ``--cluster NAME=HOST:PORT[,...]``, repeatable, and/or ``--clusters FILE``)
streams every cluster into the warehouse (:func:`pipelines.fleet.stream_fleet`); a cluster refused as given
(another cluster id behind its name, its cluster id under another name, streamed by another process) is
reported in one line and the command exits 2 once the others stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from jobs._cli import add_warehouse, cluster_name, main_of, session
from kraftlake.errors import KraftlakeError
from kraftlake.progress import Progress
from kraftlake.warehouse.fleet import FleetError, FleetMember, check_unique, parse_member, read_fleet_file


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
        "--data-dir",
        help="where --source kafka mirrors the metadata log (default <warehouse>/_kafka_mirror); a fleet: "
        "the parent of one directory a cluster (default <warehouse>/_kafka_mirrors)",
    )
    parser.add_argument("--observer-id", type=int, help="the replica id --source kafka fetches as")
    parser.add_argument(
        "--give-up",
        default="60",
        help="--source kafka: fail when no controller answered, or no answer let following go on, for this "
        "many seconds; 'never' retries for ever (default 60)",
    )
    add_warehouse(parser)
    parser.add_argument(
        "--cluster",
        action="append",
        default=None,
        metavar="NAME[=HOST:PORT,...]",
        help="NAME: the name of the cluster streamed (default: the cluster id its source reports); "
        "NAME=HOST:PORT[,HOST:PORT...] (repeatable, --source kafka): a cluster of a fleet and its controller "
        "listeners, every one streamed into the warehouse",
    )
    parser.add_argument(
        "--clusters",
        metavar="FILE",
        help="--source kafka: a fleet file, one cluster a line: NAME HOST:PORT[,...] [--command-config PATH]",
    )
    parser.add_argument(
        "--status-interval",
        type=float,
        default=5.0,
        help="a fleet: seconds between two fleet_status rows of a cluster whose lag alone moved (default 5)",
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


def fleet_members(args: argparse.Namespace) -> list[FleetMember] | None:
    """The fleet of ``--cluster NAME=...`` and ``--clusters FILE``, None when neither names one (then
    ``args.cluster`` is left as the one name given, if any)."""
    given = args.cluster or []
    named = [c for c in given if "=" not in c]
    if not any("=" in c for c in given) and not args.clusters:
        if len(named) > 1:
            raise FleetError(
                f"--cluster given {len(named)} times without =HOST:PORT: a fleet is --cluster NAME=HOST:PORT"
            )
        args.cluster = cluster_name(named[0]) if named else None
        return None
    if named:
        raise FleetError(f"--cluster {named[0]}: a cluster of a fleet is NAME=HOST:PORT[,HOST:PORT...]")
    if args.source != "kafka":
        raise FleetError(
            "a fleet (--cluster NAME=HOST:PORT, --clusters FILE) is followed with --source kafka"
        )
    for option in ("available_now", "max_batches", "idle_stop", "until_offset"):
        if getattr(args, option):
            flag = "--" + option.replace("_", "-")
            raise FleetError(f"{flag} is for one cluster: a fleet streams until --timeout or interrupted")
    for option in ("bootstrap_controller", "cluster_id"):
        if getattr(args, option):
            flag = "--" + option.replace("_", "-")
            raise FleetError(f"{flag} names one cluster: a fleet gives each its own with --cluster NAME=...")
    members = [parse_member(c) for c in given]
    if args.clusters:
        members += read_fleet_file(args.clusters)
    return check_unique(members)


def run(args: argparse.Namespace) -> int:
    members = fleet_members(args)
    options = {"recordsPerPartition": str(args.records_per_partition)}
    if members is not None:
        return _run_fleet(args, members, options)
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


def _run_fleet(args: argparse.Namespace, members: list[FleetMember], options: dict[str, str]) -> int:
    options.update(
        commandConfig=args.command_config or "",
        dataDir=args.data_dir or "",
        observerId="" if args.observer_id is None else str(args.observer_id),
        giveUp=args.give_up,
    )
    from pipelines.fleet import stream_fleet
    from pipelines.stream import FOLD_AT, StreamProgress

    spark = session("stream", args.warehouse, args.verbose)

    def report(cluster: str, p: StreamProgress) -> None:
        print(json.dumps({"cluster": cluster, **asdict(p)}), file=sys.stderr, flush=True)

    result = stream_fleet(
        spark,
        members,
        args.warehouse,
        options,
        trigger_interval_s=args.trigger_interval,
        max_records_per_batch=args.max_records_per_batch,
        timeout_s=args.timeout,
        fold_at=FOLD_AT if args.fold_at is None else args.fold_at or None,
        status_interval_s=args.status_interval,
        progress=report,
    )
    for c in result.clusters.values():
        print(
            f"{c.name}: {c.state}; streamed {c.records} records in {c.batches} batches up to offset "
            f"{c.last_offset}" + (f"; {c.error}" if c.error else "")
        )
    if result.refusals:
        raise FleetError("; ".join(result.refusals))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("stream", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
