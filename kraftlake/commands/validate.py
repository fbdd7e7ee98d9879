"""``kraftlake validate``: the Spark job ``jobs/validate.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.validate import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.validate import run as job

    return job(args)
