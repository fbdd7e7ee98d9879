"""``kraftlake plot``: the Spark job ``jobs/plot.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.plot import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.plot import run as job

    return job(args)
