"""``kraftlake stream``: the Spark job ``jobs/stream.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.stream import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.stream import run as job

    return job(args)
