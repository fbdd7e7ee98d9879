"""The seed sweep: 112 seeds for each of the 9 scenarios (1,008 seeds) in `make test-slow`, the first 16 of each
in `make test`."""

from __future__ import annotations

import pytest
from sweeps import sweep

from kraftlake.sim.runner import run_seed
from kraftlake.sim.scenarios import SCENARIOS

SEEDS_PER_SCENARIO = sweep(112, 16)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_seeds(scenario: str) -> None:
    failures = []
    for seed in range(SEEDS_PER_SCENARIO):
        outcome = run_seed(scenario, seed)
        if outcome.violation is not None:
            failures.append(f"seed {seed}: {outcome.violation}\n" + "\n".join(outcome.trace))
    assert not failures, f"{len(failures)} violations in {scenario}:\n" + "\n\n".join(failures[:2])


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_smoke(scenario: str) -> None:
    outcome = run_seed(scenario, 10_000)
    assert outcome.violation is None, outcome.violation
    assert outcome.events > 100


def test_a_seed_replays_exactly() -> None:
    """The same seed gives the same run: every traced event (time, what, message) equal, in order."""
    whole = 10**7
    first = run_seed("chaos", 7, trace_size=whole)
    again = run_seed("chaos", 7, trace_size=whole)
    assert first.violation is None and 500 < len(first.trace) < whole  # the whole run, not its tail
    assert first.events == again.events
    assert first.trace == again.trace
    other = run_seed("chaos", 8, trace_size=whole)
    assert other.trace != first.trace  # the trace tells seeds apart


def test_cli_reports_per_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    from kraftlake.cli import main

    assert main(["sim", "--seeds", "2", "--scenario", "initial_election", "--scenario", "split_2_3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["initial_election", "split_2_3"]
    assert all("violations   0" in line for line in out)
