"""``reconstruct --warehouse W --offset N [--out P]``: the state at N from a snapshot plus the log's tail."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from jobs._cli import READ_CLUSTER, add_cluster, add_warehouse, check_warehouse, main_of, session
from kraftlake.commands._args import non_negative_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    add_cluster(parser, READ_CLUSTER)
    parser.add_argument("--offset", type=non_negative_int, required=True)
    parser.add_argument(
        "--out",
        default=None,
        help="write one table per entity under this directory (default: print the image JSON)",
    )
    parser.add_argument("--out-format", choices=("delta", "parquet"), default="delta")


def run(args: argparse.Namespace) -> int:
    from kraftlake.image import image_json
    from kraftlake.spark.tables.creation import open_cluster
    from pipelines.reconstruct import image_at_offset, write_entities

    check_warehouse(args.warehouse)
    spark = session("reconstruct", args.warehouse, args.verbose)
    cluster = open_cluster(spark, args.warehouse, args.cluster)
    image = image_at_offset(spark, args.warehouse, cluster, args.offset)
    if args.out is None:
        json.dump(image_json(image), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        counts = write_entities(spark, image, args.out, args.out_format)
        print(json.dumps({"cluster": cluster, "offset": args.offset, "out": args.out, "rows": counts}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("reconstruct", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
