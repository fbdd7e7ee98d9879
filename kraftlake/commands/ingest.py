"""``kraftlake ingest``: the Spark job ``jobs/ingest.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.ingest import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.ingest import run as job

    return job(args)
