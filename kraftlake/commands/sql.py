"""``kraftlake sql``: the Spark job ``jobs/sql.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.sql import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.sql import run as job

    return job(args)
