"""``sql --warehouse W "SELECT ..."``: a query with the table functions registered (``partitions_at`` ...)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobs._cli import add_format, add_remote, add_warehouse, main_of, query_session


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    add_remote(parser)
    add_format(parser)
    parser.add_argument("query", help="a Spark SQL query, e.g. SELECT * FROM partitions_at(100)")


def run(args: argparse.Namespace) -> int:
    from pipelines.output import print_frame
    from udfs.sql import warehouse_errors

    spark = query_session("sql", args)
    with warehouse_errors():  # an offset before the retained history: one line, exit 2
        print_frame(spark.sql(args.query), args.format)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("sql", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
