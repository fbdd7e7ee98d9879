"""``kraftlake state``: the Spark job ``jobs/state.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.state import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.state import run as job

    return job(args)
