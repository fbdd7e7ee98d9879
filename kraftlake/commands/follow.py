"""`kraftlake follow`: mirror a live Kafka cluster's ``__cluster_metadata`` into a log dir, as an observer.

    kraftlake follow --bootstrap-controller HOST:PORT[,HOST:PORT...] | ID@HOST:PORT[,...] --data-dir D
                     [--command-config FILE] [--observer-id N] [--cluster-id ID]
                     [--until-offset N | --idle-stop S]

Only committed records are written, in Kafka's layout, so ``kraftlake decode/image/ingest`` and
``kafka-dump-log`` read ``D``. A restart resumes from ``D``. Nothing is deleted from ``D`` unless a retention
is given.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from kraftlake.follow.bootstrap import parse_bootstrap
from kraftlake.follow.follower import Follower, FollowProgress
from kraftlake.follow.mirror import MetadataMirror, MirrorRetention
from kraftlake.wire.client_config import load_client_properties


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options."""
    parser.add_argument(
        "--bootstrap-controller",
        required=True,
        help="controller listener(s) HOST:PORT[,HOST:PORT...] (not a broker listener), or Kafka's voter string "
        "ID@HOST:PORT,... (controller.quorum.voters)",
    )
    parser.add_argument(
        "--data-dir", required=True, type=Path, help="the mirror directory (created if missing)"
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        help="Kafka client properties: security.protocol, ssl.*, sasl.* (as Kafka's tools take)",
    )
    parser.add_argument(
        "--observer-id",
        type=int,
        help="replica id to fetch as (default: the directory's, or a new one above 2e9)",
    )
    parser.add_argument("--cluster-id", help="refuse a quorum of another cluster (default: the directory's)")
    parser.add_argument("--until-offset", type=int, help="stop once the mirror reaches this offset")
    parser.add_argument(
        "--idle-stop",
        type=float,
        help="stop after this many seconds caught up with the leader's high watermark",
    )
    parser.add_argument(
        "--give-up",
        type=float,
        default=60.0,
        help="stop with an error when no controller answered for this many seconds (default 60)",
    )
    parser.add_argument(
        "--retention-bytes",
        type=int,
        help="delete the oldest segments below a held snapshot past this many bytes (default: keep all)",
    )
    parser.add_argument(
        "--retention-ms",
        type=int,
        help="delete segments below a held snapshot older than this (default: keep all)",
    )
    parser.add_argument("--no-fsync", action="store_true", help="do not fsync appends")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    """Follow until interrupted (or --until-offset / --idle-stop)."""
    try:
        bootstrap = parse_bootstrap(args.bootstrap_controller)
    except ValueError as exc:
        print(f"kraftlake follow: error: --bootstrap-controller: {exc}", file=sys.stderr)
        return 2
    security = load_client_properties(args.command_config) if args.command_config else None
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    def report(progress: FollowProgress) -> None:
        if not args.quiet:
            print(progress.line(), file=sys.stderr, flush=True)

    retention = MirrorRetention(args.retention_bytes, args.retention_ms)
    with MetadataMirror(
        args.data_dir,
        cluster_id=args.cluster_id,
        observer_id=args.observer_id,
        fsync=not args.no_fsync,
        retention=retention,
    ) as mirror:
        if mirror.recovered_bytes:
            print(f"kraftlake follow: dropped a torn tail of {mirror.recovered_bytes} bytes", file=sys.stderr)
        follower = Follower(bootstrap, mirror, security=security, give_up_s=args.give_up)
        progress = follower.run(
            stop, until_offset=args.until_offset, idle_stop_s=args.idle_stop, on_progress=report
        )
    print(
        f"mirrored {args.data_dir}: log end {progress.log_end}, {progress.records} records fetched, "
        f"{progress.snapshots} snapshots",
        flush=True,
    )
    return 0
