"""Raft service on loopback: 3 voter processes, fsync on, 256-byte records; and Kafka's TestRaftServer.

Figures: committed records/s, append latency p50/p99 at a fixed rate (10k records/s, several windows, the
median window reported), failover time (leader ``kill -9`` to the first commit by a new leader) over 20 trials
with Kafka's default timers, and Kafka's ``kafka.tools.TestRaftServer`` (3 processes, same record size) in the
same run for the ratio.

Committed records/s is measured the same way for both: the growth of the median log end offset of the three
voters' segment files (what a majority holds) over the same window after the same warm-up, with the leader's
epoch unchanged over the window. Only the load differs, as it must: TestRaftServer generates its own (one
record per append at a fixed target rate, inside the leader's JVM), ours comes from client threads appending
500-record batches over TCP as fast as they are acknowledged (in this process, on the same 2 cores).
TestRaftServer has no back-pressure: above what it can commit its accumulator grows, the JVMs starve the
fetches and leadership moves, so it is run at several target rates and its figure is the best window with a
stable leader (every target is reported).
"""

from __future__ import annotations

import gc
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from base64 import urlsafe_b64encode
from pathlib import Path
from typing import Any

from kraftlake.logformat import METADATA_PARTITION_DIR, scan_file_headers
from kraftlake.service.client import QuorumClient
from kraftlake.service.errors import ServiceError

CLUSTER = "bench-raft"
RECORD = b"r" * 256
KAFKA_JARS = (
    Path(os.environ.get("KRAFTLAKE_JARS", Path(__file__).resolve().parents[1] / ".cache" / "jars")) / "kafka"
)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 2)


class _Voters:
    """3 `kraftlake quorum start --node-id` processes."""

    def __init__(self, root: Path, extra: tuple[str, ...] = ()) -> None:
        self.root = root
        self.extra = extra
        self.ports = dict(zip((1, 2, 3), _free_ports(3), strict=True))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        # the voters' append credential, shared by the three processes and the bench's clients
        root.mkdir(parents=True, exist_ok=True)
        self.secret = root / "append.secret"
        self.secret.write_text(secrets.token_urlsafe(32) + "\n")
        self.secret.chmod(0o600)

    def start(self, node_id: int) -> None:
        self.procs[node_id] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kraftlake.cli",
                "quorum",
                "start",
                "--node-id",
                str(node_id),
                "--voters",
                self.voters,
                "--data-dir",
                str(self.root / f"n{node_id}"),
                "--cluster-id",
                CLUSTER,
                "--quiet",
                "--append-secret",
                str(self.secret),
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def kill9(self, node_id: int) -> None:
        proc = self.procs.pop(node_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        self.procs.clear()

    def client(self) -> QuorumClient:
        return QuorumClient(
            [("127.0.0.1", p) for p in self.ports.values()], CLUSTER, timeout_s=5.0, append_secret=self.secret
        )

    def leader(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node_id in list(self.procs):
                try:
                    d, ok = QuorumClient(
                        [("127.0.0.1", self.ports[node_id])], CLUSTER, timeout_s=1
                    ).describe()
                except (ServiceError, OSError):
                    continue
                if ok and d.leader_id in self.procs:
                    return d.leader_id
            time.sleep(0.05)
        raise RuntimeError("no leader")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _leader_epochs(partition_dirs: list[Path]) -> list[int]:
    """The leader epoch in each voter's quorum-state file (Kafka's JSON; ours writes the same)."""
    epochs = []
    for d in partition_dirs:
        try:
            epochs.append(int(json.loads((d / "quorum-state").read_text())["leaderEpoch"]))
        except (OSError, ValueError, KeyError):
            epochs.append(-1)
    return epochs


def _committed_window(partition_dirs: list[Path], warmup_s: float, window_s: float) -> dict[str, Any]:
    """Committed records/s from the voters' segment files: the median log end offset's growth over the window
    (after `warmup_s`), and whether one leader epoch spanned it."""
    states: list[dict[str, Any]] = [{} for _ in partition_dirs]

    def majority_end() -> int:
        return sorted(_log_end_offset(p, st) for p, st in zip(partition_dirs, states, strict=True))[1]

    time.sleep(warmup_s)
    epochs_before, load_before = _leader_epochs(partition_dirs), _load()
    start_end, start_t = majority_end(), time.monotonic()
    time.sleep(window_s)
    end_end, end_t = majority_end(), time.monotonic()
    epochs_after = _leader_epochs(partition_dirs)
    return {
        "records_per_s": round((end_end - start_end) / (end_t - start_t)),
        "stable_leader": max(epochs_before) == max(epochs_after) and min(epochs_after) >= 0,
        "window_s": round(end_t - start_t, 1),
        "epochs": epochs_after,
        "load_1m": [load_before, _load()],
    }


def _throughput(
    voters: _Voters, warmup_s: float, window_s: float, threads: int = 4, batch: int = 500
) -> dict[str, Any]:
    """Client threads append `batch`-record appends as fast as they are acknowledged while the committed rate
    is read from the log files (`_committed_window`); the acknowledged rate is reported beside it."""
    done = [0] * threads
    stop = threading.Event()

    def work(i: int) -> None:
        client = voters.client()
        while not stop.is_set():
            client.append_retrying([RECORD] * batch)
            done[i] += batch

    start = time.monotonic()
    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    try:
        window = _committed_window(
            [voters.root / f"n{i}" / METADATA_PARTITION_DIR for i in voters.ports], warmup_s, window_s
        )
    finally:
        stop.set()
        for w in workers:
            w.join()
    window["acked_records_per_s"] = round(sum(done) / (time.monotonic() - start))
    return window


def _latency(voters: _Voters, rate: int, seconds: float, batch: int = 50, threads: int = 8) -> dict[str, Any]:
    """Appends of `batch` records scheduled at `rate` records/s; latency from the scheduled time to the ack."""
    interval = batch / rate
    total = int(seconds / interval)
    latencies: list[float] = []
    lock = threading.Lock()
    start = time.monotonic() + 0.2
    counter = iter(range(total))

    def work() -> None:
        client = voters.client()
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            due = start + i * interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            client.append_retrying([RECORD] * batch)
            with lock:
                latencies.append((time.monotonic() - due) * 1000)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    achieved = total * batch / (time.monotonic() - start)
    return {
        "rate_target": rate,
        "rate_achieved": round(achieved),
        "append_batch": batch,
        "latency_p50_ms": _pct(latencies, 50),
        "latency_p99_ms": _pct(latencies, 99),
    }


def _wait_all_caught_up(voters: _Voters, timeout: float = 30.0) -> None:
    """Until the leader reports every voter fetching at its log end (a healthy quorum before the next kill)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            d, ok = voters.client().describe()
        except (ServiceError, OSError):
            ok = False
        if ok and len(d.replicas) >= len(voters.ports) and all(r.lag == 0 for r in d.replicas):
            return
        time.sleep(0.05)


def _failover(voters: _Voters, trials: int) -> list[float]:
    times = []
    for _ in range(trials):
        leader = voters.leader()
        voters.client().append_retrying([RECORD])
        killed = time.monotonic()
        voters.kill9(leader)
        others = [("127.0.0.1", p) for i, p in voters.ports.items() if i != leader]
        client = QuorumClient(others, CLUSTER, timeout_s=1.0, append_secret=voters.secret)
        while True:
            try:
                client.append([RECORD], timeout_s=1.0)
                break
            except (ServiceError, OSError):
                time.sleep(0.005)
        times.append((time.monotonic() - killed) * 1000)
        voters.start(leader)
        # the restarted voter must be back (its process start takes a while here) before the next kill, or the
        # next trial would measure a quorum of two out of three
        _wait_all_caught_up(voters)
        time.sleep(0.5)
    return times


def _latency_windows(voters: _Voters, rate: int, seconds: float, windows: int) -> dict[str, Any]:
    """`windows` back-to-back `_latency` runs: the window with the median p99 is reported, with every p99."""
    runs = []
    for _ in range(windows):
        load = _load()
        run = _latency(voters, rate, seconds)
        run["load_1m"] = [load, _load()]
        runs.append(run)
    runs.sort(key=lambda r: r["latency_p99_ms"])
    figures = dict(runs[len(runs) // 2])
    figures["latency_p99_ms_windows"] = [r["latency_p99_ms"] for r in runs]
    figures["latency_p50_ms_windows"] = sorted(r["latency_p50_ms"] for r in runs)
    figures["latency_window_s"] = seconds
    return figures


def _ours(work: Path, trials: int, warmup_s: float, window_s: float, latency_windows: int) -> dict[str, Any]:
    # no snapshots, as TestRaftServer (no state machine, so nothing snapshots its log); without a snapshot
    # provider our service would snapshot every committed value every 20 MiB
    voters = _Voters(work / "ours", ("--no-snapshots",))
    try:
        for i in (1, 2, 3):
            voters.start(i)
        voters.leader()
        figures = _latency_windows(voters, 10_000, 8.0, latency_windows)
        times = _failover(voters, trials)
        figures.update(
            {
                "failover_trials": len(times),
                "failover_p50_ms": _pct(times, 50),
                "failover_p99_ms": _pct(times, 99),
                "failover_max_ms": round(max(times), 1),
            }
        )
        # last: its million-odd records would make every restarted voter of the failover trials re-read them
        _wait_all_caught_up(voters)
        window = _throughput(voters, warmup_s, window_s)
        figures.update(
            {
                "committed_records_per_s": window["records_per_s"],
                "committed_acked_records_per_s": window["acked_records_per_s"],
                "committed_stable_leader": window["stable_leader"],
                "committed_load_1m": window["load_1m"],
            }
        )
        return figures
    finally:
        voters.stop()


def _log_end_offset(partition_dir: Path, state: dict[str, Any]) -> int:
    """The end offset of a Kafka partition log, from its batch headers (incrementally: `state` remembers
    the file and position of the previous call)."""
    logs = sorted(partition_dir.glob("*.log"))
    if not logs:
        return 0
    path = logs[-1]
    size = path.stat().st_size
    if state.get("path") != path or size < state["pos"]:  # a new segment, or truncated (leader change)
        state.update(path=path, pos=0, end=int(path.name[:20]))
    for h in scan_file_headers(path, state["pos"], stop_at="invalid"):
        state["end"] = h.next_offset
        state["pos"] = h.end
    return int(state["end"])


def _kafka_run(root: Path, throughput: int, warmup_s: float, window_s: float) -> dict[str, Any]:
    """Kafka's TestRaftServer: 3 controllers on loopback; the leader appends `throughput` records/s (one record
    per append, as its workload generator does); committed records/s from its logs (`_committed_window`).

    Its own report line ("Throughput (bytes/second)") is a Meter over a 30 s sample window that includes the
    JVM start and the election, and it is printed only on commits after 5 s: short runs show one line of a few
    bytes/s. Hence the logs.
    """
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    ports = _free_ports(3)
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    log4j = root / "log4j2.properties"
    log4j.write_text(
        "rootLogger.level = warn\nrootLogger.appenderRef.out.ref = OUT\nappender.out.type = Console\n"
        "appender.out.name = OUT\nappender.out.layout.type = PatternLayout\n"
        "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
    )
    procs = []
    outputs = []
    parts = [root / f"log{i + 1}" / "__raft_performance_test-0" for i in range(3)]
    figures: dict[str, Any] = {"target_records_per_s": throughput}
    try:
        for i, port in enumerate(ports):
            conf = root / f"server{i + 1}.properties"
            conf.write_text(
                "\n".join(
                    [
                        f"node.id={i + 1}",
                        "process.roles=controller",
                        f"controller.quorum.voters={voters}",
                        f"listeners=CONTROLLER://127.0.0.1:{port}",
                        "controller.listener.names=CONTROLLER",
                        "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
                        f"log.dirs={root / f'log{i + 1}'}",
                    ]
                )
                + "\n"
            )
            out = root / f"server{i + 1}.out"
            outputs.append(out)
            dir_id = urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            procs.append(
                subprocess.Popen(
                    [
                        "java",
                        "-Xmx512m",
                        f"-Dlog4j2.configurationFile={log4j}",
                        "-cp",
                        f"{KAFKA_JARS}/*",
                        "kafka.tools.TestRaftServer",
                        "--config",
                        str(conf),
                        "--replica-directory-id",
                        dir_id,
                        "--throughput",
                        str(throughput),
                        "--record-size",
                        "256",
                    ],
                    stdout=open(out, "wb"),  # noqa: SIM115 (closed with the process)
                    stderr=subprocess.STDOUT,
                )
            )
        states: list[dict[str, Any]] = [{} for _ in parts]
        deadline = time.monotonic() + 90
        while (
            sorted(_log_end_offset(p, st) for p, st in zip(parts, states, strict=True))[1] < 1000
            and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        figures.update(_committed_window(parts, warmup_s, window_s))
        figures["log_end_offsets"] = [_log_end_offset(p, {}) for p in parts]
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
    text = "\n".join(o.read_text(errors="replace") for o in outputs)
    if figures["records_per_s"] <= 0:
        tail = " | ".join(text.strip().splitlines()[-3:])
        figures["error"] = f"its logs did not grow in {window_s} s; output tail: {tail[:400]}"
    # its own latency line: p75/p99 of append-to-commit on the leader (histogram capped at 250 ms)
    found = re.findall(r"Latency \(ms\):\s*([\d.]+) p75\s*([\d.]+) p99", text)
    if found:
        figures["own_latency_p75_ms"], figures["own_latency_p99_ms"] = map(float, found[-1])
    shutil.rmtree(root, ignore_errors=True)  # GBs of records at the higher targets
    return figures


def _kafka(work: Path, targets: list[int], warmup_s: float, window_s: float) -> dict[str, Any]:
    """TestRaftServer at each target rate; its figure is the best window with a stable leader."""
    if shutil.which("java") is None or not list(KAFKA_JARS.glob("kafka_2.13-*.jar")):
        return {"kafka_error": "no java or no kafka_2.13 jar in " + str(KAFKA_JARS)}
    runs = [_kafka_run(work / "kafka", target, warmup_s, window_s) for target in targets]
    figures: dict[str, Any] = {"kafka_runs": runs}
    stable = [r for r in runs if r["stable_leader"] and r["records_per_s"] > 0]
    if stable:
        best = max(stable, key=lambda r: r["records_per_s"])
        figures.update(
            {
                "kafka_committed_records_per_s": best["records_per_s"],
                "kafka_target_records_per_s": best["target_records_per_s"],
                "kafka_load_1m": best["load_1m"],
            }
        )
    else:
        figures["kafka_error"] = "no TestRaftServer window with a stable leader and growing logs"
    return figures


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    """Our service's figures, then Kafka's TestRaftServer's, and the throughput ratio.

    ctx (or env ``KRAFTLAKE_BENCH_RAFT_<KEY>``): failover_trials (20), warmup_s (10), window_s (20),
    latency_windows (3), kafka_targets ("50000,100000,125000,135000,150000").
    """

    def opt(key: str, default: str) -> str:
        return str(ctx.get(key, os.environ.get(f"KRAFTLAKE_BENCH_RAFT_{key.upper()}", default)))

    # the client threads' own pauses count in the latency (measured from the scheduled time): keep the
    # start-up heap out of the collector's scans, as the voters do
    gc.collect()
    gc.freeze()
    work = Path(ctx["work_dir"])
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    warmup_s, window_s = float(opt("warmup_s", "10")), float(opt("window_s", "20"))
    figures = _ours(
        work, int(opt("failover_trials", "20")), warmup_s, window_s, int(opt("latency_windows", "3"))
    )
    targets = [int(t) for t in opt("kafka_targets", "50000,100000,125000,135000,150000").split(",") if t]
    figures.update(_kafka(work, targets, warmup_s, window_s))
    if "kafka_committed_records_per_s" in figures:
        figures["throughput_ratio_vs_kafka"] = round(
            figures["committed_records_per_s"] / max(1, figures["kafka_committed_records_per_s"]), 3
        )
    return figures
