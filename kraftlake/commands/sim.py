"""`kraftlake sim`: run seeded Raft simulations with faults and check the invariants after every event."""

from __future__ import annotations

import argparse
import time

from kraftlake.commands._args import non_negative_int, positive_int
from kraftlake.sim.errors import InvariantViolation
from kraftlake.sim.runner import run_seed
from kraftlake.sim.scenarios import SCENARIOS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options."""
    parser.add_argument("--seeds", type=positive_int, default=100, help="seeds per scenario (default 100)")
    parser.add_argument("--seed-start", type=non_negative_int, default=0, help="first seed (default 0)")
    parser.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        action="append",
        help="run only this scenario (repeatable; default all)",
    )
    parser.add_argument(
        "--trace", type=non_negative_int, default=25, help="trace lines printed for a failing seed"
    )


def run(args: argparse.Namespace) -> int:
    """Run the seeds; print one line per scenario; exit 1 on any violation."""
    names = args.scenario or list(SCENARIOS)
    failed = 0
    for name in names:
        started = time.perf_counter()
        violations: list[tuple[int, InvariantViolation, list[str]]] = []
        events = 0
        for seed in range(args.seed_start, args.seed_start + args.seeds):
            outcome = run_seed(name, seed, trace_size=args.trace)
            events += outcome.events
            if outcome.violation is not None:
                violations.append((seed, outcome.violation, outcome.trace))
        elapsed = time.perf_counter() - started
        print(
            f"{name:<26} seeds {args.seeds:>5}  violations {len(violations):>3}  events {events:>8}  "
            f"{elapsed:6.1f}s",
            flush=True,
        )
        for seed, violation, trace in violations[:3]:
            print(f"  FAILED seed {seed}: {violation}")
            print(f"  replay: kraftlake sim --scenario {name} --seed-start {seed} --seeds 1 --trace 200")
            for line in trace:
                print(f"    {line}")
        failed += len(violations)
    return 1 if failed else 0
