"""`kraftlake follow`: mirror a live Kafka cluster's ``__cluster_metadata`` into a log dir, as an observer.

    kraftlake follow --bootstrap-controller HOST:PORT[,HOST:PORT...] | ID@HOST:PORT[,...] --data-dir D
                     [--command-config FILE] [--observer-id N] [--cluster-id ID]
                     [--until-offset N | --idle-stop S] [--give-up S|never] [--status-file F]

Only committed records are written, in Kafka's layout, so ``kraftlake decode/image/ingest`` and
``kafka-dump-log`` read ``D``. A restart resumes from ``D``. Nothing is deleted from ``D`` unless a retention
is given. One follower writes ``D`` at a time (``D/.lock``); the first contact records the cluster id in
``D/meta.properties`` and refuses another cluster from then on.

As a service: ``--give-up never`` retries an unreachable quorum for ever, ``--status-file`` keeps a JSON status
(offset, high watermark, lag, leader, last error, last progress) for a supervisor (README: a systemd unit).
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from kraftlake.follow.bootstrap import parse_bootstrap
from kraftlake.follow.follower import Follower, FollowProgress
from kraftlake.follow.mirror import MetadataMirror, MirrorRetention
from kraftlake.follow.status import status, write_status
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
    parser.add_argument(
        "--until-offset",
        type=int,
        help="stop once the mirror holds this offset (the batch holding it is the last one written)",
    )
    parser.add_argument(
        "--idle-stop",
        type=float,
        help="once caught up, stop after this many seconds in which nothing but NoOp records was committed",
    )
    parser.add_argument(
        "--give-up",
        type=give_up,
        default=60.0,
        help="stop with an error when no controller answered, or no answer let following go on, for this many "
        "seconds; 'never' retries for ever (a service) (default 60)",
    )
    parser.add_argument(
        "--status-file",
        type=Path,
        help="keep a JSON status here (offset, high watermark, lag, leader, last error, last progress), "
        "replaced at each progress report and at the stop",
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
    parser.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        help="seconds between progress lines and status file updates (default 5)",
    )


def give_up(text: str) -> float | None:
    """``--give-up``: seconds >= 0, or ``never`` (None)."""
    if text.strip().lower() == "never":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number of seconds nor 'never'") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


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

    follower: Follower | None = None

    def report(progress: FollowProgress) -> None:
        if not args.quiet:
            print(progress.line(), file=sys.stderr, flush=True)
        if args.status_file is not None and follower is not None:
            write_status(args.status_file, status(follower, "following"))

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
        try:
            progress = follower.run(
                stop,
                until_offset=args.until_offset,
                idle_stop_s=args.idle_stop,
                on_progress=report,
                progress_every_s=args.progress_every,
            )
        except BaseException as exc:
            if args.status_file is not None:
                write_status(args.status_file, status(follower, "failed", str(exc) or type(exc).__name__))
            raise
        if args.status_file is not None:
            write_status(args.status_file, status(follower, "stopped"))
    print(
        f"mirrored {args.data_dir}: log end {progress.log_end}, {progress.records} records fetched, "
        f"{progress.snapshots} snapshots",
        flush=True,
    )
    return 0
