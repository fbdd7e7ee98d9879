"""``kraftlake serve``: the Spark job ``jobs/serve.py`` as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.serve import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.serve import run as job

    return job(args)
