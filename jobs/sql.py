"""``sql --warehouse W "SELECT ..."``: a query with the table functions registered (``partitions_at`` ...).

Run on the ``kraftlake serve`` running over the warehouse when there is one and ``--remote`` (or
``$SPARK_REMOTE``) names no other server (its record, :mod:`pipelines.endpoint_file`: through its SQL route,
:mod:`pipelines.sql_route`, when it has one, else Connect), else on the endpoint of ``--remote``, else (or with
``--local``) in a local Spark session. :func:`printed` is what any of
them prints, the route's server included.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from typing import Any

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


def printed(spark: Any, query: str, fmt: str) -> str:
    """What the command prints for ``query`` run on ``spark``. Raises :class:`CommandError` (or
    ``WarehouseError``) with one line for an offset before the retained history, a parse or analysis error."""
    from pipelines.output import print_frame

    out = io.StringIO()
    with spark_errors():
        print_frame(spark.sql(query), fmt, out)
    return out.getvalue()


def _through_route(route: str, query: str, fmt: str) -> bool:
    """Print the answer of the running server's SQL route; False when nothing listens there."""
    from pipelines.endpoint_file import TOKEN_ENV
    from pipelines.sql_route import RefusedQuery, ask

    try:
        text = ask(route, query, fmt, os.environ.get(TOKEN_ENV))
    except RefusedQuery as exc:
        raise CommandError(str(exc)) from None
    if text is None:
        return False
    sys.stdout.write(text)
    return True


def run(args: argparse.Namespace) -> int:
    from pipelines.endpoint_file import running_record
    from pipelines.record_udf_names import calls_record_udfs
    from pipelines.serve import remote_url, same_endpoint

    if not args.query.strip():
        raise CommandError("the query is empty")
    remote = None if args.local else remote_url(args.remote)
    if not args.local:
        found = running_record(args.warehouse or "./warehouse")
        # the warehouse's own server, named or not: its SQL route answers what its Connect endpoint would
        if found is not None and (remote is None or same_endpoint(remote, found.url)):
            if remote is None:  # chosen without being named: say so
                print(
                    f"kraftlake sql: on the running `kraftlake serve` at {found.url} (--local: not)",
                    file=sys.stderr,
                )
            if found.sql_route is not None and _through_route(found.sql_route, args.query, args.format):
                return 0
            args.remote = remote or found.url
    if args.local and args.remote:
        raise CommandError("--local and --remote: choose one")
    with query_session("sql", args, local=args.local, record_udfs=calls_record_udfs(args.query)) as spark:
        sys.stdout.write(printed(spark, args.query, args.format))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("sql", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
