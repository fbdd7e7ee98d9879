"""``kraftlake reconstruct``: the Spark job ``jobs/reconstruct.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.reconstruct import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.reconstruct import run as job

    return job(args)
