"""``plot --warehouse W KIND [--from/--to offset or time] [--topic T --partition P] [--broker B]
[--resource TYPE:NAME] --out F.html``: a figure of the metadata history, written as a self-contained HTML page, PNG or SVG."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jobs._cli import READ_CLUSTER, add_cluster, add_warehouse, main_of, session
from kraftlake.commands._args import non_negative_int
from kraftlake.plot.options import KINDS, PlotError, PlotRequest, parse_bound, parse_resource


def _arg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a parser raising ``PlotError`` (argparse prints one line and exits 2)."""

    def typed(text: str) -> Any:
        try:
            return parse(text)
        except PlotError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return typed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_warehouse(parser)
    add_cluster(parser, READ_CLUSTER)
    parser.add_argument(
        "kind", choices=tuple(KINDS), metavar="KIND", help="; ".join(f"{k}: {v}" for k, v in KINDS.items())
    )
    parser.add_argument(
        "--from",
        dest="start",
        type=_arg(parse_bound),
        default=None,
        metavar="OFFSET|TIME",
        help="first offset, or a time (ISO-8601, UTC unless it names a zone); default: the first kept",
    )
    parser.add_argument(
        "--to",
        dest="end",
        type=_arg(parse_bound),
        default=None,
        metavar="OFFSET|TIME",
        help="last offset, or a time; default: the warehouse's last offset",
    )
    parser.add_argument("--topic", help="the topic (partition)")
    parser.add_argument("--partition", type=non_negative_int, help="the partition index (partition)")
    parser.add_argument("--broker", type=non_negative_int, help="only this broker (brokers)")
    parser.add_argument(
        "--resource",
        type=_arg(parse_resource),
        metavar="TYPE:NAME",
        help="TYPE:NAME, e.g. topic:orders (configs)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="the file to write: .html (opens offline), .png or .svg (default: KIND.html)",
    )


def request_of(args: argparse.Namespace) -> PlotRequest:
    return PlotRequest(
        args.kind, args.start, args.end, args.topic, args.partition, args.broker, args.resource
    ).check()


def run(args: argparse.Namespace) -> int:
    from kraftlake.plot.output import check_output
    from kraftlake.spark.tables.layout import OFFSETS, WarehouseError, table_path

    # everything that can be refused is refused before Spark starts
    request = request_of(args)
    out = check_output(args.out or f"{args.kind}.html")
    if not Path(table_path(args.warehouse, OFFSETS), "_delta_log").is_dir():
        raise WarehouseError(
            f"{args.warehouse} is not a kraftlake warehouse (no {OFFSETS} table): run ingest first"
        )

    from pipelines.plots import write_plot

    spark = session("plot", args.warehouse, args.verbose)
    result = write_plot(spark, args.warehouse, request, out, args.cluster)
    print(
        f"{result.path}: {result.title}, offsets {result.range.lo}..{result.range.hi} "
        f"({len(result.data)} rows)"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return main_of("plot", add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
