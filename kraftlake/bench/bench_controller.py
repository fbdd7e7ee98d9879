"""Controller benchmarks: controlled shutdown of one broker, and failover to a hot standby.

The cluster (``--brokers`` brokers, ``--partitions`` partitions of RF 3 in topics of 100) is built through
the controller itself (registration, heartbeats, CreateTopics) on the in-memory log, with a standby
replaying every committed record. There is no 3-voter quorum service wired in yet, so "committed" here means
appended to the one-voter in-memory log (commit on append); the figures exclude network and fsync.

- controlled shutdown: time from the heartbeat asking for shutdown to all its records (one metadata
  transaction when over 10,000 records) appended, replayed and committed;
- failover: time from the active's death to the standby's first command answered and its records committed
  (no bootstrap, no replay: the standby's image is hot).

Run: ``python -m kraftlake.bench.bench_controller --partitions 200000``.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
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


def run_bench(brokers: int, partitions: int) -> dict[str, Any]:
    log, active, standby, epochs, build_s = build(brokers, partitions)
    victim = 0
    in_isr = sum(1 for t in active.image.topics_by_id.values() for p in t.partitions.values() if victim in p.isr)
    before = log.end_offset()
    t0 = time.perf_counter()
    result = active.handle_heartbeat(BrokerHeartbeatRequest(victim, epochs[victim], active.next_offset - 1,
                                                            want_shutdown=True), 1000)
    t1 = time.perf_counter()
    active.execute(result)
    t2 = time.perf_counter()
    assert log.committed_offset == log.end_offset() - 1
    shutdown_records = log.end_offset() - before
    assert all(p.leader != victim for t in active.image.topics_by_id.values() for p in t.partitions.values())

    # failover: the active dies; the standby serves at once
    t3 = time.perf_counter()
    active.deactivate()
    standby.activate(2, log, 2000)
    r = standby.handle_heartbeat(BrokerHeartbeatRequest(1, epochs[1], standby.next_offset - 1), 2000)
    standby.execute(r)
    created = standby.handle_create_topics([CreatableTopic("after-failover", 3, 3)])
    standby.execute(created)
    t4 = time.perf_counter()
    assert created.response.by_name()["after-failover"].error.ok
    return {
        "brokers": brokers,
        "partitions": partitions,
        "build_seconds": round(build_s, 2),
        "log_records": log.end_offset(),
        "victim_partitions_in_isr": in_isr,
        "controlled_shutdown_records": shutdown_records,
        "controlled_shutdown_compute_seconds": round(t1 - t0, 3),
        "controlled_shutdown_total_seconds": round(t2 - t0, 3),
        "failover_seconds": round(t4 - t3, 4),
        "commit": "in-memory one-voter log (no quorum service wired in)",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--partitions", type=int, nargs="+", default=[200_000])
    parser.add_argument("--memory", action="store_true", help="also trace peak Python memory (slower)")
    args = parser.parse_args(argv)
    for n in args.partitions:
        if args.memory:
            tracemalloc.start()
        out = run_bench(args.brokers, n)
        if args.memory:
            out["peak_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
            tracemalloc.stop()
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
