"""``kraftlake fleet status --warehouse W``: the state of each cluster a fleet's streams follow, without a JVM.

Reads ``fleet_status`` (:mod:`kraftlake.warehouse.fleet_status`): one row a cluster, its newest state, as a
table or as JSON lines.
"""

from __future__ import annotations

import argparse
import json

from kraftlake.warehouse.location import warehouse_argument

COLUMNS = ("cluster", "state", "lag", "last_offset", "last_commit", "updated", "last_error")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = sub.add_parser("status", help="each cluster's newest state in the warehouse's fleet_status")
    status.add_argument(
        "--warehouse",
        default="./warehouse",
        type=warehouse_argument,
        help="the warehouse directory (default ./warehouse)",
    )
    status.add_argument("--format", choices=("table", "jsonl"), default="table", help="output format")


def _cell(value: object) -> str:
    return "" if value is None else str(value)


def run(args: argparse.Namespace) -> int:
    from kraftlake.warehouse.fleet_status import newest

    rows = newest(args.warehouse)
    if args.format == "jsonl":
        for row in rows:
            print(json.dumps({c: row[c] for c in COLUMNS}))
        return 0
    if not rows:
        print(f"no fleet status in {args.warehouse}: no fleet was streamed into it")
        return 0
    cells = [list(COLUMNS), *([_cell(r[c]) for c in COLUMNS] for r in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS) - 1)]
    for line in cells:
        head = "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=False))
        print(f"{head}  {line[-1]}".rstrip())
    return 0
