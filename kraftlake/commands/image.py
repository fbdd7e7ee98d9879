"""``kraftlake image PATH [--offset N] [--shell-format]``: print the metadata image of a log at an offset."""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a metadata log directory, a .log segment or a .checkpoint snapshot")
    parser.add_argument("--offset", type=int, default=None,
                        help="the offset whose state to print (including its record); default: the log end")
    parser.add_argument("--shell-format", action="store_true",
                        help="print the image as kafka-metadata-shell's 'tree /image' prints it")


def run(args: argparse.Namespace) -> int:
    from kraftlake.image.render import image_json, shell_tree
    from kraftlake.image.source import load_path

    image = load_path(args.path, args.offset)
    if args.shell_format:
        sys.stdout.write(shell_tree(image))
    else:
        json.dump(image_json(image), sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0
