"""``stream --source log-dir --log-dir D --warehouse W``: the streaming pipeline with progress reporting."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from jobs._cli import add_warehouse, main_of, session
from kraftlake.errors import KraftlakeError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", choices=("log-dir", "service"), default="log-dir")
    parser.add_argument("--log-dir", help="the metadata log directory to tail (--source log-dir)")
    add_warehouse(parser)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between polls when idle")
    parser.add_argument("--max-batch-records", type=int, default=100_000)
    parser.add_argument("--max-batches", type=int, default=None)
    parser.add_argument("--idle-stop", type=float, default=None, help="stop after this many idle seconds")


def run(args: argparse.Namespace) -> int:
    if args.source == "service":
        raise KraftlakeError("stream --source service is not available yet (the observer client is pending)")
    if not args.log_dir:
        raise KraftlakeError("stream --source log-dir needs --log-dir")
    from pipelines.stream import stream_log_dir

    spark = session("stream", args.warehouse)
    total = stream_log_dir(spark, args.log_dir, args.warehouse, interval_s=args.interval,
                           max_batch_records=args.max_batch_records, max_batches=args.max_batches,
                           idle_stop_s=args.idle_stop,
                           progress=lambda p: print(json.dumps(asdict(p)), file=sys.stderr, flush=True))
    print(f"streamed {total} records")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("stream", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
