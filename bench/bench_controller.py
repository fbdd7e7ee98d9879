"""Controller benchmarks: controlled shutdown of one broker, and failover to a hot standby.

Two set-ups of a cluster built through the controller itself (registration, heartbeats, CreateTopics; topics
of 100 partitions, RF 3, 100 brokers):

- ``memory``: an active and a standby ``QuorumController`` on the in-memory log (commit on append): the
  controller's own cost, no network or fsync;
- ``quorum``: ``kraftlake.service.ControllerQuorum``, three voters (in this process, on one loop thread, fsync
  on), a controller on each, started from a snapshot of the built cluster (cached per size under the work
  dir; building 2M partitions through the quorum would take many minutes): the time from the command to the
  commit of all its records through the 3-voter quorum, as the KRaft announcement measured it (controlled
  shutdown 32 s with the quorum controller vs 135 s with ZooKeeper at 2M partitions; the goal here is < 3 s).

Figures are medians of wall and CPU seconds: controlled shutdowns of ``RUNS`` brokers far apart, ``RUNS``
failovers, the load average beside them (the machine is shared). Controlled shutdown = the heartbeat asking
for it until all its records (one metadata transaction when over 10,000) are committed; failover = the
active's death until a standby answered a command and its records are committed (no bootstrap: the
standby's image is hot). The quorum runs at 200k and 2M partitions, measured (not extrapolated).

Run: ``python -m bench.bench_controller --setup quorum --partitions 200000 2000000``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import random
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
from kraftlake.image import MetadataImage, Provenance, write_snapshot
from kraftlake.records import MetadataRecord
from kraftlake.service.gctune import tune_for_service

log = logging.getLogger(__name__)


def _register_brokers(active: QuorumController, brokers: int) -> dict[int, int]:
    """Register ``brokers`` brokers with the active controller and unfence them with a heartbeat each; returns
    their broker epochs."""
    epochs = {}
    rng = random.Random(brokers)  # the brokers' own ids (incarnations, directories)
    for b in range(brokers):
        req = BrokerRegistrationRequest(
            b,
            random_uuid(rng),
            (Listener("PLAINTEXT", f"b{b}", 9092),),
            log_dirs=(random_uuid(rng),),
        )
        r = active.handle_register_broker(req, 0)
        active.execute(r)
        epochs[b] = r.response.data["broker_epoch"]
    for b in range(brokers):
        active.execute(active.handle_heartbeat(BrokerHeartbeatRequest(b, epochs[b], active.next_offset), 0))
    return epochs


def build(
    brokers: int, partitions: int, per_topic: int = 100
) -> tuple[MemoryMetadataLog, QuorumController, QuorumController, dict[int, int], float]:
    log = MemoryMetadataLog()
    active = QuorumController(node_id=1, seed=1)
    standby = QuorumController(node_id=2, seed=2)
    log.listeners.append(active.handle_commit)
    log.listeners.append(standby.handle_commit)
    start = time.perf_counter()
    active.activate(1, log, 0)
    epochs = _register_brokers(active, brokers)
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
        in_isr.append(
            sum(
                1
                for _t, _pid, p in active.broker_partitions.partitions(victim, active.image)
                if victim in p.isr
            )
        )
        before = log.end_offset()
        c0 = time.process_time()
        result = active.handle_heartbeat(
            BrokerHeartbeatRequest(victim, epochs[victim], active.next_offset - 1, want_shutdown=True), 1000
        )
        c1 = time.process_time()
        active.execute(result)
        c2 = time.process_time()
        assert log.committed_offset == log.end_offset() - 1
        shutdown_compute.append(c1 - c0)
        shutdown_total.append(c2 - c0)
        shutdown_records.append(log.end_offset() - before)
        assert all(
            p.leader != victim for _t, _pid, p in active.broker_partitions.partitions(victim, active.image)
        )
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


class _DiscardingLog:
    """An appender that keeps no records: the build of a large image needs only the active controller's own
    replay (`build_image`), not a log or a standby."""

    def __init__(self) -> None:
        self.end = 0
        self.controller: QuorumController | None = None

    def end_offset(self) -> int:
        return self.end

    def append(self, epoch: int, records: Any) -> int:
        base = self.end
        self.end += len(records)
        assert self.controller is not None
        last = self.end - 1
        # committed at once: the active controller only needs the offset to move its committed image
        self.controller.handle_commit([MetadataRecord(last, epoch, 0, base, True, "", 0, 0, None, b"")])
        return base


def build_image(brokers: int, partitions: int, per_topic: int = 100) -> tuple[MetadataImage, float]:
    """The image of a cluster built through the controller's own commands (registration, heartbeats,
    CreateTopics of 100-partition RF-3 topics), as `build` does, without a log; returns (image, CPU seconds)."""
    c0 = time.process_time()
    sink = _DiscardingLog()
    active = QuorumController(node_id=1, seed=1)
    sink.controller = active
    active.activate(1, sink, 0)
    _register_brokers(active, brokers)
    topics = (partitions + per_topic - 1) // per_topic
    for i in range(0, topics, 10):
        active.execute(
            active.handle_create_topics(
                [
                    CreatableTopic(f"topic-{j:07d}", min(per_topic, partitions - j * per_topic), 3)
                    for j in range(i, min(topics, i + 10))
                ]
            )
        )
    image = active.committed_image
    assert image.partition_count() == partitions
    # epoch 0: the quorum that starts from this snapshot has no quorum-state yet
    return image.with_provenance(Provenance(image.provenance.offset, 0, _now())), time.process_time() - c0


def cached_snapshot(work_dir: Path, brokers: int, partitions: int) -> tuple[Path, float | None]:
    """A snapshot of `build_image`'s image, built once per size under `work_dir`; (path, build CPU s or None)."""
    d = work_dir / f"cluster-v1-{brokers}-{partitions}"
    found = sorted(d.glob("*.checkpoint")) if d.is_dir() else []
    if found:
        return found[-1], None
    image, cpu = build_image(brokers, partitions)
    d.mkdir(parents=True, exist_ok=True)
    path = write_snapshot(image, d)
    del image
    gc.collect()
    return path, cpu


def _seed(data_dir: Path, snapshot: Path, voters: int) -> None:
    """Every voter starts from the snapshot (a hard link: the nodes only read it and write their own)."""
    for i in range(1, voters + 1):
        d = data_dir / f"node-{i}" / "__cluster_metadata-0"
        d.mkdir(parents=True)
        os.link(snapshot, d / snapshot.name)


def run_quorum(
    brokers: int, partitions: int, runs: int = RUNS, work_dir: Path | None = None
) -> dict[str, Any]:
    """Controlled shutdowns and failovers through a 3-voter ``ControllerQuorum`` (fsync on), wall clock.

    The voters start from a snapshot of a cluster built through the controller (`cached_snapshot`): building
    2M partitions through the quorum itself costs many minutes and measures nothing asked here.
    """
    from kraftlake.service.controller_host import ControllerQuorum

    work_dir = work_dir or Path(tempfile.gettempdir()) / "kraftlake-bench-controller"
    snapshot, build_cpu = cached_snapshot(work_dir, brokers, partitions)
    with tempfile.TemporaryDirectory(prefix="bench-controller-", dir=work_dir) as tmp:
        _seed(Path(tmp), snapshot, 3)
        quorum = ControllerQuorum(3, Path(tmp), "kraftlake-bench-ctrl0", fsync=True)
        t0, c0 = time.perf_counter(), time.process_time()
        thresholds = gc.get_threshold()
        loads: list[float] = []
        _start(quorum)
        try:
            active = quorum.wait_active(120)
            start_wall, start_cpu = time.perf_counter() - t0, time.process_time() - c0
            epochs = {b: reg.epoch for b, reg in active.controller.committed_image.brokers.items()}
            tune_for_service()  # what `kraftlake quorum start` does once it serves: the start-up heap frozen

            def heartbeat(b: int, **kw: Any) -> Any:
                return quorum.submit(
                    lambda c: c.handle_heartbeat(
                        BrokerHeartbeatRequest(b, epochs[b], c.next_offset - 1, **kw), _now()
                    ),
                    timeout=300,
                )

            # brokers far apart: each shuts down with its partitions' other replicas all in their ISRs, as one
            # broker of a healthy cluster does (neighbours share partitions under the placement)
            victims = [i * brokers // runs for i in range(runs)]

            def keep_alive(skip: list[int]) -> None:
                for b in range(brokers):
                    if b not in skip:
                        heartbeat(b)

            keep_alive([])
            shutdown, shutdown_cpu, records = [], [], []
            for victim in victims:
                _settle(quorum)
                keep_alive(victims)
                before = quorum.wait_active().controller.next_offset
                t, c = time.perf_counter(), time.process_time()
                heartbeat(victim, want_shutdown=True)
                shutdown.append(time.perf_counter() - t)
                loads.append(os.getloadavg()[0])
                log.info(
                    "%d partitions: controlled shutdown of broker %d committed in %.3f s",
                    partitions,
                    victim,
                    shutdown[-1],
                )
                shutdown_cpu.append(time.process_time() - c)
                records.append(quorum.wait_active().controller.next_offset - before)
            failovers, failover_cpu = [], []
            for i in range(runs):
                _settle(quorum)
                keep_alive(victims)
                old = quorum.wait_active()
                t, c = time.perf_counter(), time.process_time()
                quorum.kill(old.node_id)
                quorum.wait_active(60, exclude=old.node_id)
                name = f"after-failover-{i}"
                resp = quorum.submit(partial(_create, [CreatableTopic(name, 3, 3)]), timeout=60)
                failovers.append(time.perf_counter() - t)
                log.info("%d partitions: failover served a command after %.3f s", partitions, failovers[-1])
                failover_cpu.append(time.process_time() - c)
                assert resp.by_name()[name].error.ok
                _restart(quorum, old.node_id)
            _settle(quorum)
            active = quorum.wait_active()
            controller: QuorumController = active.controller
            led = sum(
                1
                for v in victims
                for _t, _pid, p in controller.broker_partitions.partitions(v, controller.image)
                if p.leader == v
            )
            assert led == 0, "a shut-down broker still leads partitions"
            cfg = controller.config
        finally:
            quorum.stop()
            gc.unfreeze()
            gc.set_threshold(*thresholds)
    return {
        "partitions": partitions,
        "snapshot_build_cpu_s": None if build_cpu is None else round(build_cpu, 1),
        "start_from_snapshot_wall_s": round(start_wall, 1),
        "start_from_snapshot_cpu_s": round(start_cpu, 1),
        "controlled_shutdown_records_median": statistics.median(records),
        "controlled_shutdown_to_commit_wall_s_median": round(statistics.median(shutdown), 3),
        "controlled_shutdown_to_commit_cpu_s_median": round(statistics.median(shutdown_cpu), 3),
        "controlled_shutdown_to_commit_wall_s_runs": [round(x, 3) for x in shutdown],
        "load_average_1m_at_shutdowns": [round(x, 1) for x in loads],
        "failover_to_first_commit_wall_s_median": round(statistics.median(failovers), 3),
        "failover_to_first_commit_cpu_s_median": round(statistics.median(failover_cpu), 3),
        "failover_to_first_commit_wall_s_runs": [round(x, 3) for x in failovers],
        "failover_goal_s": "fetch timeout + 2 x election timeout (see kraftlake.raft.config)",
        "session_timeout_ms": cfg.session_timeout_ms,
    }


def _start(quorum: Any) -> None:
    """`ControllerQuorum.start` without its 30 s wait per voter: each loads a snapshot of up to 2M partitions
    on the shared loop before it serves."""
    local = quorum.local
    fresh = {i: local._make(i) for i in local.endpoints}
    for i, service in fresh.items():
        local.endpoints[i] = ("127.0.0.1", service.bind())
    for service in fresh.values():
        local.loop.run(service.runner.start(dict(local.endpoints)), timeout=None)
        service.started = True
    local.services = fresh


def _restart(quorum: Any, node_id: int) -> None:
    """`ControllerQuorum.restart` without its 30 s wait: the voter loads a 2M-partition snapshot first."""
    local = quorum.local
    service = local._make(node_id)
    service.bind()
    local.loop.run(service.runner.start(dict(local.endpoints)), timeout=None)
    service.started = True
    local.services[node_id] = service


def _settle(quorum: Any, timeout: float = 180.0) -> None:
    """Wait until the quorum is quiet: a restarted voter loads its snapshot on the shared loop, which stalls the
    other voters' raft timers and may cost an election or two. Quiet = the same active controller commits a
    command before and after a fetch timeout, and every running host has applied its log."""
    deadline = time.monotonic() + timeout
    while True:
        first = _commit_one(quorum, deadline)
        time.sleep(2.5)
        second = _commit_one(quorum, deadline)
        if first == second or time.monotonic() > deadline:
            break
    quorum.wait_applied(
        quorum.wait_active(10).controller.next_offset - 1, max(1.0, deadline - time.monotonic())
    )


def _commit_one(quorum: Any, deadline: float) -> tuple[int, int]:
    """Commit one record (a producer id block) on the active controller; (its node id, epoch)."""
    left = max(1.0, deadline - time.monotonic())

    def allocate(c: QuorumController) -> Any:
        bid = max(c.image.brokers)
        return c.handle_allocate_producer_ids(bid, c.image.brokers[bid].epoch)

    quorum.submit(allocate, timeout=left)
    host = quorum.wait_active(left)
    return host.node_id, host.controller.epoch


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
    """``make bench`` entry: the in-memory set-up at 20k and 200k partitions, the quorum at 200k and 2M (the
    2M figures measured, each a median of `RUNS`)."""
    work = Path(ctx.get("work_dir") or Path(tempfile.gettempdir()) / "kraftlake-bench-controller")
    work.mkdir(parents=True, exist_ok=True)
    return {
        "brokers": 100,
        "memory": _ladder(run_memory, [20_000, 200_000], 100, BUDGET_S, "build_seconds"),
        "quorum": [run_quorum(100, n, RUNS, work) for n in (200_000, 2_000_000)],
        "timing": "memory: CPU seconds of this process; quorum: wall seconds and this process's CPU seconds "
        "(3 voters in this process on one loop thread, fsync; the machine's other load included)",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--partitions", type=int, nargs="+", default=[200_000])
    parser.add_argument("--setup", choices=["memory", "quorum", "both"], default="both")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument(
        "--work-dir", default="", help="where cluster snapshots are cached (default: a temp dir)"
    )
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
            work = Path(args.work_dir) if args.work_dir else None
            print(json.dumps({"setup": "quorum", **run_quorum(args.brokers, n, args.runs, work)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
