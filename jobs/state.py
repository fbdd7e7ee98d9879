"""``state --warehouse W --offset N | --time T --entity partitions [--where ...]``: an entity's state."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobs._cli import (
    add_cluster,
    add_format,
    add_remote,
    add_warehouse,
    main_of,
    query_session,
    spark_errors,
    timestamp,
)
from kraftlake.commands._args import non_negative_int
from kraftlake.history import ENTITIES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    add_cluster(
        parser,
        "the cluster (needed with --offset when the warehouse holds several; --time answers every cluster "
        "unless one is named)",
    )
    add_remote(parser)
    add_format(parser)
    at = parser.add_mutually_exclusive_group(required=True)
    at.add_argument("--offset", type=non_negative_int, help="the offset (its record included)")
    at.add_argument(
        "--time",
        type=timestamp,
        help="an ISO-8601 timestamp, UTC unless it carries an offset (e.g. 2026-11-22T07:00:00): the state at "
        "the last record at or before it",
    )
    parser.add_argument("--entity", choices=sorted(ENTITIES), default="partitions")
    parser.add_argument("--where", default=None, help="a SQL condition on the entity's columns")


def state_query(
    entity: str, offset: int | None, time: str | None, where: str | None, cluster: str | None = None
) -> str:
    named = "" if cluster is None else f", '{cluster}'"  # a checked name (jobs._cli.cluster_name)
    if offset is not None:
        source = f"{entity}_at({int(offset)}{named})"
    else:
        source = f"{entity}_at_time(TIMESTAMP '{str(time).replace(chr(39), '')}'{named})"
    first = ["cluster"] if offset is None else []
    keys = ", ".join([*first, *(f"`{k}`" for k in ENTITIES[entity].key)]) or "from_offset"
    return f"SELECT * FROM {source}" + (f" WHERE {where}" if where else "") + f" ORDER BY {keys}"


def run(args: argparse.Namespace) -> int:
    from pipelines.output import print_frame

    spark = query_session("state", args)
    # an offset before the retained history or past the commit point (the functions raise), a --where Spark
    # cannot parse or resolve: one line, exit 2
    with spark_errors():
        print_frame(
            spark.sql(state_query(args.entity, args.offset, args.time, args.where, args.cluster)), args.format
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("state", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
