"""The `kraftlake` command.

`COMMANDS` is the dispatch table: a command's name, the module that implements it and its one-line help. The
module exposes ``add_arguments(parser)`` and ``run(args) -> int``; the file commands live in
`kraftlake.commands`, the Spark commands are the jobs under `jobs/`. Only the chosen command's module is
imported (``kraftlake --help`` imports none), so `kraftlake decode` never pays for Spark, pandas or altair.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple

from kraftlake.errors import KraftlakeError


class Command(NamedTuple):
    """One subcommand: the module with its ``add_arguments(parser)`` and ``run(args) -> int``, its help."""

    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "decode": Command(
        "kraftlake.commands.decode", "print the records of a segment, snapshot or log directory as JSON"
    ),
    "image": Command("kraftlake.commands.image", "print the metadata image of a log at an offset"),
    "sim": Command(
        "kraftlake.commands.sim", "run seeded Raft simulations with faults and check the invariants"
    ),
    "quorum": Command("kraftlake.commands.quorum", "run or describe a local KRaft quorum"),
    "follow": Command(
        "kraftlake.commands.follow",
        "mirror a live Kafka cluster's metadata log over the network, as an observer",
    ),
    "report": Command(
        "kraftlake.commands.report",
        "what happened to a cluster in a window of its log: one page, Markdown or JSON",
    ),
    "fleet": Command(
        "kraftlake.commands.fleet", "the state of each cluster a fleet's streams follow (fleet status)"
    ),
    "simulate": Command(
        "kraftlake.commands.simulate", "write a simulated cluster's metadata log through a quorum"
    ),
    "demo": Command("jobs.demo", "the main job: quorum, simulated cluster, Delta warehouse, queries"),
    "ingest": Command("jobs.ingest", "import a Kafka metadata log directory into a Delta warehouse"),
    "state": Command("jobs.state", "print an entity's state at an offset or time from the warehouse"),
    "sql": Command("jobs.sql", "run SQL over the warehouse with partitions_at(N) and friends"),
    "functions": Command(
        "jobs.functions", "store partitions_at(N) and friends as persistent functions in a metastore"
    ),
    "serve": Command(
        "jobs.serve", "serve the warehouse over Spark Connect (and JDBC) with the functions registered"
    ),
    "reconstruct": Command("jobs.reconstruct", "rebuild the state at an offset from snapshot + log tail"),
    "stream": Command(
        "jobs.stream",
        "stream the metadata log (quorum service or log dir) into the warehouse (Structured Streaming)",
    ),
    "compact": Command("jobs.compact", "snapshot, retention deletes, OPTIMIZE and VACUUM of a warehouse"),
    "validate": Command("jobs.validate", "Great Expectations suites on the warehouse tables, GX Data Docs"),
    "plot": Command(
        "jobs.plot",
        "draw the history as HTML: under-replicated partitions, leader/ISR, broker states, configs",
    ),
}


def chosen(argv: Sequence[str]) -> str | None:
    """The command named on a command line: its first word that is not an option (the top-level parser has no
    option taking a value), when it is one of `COMMANDS`."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command listed; the options of `command` only (of all when None, which imports
    every command's module)."""
    parser = argparse.ArgumentParser(prog="kraftlake", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=text, description=text)
        if command is None or name == command:
            importlib.import_module(module).add_arguments(cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = chosen(argv)
    # Without a known command argparse prints the usage or its error and exits; no module is imported for that.
    args = build_parser(name if name is not None else "").parse_args(argv)
    module = importlib.import_module(COMMANDS[args.command].module)
    try:
        return int(module.run(args))
    except KraftlakeError as exc:
        print(f"kraftlake {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
