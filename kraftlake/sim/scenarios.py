"""Scenarios in the spirit of Kafka's RaftEventSimulationTest, each a function of a seed.

Every scenario runs a client workload and random snapshots over a lossy, duplicating, reordering network
with slow disks, injects its faults, then heals and requires the quorum to converge. Invariants are checked
after every event by the simulation itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from kraftlake.sim.errors import InvariantViolation
from kraftlake.sim.simulation import Faults, Simulation

ELECTION_WITHIN_MS = 20_000

MakeSim = Callable[..., Simulation]


def _setup(sim: Simulation, duration_ms: int) -> None:
    sim.workload(duration_ms)
    sim.snapshots(duration_ms)


def initial_election(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """1-5 voters and 0-2 observers elect a leader, commit, and every node catches up."""
    shape = random.Random(seed ^ 0x5EED)
    sim = make(seed, voters=shape.randint(1, 5), observers=shape.randint(0, 2), **kwargs)
    _setup(sim, 4_000)
    sim.await_leader(ELECTION_WITHIN_MS)
    sim.run_until(4_000)
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


def _with_leader(
    seed: int, voters: int, observers: int, make: MakeSim, kwargs: dict[str, object]
) -> tuple[Simulation, int]:
    sim = make(seed, voters=voters, observers=observers, **kwargs)
    _setup(sim, 8_000)
    leader = sim.await_leader(ELECTION_WITHIN_MS)
    sim.run_until(sim.now + 1_000)
    return sim, sim.leader() or leader


def leader_graceful_failure(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """The leader resigns (EndQuorumEpoch) and stops; a preferred successor takes over."""
    sim, leader = _with_leader(seed, 3 + seed % 3, 1, make, kwargs)
    sim.resign(leader)
    sim.run_until(sim.now + 50)
    sim.crash(leader)
    sim.await_leader(ELECTION_WITHIN_MS, "successor after a graceful resignation")
    sim.run_until(sim.now + 1_000)
    sim.restart(leader)
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


def leader_hard_failure(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """The leader is killed (losing its unflushed tail); the others elect a new one; it rejoins."""
    sim, leader = _with_leader(seed, 3 + seed % 3, 1, make, kwargs)
    sim.crash(leader)
    sim.await_leader(ELECTION_WITHIN_MS, "successor after a hard failure")
    sim.run_until(sim.now + 1_000)
    sim.restart(leader)
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


def all_nodes_killed(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """Every node is killed at once and restarted; nothing acknowledged is lost."""
    sim, _ = _with_leader(seed, 3 + seed % 3, 1, make, kwargs)
    for node_id in sim.nodes:
        sim.crash(node_id)
    sim.run_until(sim.now + 500)
    for node_id in sim.nodes:
        sim.restart(node_id)
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


def leader_partitioned(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """The leader is cut off; the majority elects another; the old leader resigns (check-quorum), rejoins."""
    sim, leader = _with_leader(seed, 3 + seed % 3, 0, make, kwargs)
    sim.partition({leader})
    sim.await_leader(ELECTION_WITHIN_MS, "leader in the majority partition")
    sim.run_until(sim.now + 3_500)
    old = sim.nodes[leader].node
    if old is not None and old.is_leader:
        raise InvariantViolation(
            "check-quorum", f"partitioned leader {leader} still leads after 1.5 x fetch timeout"
        )
    sim.heal()
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


def split_2_3(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """Five voters split 2/3: the three make progress, the two cannot; after healing all agree."""
    sim, leader = _with_leader(seed, 5, 0, make, kwargs)
    others = [v for v in sorted(sim.voter_ids) if v != leader]
    minority = {leader, others[sim.rng.randrange(len(others))]} if seed % 2 else set(others[:2])
    majority = set(sim.voter_ids) - minority
    sim.partition(minority, majority)

    def majority_leads() -> bool:
        lead = sim.leader()
        return lead is not None and lead in majority and sim.nodes[lead].node.high_watermark > 0  # type: ignore[union-attr]

    if not sim.run_until(sim.now + ELECTION_WITHIN_MS, majority_leads):
        raise InvariantViolation("liveness", "the 3-voter side elected no leader")
    sim.run_until(sim.now + 2_000)
    sim.heal()
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


def back_to_back_failures(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """Kill the leader, then the next leader as soon as it is elected; restart both."""
    sim, first = _with_leader(seed, 3 + seed % 3, 1, make, kwargs)
    sim.crash(first)
    second = sim.await_leader(ELECTION_WITHIN_MS, "second leader")
    sim.crash(second)
    sim.restart(first)
    sim.await_leader(ELECTION_WITHIN_MS, "third leader")
    sim.restart(second)
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


def single_node_data_loss(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """One voter loses its whole disk and restarts empty; the quorum still loses nothing acknowledged.

    As in Kafka's test, the majority-holds-HW invariant is off (the lost copy may have been part of it) and the
    network loses no messages: with a static voter set, a wiped voter can vote a lagging candidate in and lose
    committed entries (on a lossy network seed 60 does; KIP-853's directory ids exist to prevent it).
    """
    kwargs = {**kwargs, "check_majority_hw": False, "faults": Faults(loss=0.0)}
    sim, leader = _with_leader(seed, 3 + seed % 3, 0, make, kwargs)
    victims = sorted(sim.voter_ids - {leader})
    victim = victims[sim.rng.randrange(len(victims))]
    sim.wipe(victim)
    sim.run_until(sim.now + 200)
    sim.restart(victim)
    sim.run_until(sim.now + 2_000)
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


def _resign_leader(sim: Simulation) -> None:
    leader = sim.leader()
    if leader is not None:
        sim.resign(leader)


def chaos(seed: int, make: MakeSim = Simulation, **kwargs: object) -> Simulation:
    """Random crashes, restarts, partitions and resignations for ten seconds, then heal and converge."""
    sim = make(seed, voters=3 + seed % 3, observers=seed % 2, **kwargs)
    _setup(sim, 10_000)
    ids = sorted(sim.nodes)
    t = 0
    while True:
        t += sim.rng.randint(300, 1500)
        if t >= 10_000:
            break
        action = sim.rng.choice(["crash", "restart", "partition", "heal", "resign"])
        node = sim.rng.choice(ids)
        if action == "crash":
            sim.call_at(t, partial(sim.crash, node))
        elif action == "restart":
            sim.call_at(t, partial(sim.restart, node))
        elif action == "partition":
            sim.call_at(t, partial(sim.partition, {node}))
        elif action == "heal":
            sim.call_at(t, sim.heal)
        else:
            sim.call_at(t, lambda: _resign_leader(sim))
    sim.run_until(10_000)
    sim.heal()
    for node_id in ids:
        sim.restart(node_id)
    sim.await_convergence(ELECTION_WITHIN_MS)
    return sim


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named scenario and the share of seeds `make test` gives it."""

    name: str
    run: Callable[..., Simulation]


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("initial_election", initial_election),
        Scenario("leader_graceful_failure", leader_graceful_failure),
        Scenario("leader_hard_failure", leader_hard_failure),
        Scenario("all_nodes_killed", all_nodes_killed),
        Scenario("leader_partitioned", leader_partitioned),
        Scenario("split_2_3", split_2_3),
        Scenario("back_to_back_failures", back_to_back_failures),
        Scenario("single_node_data_loss", single_node_data_loss),
        Scenario("chaos", chaos),
    )
}
