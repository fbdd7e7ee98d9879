"""Following a real Kafka 4.3.1 controller quorum: `kraftlake follow` beside a fresh Kafka broker, in one run.

Issue 12's speed goals, measured side by side (interleaved, ``runs`` runs of each, medians reported).

The quorum
    ``controllers`` (default 1; 3 works but triples the set-up on two cores) ``kafka.Kafka`` controllers
    (``process.roles=controller``, a static quorum, started as ``kafka-server-start.sh`` starts a server but
    with a 2 GiB heap) whose ``__cluster_metadata-0`` is written before they start: a snapshot of ~200k
    partitions (``topics`` topics of 100 partitions, 100 brokers; ``kraftlake.image.write_snapshot`` of the
    image of `bench_image.generate_log`'s synthetic cluster log) at offset S, and the log's next ``records``
    records (~1M: ISR changes, leader moves, configs, fencing, topic re-creation, NoOps) as one segment from S.
    Kafka loads it as it loads its own (``StorageTool format`` writes ``meta.properties`` and
    ``bootstrap.checkpoint``; the log sets metadata.version 27; the controller writes ``quorum-state`` and the
    leader-epoch cache itself) and replays the tail on start. Generated once and cached under the work dir.
    Controller settings that differ from Kafka's defaults, so that the controller does not rewrite the
    synthetic cluster while it is measured: no snapshots (``metadata.log.max.record.bytes.between.snapshots``
    1e12, ``metadata.log.max.snapshot.interval.ms`` 0: a snapshot at the log end would let every new observer
    skip the million records), ``broker.session.timeout.ms`` 1 h (the 100 synthetic brokers never heartbeat;
    fencing each would write thousands of PartitionChangeRecords), ``auto.leader.rebalance.enable`` false, and
    its controller package logging at WARN (it logs every replayed record at INFO). The leader's high
    watermark is read with DescribeQuorum (Kafka's own answer) before each run: that is the run's target.

Catch-up (a new observer from nothing to the high watermark: FetchSnapshot of the ~25 MB snapshot, then Fetch
of the ~1M-record tail), each run from process start until the observer's ``__cluster_metadata-0`` holds the
target offset, seen the same way for every contender (the bench polls the newest segment's batch headers
every 10 ms):

- ``follow``: ``python -m kraftlake.cli follow --bootstrap-controller B --data-dir <empty> --until-offset HW``
  as a user runs it (fsync on; with ``nofsync`` set, ``follow_nofsync`` runs it with ``--no-fsync`` too: a
  Kafka observer does not fsync its metadata log). Its first progress line is printed after its first Fetch
  is answered: the time to it is the process's start cost (interpreter, imports, connect);
  ``*_after_first_fetch_s`` the rest.
- ``broker``: a fresh ``kafka.Kafka`` broker (``process.roles=broker``, its own log dir with
  ``meta.properties``, a new node id each run), JVM options as ``kafka-server-start.sh`` sets them (1 GiB
  heap, G1), INFO logging with Unix-millisecond timestamps. Its first log line gives the JVM's own start
  cost; its first ``Completed transition to FollowerState`` (the first Fetch answered: it learned the
  leader) the start-to-first-fetch cost. SIGKILLed once it holds the target.
- records/s counts the log records after the snapshot (target - S), MB/s the snapshot's and the tail's bytes,
  over the whole process time; ``ratio_broker_over_follow`` > 1 means kraftlake reached it sooner. CPU
  seconds are the child's (``RUSAGE_CHILDREN``; the broker's include building its metadata image meanwhile).
- where the CLI's start goes, once per run: ``python -m kraftlake.cli follow --help`` (``cli_parser``: the
  dispatch table and the follow command's parser) beside ``python -c "import kraftlake.commands.follow"``
  (``follow_import``).

Reading the same bytes: ``kafka-dump-log --cluster-metadata-decoder --files <segments>`` (as
``kafka-run-class.sh`` runs it: 256 MiB heap) and ``kraftlake decode <mirror>`` over the segments of the first
follow run's mirror (checked byte-identical to the leader's), stdout to /dev/null, wall and CPU seconds.

Live: ``kraftlake follow`` (the CLI, no end) and a live broker (as above, but not snapshotting: its first
snapshot of 200k partitions would land in the window), both caught up, while the leader appends its NoOp every
500 ms and a Java loop of Kafka's ``Admin`` client (one JVM, against the broker) makes one change every 250 ms
for ``live_s`` seconds: create a topic of 3 partitions, set a topic config, grow it to 6 partitions, delete
it, round and round. For each batch committed after the start of the window, latency = the time the bench
first sees its bytes in the observer's newest segment (polled every 5 ms) minus the batch's base (first)
timestamp, which the leader sets when it appends (its max timestamp beside it). The mirror holds committed batches only, and
``kraftlake follow`` fsyncs them right after writing; the broker appends fetched batches before it knows they
are committed (a follower's log runs ahead of the high watermark), so its figure is a lower bound for
"committed and known". Goal: p99 < 1 s for ``kraftlake follow``.

Every JVM runs in its own session (and dies with this process where ``setpriv`` exists) and is SIGKILLed at
the end; every run directory is deleted; only the generated log stays cached.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import mmap
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kraftlake import kafka_tools
from kraftlake.logformat import METADATA_PARTITION_DIR, iter_file_batches, scan_batch_headers
from kraftlake.logformat.segment import scan_locations, segment_filename

RECORDS = 1_000_000
"""Log records after the snapshot."""
TOPICS = 2_000
"""Topics of 100 partitions in the snapshot (200k partitions)."""
RUNS = 3
LIVE_S = 60.0
CONTROLLERS = 1
_FORMAT = 1  # bump when the prepared log changes
_CLUSTER_ID = "KraftLakeBenchFollow0A"
_CONTROLLER_BASE_ID = 3000  # above the synthetic brokers (0..99)
_BROKER_BASE_ID = 101
_POLL_S = 0.01
_LIVE_POLL_S = 0.005
_ADMIN_PERIOD_MS = 250

# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS; kafka-server-start.sh adds a 1 GiB heap, tools get 256 MiB
_KAFKA_PERF_OPTS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
_BROKER_HEAP = ("-Xmx1G", "-Xms1G")
_CONTROLLER_HEAP = ("-Xmx2G", "-Xms1G")
_TOOL_HEAP = ("-Xmx256M",)

_LOG_LINE = re.compile(r"^\[(\d{13})\] ")


# -- the prepared log ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """The cached snapshot + tail segment the controllers start from."""

    snapshot: Path
    segment: Path
    split: int  # the snapshot's end offset = the segment's base offset
    end: int  # the log end offset
    partitions: int


def prepared_log(work: Path, records: int, topics: int) -> Prepared:
    """Generate (once) a synthetic cluster log, snapshot its state at S and keep the `records` after S."""
    from kraftlake.image import load_log, write_snapshot
    from kraftlake.sim.workloads.churn import BROKERS, PARTITIONS_PER_TOPIC, generate_log

    final = work / f"prepared-v{_FORMAT}-{records}-{topics}"
    done = final / "complete.json"
    if not done.exists():
        tmp = work / f".tmp-{final.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        full = tmp / "full" / METADATA_PARTITION_DIR
        t = time.perf_counter()
        setup = 1 + 2 * BROKERS + topics * (PARTITIONS_PER_TOPIC + 1)
        total = generate_log(full, setup + 50_000 + records, topics)
        source = full / segment_filename(0)
        with open(source, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            locations = scan_locations(buf, str(source))
            if len(list(full.glob("*.log"))) != 1 or locations[-1].last_offset + 1 != total:
                raise RuntimeError(f"unexpected generated log in {full}")
            cut = next(loc for loc in locations if loc.base_offset >= total - records)
            image = load_log(full, cut.base_offset - 1)
            snapshot = write_snapshot(image, tmp)
            with open(tmp / segment_filename(cut.base_offset), "wb") as out:
                out.write(buf[cut.position :])
        shutil.rmtree(tmp / "full")
        (tmp / "complete.json").write_text(
            json.dumps(
                {
                    "split": cut.base_offset,
                    "end": total,
                    "partitions": image.partition_count(),
                    "snapshot": snapshot.name,
                    "generate_seconds": round(time.perf_counter() - t, 1),
                }
            )
        )
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    meta = json.loads(done.read_text())
    return Prepared(
        final / meta["snapshot"],
        final / segment_filename(meta["split"]),
        meta["split"],
        meta["end"],
        meta["partitions"],
    )


# -- processes -------------------------------------------------------------------------------------------

_LIVE_PROCS: list[subprocess.Popen[bytes]] = []


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE_PROCS):
        _kill(proc)


def _kill(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
    if sig == signal.SIGKILL:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        if proc in _LIVE_PROCS:
            _LIVE_PROCS.remove(proc)


def _spawn(
    argv: list[str],
    stdout: IO[bytes] | int | None,
    stderr: IO[bytes] | int | None = subprocess.STDOUT,
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session (the kernel kills it if this thread dies, where setpriv exists)."""
    if threading.current_thread() is threading.main_thread() and shutil.which("setpriv"):
        argv = ["setpriv", "--pdeathsig", "KILL", "--", *argv]
    proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, start_new_session=True)
    _LIVE_PROCS.append(proc)
    return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _java(main_class: str, args: Sequence[str], heap: Sequence[str], log4j2: Path) -> list[str]:
    return [
        kafka_tools.java_executable(),
        *heap,
        *_KAFKA_PERF_OPTS,
        f"-Dlog4j2.configurationFile={log4j2}",
        "-cp",
        f"{kafka_tools.kafka_jars_dir()}/*",
        main_class,
        *args,
    ]


def _server_log4j2(path: Path, log: Path, quiet_controller: bool) -> Path:
    text = (
        f"status = error\nappender.file.type = File\nappender.file.name = FILE\nappender.file.fileName = {log}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d{UNIX_MILLIS}] %p %m (%c)%n\n"
        "rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = FILE\n"
    )
    if quiet_controller:
        text += "logger.controller.name = org.apache.kafka.controller\nlogger.controller.level = WARN\n"
    path.write_text(text)
    return path


def _log_times(log: Path, pattern: str) -> tuple[float | None, float | None]:
    """The Unix time (s) of the log's first line and of the first line containing `pattern`."""
    first = found = None
    if not log.exists():
        return None, None
    with open(log, errors="replace") as f:
        for line in f:
            m = _LOG_LINE.match(line)
            if m is None:
                continue
            if first is None:
                first = int(m.group(1)) / 1000
            if pattern in line:
                found = int(m.group(1)) / 1000
                break
    return first, found


# -- watching an observer's log --------------------------------------------------------------------------


class LogWatch:
    """The end offset of a ``__cluster_metadata-0`` directory from its newest segment's batch headers, read
    incrementally; optionally the time each batch from `record_from` on was first seen."""

    def __init__(self, partition_dir: Path, record_from: int | None = None) -> None:
        self.dir = partition_dir
        self.path: Path | None = None
        self.pos = 0
        self.end = 0
        self.record_from = record_from
        self.seen: list[tuple[int, int, int, int, float]] = []  # base, last, base ts, max ts, seen (s)

    def poll(self) -> int:
        try:
            names = sorted(p for p in os.listdir(self.dir) if p.endswith(".log"))
        except FileNotFoundError:
            return self.end
        if not names:
            return self.end
        path = self.dir / names[-1]
        if path != self.path:
            self.path, self.pos = path, 0
            self.end = max(self.end, int(names[-1][:20]))
        try:
            with open(path, "rb") as f:
                f.seek(self.pos)
                buf = f.read()
        except FileNotFoundError:
            return self.end
        now = time.time()
        i = 0
        for h in scan_batch_headers(buf, source=str(path), stop_at="invalid"):
            base = h.base_offset
            self.end = h.next_offset
            if self.record_from is not None and base >= self.record_from:
                self.seen.append((base, h.last_offset, h.base_timestamp, h.max_timestamp, now))
            i = h.end
        self.pos += i
        return self.end


def _wait_for(
    watch: LogWatch,
    target: int,
    proc: subprocess.Popen[bytes],
    timeout: float,
    what: str,
) -> float:
    """Poll until the watched log holds `target`; the time.time() it was seen."""
    deadline = time.monotonic() + timeout
    while True:
        if watch.poll() >= target:
            return time.time()
        if proc.poll() is not None and watch.poll() < target:
            raise RuntimeError(f"{what} exited with {proc.returncode} at offset {watch.end} before {target}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not reach offset {target} within {timeout:.0f}s (at {watch.end})")
        time.sleep(_POLL_S)


# -- the quorum ------------------------------------------------------------------------------------------


def leader_high_watermark(endpoints: Sequence[tuple[str, int]]) -> tuple[int, int]:
    """(leader id, high watermark) as the leader answers DescribeQuorum."""
    from kraftlake.protocol import rpc_messages
    from kraftlake.protocol.rpc import ApiKey
    from kraftlake.wire.connection import KafkaConnection

    f = rpc_messages.DescribeQuorumRequest
    msg = f(
        topics=[f.TopicData(topic_name="__cluster_metadata", partitions=[f.PartitionData(partition_index=0)])]
    )
    for host, port in endpoints:
        conn = KafkaConnection(host, port, None, client_id="kraftlake-bench", timeout_s=5.0)
        try:
            conn.open()
            answer = conn.request(ApiKey.DESCRIBE_QUORUM, msg)
        except Exception:  # not up yet, or not the leader: ask the next one
            continue
        finally:
            conn.close()
        if answer.error_code == 0 and answer.topics and answer.topics[0].partitions:
            p = answer.topics[0].partitions[0]
            if p.error_code == 0 and p.leader_id >= 0 and p.high_watermark >= 0:
                return int(p.leader_id), int(p.high_watermark)
    raise RuntimeError(f"no controller of {list(endpoints)} answered DescribeQuorum as the leader")


@dataclass
class Quorum:
    """The controllers, formatted and loaded with the prepared log."""

    root: Path
    count: int
    prepared: Prepared
    ports: dict[int, int] = field(default_factory=dict)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    @property
    def endpoints(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.ports.values()]

    def log_dir(self, node: int) -> Path:
        return self.root / f"controller-{node}" / "logs"

    def start(self, timeout: float = 600.0) -> dict[str, Any]:
        ids = [_CONTROLLER_BASE_ID + i for i in range(self.count)]
        self.ports = {i: _free_port() for i in ids}
        for node in ids:
            d = self.root / f"controller-{node}"
            d.mkdir(parents=True)
            (d / "server.properties").write_text(
                "\n".join(
                    [
                        "process.roles=controller",
                        f"node.id={node}",
                        f"controller.quorum.voters={self.voters}",
                        "controller.listener.names=CONTROLLER",
                        f"listeners=CONTROLLER://127.0.0.1:{self.ports[node]}",
                        "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
                        f"log.dirs={self.log_dir(node)}",
                        "metadata.log.max.record.bytes.between.snapshots=1000000000000",
                        "metadata.log.max.snapshot.interval.ms=0",
                        "broker.session.timeout.ms=3600000",
                        "auto.leader.rebalance.enable=false",
                    ]
                )
                + "\n"
            )
        t = time.perf_counter()
        first = ids[0]
        kafka_tools.run_class(
            "kafka.tools.StorageTool",
            ["format", "-t", _CLUSTER_ID, "-c", str(self.root / f"controller-{first}" / "server.properties")],
        )
        meta = (self.log_dir(first) / "meta.properties").read_text()
        for node in ids:
            logs = self.log_dir(node)
            if node != first:
                logs.mkdir(parents=True)
                shutil.copyfile(self.log_dir(first) / "bootstrap.checkpoint", logs / "bootstrap.checkpoint")
                mine = re.sub(r"(?m)^node\.id=.*$", f"node.id={node}", meta)
                mine = re.sub(r"(?m)^directory\.id=.*$", f"directory.id={_directory_id()}", mine)
                (logs / "meta.properties").write_text(mine)
            part = logs / METADATA_PARTITION_DIR
            part.mkdir()
            shutil.copyfile(self.prepared.snapshot, part / self.prepared.snapshot.name)
            shutil.copyfile(self.prepared.segment, part / self.prepared.segment.name)
        format_s = time.perf_counter() - t
        t = time.perf_counter()
        for node in ids:
            d = self.root / f"controller-{node}"
            log4j2 = _server_log4j2(d / "log4j2.properties", d / "server.log", quiet_controller=True)
            with open(d / "server.stdout", "wb") as out:
                self.procs[node] = _spawn(
                    _java("kafka.Kafka", [str(d / "server.properties")], _CONTROLLER_HEAP, log4j2), out
                )
        deadline = time.monotonic() + timeout
        while True:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                tail = (self.root / f"controller-{dead[0]}" / "server.log").read_text(errors="replace")[
                    -3000:
                ]
                raise RuntimeError(f"controller {dead[0]} exited while loading the log:\n{tail}")
            with contextlib.suppress(RuntimeError):
                leader, hw = leader_high_watermark(self.endpoints)
                if hw >= self.prepared.end:
                    return {
                        "controllers": self.count,
                        "leader": leader,
                        "format_seconds": round(format_s, 1),
                        "controller_load_seconds": round(time.perf_counter() - t, 1),
                    }
            if time.monotonic() > deadline:
                raise RuntimeError(f"the controllers did not load the log within {timeout:.0f}s")
            time.sleep(0.5)

    def stop(self) -> None:
        for proc in self.procs.values():
            _kill(proc)


def _directory_id() -> str:
    import base64
    import uuid

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# -- the contenders --------------------------------------------------------------------------------------


def _follow_argv(quorum: Quorum, data_dir: Path, until: int | None, fsync: bool) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "kraftlake.cli",
        "follow",
        "--bootstrap-controller",
        quorum.bootstrap,
        "--data-dir",
        str(data_dir),
    ]
    if until is not None:
        argv += ["--until-offset", str(until)]
    if not fsync:
        argv.append("--no-fsync")
    return argv


def run_follow(
    quorum: Quorum, data_dir: Path, target: int, fsync: bool = True, timeout: float = 300.0
) -> dict[str, float]:
    """`kraftlake follow --until-offset target` from an empty directory: seconds to its first fetch (its first
    progress line), to holding the target, to its exit, and its CPU seconds."""
    cpu0 = _children_cpu()
    t0 = time.time()
    proc = _spawn(_follow_argv(quorum, data_dir, target, fsync), subprocess.DEVNULL, subprocess.PIPE)
    first_line: list[float] = []
    err: list[bytes] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if not first_line:
                first_line.append(time.time())
            err.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        reached = _wait_for(
            LogWatch(data_dir / METADATA_PARTITION_DIR), target, proc, timeout, "kraftlake follow"
        )
        code = proc.wait(timeout)
        exited = time.time()
    finally:
        _kill(proc)
    reader.join(10)
    if code != 0:
        raise RuntimeError(
            f"kraftlake follow exited with {code}: {b''.join(err).decode(errors='replace')[-2000:]}"
        )
    first = first_line[0] - t0 if first_line else float("nan")
    return {
        "reach_s": reached - t0,
        "first_fetch_s": first,
        "after_first_fetch_s": reached - t0 - first,
        "exit_s": exited - t0,
        "cpu_s": _children_cpu() - cpu0,
    }


@dataclass
class Broker:
    """A fresh ``kafka.Kafka`` broker joining the quorum as an observer."""

    root: Path
    node: int
    quorum: Quorum
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    extra_config: tuple[str, ...] = ()
    # A client of this listener sees only the brokers that have one: not the 100 synthetic brokers of the log
    # (PLAINTEXT on hosts that do not exist), nor the killed catch-up brokers (still registered)
    listener: str = "CATCHUP"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def partition_dir(self) -> Path:
        return self.root / "logs" / METADATA_PARTITION_DIR

    def start(self) -> None:
        self.root.mkdir(parents=True)
        logs = self.root / "logs"
        logs.mkdir()
        (logs / "meta.properties").write_text(
            f"version=1\ncluster.id={_CLUSTER_ID}\nnode.id={self.node}\ndirectory.id={_directory_id()}\n"
        )
        self.port = _free_port()
        conf = self.root / "server.properties"
        conf.write_text(
            "\n".join(
                [
                    "process.roles=broker",
                    f"node.id={self.node}",
                    f"controller.quorum.voters={self.quorum.voters}",
                    "controller.listener.names=CONTROLLER",
                    f"listeners={self.listener}://127.0.0.1:{self.port}",
                    f"inter.broker.listener.name={self.listener}",
                    f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,{self.listener}:PLAINTEXT",
                    f"log.dirs={logs}",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    *self.extra_config,
                ]
            )
            + "\n"
        )
        log4j2 = _server_log4j2(self.root / "log4j2.properties", self.log, quiet_controller=False)
        self.started_at = time.time()
        with open(self.root / "server.stdout", "wb") as out:
            self.proc = _spawn(_java("kafka.Kafka", [str(conf)], _BROKER_HEAP, log4j2), out)

    def stop(self) -> None:
        if self.proc is not None:
            _kill(self.proc)


def run_broker(
    quorum: Quorum, root: Path, node: int, target: int, timeout: float = 300.0
) -> dict[str, float]:
    """A fresh broker until its metadata log holds `target`: seconds to its first log line (the JVM's start),
    to its first Fetch answered, to holding the target, and its CPU seconds (until SIGKILL)."""
    cpu0 = _children_cpu()
    broker = Broker(root, node, quorum)
    broker.start()
    assert broker.proc is not None
    try:
        reached = _wait_for(LogWatch(broker.partition_dir), target, broker.proc, timeout, f"broker {node}")
    finally:
        broker.stop()
    t0 = broker.started_at
    first_line, follower = _log_times(broker.log, "Completed transition to FollowerState")
    first_fetch = follower - t0 if follower is not None else float("nan")
    return {
        "reach_s": reached - t0,
        "jvm_first_log_line_s": (first_line - t0) if first_line else float("nan"),
        "first_fetch_s": first_fetch,
        "after_first_fetch_s": reached - t0 - first_fetch,
        "cpu_s": _children_cpu() - cpu0,
    }


def run_dump_log(segments: Sequence[Path], work: Path) -> dict[str, float]:
    """``kafka-dump-log --cluster-metadata-decoder --files ...`` as kafka-run-class.sh runs it."""
    log4j2 = kafka_tools.tools_log4j2_config()
    argv = _java(
        kafka_tools.DUMP_LOG_CLASS,
        ["--cluster-metadata-decoder", "--files", ",".join(str(s) for s in segments)],
        _TOOL_HEAP,
        log4j2,
    )
    return _timed_subprocess(argv, work, "kafka-dump-log")


def run_decode(mirror: Path, work: Path) -> dict[str, float]:
    """``kraftlake decode <mirror>`` (its segments, one JSON line per record)."""
    return _timed_subprocess(
        [sys.executable, "-m", "kraftlake.cli", "decode", str(mirror)], work, "kraftlake decode"
    )


def _timed_subprocess(argv: list[str], work: Path, what: str) -> dict[str, float]:
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile(dir=work) as err:
        proc = _spawn(argv, subprocess.DEVNULL, err)
        try:
            code = proc.wait(1800)
        finally:
            _kill(proc)
        if code != 0:
            err.seek(0)
            raise RuntimeError(f"{what} exited with {code}: {err.read().decode(errors='replace')[-2000:]}")
    return {"wall_s": time.perf_counter() - t0, "cpu_s": _children_cpu() - cpu0}


# -- the live window -------------------------------------------------------------------------------------


_ADMIN_LOOP = r"""
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.config.ConfigResource;

public class AdminLoop {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(args[0].startsWith("controllers=") ? "bootstrap.controllers" : "bootstrap.servers",
                args[0].replaceFirst("^controllers=", ""));
        long start = System.currentTimeMillis();
        long end = start + (long) (Double.parseDouble(args[1]) * 1000);
        long firstOk = -1;
        long period = Long.parseLong(args[2]);
        int ok = 0, failed = 0;
        String last = "";
        try (Admin admin = Admin.create(props)) {
            for (int i = 0; System.currentTimeMillis() < end; i++) {
                long next = System.currentTimeMillis() + period;
                String topic = "live-" + (i / 4);
                try {
                    switch (i % 4) {
                        case 0 -> admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
                        case 1 -> admin.incrementalAlterConfigs(Map.of(
                                new ConfigResource(ConfigResource.Type.TOPIC, topic),
                                List.of(new AlterConfigOp(new ConfigEntry("retention.ms", String.valueOf(3600000 + i)),
                                        AlterConfigOp.OpType.SET)))).all().get();
                        case 2 -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(6))).all().get();
                        default -> admin.deleteTopics(List.of(topic)).all().get();
                    }
                    ok++;
                    if (firstOk < 0) firstOk = System.currentTimeMillis() - start;
                } catch (Exception e) {
                    failed++;
                    last = String.valueOf(e).replace('\\', '/').replace('"', '\'').replace('\n', ' ');
                }
                long pause = next - System.currentTimeMillis();
                if (pause > 0) Thread.sleep(pause);
            }
        }
        System.out.println("{\"ok\": " + ok + ", \"failed\": " + failed + ", \"first_ok_ms\": " + firstOk
                + ", \"last_error\": \"" + last + "\"}");
    }
}
"""


def _workload(broker: Broker, root: Path, seconds: float, period_ms: int) -> dict[str, Any]:
    """Kafka's Admin client against the broker for `seconds`: one change every `period_ms` (create a topic of 3
    partitions, set a topic config, grow it to 6 partitions, delete it; round and round), in one JVM (the
    source-file launcher compiles it)."""
    source = root / "AdminLoop.java"
    source.write_text(_ADMIN_LOOP)
    argv = _java(
        str(source),
        [f"127.0.0.1:{broker.port}", str(seconds), str(period_ms)],
        _TOOL_HEAP,
        kafka_tools.tools_log4j2_config(),
    )
    proc = _spawn(argv, subprocess.PIPE, subprocess.PIPE)
    try:
        stdout, stderr = (b.decode(errors="replace") for b in proc.communicate(timeout=seconds + 300))
    finally:
        _kill(proc)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the admin loop exited with {proc.returncode}: {(stderr or stdout)[-2000:]}")
    result = json.loads(lines[-1])
    return {
        "live_admin_ops": result["ok"],
        "live_admin_failures": result["failed"],
        "live_admin_first_op_s": round(result["first_ok_ms"] / 1000, 1),
        "live_admin_last_error": result["last_error"][:300],
        "live_admin_period_ms": period_ms,
    }


def _batch_types(partition_dir: Path, first: int) -> dict[int, set[str]]:
    """Batch base offset -> the record types in it, for the batches from `first` on."""
    from kraftlake.records.reader import iter_records

    segments = sorted((int(p.name[:20]), p) for p in partition_dir.glob("*.log"))
    types: dict[int, set[str]] = {}
    for i, (_, seg) in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1][0] <= first:
            continue  # wholly below `first`
        for r in iter_records(b for b in iter_file_batches(seg) if b.base_offset >= first):
            types.setdefault(r.batch_offset, set()).add(r.type)
    return types


def _latency_figures(
    seen: list[tuple[int, int, int, int, float]], prefix: str, types: dict[int, set[str]] | None = None
) -> dict[str, Any]:
    first = [(s - ts / 1000) * 1000 for _, _, ts, _, s in seen]
    by_max = [(s - mx / 1000) * 1000 for _, _, _, mx, s in seen]
    out: dict[str, Any] = {f"{prefix}_batches": len(seen)}
    if not seen:
        return out
    out.update(
        {
            f"{prefix}_latency_p50_ms": _pct(first, 50),
            f"{prefix}_latency_p99_ms": _pct(first, 99),
            f"{prefix}_latency_max_ms": round(max(first), 1),
            f"{prefix}_latency_by_max_ts_p50_ms": _pct(by_max, 50),
            f"{prefix}_latency_by_max_ts_p99_ms": _pct(by_max, 99),
        }
    )
    if types is not None:
        noop = [lat for (base, *_), lat in zip(seen, first, strict=True) if types.get(base) == {"NoOpRecord"}]
        other = [
            lat
            for (base, *_), lat in zip(seen, first, strict=True)
            if types.get(base, set()) - {"NoOpRecord"}
        ]
        out[f"{prefix}_noop_batches"] = len(noop)
        out[f"{prefix}_other_batches"] = len(other)
        if other:
            out[f"{prefix}_other_latency_p50_ms"] = _pct(other, 50)
            out[f"{prefix}_other_latency_p99_ms"] = _pct(other, 99)
    return out


def run_live(quorum: Quorum, root: Path, live_s: float) -> dict[str, Any]:
    """`kraftlake follow` and a broker, both caught up, while the cluster changes for `live_s` seconds."""
    mirror = root / "live-mirror"
    follow = _spawn(_follow_argv(quorum, mirror, None, True), subprocess.DEVNULL, subprocess.DEVNULL)
    # no snapshot: its first (200k partitions, once it loaded the 55 MB tail) would land in the window
    broker = Broker(
        root / "live-broker",
        _BROKER_BASE_ID + 99,
        quorum,
        listener="LIVE",
        extra_config=(
            "metadata.log.max.record.bytes.between.snapshots=1000000000000",
            "metadata.log.max.snapshot.interval.ms=0",
        ),
    )
    try:
        broker.start()
        assert broker.proc is not None
        deadline = time.monotonic() + 300
        while True:
            _first, started = _log_times(broker.log, "Kafka Server started")
            if started is not None:
                break
            if broker.proc.poll() is not None or follow.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the live broker or follower did not start")
            time.sleep(0.2)
        _, hw = leader_high_watermark(quorum.endpoints)
        ours = LogWatch(mirror / METADATA_PARTITION_DIR)
        theirs = LogWatch(broker.partition_dir)
        _wait_for(ours, hw, follow, 300, "kraftlake follow (live)")
        _wait_for(theirs, hw, broker.proc, 300, "the live broker")
        _, live_from = leader_high_watermark(quorum.endpoints)
        ours.record_from = theirs.record_from = live_from
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                ours.poll()
                theirs.poll()
                time.sleep(_LIVE_POLL_S)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        load = os.getloadavg()[0]
        tools = _workload(broker, root, live_s, _ADMIN_PERIOD_MS)
        _, live_to = leader_high_watermark(quorum.endpoints)
        time.sleep(1.5)  # the last batches reach both
        stop.set()
        watcher.join(10)
        ours.poll()
        theirs.poll()
    finally:
        _kill(follow, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            follow.wait(30)
        _kill(follow)
        broker.stop()
    ours_seen = [s for s in ours.seen if s[1] < live_to]
    theirs_seen = [s for s in theirs.seen if s[1] < live_to]
    types = _batch_types(mirror / METADATA_PARTITION_DIR, live_from)
    out: dict[str, Any] = {
        "live_seconds": live_s,
        "live_offsets": [live_from, live_to],
        "live_records": live_to - live_from,
        "live_load_1m": round(load, 2),
        **tools,
    }
    out.update(_latency_figures(ours_seen, "live_follow", types))
    out.update(_latency_figures(theirs_seen, "live_broker"))
    if "live_follow_latency_p99_ms" in out:
        out["live_follow_meets_goal_p99_under_1s"] = out["live_follow_latency_p99_ms"] < 1000
    return out


# -- the run ---------------------------------------------------------------------------------------------


def _pct(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 1)


def _median(runs: list[dict[str, float]], key: str) -> float:
    values = [r[key] for r in runs if r[key] == r[key]]  # without NaN
    return round(statistics.median(values), 3) if values else float("nan")


def _segment_bytes_to(partition_dir: Path, offset: int) -> int:
    """Bytes of the batches below `offset` in a log's segments (from the headers)."""
    total = 0
    for seg in sorted(partition_dir.glob("*.log")):
        buf = seg.read_bytes()
        i = 0
        for h in scan_batch_headers(
            buf, source=str(seg), stop_at="invalid"
        ):  # stops at a batch being written
            if h.base_offset >= offset:
                return total + h.position
            i = h.end
        total += i
    return total


def _same_bytes(mirror_dir: Path, leader_dir: Path) -> bool:
    """The mirror's log (its segments' bytes, in offset order) is a prefix of the leader's: the same batches
    byte for byte (the two may roll segments at other offsets)."""

    def whole(d: Path) -> bytes:
        return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))

    ours = whole(mirror_dir)
    return len(ours) > 0 and whole(leader_dir).startswith(ours)


def _opt(ctx: dict[str, Any], key: str, default: Any) -> Any:
    return type(default)(ctx.get(key, os.environ.get(f"KRAFTLAKE_BENCH_FOLLOW_{key.upper()}", default)))


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    """Prepare (or reuse) the log, start the quorum, run the contenders interleaved, then the live window.

    ctx (or env ``KRAFTLAKE_BENCH_FOLLOW_<KEY>``): records (1,000,000), topics (2,000), runs (3), live_s (60),
    controllers (1), nofsync (0; 1 adds ``kraftlake follow --no-fsync`` to the catch-up runs).
    """
    work = Path(ctx["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    records, topics = _opt(ctx, "records", RECORDS), _opt(ctx, "topics", TOPICS)
    runs, live_s, controllers = (
        max(1, _opt(ctx, "runs", RUNS)),
        _opt(ctx, "live_s", LIVE_S),
        _opt(ctx, "controllers", CONTROLLERS),
    )
    nofsync = bool(_opt(ctx, "nofsync", 0))
    started = time.perf_counter()
    t = time.perf_counter()
    prepared = prepared_log(work, records, topics)
    prepare_s = time.perf_counter() - t
    root = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    quorum = Quorum(root / "quorum", controllers, prepared)
    figures: dict[str, Any] = {
        "snapshot_partitions": prepared.partitions,
        "snapshot_offset": prepared.split,
        "snapshot_bytes": prepared.snapshot.stat().st_size,
        "tail_records": prepared.end - prepared.split,
        "tail_bytes": prepared.segment.stat().st_size,
        "prepare_seconds": round(prepare_s, 1) if prepare_s > 1 else "cached",
        "cpus": os.cpu_count(),
        "load_1m_before": round(os.getloadavg()[0], 2),
    }
    try:
        figures.update(quorum.start())
        leader = figures["leader"]
        leader_dir = quorum.log_dir(leader) / METADATA_PARTITION_DIR
        results: dict[str, list[dict[str, float]]] = {
            "follow": [],
            "follow_nofsync": [],
            "broker": [],
            "dump_log": [],
            "decode": [],
            "cli_parser": [],
            "follow_import": [],
        }
        first_mirror: Path | None = None
        for r in range(runs):
            # the same contenders every run, the order reversed every other run
            order = ["follow", "broker", *(["follow_nofsync"] if nofsync else [])]
            for name in order if r % 2 == 0 else order[::-1]:
                _, hw = leader_high_watermark(quorum.endpoints)
                path = root / f"{name}-{r}"
                if name == "broker":
                    out = run_broker(quorum, path, _BROKER_BASE_ID + r, hw)
                else:
                    out = run_follow(quorum, path, hw, fsync=name == "follow")
                out["target"] = hw
                out["bytes"] = prepared.snapshot.stat().st_size + _segment_bytes_to(leader_dir, hw)
                out["load_1m"] = round(os.getloadavg()[0], 2)
                results[name].append(out)
                if name == "follow" and first_mirror is None:
                    first_mirror = path  # read by dump-log and decode, then deleted
                else:
                    shutil.rmtree(path, ignore_errors=True)
            # where the CLI's start goes: the dispatcher and the command's parser against the command's own
            # modules
            results["cli_parser"].append(
                _timed_subprocess(
                    [sys.executable, "-m", "kraftlake.cli", "follow", "--help"],
                    root,
                    "kraftlake follow --help",
                )
            )
            results["follow_import"].append(
                _timed_subprocess(
                    [sys.executable, "-c", "import kraftlake.commands.follow"],
                    root,
                    "import kraftlake.commands.follow",
                )
            )
            assert first_mirror is not None
            segments = sorted((first_mirror / METADATA_PARTITION_DIR).glob("*.log"))
            for name in ("dump_log", "decode") if r % 2 == 0 else ("decode", "dump_log"):
                if name == "dump_log":
                    results[name].append(run_dump_log(segments, root))
                else:
                    results[name].append(run_decode(first_mirror, root))
        assert first_mirror is not None
        mirror_dir = first_mirror / METADATA_PARTITION_DIR
        figures["mirror_equals_leader_bytes"] = _same_bytes(mirror_dir, leader_dir)
        decoded = sum(
            b.last_offset - b.base_offset + 1
            for s in sorted(mirror_dir.glob("*.log"))
            for b in iter_file_batches(s)
        )
        figures.update(_catch_up_figures(results, prepared))
        figures.update(_reader_figures(results, decoded))
        figures["runs"] = runs
        figures["raw_runs"] = {
            k: [{kk: round(vv, 3) for kk, vv in run.items()} for run in v] for k, v in results.items()
        }
        shutil.rmtree(first_mirror, ignore_errors=True)
        if live_s > 0:
            figures.update(run_live(quorum, root, live_s))
    finally:
        quorum.stop()
        for proc in list(_LIVE_PROCS):
            _kill(proc)
        shutil.rmtree(root, ignore_errors=True)
    figures["load_1m_after"] = round(os.getloadavg()[0], 2)
    figures["bench_seconds"] = round(time.perf_counter() - started, 1)
    return figures


def _catch_up_figures(results: dict[str, list[dict[str, float]]], prepared: Prepared) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("follow", "follow_nofsync", "broker"):
        rs = results[name]
        if not rs:
            continue
        for key in rs[0]:
            if key.endswith("_s"):
                out[f"{name}_{key}_median"] = _median(rs, key)
        rate = [(r["target"] - prepared.split) / r["reach_s"] for r in rs]
        mb = [r["bytes"] / r["reach_s"] / 1e6 for r in rs]
        out[f"{name}_records_per_s_median"] = round(statistics.median(rate))
        out[f"{name}_mb_per_s_median"] = round(statistics.median(mb), 1)
        after = [
            (r["target"] - prepared.split) / r["after_first_fetch_s"]
            for r in rs
            if r["after_first_fetch_s"] == r["after_first_fetch_s"]
        ]
        if after:
            out[f"{name}_records_per_s_after_first_fetch_median"] = round(statistics.median(after))
    if results["follow"] and results["broker"]:
        out["ratio_broker_over_follow"] = round(
            out["broker_reach_s_median"] / out["follow_reach_s_median"], 2
        )
        out["ratio_broker_over_follow_after_first_fetch"] = round(
            out["broker_after_first_fetch_s_median"] / out["follow_after_first_fetch_s_median"], 2
        )
        out["ratio_broker_over_follow_cpu"] = round(
            out["broker_cpu_s_median"] / out["follow_cpu_s_median"], 2
        )
        out["follow_not_slower_than_broker"] = out["follow_reach_s_median"] <= out["broker_reach_s_median"]
    return out


def _reader_figures(results: dict[str, list[dict[str, float]]], records: int) -> dict[str, Any]:
    out: dict[str, Any] = {"read_records": records}
    for name in ("dump_log", "decode"):
        rs = results[name]
        if not rs:
            continue
        wall, cpu = _median(rs, "wall_s"), _median(rs, "cpu_s")
        out[f"{name}_wall_s_median"] = wall
        out[f"{name}_cpu_s_median"] = cpu
        out[f"{name}_records_per_s_median"] = round(records / wall)
    for name in ("cli_parser", "follow_import"):
        if results[name]:
            out[f"{name}_wall_s_median"] = _median(results[name], "wall_s")
    if results["dump_log"] and results["decode"]:
        out["ratio_dump_log_over_decode_wall"] = round(
            out["dump_log_wall_s_median"] / out["decode_wall_s_median"], 2
        )
        out["ratio_dump_log_over_decode_cpu"] = round(
            out["dump_log_cpu_s_median"] / out["decode_cpu_s_median"], 2
        )
    return out


if __name__ == "__main__":
    print(json.dumps(run({"work_dir": ".cache/bench/follow"}), indent=2))
