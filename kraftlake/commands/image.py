"""``kraftlake image PATH [--offset N] [--shell-format]``: print the metadata image of a log at an offset."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kraftlake.commands._args import non_negative_int
from kraftlake.errors import KraftlakeError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a metadata log directory, a .log segment or a .checkpoint snapshot")
    parser.add_argument(
        "--offset",
        type=non_negative_int,
        default=None,
        help="the offset whose state to print (including its record); default: the log end",
    )
    parser.add_argument(
        "--shell-format",
        action="store_true",
        help="print the image as kafka-metadata-shell's 'tree /image' prints it",
    )


def _warn_skipped(path: Path, exc: KraftlakeError) -> None:
    print(f"kraftlake image: warning: skipped snapshot {path.name}: {exc}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from kraftlake.image.render import image_json, shell_tree
    from kraftlake.image.source import load_path

    if args.offset is not None and Path(args.path).is_dir():
        from kraftlake.image.errors import ImageError
        from kraftlake.image.gaps import gap_at, log_gaps

        gap = gap_at(log_gaps(args.path), args.offset)
        if gap is not None:
            raise ImageError(f"{args.path}: no state is known at offset {args.offset}: {gap.describe()}")
    image = load_path(args.path, args.offset, on_skip=_warn_skipped)
    if args.shell_format:
        sys.stdout.write(shell_tree(image))
    else:
        json.dump(image_json(image), sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0
