"""``functions --warehouse W [--database kraftlake] [--metastore auto|local|session]``: persistent SQL functions.

Creates the database and, in it, the table functions of ``kraftlake sql`` (``partitions_at(N)`` ...) as
permanent functions plus the warehouse tables as external tables, in the session catalog's metastore: the
user's Hive metastore when the session is configured with one (``session``: spark-submit's or
conf/spark-defaults.conf's ``spark.sql.catalogImplementation=hive``), else an embedded Derby metastore under
``<warehouse>/_metastore`` (``local``; one process at a time). ``auto`` picks ``session`` when Hive is
configured, ``local`` otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from jobs._cli import add_warehouse, log_file, main_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    parser.add_argument(
        "--database", default="kraftlake", help="the database holding the functions (default kraftlake)"
    )
    parser.add_argument(
        "--metastore",
        choices=("auto", "local", "session"),
        default="auto",
        help="local: embedded Derby under <warehouse>/_metastore; session: the Hive metastore the "
        "session is configured with; auto (default): session if Hive is configured, else local",
    )
    parser.add_argument(
        "--metastore-dir",
        default=None,
        help="the local metastore's directory (default <warehouse>/_metastore)",
    )
    parser.add_argument(
        "--no-tables", action="store_true", help="register the functions only, not the tables"
    )


def _mode(requested: str) -> str:
    from kraftlake.spark.session import DEFAULT_CONF, read_conf, submitted_conf
    from udfs.catalog import configured_catalog

    if requested != "auto":
        return requested
    # the precedence build_session applies: conf/spark-defaults.conf, then what spark-submit set
    conf = {**(read_conf(DEFAULT_CONF) if DEFAULT_CONF.is_file() else {}), **submitted_conf()}
    return "session" if configured_catalog(conf) == "hive" else "local"


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from kraftlake.spark.session import build_session
    from udfs.catalog import conf_flags, create_functions, metastore_conf, open_session

    mode = _mode(args.metastore)
    log = log_file("functions")
    if args.verbose:
        print(f"kraftlake functions: Spark's log: {log}", file=sys.stderr)
    if mode == "local":
        spark = open_session("kraftlake-functions", args.warehouse, args.metastore_dir, log, args.verbose)
    else:
        spark = build_session("kraftlake-functions", log_file=log, verbose=args.verbose)
    result = create_functions(spark, args.warehouse, args.database, tables=not args.no_tables)
    doc = dataclasses.asdict(result)
    if mode == "local":
        # what another session needs to see the functions (pyspark, spark-sql, build_session(conf=...))
        doc["session_conf"] = conf_flags(metastore_conf(args.warehouse, args.metastore_dir))
    print(json.dumps(doc, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("functions", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
