"""``sql --warehouse W "SELECT ..."``: a query with the table functions registered (``partitions_at`` ...)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobs._cli import (
    CommandError,
    add_format,
    add_remote,
    add_warehouse,
    main_of,
    query_session,
    spark_errors,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    add_remote(parser)
    add_format(parser)
    parser.add_argument("query", help="a Spark SQL query, e.g. SELECT * FROM partitions_at(100)")


def run(args: argparse.Namespace) -> int:
    from pipelines.output import print_frame

    if not args.query.strip():
        raise CommandError("the query is empty")
    spark = query_session("sql", args)
    # an offset before the retained history, a parse or analysis error: one line, exit 2
    with spark_errors():
        print_frame(spark.sql(args.query), args.format)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("sql", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
