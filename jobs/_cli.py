"""What every job shares: the session, the warehouse option and ``main(argv)`` plumbing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from kraftlake.errors import KraftlakeError


def session(app: str, warehouse: str) -> Any:
    from kraftlake.spark import logsource
    from kraftlake.spark.session import build_session

    spark = build_session(f"kraftlake-{app}")
    logsource.register(spark)
    return spark


def add_warehouse(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--warehouse", default="./warehouse", help="the warehouse directory (default ./warehouse)"
    )


def add_remote(parser: argparse.ArgumentParser) -> None:
    """``--remote``; commands with it take ``--warehouse`` as unset (None) unless given, so that a remote run
    can tell a warehouse the user named (checked against the server's) from the default."""
    parser.add_argument(
        "--remote",
        default=None,
        metavar="sc://HOST:PORT",
        help="query a running `kraftlake serve` endpoint (default $SPARK_REMOTE; without either, a "
        "local Spark session): the server's warehouse, no JVM here",
    )
    parser.set_defaults(warehouse=None)


def query_session(app: str, args: argparse.Namespace) -> Any:
    """The session a query command runs on: a ``kraftlake serve`` endpoint (``--remote`` or ``$SPARK_REMOTE``),
    whose functions are registered already, else a local session with the functions registered for the
    warehouse."""
    from pipelines.serve import connect_session, remote_url

    url = remote_url(args.remote)
    if url is not None:
        return connect_session(url, args.warehouse)
    from udfs.sql import register

    warehouse = args.warehouse or "./warehouse"
    spark = session(app, warehouse)
    register(spark, warehouse)
    return spark


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("table", "jsonl"), default="table", help="output format")


def main_of(
    name: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None,
) -> int:
    parser = argparse.ArgumentParser(prog=name)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except KraftlakeError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
