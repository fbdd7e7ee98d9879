"""The simulators' public hooks: what a scenario or a command uses instead of their private members."""

from __future__ import annotations

from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator
from kraftlake.sim.simulation import Simulation


def test_call_at_runs_at_that_simulated_time_in_scheduling_order() -> None:
    sim = Simulation(seed=1, voters=3)
    seen: list[tuple[str, int]] = []
    sim.call_at(700, lambda: seen.append(("b", sim.now)))
    sim.call_at(300, lambda: seen.append(("a", sim.now)))
    sim.call_at(700, lambda: seen.append(("c", sim.now)))
    sim.run_until(200)
    assert seen == []
    sim.run_until(1000)
    assert seen == [("a", 300), ("b", 700), ("c", 700)]


def test_setup_progress_counts_the_initial_topics_only() -> None:
    config = ClusterSimConfig(
        brokers=4,
        topics=5,
        partitions_per_topic=2,
        events=200,
        seed=2,
        weights={"create_topic": 5, "isr_shrink": 1, "idle": 1},
    )
    sim = ClusterSimulator(config)
    calls: list[tuple[int, int]] = []
    sim.setup_progress = lambda n: calls.append((n, len(sim.image.topics_by_name)))
    summary = sim.run()
    # called after each initial topic is created (the image already holds it), never for later ones
    assert calls == [(n, n) for n in range(1, 6)]
    assert summary.event_counts["create_topic"] > 0
    assert len(sim.image.topics_by_name) > 5
