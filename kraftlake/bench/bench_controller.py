"""Controller benchmarks: controlled shutdown of one broker, and failover to a hot standby.

Two set-ups, each built through the controller itself (registration, heartbeats, CreateTopics; topics of
100 partitions, RF 3, 100 brokers):

- ``memory``: an active and a standby ``QuorumController`` on the in-memory log (commit on append): the
  controller's own cost, no network or fsync;
- ``quorum``: ``kraftlake.service.ControllerQuorum``, three voters (in this process, fsync on), a controller
  on each: the time from the command to the commit of all its records through the 3-voter quorum, as the
  KRaft announcement measured it (controlled shutdown 32 s with the quorum controller vs 135 s with
  ZooKeeper at 2M partitions; the goal here is < 3 s).

Figures are medians: controlled shutdowns of ``RUNS`` different brokers, ``RUNS`` failovers. Controlled
shutdown = the heartbeat asking for it until all its records (one metadata transaction when over 10,000) are
committed and replayed; failover = the active's death until a standby answered a command and its records are
committed (no bootstrap: the standby's image is hot). Sizes: the largest that builds within the time budget.

Run: ``python -m kraftlake.bench.bench_controller --partitions 200000 2000000``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import tracemalloc
from functools import partial
from pathlib import Path
from typing import Any

from kraftlake.controller import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
    Listener,
    MemoryMetadataLog,
    QuorumController,
    random_uuid,
)


def build(brokers: int, partitions: int, per_topic: int = 100) -> tuple[MemoryMetadataLog, QuorumController,
                                                                      QuorumController, dict[int, int], float]:
    log = MemoryMetadataLog()
    active = QuorumController(node_id=1, seed=1)
    standby = QuorumController(node_id=2, seed=2)
    log.listeners.append(active.handle_commit)
    log.listeners.append(standby.handle_commit)
    start = time.perf_counter()
    active.activate(1, log, 0)
    epochs = {}
    for b in range(brokers):
        req = BrokerRegistrationRequest(b, random_uuid(active.rng), (Listener("PLAINTEXT", f"b{b}", 9092),),
                                        log_dirs=(random_uuid(active.rng),))
        r = active.handle_register_broker(req, 0)
        active.execute(r)
        epochs[b] = r.response.data["broker_epoch"]
    for b in range(brokers):
        active.execute(active.handle_heartbeat(BrokerHeartbeatRequest(b, epochs[b], active.next_offset), 0))
    topics = (partitions + per_topic - 1) // per_topic
    for i in range(topics):
        n = min(per_topic, partitions - i * per_topic)
        active.execute(active.handle_create_topics([CreatableTopic(f"topic-{i:07d}", n, 3)]))
    return log, active, standby, epochs, time.perf_counter() - start


RUNS = 3
BUDGET_S = 240.0  # build time allowed per set-up; sizes grow tenfold while the last build took under a tenth


def run_memory(brokers: int, partitions: int, runs: int = RUNS) -> dict[str, Any]:
    log, active, standby, epochs, build_s = build(brokers, partitions)
    shutdown_compute, shutdown_total, shutdown_records, in_isr = [], [], [], []
    for victim in range(runs):
        in_isr.append(sum(1 for _t, _pid, p in active.broker_partitions.partitions(victim, active.image)
                          if victim in p.isr))
        before = log.end_offset()
        c0 = time.process_time()
        result = active.handle_heartbeat(BrokerHeartbeatRequest(victim, epochs[victim], active.next_offset - 1,
                                                                want_shutdown=True), 1000)
        c1 = time.process_time()
        active.execute(result)
        c2 = time.process_time()
        assert log.committed_offset == log.end_offset() - 1
        shutdown_compute.append(c1 - c0)
        shutdown_total.append(c2 - c0)
        shutdown_records.append(log.end_offset() - before)
        assert all(p.leader != victim for _t, _pid, p in active.broker_partitions.partitions(victim, active.image))
    failovers = []
    controllers = [active, standby]
    epoch = 1
    for i in range(runs):
        old, new = controllers
        c0 = time.process_time()
        old.deactivate()
        epoch += 1
        new.activate(epoch, log, 2000 + i)
        b = runs + 1
        new.execute(new.handle_heartbeat(BrokerHeartbeatRequest(b, epochs[b], new.next_offset - 1), 2000 + i))
        created = new.handle_create_topics([CreatableTopic(f"after-failover-{i}", 3, 3)])
        new.execute(created)
        failovers.append(time.process_time() - c0)
        assert created.response.by_name()[f"after-failover-{i}"].error.ok
        controllers.reverse()
    return {
        "partitions": partitions,
        "build_seconds": round(build_s, 1),
        "log_records": log.end_offset(),
        "victim_partitions_in_isr_median": statistics.median(in_isr),
        "controlled_shutdown_records_median": statistics.median(shutdown_records),
        "controlled_shutdown_compute_cpu_s_median": round(statistics.median(shutdown_compute), 3),
        "controlled_shutdown_committed_cpu_s_median": round(statistics.median(shutdown_total), 3),
        "failover_cpu_s_median": round(statistics.median(failovers), 4),
    }


def run_quorum(brokers: int, partitions: int, runs: int = RUNS, per_topic: int = 100) -> dict[str, Any]:
    """The same measurements through a 3-voter ``ControllerQuorum`` (fsync on), wall clock."""
    from kraftlake.service.controller_host import ControllerQuorum

    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        quorum = ControllerQuorum(3, Path(tmp), "kraftlake-bench-ctrl0", fsync=True)
        quorum.start()
        try:
            t0 = time.perf_counter()
            quorum.wait_active(30)
            import random

            rng = random.Random(7)
            epochs: dict[int, int] = {}
            for b in range(brokers):
                req = BrokerRegistrationRequest(b, random_uuid(rng), (Listener("PLAINTEXT", f"b{b}", 9092),),
                                                log_dirs=(random_uuid(rng),))
                resp = quorum.submit(partial(_register, req))
                epochs[b] = resp.data["broker_epoch"]

            def heartbeat(b: int, **kw: Any) -> Any:
                return quorum.submit(lambda c: c.handle_heartbeat(
                    BrokerHeartbeatRequest(b, epochs[b], c.next_offset - 1, **kw), _now()), timeout=300)

            for b in range(brokers):
                heartbeat(b)
            topics = (partitions + per_topic - 1) // per_topic
            # small commands: the three voters share this process's loop and GIL, and a long command delays
            # their raft work (fetch timeout 2 s) as long as it runs
            chunk = max(1, 1_000 // per_topic)
            for i in range(0, topics, chunk):
                batch = [CreatableTopic(f"topic-{j:07d}", min(per_topic, partitions - j * per_topic), 3)
                         for j in range(i, min(topics, i + chunk))]
                quorum.submit(partial(_create, batch), timeout=300)
                if i % (chunk * 100) == 0:  # keep the sessions alive (the session timeout is 9 s)
                    for b in range(brokers):
                        heartbeat(b)
            build_s = time.perf_counter() - t0
            shutdown = []
            for victim in range(runs):
                t = time.perf_counter()
                heartbeat(victim, want_shutdown=True)
                shutdown.append(time.perf_counter() - t)
                for b in range(runs, brokers):
                    heartbeat(b)
            failovers = []
            for i in range(runs):
                old = quorum.wait_active()
                t = time.perf_counter()
                quorum.kill(old.node_id)
                quorum.wait_active(60, exclude=old.node_id)
                name = f"after-failover-{i}"
                resp = quorum.submit(partial(_create, [CreatableTopic(name, 3, 3)]), timeout=60)
                failovers.append(time.perf_counter() - t)
                assert resp.by_name()[name].error.ok
                quorum.restart(old.node_id)
                for b in range(runs, brokers):
                    heartbeat(b)
            active = quorum.wait_active()
            controller: QuorumController = active.controller
            led = sum(1 for v in range(runs)
                      for _t, _pid, p in controller.broker_partitions.partitions(v, controller.image) if p.leader == v)
            assert led == 0, "a shut-down broker still leads partitions"
            cfg = controller.config
        finally:
            quorum.stop()
    return {
        "partitions": partitions,
        "build_wall_seconds": round(build_s, 1),
        "controlled_shutdown_to_commit_wall_s_median": round(statistics.median(shutdown), 3),
        "controlled_shutdown_to_commit_wall_s_runs": [round(x, 3) for x in shutdown],
        "failover_to_first_commit_wall_s_median": round(statistics.median(failovers), 3),
        "failover_goal_s": "fetch timeout + 2 x election timeout (see kraftlake.raft.config)",
        "session_timeout_ms": cfg.session_timeout_ms,
    }


def _now() -> int:
    return int(time.time() * 1000)


def _register(req: BrokerRegistrationRequest, c: QuorumController) -> Any:
    return c.handle_register_broker(req, _now())


def _create(topics: list[CreatableTopic], c: QuorumController) -> Any:
    return c.handle_create_topics(topics)


def _ladder(fn: Any, sizes: list[int], brokers: int, budget: float, key: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in sizes:
        if out and out[-1][key] * (n / out[-1]["partitions"]) > budget:
            out.append({"partitions": n, "skipped": f"extrapolated build over the {budget:.0f} s budget"})
            break
        out.append(fn(brokers, n))
    return out


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    """``make bench`` entry: both set-ups at 20k, 200k and 2M partitions while builds fit the budget."""
    sizes = [20_000, 200_000, 2_000_000]
    return {
        "brokers": 100,
        "memory": _ladder(run_memory, sizes, 100, BUDGET_S, "build_seconds"),
        "quorum": _ladder(run_quorum, sizes, 100, BUDGET_S, "build_wall_seconds"),
        "timing": "memory: CPU seconds of this process; quorum: wall seconds (3 voters in this process, fsync)",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--partitions", type=int, nargs="+", default=[200_000])
    parser.add_argument("--setup", choices=["memory", "quorum", "both"], default="both")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--memory", action="store_true", help="also trace peak Python memory (slower)")
    args = parser.parse_args(argv)
    for n in args.partitions:
        if args.setup in ("memory", "both"):
            if args.memory:
                tracemalloc.start()
            out = {"setup": "memory", **run_memory(args.brokers, n, args.runs)}
            if args.memory:
                out["peak_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
                tracemalloc.stop()
            print(json.dumps(out), flush=True)
        if args.setup in ("quorum", "both"):
            print(json.dumps({"setup": "quorum", **run_quorum(args.brokers, n, args.runs)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
