"""What every job shares: the session, the warehouse option, the refusals made before Spark starts, Spark's
errors as one line, and ``main(argv)`` plumbing."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kraftlake.errors import KraftlakeError
from kraftlake.warehouse.location import warehouse_argument


class CommandError(KraftlakeError):
    """Raised by a job for input it cannot use: a path that is not a warehouse (before Spark starts), a query
    Spark refused to parse or analyse (its first line, and kraftlake's functions when the name was unknown)."""


def check_warehouse(warehouse: str | Path) -> None:
    """Refuse a warehouse path without the warehouse's log table (a typo, a log dir, an empty directory)."""
    from kraftlake.spark.tables.layout import LOG, table_path

    path = Path(warehouse)
    if not path.exists():
        raise CommandError(f"warehouse {warehouse} does not exist: `kraftlake ingest` or `demo` makes one")
    if not Path(table_path(path, LOG), "_delta_log").is_dir():
        raise CommandError(
            f"{warehouse} is not a kraftlake warehouse (no Delta table {LOG}/ in it): `kraftlake ingest` or "
            "`demo` makes one"
        )


_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?(?:Z|[+-]\d{2}:\d{2})?"
)


def timestamp(text: str) -> str:
    """An argparse type: an ISO-8601 date or date-time (UTC unless it carries an offset), returned as the UTC
    ``YYYY-MM-DD HH:MM:SS[.ffffff]`` a Spark TIMESTAMP literal of a UTC session reads the same way."""
    value = text.strip()
    try:
        if not _TIMESTAMP.fullmatch(value):
            raise ValueError
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a timestamp (ISO-8601, UTC unless an offset is given: 2026-11-22, "
            "2026-11-22T07:00:00, 2026-11-22 07:00:00.250+01:00)"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.isoformat(sep=" ")


def _functions_line() -> str:
    from udfs.sql import CLUSTER_ARG, function_statements

    optional = f", {CLUSTER_ARG} STRING DEFAULT NULL"
    heads = [
        s.split(" FUNCTION ", 1)[1].split(")", 1)[0].replace(optional, f"[, {CLUSTER_ARG} STRING]") + ")"
        for s in function_statements(".")
    ]
    at = [h.split("(", 1)[0][: -len("_at")] for h in heads if h.split("(", 1)[0].endswith("_at")]
    others = [h for h in heads if not h.split("(", 1)[0].endswith(("_at", "_at_time", "_versions"))]
    return (
        f"kraftlake's functions: <entity>_at(at_offset BIGINT[, {CLUSTER_ARG} STRING]), "
        f"<entity>_at_time(at_time TIMESTAMP[, {CLUSTER_ARG} STRING]) and "
        f"<entity>_versions(range_from BIGINT, range_to BIGINT[, {CLUSTER_ARG} STRING]) for "
        f"{', '.join(at)}; {', '.join(others)}"
    )


def spark_message(exc: BaseException) -> str | None:
    """One line for an error Spark raised over a query (parse, analysis, a bad cast, ...), else None.

    Spark's own message starts with ``[CONDITION] text`` and goes on with the query and a caret or a JVM stack
    trace; its first line, less the SQLSTATE, is what the user needs. An unknown function also gets the names of
    kraftlake's functions."""
    get_condition = getattr(exc, "getCondition", None)
    condition = get_condition() if callable(get_condition) else None
    if not condition:
        return None
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else condition
    first = re.sub(r"\s*SQLSTATE: \w+\.?", "", first).strip()
    if condition in ("UNRESOLVED_ROUTINE", "UNRESOLVABLE_TABLE_VALUED_FUNCTION", "ROUTINE_NOT_FOUND"):
        first = f"{first}; {_functions_line()}"
    return first


@contextmanager
def spark_errors() -> Iterator[None]:
    """Run a user's query: the table functions' refusals (an offset the warehouse does not hold) become
    ``WarehouseError`` (:func:`udfs.sql.warehouse_errors`), Spark's parse and analysis errors
    :class:`CommandError` (one line each)."""
    from udfs.sql import warehouse_errors

    try:
        with warehouse_errors():
            yield
    except KraftlakeError:
        raise
    except Exception as exc:
        message = spark_message(exc)
        if message is None:
            raise
        raise CommandError(message) from None


def log_file(app: str) -> Path:
    """Where a job's Spark log goes: ``<temp dir>/kraftlake-logs/<app>-<UTC time>-<pid>.log`` (not the warehouse,
    which ``demo`` replaces and ``compact`` lists)."""
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    return Path(tempfile.gettempdir()) / "kraftlake-logs" / f"{app}-{stamp}-{os.getpid()}.log"


def session(app: str, warehouse: str, verbose: bool = False) -> Any:
    from kraftlake.spark import logsource
    from kraftlake.spark.session import build_session

    log = log_file(app)
    if verbose:
        print(f"kraftlake {app}: Spark's log: {log}", file=sys.stderr)
    spark = build_session(f"kraftlake-{app}", log_file=log, verbose=verbose)
    logsource.register(spark)
    return spark


def cluster_name(text: str) -> str:
    """An argparse type: a cluster's name (:data:`kraftlake.spark.tables.clusters.NAME_PATTERN`)."""
    from kraftlake.spark.tables.clusters import ClusterError, check_name

    try:
        return check_name(text)
    except ClusterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_cluster(parser: argparse.ArgumentParser, what: str) -> None:
    """``--cluster NAME``: which of the warehouse's clusters a command works on."""
    parser.add_argument("--cluster", type=cluster_name, default=None, metavar="NAME", help=what)


#: The ``--cluster`` help of a command reading one cluster of the warehouse.
READ_CLUSTER = "the cluster to read (needed when the warehouse holds several)"


def add_warehouse(parser: argparse.ArgumentParser) -> None:
    """``--warehouse``, and ``--verbose`` (every Spark job has both)."""
    parser.add_argument(
        "--warehouse",
        default="./warehouse",
        type=warehouse_argument,
        help="the warehouse directory (default ./warehouse)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="print Spark's and Delta's warnings on stderr too (they always go to a log file under "
        f"{Path(tempfile.gettempdir()) / 'kraftlake-logs'})",
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


@contextmanager
def query_session(
    app: str,
    args: argparse.Namespace,
    local: bool = False,
    record_udfs: bool = True,
) -> Iterator[Any]:
    """The session a query command runs on: a ``kraftlake serve`` endpoint (``--remote`` or ``$SPARK_REMOTE``),
    whose functions are registered already (the record UDFs only with ``record_udfs``: each is a round trip),
    else (or when ``local``) a local session with the functions registered for the warehouse
    (:func:`udfs.sql.register`).

    An endpoint's session is stopped on leaving: pyspark makes it the process's default Connect session, which
    other code of a process that goes on (great_expectations' Spark engine picks a Connect session first) would
    use after the server has gone, retrying for minutes. The local session stays for the next command."""
    from pipelines.serve import connect_session, remote_url

    url = None if local else remote_url(args.remote)
    if url is not None:
        remote = connect_session(url, args.warehouse, record_udfs)
        try:
            yield remote
        finally:
            remote.stop()
        return
    from udfs.sql import register

    warehouse = args.warehouse or "./warehouse"
    check_warehouse(warehouse)
    spark = session(app, warehouse, args.verbose)
    register(spark, warehouse)
    yield spark


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
