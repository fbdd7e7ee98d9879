"""``validate --warehouse W``: Great Expectations suites on the tables, GX Data Docs (``spark-submit jobs/validate.py``).

Exits 1 when an expectation fails, after printing each failed one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobs._cli import READ_CLUSTER, add_cluster, add_warehouse, check_warehouse, main_of, session


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    add_cluster(parser, READ_CLUSTER)
    parser.add_argument(
        "--table",
        action="append",
        dest="tables",
        metavar="TABLE",
        help="validate only this table (repeatable; default: every table)",
    )
    parser.add_argument("--no-docs", action="store_true", help="do not build the GX Data Docs")


def run(args: argparse.Namespace) -> int:
    from pipelines.validate import print_report, validate

    check_warehouse(args.warehouse)
    spark = session("validate", args.warehouse, args.verbose)
    report = validate(spark, args.warehouse, args.tables, build_docs=not args.no_docs, cluster=args.cluster)
    print_report(report, sys.stdout)
    return 0 if report.success else 1


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("validate", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
