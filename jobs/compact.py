"""``compact --warehouse W [--offset N] [--retain-offsets K | --retain-hours H] [--checkpoint-dir D]``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence

from jobs._cli import add_cluster, add_warehouse, check_warehouse, main_of, session
from kraftlake.commands._args import non_negative_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    add_cluster(parser, "the cluster to compact (needed when the warehouse holds several)")
    parser.add_argument(
        "--offset", type=non_negative_int, default=None, help="the snapshot's offset (default: the latest)"
    )
    keep = parser.add_mutually_exclusive_group()
    keep.add_argument(
        "--retain-offsets", type=non_negative_int, default=None, help="keep the history of the last K offsets"
    )
    keep.add_argument("--retain-hours", type=float, default=None, help="keep the history of the last H hours")
    parser.add_argument(
        "--checkpoint-dir",
        default=None,
        help="also export the snapshot as a Kafka .checkpoint file into this directory",
    )
    parser.add_argument("--vacuum-hours", type=float, default=168.0, help="VACUUM retention (default 168)")
    parser.add_argument("--no-optimize", action="store_true", help="skip OPTIMIZE")


def run(args: argparse.Namespace) -> int:
    from pipelines.compact import compact

    check_warehouse(args.warehouse)
    spark = session("compact", args.warehouse, args.verbose)
    result = compact(
        spark,
        args.warehouse,
        args.offset,
        args.retain_offsets,
        args.retain_hours,
        args.checkpoint_dir,
        args.vacuum_hours,
        not args.no_optimize,
        cluster=args.cluster,
    )
    print(json.dumps(dataclasses.asdict(result)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("compact", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
