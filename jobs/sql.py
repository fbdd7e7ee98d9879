"""``sql --warehouse W "SELECT ..."``: a query with the table functions registered (``partitions_at`` ...).

Run on the endpoint of ``--remote`` (or ``$SPARK_REMOTE``), else on the ``kraftlake serve`` running over the
warehouse (its record, :mod:`pipelines.endpoint_file`), else (or with ``--local``) in a local Spark session.
"""

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
    parser.add_argument(
        "--local",
        action="store_true",
        help="a local Spark session, even when a `kraftlake serve` of the warehouse is running or "
        "$SPARK_REMOTE is set",
    )
    parser.add_argument("query", help="a Spark SQL query, e.g. SELECT * FROM partitions_at(100)")


def run(args: argparse.Namespace) -> int:
    from pipelines.endpoint_file import running_endpoint
    from pipelines.output import print_frame
    from pipelines.serve import calls_record_udfs, remote_url

    if not args.query.strip():
        raise CommandError("the query is empty")
    if not args.local and remote_url(args.remote) is None:
        url = running_endpoint(args.warehouse or "./warehouse")
        if url is not None:
            print(f"kraftlake sql: on the running `kraftlake serve` at {url} (--local: not)", file=sys.stderr)
            args.remote = url
    if args.local and args.remote:
        raise CommandError("--local and --remote: choose one")
    spark = query_session("sql", args, local=args.local, record_udfs=calls_record_udfs(args.query))
    # an offset before the retained history, a parse or analysis error: one line, exit 2
    with spark_errors():
        print_frame(spark.sql(args.query), args.format)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("sql", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
