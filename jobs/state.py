"""``state --warehouse W --offset N | --time T --entity partitions [--where ...]``: an entity's state.

Answered without Spark by default (:mod:`kraftlake.warehouse.answers`: the warehouse's Delta tables read with
pyarrow, no JVM), through Spark SQL and the table functions with ``--spark``, ``--remote`` (or
``$SPARK_REMOTE``) or ``--where``: the condition is Spark SQL, which only Spark evaluates as Spark does. A
table the reader cannot read (a Delta feature it does not implement) is answered through Spark too, said on
stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

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
    parser.add_argument(
        "--where", default=None, help="a Spark SQL condition on the entity's columns (answered through Spark)"
    )
    parser.add_argument(
        "--spark",
        action="store_true",
        help="answer through Spark SQL and the table functions (default: read the Delta tables without a JVM)",
    )


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


def _sorted(entity: str, rows: Any) -> Any:
    """``rows`` (an Arrow table) in :func:`state_query`'s ``ORDER BY``: ascending, NULLs first (Spark's
    default)."""
    import pyarrow.compute as pc

    keys = ENTITIES[entity].key or ("from_offset",)
    order = pc.sort_indices(rows, sort_keys=[(k, "ascending", "at_start") for k in keys])
    return rows.take(order)


def without_jvm(args: argparse.Namespace) -> bool:
    """Whether ``args`` ask nothing of Spark: no ``--spark``, no endpoint, no SQL condition."""
    remote = args.remote or os.environ.get("SPARK_REMOTE")
    return not (args.spark or remote or args.where)


def answer_without_jvm(args: argparse.Namespace) -> bool:
    """Print the answer read from the Delta tables; False (nothing printed) when a table needs Spark."""
    from kraftlake.warehouse.answers import state_table, state_table_at_time
    from kraftlake.warehouse.tables import NeedsSpark, Warehouse, WarehouseError, check_warehouse
    from pipelines.arrow_output import write_table

    wh = Warehouse(check_warehouse(args.warehouse or "./warehouse"), getattr(args, "cluster", None))
    try:
        if args.offset is not None:
            rows = state_table(wh, args.entity, args.offset)
        else:
            if wh.cluster is None and wh.has_clusters():
                try:
                    wh.resolve_cluster()
                except WarehouseError:
                    return False  # --time answers every cluster of a fleet: Spark's functions do that
            rows = state_table_at_time(wh, args.entity, args.time)
            # as <entity>_at_time: the cluster first
            rows = rows.add_column(0, "cluster", _repeated(wh.cluster, rows.num_rows))
    except NeedsSpark as exc:
        print(f"kraftlake state: {exc}: answering through Spark", file=sys.stderr)
        return False
    write_table(_sorted(args.entity, rows), args.format)
    return True


def _repeated(text: str | None, n: int) -> Any:
    """``text`` (NULL when None) ``n`` times, as an Arrow string array built without pandas."""
    import numpy as np
    import pyarrow as pa

    data = (text or "").encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    validity = None if text is not None else pa.py_buffer(np.zeros((n + 7) // 8, dtype=np.uint8).tobytes())
    return pa.Array.from_buffers(
        pa.string(), n, [validity, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data * n)]
    )


def run(args: argparse.Namespace) -> int:
    from pipelines.output import print_frame

    if without_jvm(args) and answer_without_jvm(args):
        return 0
    # an offset before the retained history or past the commit point (the functions raise), a --where Spark
    # cannot parse or resolve: one line, exit 2
    query = state_query(args.entity, args.offset, args.time, args.where, args.cluster)
    with query_session("state", args) as spark, spark_errors():
        print_frame(spark.sql(query), args.format)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("state", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
