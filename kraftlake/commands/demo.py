"""``kraftlake demo``: the main job ``jobs/demo.py`` (``make run``) as a subcommand."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from jobs.demo import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from jobs.demo import run as job

    return job(args)
