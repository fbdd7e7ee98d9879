"""``plot --warehouse W KIND [--from/--to offset or time] [--topic T --partition P] [--broker B]
[--resource TYPE:NAME] --out F.html``: a figure of the metadata history, written as a self-contained HTML page, PNG or SVG.

Its data is read from the warehouse's Delta tables without Spark by default
(:mod:`kraftlake.warehouse.plot_frames`, no JVM), through Spark SQL with ``--spark`` (:mod:`pipelines.plots`),
or when a table needs what the reader without a JVM does not implement (said on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs._cli import READ_CLUSTER, add_cluster, add_warehouse, main_of, session
from kraftlake.commands._args import non_negative_int
from kraftlake.plot.options import KINDS, PlotError, PlotRequest, parse_bound, parse_resource

if TYPE_CHECKING:
    from kraftlake.plot.frames import PlotResult


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
    parser.add_argument(
        "--spark",
        action="store_true",
        help="compute the figure's data through Spark SQL (default: read the Delta tables without a JVM)",
    )


def request_of(args: argparse.Namespace) -> PlotRequest:
    return PlotRequest(
        args.kind, args.start, args.end, args.topic, args.partition, args.broker, args.resource
    ).check()


def _without_jvm(args: argparse.Namespace, request: PlotRequest, out: Path) -> PlotResult | None:
    """The figure drawn from the Delta tables read without Spark; None (nothing written) when a table needs
    Spark."""
    from kraftlake.plot.frames import write_figure
    from kraftlake.warehouse.plot_frames import WarehouseFrames, resolve_range
    from kraftlake.warehouse.tables import NeedsSpark, Warehouse

    wh = Warehouse(Path(args.warehouse), args.cluster)
    try:
        rng = resolve_range(wh, request.start, request.end, where=args.warehouse)
        return write_figure(WarehouseFrames(wh), request, rng, out)
    except NeedsSpark as exc:
        print(f"kraftlake plot: {exc}: drawing through Spark", file=sys.stderr)
        return None


def run(args: argparse.Namespace) -> int:
    from kraftlake.plot.output import check_output
    from kraftlake.warehouse.tables import OFFSETS, WarehouseError

    # everything that can be refused is refused before Spark starts
    request = request_of(args)
    out = check_output(args.out or f"{args.kind}.html")
    if not Path(args.warehouse, OFFSETS, "_delta_log").is_dir():
        raise WarehouseError(
            f"{args.warehouse} is not a kraftlake warehouse (no {OFFSETS} table): run ingest first"
        )

    result = None if args.spark else _without_jvm(args, request, out)
    if result is None:
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
