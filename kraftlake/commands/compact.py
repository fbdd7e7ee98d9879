"""``kraftlake compact``: the Spark job ``jobs/compact.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.compact import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.compact import run as job

    return job(args)
