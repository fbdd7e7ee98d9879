"""Deterministic cluster scenarios that put data at risk, one per kind of risk window
(:mod:`kraftlake.history.risk`), scripted on the cluster simulator against the real controller.

``run_scenario(names, seed, log)`` (log: ``MemoryMetadataLog`` when None, or a ``LocalMetadataLog`` writing a
real log directory) runs ``ClusterSimulator.setup`` (4 brokers, the cluster default ``min.insync.replicas=2``,
ELR on as in Kafka 4.x), then each named script: leaders' AlterPartitions, config changes, crashes,
controlled shutdowns and restarts, each leaving every broker up; it returns the simulator (its log holds the
records). The scripts:

- ``leader_only``: an ISR shrinking to its leader alone below the cluster default, then growing back;
- ``topic_min_isr``: a topic's ``min.insync.replicas=3`` override with an ISR of 2, lowered and raised mid
  window, then the topic deleted while at risk and created again under the same name (a new topic id);
- ``broker_min_isr``: a per-broker ``min.insync.replicas=3`` on the leader, then deleted;
- ``offline_elr``: both replicas of a partition shut down cleanly one after the other (the partition goes
  offline with an empty ISR, both in its ELR), then one restarts and is elected from the ELR;
- ``unclean``: ``unclean.leader.election.enable=true`` and ``min.insync.replicas=1`` on a topic whose ISR
  shrank to its leader; the leader crashes, the controller elects a replica from outside the ISR (RECOVERING),
  which then reports RECOVERED.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kraftlake.controller import ConfigChange, ConfigOp, CreatableTopic, ResourceType
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator
from kraftlake.sim.errors import SimError

SCENARIO_BROKERS = 4


def _start(seed: int, log: Any | None) -> ClusterSimulator:
    config = ClusterSimConfig(
        brokers=SCENARIO_BROKERS, topics=0, events=0, seed=seed, standby=False, min_insync_replicas=2
    )
    sim = ClusterSimulator(config, log)
    sim.setup()
    return sim


def _create(
    sim: ClusterSimulator, name: str, replicas: tuple[int, ...], configs: dict[str, str] | None = None
) -> None:
    topic = CreatableTopic(name, assignments={0: replicas}, configs=configs or {})
    resp = sim.command(sim.active.handle_create_topics([topic]), "create_topic")
    error = resp.by_name()[name].error
    if not error.ok:
        raise SimError(f"scenario: creating {name} failed: {error}")


def _config(sim: ClusterSimulator, rtype: ResourceType, name: str, key: str, value: str | None) -> None:
    op = ConfigOp.DELETE if value is None else ConfigOp.SET
    sim.command(
        sim.active.handle_incremental_alter_configs([ConfigChange(rtype, name, key, op, value)]), "config"
    )


def _isr(sim: ClusterSimulator, topic: str, isr: tuple[int, ...], recovery_state: int = 0) -> None:
    if not sim.alter_isr(topic, 0, isr, recovery_state):
        raise SimError(f"scenario: AlterPartition {topic}-0 to ISR {list(isr)} was refused")
    sim.settle(500)


def _down_time(sim: ClusterSimulator) -> int:
    """Long enough for a silent broker to be fenced."""
    return sim.config.controller.session_timeout_ms + 2 * sim.config.heartbeat_interval_ms


def leader_only(sim: ClusterSimulator) -> None:
    _create(sim, "jepsen", (0, 1, 2))
    _isr(sim, "jepsen", (0, 2))
    _isr(sim, "jepsen", (0,))
    sim.settle(2_000)
    _isr(sim, "jepsen", (0, 1))
    _isr(sim, "jepsen", (0, 1, 2))


def topic_min_isr(sim: ClusterSimulator) -> None:
    _create(sim, "orders", (1, 2, 3), {"min.insync.replicas": "3"})
    _isr(sim, "orders", (1, 2))
    _config(sim, ResourceType.TOPIC, "orders", "min.insync.replicas", "2")
    sim.settle(1_000)
    _config(sim, ResourceType.TOPIC, "orders", "min.insync.replicas", "3")
    sim.settle(1_000)
    sim.command(sim.active.handle_delete_topics(["orders"]), "delete_topic")
    sim.settle(1_000)
    _create(sim, "orders", (1, 2, 3), {"min.insync.replicas": "3"})
    _isr(sim, "orders", (1, 3))


def broker_min_isr(sim: ClusterSimulator) -> None:
    _config(sim, ResourceType.BROKER, "0", "min.insync.replicas", "3")
    _create(sim, "payments", (0, 1, 2))
    _isr(sim, "payments", (0, 1))
    _config(sim, ResourceType.BROKER, "0", "min.insync.replicas", None)
    sim.settle(1_000)
    _isr(sim, "payments", (0, 1, 2))


def offline_elr(sim: ClusterSimulator) -> None:
    _create(sim, "ledger", (2, 3))
    sim.shut_down_broker(3)
    sim.settle(1_000)
    sim.shut_down_broker(2)
    sim.settle(2_000)
    sim.restart_broker(2)
    sim.settle(_down_time(sim))
    sim.restart_broker(3)
    sim.settle(_down_time(sim))


def unclean(sim: ClusterSimulator) -> None:
    _create(
        sim,
        "clicks",
        (0, 1, 2),
        {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"},
    )
    _isr(sim, "clicks", (0,))
    sim.crash_broker(0)
    sim.settle(_down_time(sim))
    p = sim.image.topics_by_name["clicks"].partitions[0]
    _isr(sim, "clicks", p.isr, recovery_state=0)
    _isr(sim, "clicks", (*p.isr, 2))
    sim.restart_broker(0)
    sim.settle(_down_time(sim))


SCRIPTS: dict[str, Callable[[ClusterSimulator], None]] = {
    "leader_only": leader_only,
    "topic_min_isr": topic_min_isr,
    "broker_min_isr": broker_min_isr,
    "offline_elr": offline_elr,
    "unclean": unclean,
}
"""Each scenario's script, run on a simulator after its setup."""


def run_scenario(names: str | list[str], seed: int = 0, log: Any | None = None) -> ClusterSimulator:
    """Set up a cluster and run the named scenario's script on it (a list: each in turn, on one cluster, as
    each leaves every broker up); returns the simulator."""
    sim = _start(seed, log)
    for name in [names] if isinstance(names, str) else names:
        SCRIPTS[name](sim)
    return sim


def _scenario(name: str) -> Callable[..., ClusterSimulator]:
    def run(seed: int = 0, log: Any | None = None) -> ClusterSimulator:
        return run_scenario(name, seed, log)

    run.__name__ = name
    return run


RISK_SCENARIOS: dict[str, Callable[..., ClusterSimulator]] = {name: _scenario(name) for name in SCRIPTS}
"""The scenarios by name: ``RISK_SCENARIOS[name](seed, log)`` sets up a cluster and runs one."""
