"""Running one seed of a scenario and collecting its outcome."""

from __future__ import annotations

from dataclasses import dataclass

from kraftlake.sim import simulation
from kraftlake.sim.errors import InvariantViolation
from kraftlake.sim.scenarios import SCENARIOS


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one seed: events run, the violation if any, and the last `trace_size` trace lines."""

    scenario: str
    seed: int
    events: int
    violation: InvariantViolation | None
    trace: list[str]


def run_seed(scenario: str, seed: int, trace_size: int = 25, **kwargs: object) -> Outcome:
    """Run `scenario` with `seed`; a violation is caught and returned with the trace that led to it."""
    created: list[simulation.Simulation] = []

    def factory(*args: object, **kw: object) -> simulation.Simulation:
        kw.setdefault("trace_size", trace_size)
        made = simulation.Simulation(*args, **kw)  # type: ignore[arg-type]
        created.append(made)
        return made

    try:
        sim = SCENARIOS[scenario].run(seed, make=factory, **kwargs)
        return Outcome(scenario, seed, sim.events_run, None, sim.formatted_trace())
    except InvariantViolation as exc:
        if not created:
            return Outcome(scenario, seed, 0, exc, [])
        return Outcome(scenario, seed, created[-1].events_run, exc, created[-1].formatted_trace())
