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
    parser.add_argument("--warehouse", default="./warehouse", help="the warehouse directory (default ./warehouse)")


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("table", "jsonl"), default="table", help="output format")


def main_of(name: str, add_arguments: Callable[[argparse.ArgumentParser], None],
            run: Callable[[argparse.Namespace], int], argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog=name)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except KraftlakeError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
