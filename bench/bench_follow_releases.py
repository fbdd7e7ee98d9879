"""Catch-up of the oldest and the newest Kafka release kraftlake follows: `kraftlake follow` beside a fresh broker
of the same release observing the same quorum (issue 24's speed goal: not slower than that release's broker).

Per release (`RELEASES`: 3.3.2, the oldest KRaft in production, and 4.4.0), from its own jars in
``$KRAFTLAKE_JARS/kafka-releases/<version>`` (``make setup`` fetches both):

The quorum
    One ``kafka.Kafka`` controller (``process.roles=controller``, a static ``controller.quorum.voters``,
    formatted by the release's ``StorageTool``, no snapshots so every observer fetches the whole log) and a
    writer broker through which a small Java program of the release's ``Admin`` client sets `QUOTAS` client
    quotas (``alterClientQuotas``, `CHUNK` entities a request: one ``ClientQuotaRecord`` each), written by the
    release's own controller as it writes any quota. The writer then stops (SIGTERM). The target of each run is
    the leader's high watermark as its DescribeQuorum answers just before the run.

Each run, from process start until the observer's ``__cluster_metadata-0`` holds the target (its newest
segment's batch headers, polled every 10 ms, the same way for both), `RUNS` runs of each, interleaved:

- ``follow``: ``python -m kraftlake.cli follow --bootstrap-controller 127.0.0.1:PORT --data-dir <empty>
  --until-offset HW`` (fsync on), the plain address a user types.
- ``broker``: a fresh ``kafka.Kafka`` broker of the release (``process.roles=broker``, a new node id and log
  dir each run, formatted before the clock starts), 1 GiB heap and G1 as ``kafka-server-start.sh`` runs it;
  SIGKILLed once it holds the target.

Figures per release: the median seconds of each and ``ratio_broker_over_follow`` (> 1: kraftlake reached the
high watermark sooner). Every JVM runs in its own session and is SIGKILLed at the end; the work directory is
deleted.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_follow import (
    _BROKER_HEAP,
    _KAFKA_PERF_OPTS,
    _TOOL_HEAP,
    LogWatch,
    _free_port,
    _kill,
    _spawn,
    _wait_for,
    leader_high_watermark,
)
from kraftlake import kafka_tools

RELEASES = ("3.3.2", "4.4.0")
QUOTAS = 30_000
CHUNK = 200
RUNS = 3
_CLUSTER_ID = "KraftLakeBenchRelease0"
_CONTROLLER_ID = 3000
_STARTED = "Kafka Server started"
_METADATA = "__cluster_metadata-0"

_QUOTA_WRITER = r"""
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.quota.*;

public class QuotaWriter {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        int total = Integer.parseInt(args[1]);
        int chunk = Integer.parseInt(args[2]);
        try (Admin admin = Admin.create(props)) {
            for (int start = 0; start < total; start += chunk) {
                List<ClientQuotaAlteration> ops = new ArrayList<>();
                for (int i = start; i < Math.min(total, start + chunk); i++) {
                    ClientQuotaEntity entity =
                        new ClientQuotaEntity(Collections.singletonMap(ClientQuotaEntity.CLIENT_ID, "bench-" + i));
                    ops.add(new ClientQuotaAlteration(entity,
                        Collections.singletonList(new ClientQuotaAlteration.Op("consumer_byte_rate", 1024.0 + i))));
                }
                admin.alterClientQuotas(ops).all().get();
            }
        }
    }
}
"""


class ReleaseQuorum:
    """One release's controller (and writer broker) in `work`."""

    def __init__(self, version: str, work: Path) -> None:
        self.version = version
        self.jars = kafka_tools.jars_root() / "kafka-releases" / version
        if not any(self.jars.glob("kafka-clients-*.jar")):
            raise RuntimeError(f"no jars for Kafka {version} in {self.jars}: run `make setup`")
        self.work = work
        self.controller_port = _free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    def java(self, main_class: str, args: list[str], heap: tuple[str, ...], log: Path | None) -> list[str]:
        """The release's ``java -cp jars/* main_class``, logging (log4j 1 before 4.0, log4j2 from 4.0) at INFO
        to `log`, or (tools) at WARN to stderr."""
        if log is None:
            log1 = self.work / "tools.log4j.properties"
            log1.write_text(
                "log4j.rootLogger=WARN, err\nlog4j.appender.err=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.err.Target=System.err\nlog4j.appender.err.layout=org.apache.log4j.PatternLayout\n"
            )
            log2 = kafka_tools.tools_log4j2_config()
        else:
            log1, log2 = log.with_name("log4j.properties"), log.with_name("log4j2.properties")
            log1.write_text(
                f"log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
                f"log4j.appender.file.File={log}\nlog4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            )
            log2.write_text(
                "status = error\nappender.file.type = File\nappender.file.name = FILE\n"
                f"appender.file.fileName = {log}\nappender.file.layout.type = PatternLayout\n"
                "rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = FILE\n"
            )
        return [
            kafka_tools.java_executable(),
            *heap,
            *_KAFKA_PERF_OPTS,
            f"-Dlog4j.configuration=file:{log1}",
            f"-Dlog4j2.configurationFile={log2}",
            "-cp",
            f"{self.jars}/*",
            main_class,
            *args,
        ]

    def tool(self, main_class: str, args: list[str], timeout: float = 300.0) -> None:
        done = subprocess.run(
            self.java(main_class, args, _TOOL_HEAP, None), capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"Kafka {self.version} {main_class} exited {done.returncode}: {done.stderr[-2000:]}"
            )

    def node_config(self, node_id: int, role: str, port: int = 0) -> Path:
        """A formatted node's ``server.properties`` (the log dir formatted by the release's ``StorageTool``)."""
        d = self.work / f"{role}-{node_id}"
        d.mkdir(parents=True)
        listeners = (
            f"listeners=CONTROLLER://{self.bootstrap}\n"
            if role == "controller"
            else f"listeners=PLAINTEXT://127.0.0.1:{port}\nadvertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
        )
        config = d / "server.properties"
        config.write_text(
            f"process.roles={role}\nnode.id={node_id}\n"
            f"controller.quorum.voters={_CONTROLLER_ID}@{self.bootstrap}\n{listeners}"
            "controller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
            f"log.dirs={d / 'logs'}\nnum.network.threads=1\nnum.io.threads=2\n"
            "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
            "metadata.log.max.record.bytes.between.snapshots=1000000000000\n"
            "metadata.log.max.snapshot.interval.ms=0\n"
        )
        self.tool("kafka.tools.StorageTool", ["format", "-t", _CLUSTER_ID, "-c", str(config)])
        return config

    def start(self, config: Path, heap: tuple[str, ...], timeout: float = 120.0) -> subprocess.Popen[bytes]:
        log = config.with_name("server.log")
        proc = _spawn(self.java("kafka.Kafka", [str(config)], heap, log), subprocess.DEVNULL)
        self.procs.append(proc)
        deadline = time.monotonic() + timeout
        while not (log.exists() and _STARTED in log.read_text(errors="replace")):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                raise RuntimeError(f"Kafka {self.version} {config.parent.name} did not start:\n{tail}")
            time.sleep(0.2)
        return proc

    def prepare(self) -> None:
        """The controller, then `QUOTAS` quota records through a writer broker that stops afterwards."""
        self.start(self.node_config(_CONTROLLER_ID, "controller"), ("-Xmx512M", "-Xms512M"))
        port = _free_port()
        writer = self.start(self.node_config(1, "broker", port), ("-Xmx512M",))
        source = self.work / "QuotaWriter.java"
        source.write_text(_QUOTA_WRITER)
        self.tool(str(source), [f"127.0.0.1:{port}", str(QUOTAS), str(CHUNK)], timeout=600)
        writer.terminate()
        writer.wait(60)

    def stop(self) -> None:
        for proc in self.procs:
            _kill(proc)


def run_broker(quorum: ReleaseQuorum, node_id: int, target: int) -> float:
    """Seconds from a fresh broker's start until its metadata log holds `target`."""
    config = quorum.node_config(node_id, "broker", _free_port())
    t0 = time.time()
    log = config.with_name("server.log")
    proc = _spawn(quorum.java("kafka.Kafka", [str(config)], _BROKER_HEAP, log), subprocess.DEVNULL)
    try:
        watch = LogWatch(config.parent / "logs" / _METADATA)
        return _wait_for(watch, target, proc, 300, f"Kafka {quorum.version} broker") - t0
    finally:
        _kill(proc)


def run_follow(quorum: ReleaseQuorum, data_dir: Path, target: int) -> float:
    """Seconds from `kraftlake follow`'s start until its mirror holds `target`."""
    argv = [sys.executable, "-m", "kraftlake.cli", "follow", "--bootstrap-controller", quorum.bootstrap]
    argv += ["--data-dir", str(data_dir), "--until-offset", str(target), "--quiet"]
    t0 = time.time()
    proc = _spawn(argv, subprocess.DEVNULL)
    try:
        return _wait_for(LogWatch(data_dir / _METADATA), target, proc, 300, "kraftlake follow") - t0
    finally:
        _kill(proc)


def measure(version: str, work: Path, runs: int) -> dict[str, Any]:
    quorum = ReleaseQuorum(version, work)
    try:
        quorum.prepare()
        endpoints = [("127.0.0.1", quorum.controller_port)]
        follow: list[float] = []
        broker: list[float] = []
        targets: list[int] = []
        for i in range(runs):
            _, hw = leader_high_watermark(endpoints)
            targets.append(hw)
            follow.append(run_follow(quorum, work / f"mirror-{i}", hw))
            _, hw = leader_high_watermark(endpoints)
            broker.append(run_broker(quorum, 100 + i, hw))
    finally:
        quorum.stop()
    f, b = statistics.median(follow), statistics.median(broker)
    return {
        "records": targets[0],
        "follow_s": round(f, 3),
        "broker_s": round(b, 3),
        "ratio_broker_over_follow": round(b / f, 2),
        "follow_runs_s": [round(x, 3) for x in follow],
        "broker_runs_s": [round(x, 3) for x in broker],
    }


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    work = Path(ctx["work_dir"])
    runs = int(ctx.get("runs", RUNS))
    out: dict[str, Any] = {}
    for version in ctx.get("releases", RELEASES):
        d = work / version
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        try:
            out[version] = measure(version, d, runs)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return out
