"""The `kraftlake` command.

Each subcommand lives in its own module under `kraftlake.commands` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported only when their command runs, so
`kraftlake decode` never pays for Spark.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

from kraftlake.errors import KraftlakeError

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "decode": (
        "kraftlake.commands.decode",
        "print the records of a segment, snapshot or log directory as JSON",
    ),
    "image": ("kraftlake.commands.image", "print the metadata image of a log at an offset"),
    "sim": ("kraftlake.commands.sim", "run seeded Raft simulations with faults and check the invariants"),
    "quorum": ("kraftlake.commands.quorum", "run or describe a local KRaft quorum"),
    "follow": (
        "kraftlake.commands.follow",
        "mirror a live Kafka cluster's metadata log over the network, as an observer",
    ),
    "simulate": ("kraftlake.commands.simulate", "write a simulated cluster's metadata log through a quorum"),
    "demo": ("kraftlake.commands.demo", "the main job: quorum, simulated cluster, Delta warehouse, queries"),
    "ingest": ("kraftlake.commands.ingest", "import a Kafka metadata log directory into a Delta warehouse"),
    "state": ("kraftlake.commands.state", "print an entity's state at an offset or time from the warehouse"),
    "sql": ("kraftlake.commands.sql", "run SQL over the warehouse with partitions_at(N) and friends"),
    "functions": (
        "kraftlake.commands.functions",
        "store partitions_at(N) and friends as persistent functions in a metastore",
    ),
    "serve": (
        "kraftlake.commands.serve",
        "serve the warehouse over Spark Connect (and JDBC) with the functions registered",
    ),
    "reconstruct": (
        "kraftlake.commands.reconstruct",
        "rebuild the state at an offset from snapshot + log tail",
    ),
    "stream": (
        "kraftlake.commands.stream",
        "stream the metadata log (quorum service or log dir) into the warehouse (Structured Streaming)",
    ),
    "compact": (
        "kraftlake.commands.compact",
        "snapshot, retention deletes, OPTIMIZE and VACUUM of a warehouse",
    ),
    "validate": (
        "kraftlake.commands.validate",
        "Great Expectations suites on the warehouse tables, GX Data Docs",
    ),
    "plot": (
        "kraftlake.commands.plot",
        "draw the history as HTML: under-replicated partitions, leader/ISR, broker states, configs",
    ),
}


def _available() -> dict[str, tuple[str, str]]:
    found = {}
    for name, (module, text) in COMMANDS.items():
        if importlib.util.find_spec(module) is not None:
            found[name] = (module, text)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraftlake", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, text) in _available().items():
        cmd = sub.add_parser(name, help=text, description=text)
        importlib.import_module(module).add_arguments(cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = importlib.import_module(_available()[args.command][0])
    try:
        return int(module.run(args))
    except KraftlakeError as exc:
        print(f"kraftlake {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
