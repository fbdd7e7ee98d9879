"""``kraftlake functions``: the Spark job ``jobs/functions.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.functions import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.functions import run as job

    return job(args)
