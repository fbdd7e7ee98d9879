"""A real single-node KRaft Kafka (combined broker+controller) from the cached Maven jars.

`produce_metadata_log` formats a log dir with ``StorageTool format --standalone`` (at Kafka's default
metadata.version, or at a ``--release-version``), starts ``kafka.Kafka`` on 127.0.0.1 with free ports, runs `WORKLOAD` through Kafka's own admin tools (``TopicCommand``,
``ConfigCommand``), waits for a metadata snapshot that covers the workload, stops the server with SIGTERM and
returns the log dir. The server never outlives the call: it is killed on any failure.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from waiting import wait_until

from kraftlake import kafka_tools

NODE_ID = 1
METADATA_PARTITION = "__cluster_metadata-0"
_CHECKPOINT = re.compile(r"^(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint$")

# Snapshots every few seconds (the controller appends a NoOpRecord every 500 ms, so there is always
# something new) and a new segment every few seconds, so one short run yields several of each.
SNAPSHOT_INTERVAL_MS = 3000
SEGMENT_MS = 5000

SHELL_RELEASE_VERSION = "4.3-IV0"
"""The newest metadata.version the metadata shell witness (Kafka 4.3.1's: 4.4.0 published no ``kafka-shell``)
loads: it knows no 4.4-IV1 or later, and a log at one (4.4.0's default is 4.4-IV2) leaves its image without a
metadata.version, which its loader refuses to publish. Logs checked against the shell are formatted at this."""


class KafkaPeerError(RuntimeError):
    """Raised when the real Kafka peer fails to format, start, run the workload or stop."""


@dataclass(frozen=True)
class AdminStep:
    """One invocation of a Kafka admin tool: its main class and arguments (``{bootstrap}`` is filled in)."""

    main_class: str
    args: tuple[str, ...]


TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka.admin.ConfigCommand (core) until 4.3


def _topics(*args: str) -> AdminStep:
    return AdminStep(TOPIC_COMMAND, ("--bootstrap-server", "{bootstrap}", *args))


def _configs(*args: str) -> AdminStep:
    return AdminStep(CONFIG_COMMAND, ("--bootstrap-server", "{bootstrap}", "--alter", *args))


# What the workload leaves behind, for the tests to check against.
CREATED_TOPICS = {"orders": 3, "payments": 2, "scratch": 2}
ADDED_PARTITIONS = {"orders": 5}
DELETED_TOPICS = ("scratch",)
LIVE_TOPICS = ("orders", "payments")

WORKLOAD: tuple[AdminStep, ...] = (
    _topics("--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "1"),
    _topics(
        "--create",
        "--topic",
        "payments",
        "--partitions",
        "2",
        "--replication-factor",
        "1",
        "--config",
        "min.insync.replicas=1",
    ),
    _topics("--create", "--topic", "scratch", "--partitions", "2", "--replication-factor", "1"),
    _configs(
        "--entity-type",
        "topics",
        "--entity-name",
        "orders",
        "--add-config",
        "retention.ms=3600000,cleanup.policy=compact",
    ),
    _configs("--entity-type", "topics", "--entity-name", "orders", "--delete-config", "cleanup.policy"),
    _configs(
        "--entity-type", "brokers", "--entity-name", str(NODE_ID), "--add-config", "log.cleaner.threads=2"
    ),
    _configs("--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=7200000"),
    _configs("--entity-type", "clients", "--entity-name", "app1", "--add-config", "consumer_byte_rate=2048"),
    _configs(
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        "SCRAM-SHA-256=[iterations=4096,password=alice-secret]",
    ),
    _topics("--alter", "--topic", "orders", "--partitions", "5"),
    _topics("--delete", "--topic", "scratch"),
)


@dataclass(frozen=True)
class KafkaMetadataLog:
    """What a peer run hands back. Treat the files as read-only: copy them before changing anything."""

    log_dir: Path  # meta.properties, __cluster_metadata-0/
    cluster_id: str
    node_id: int
    server_log: Path
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def metadata_dir(self) -> Path:
        """The ``__cluster_metadata-0`` directory."""
        return self.log_dir / METADATA_PARTITION

    @property
    def segments(self) -> list[Path]:
        """The ``.log`` segments, in offset order."""
        return sorted(self.metadata_dir.glob("*.log"))

    @property
    def snapshots(self) -> list[Path]:
        """The ``.checkpoint`` snapshots, in offset order (including the empty one at offset 0)."""
        return sorted(p for p in self.metadata_dir.glob("*.checkpoint") if _CHECKPOINT.match(p.name))

    @property
    def bootstrap_snapshot(self) -> Path:
        """The snapshot at offset 0 ``StorageTool format`` wrote: from Kafka 4.4 it holds the bootstrap metadata
        (the features, then the records ``--add-scram`` asks for) after the KRaft control records, and there is
        no ``bootstrap.checkpoint`` any more."""
        return self.metadata_dir / f"{0:020d}-{0:010d}.checkpoint"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_properties(log_dir: Path, broker_port: int, controller_port: int) -> str:
    return f"""\
process.roles=broker,controller
node.id={NODE_ID}
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{broker_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={log_dir}
num.partitions=1
num.network.threads=2
num.io.threads=2
background.threads=2
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
metadata.log.max.record.bytes.between.snapshots=4096
metadata.log.max.snapshot.interval.ms={SNAPSHOT_INTERVAL_MS}
metadata.log.segment.ms={SEGMENT_MS}
"""


def _log4j2_properties(server_log: Path) -> str:
    return f"""\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {server_log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


def snapshot_offsets(metadata_dir: Path) -> list[int]:
    """End offsets of the ``.checkpoint`` snapshots in ``metadata_dir``, ascending."""
    found = []
    for path in metadata_dir.glob("*.checkpoint"):
        m = _CHECKPOINT.match(path.name)
        if m is not None:
            found.append(int(m.group("offset")))
    return sorted(found)


class KafkaPeer:
    """One Kafka server process in ``workdir``; a context manager that always stops it."""

    def __init__(self, workdir: Path, release_version: str | None = None) -> None:
        self.workdir = workdir
        self.release_version = release_version
        self.log_dir = workdir / "kraft-logs"
        self.server_log = workdir / "server.log"
        self.stdout_log = workdir / "server.stdout"
        self.config = workdir / "server.properties"
        self.log4j2_config = workdir / "log4j2.properties"
        self.broker_port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.broker_port:
            self.controller_port = free_port()
        self.cluster_id = ""
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the broker listener."""
        return f"127.0.0.1:{self.broker_port}"

    def format(self) -> None:
        """Write the config files and ``StorageTool format -t <id> --standalone`` the log dir (with
        ``--release-version`` when the peer has one)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(_server_properties(self.log_dir, self.broker_port, self.controller_port))
        self.log4j2_config.write_text(_log4j2_properties(self.server_log))
        self.cluster_id = kafka_tools.run_class("kafka.tools.StorageTool", ["random-uuid"]).strip()
        if not re.fullmatch(r"[A-Za-z0-9_-]{22}", self.cluster_id):
            raise KafkaPeerError(f"StorageTool random-uuid printed {self.cluster_id!r}")
        kafka_tools.run_class(
            "kafka.tools.StorageTool",
            [
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(self.config),
                "--standalone",
                *(("--release-version", self.release_version) if self.release_version else ()),
            ],
        )

    def start(self, timeout: float = 60.0) -> None:
        """Start ``kafka.Kafka server.properties`` and wait until the server says it has started."""
        argv = kafka_tools.java_command(
            "kafka.Kafka", [str(self.config)], heap="512m", log4j2_config=self.log4j2_config
        )
        with self.stdout_log.open("wb") as out:
            # its own session, so stop() signals exactly this process and nothing else
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        process = self.process

        def started() -> bool:
            if process.poll() is not None:
                raise KafkaPeerError(f"Kafka exited with {process.returncode} while starting:\n{self.tail()}")
            return self._started_line_logged() and self._port_open()

        wait_until(
            started,
            timeout,
            "Kafka started (its log says so, its port is open)",
            0.25,
            fail=lambda msg: KafkaPeerError(f"{msg}:\n{self.tail()}"),
        )

    def _started_line_logged(self) -> bool:
        return self.server_log.exists() and "Kafka Server started" in self.server_log.read_text(
            errors="replace"
        )

    def _port_open(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.broker_port), timeout=1.0):
                return True
        except OSError:
            return False

    def admin(self, step: AdminStep) -> str:
        """Run one admin tool against this server; returns its stdout."""
        if self.process is None or self.process.poll() is not None:
            raise KafkaPeerError(f"Kafka is not running:\n{self.tail()}")
        args = [a.replace("{bootstrap}", self.bootstrap) for a in step.args]
        try:
            return kafka_tools.run_class(step.main_class, args, timeout=120.0)
        except kafka_tools.KafkaToolError as exc:
            raise KafkaPeerError(f"{step.main_class} {' '.join(args)} failed: {exc}\n{self.tail()}") from exc

    def wait_for_snapshot_after(self, offsets: Sequence[int], timeout: float = 30.0) -> int:
        """Wait for a snapshot whose end offset is beyond all of ``offsets``; returns its offset."""
        floor = max(offsets, default=-1)
        metadata_dir = self.log_dir / METADATA_PARTITION
        newer = wait_until(
            lambda: [o for o in snapshot_offsets(metadata_dir) if o > floor],
            timeout,
            f"a snapshot beyond offset {floor}",
            0.25,
            seen=lambda: snapshot_offsets(metadata_dir),
            fail=lambda msg: KafkaPeerError(f"{msg}:\n{self.tail()}"),
        )
        return newer[-1]

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server and wait for its clean shutdown; SIGKILL it if it does not exit in time."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10.0)
            raise KafkaPeerError(f"Kafka did not stop within {timeout:.0f}s of SIGTERM; killed it") from None

    def tail(self, lines: int = 30) -> str:
        """The last lines of the server's log and stdout, for error messages."""
        out = []
        for path in (self.server_log, self.stdout_log):
            if path.exists():
                out.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(out)

    def __enter__(self) -> KafkaPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            # belt and braces: never leave a JVM behind, even if stop() itself raised
            if self.process is not None and self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)


def produce_metadata_log(
    workdir: Path, workload: Sequence[AdminStep] = WORKLOAD, release_version: str | None = None
) -> KafkaMetadataLog:
    """Run a real Kafka through ``workload`` and return its stopped log dir (with timings in seconds); formatted
    at ``release_version`` (a metadata.version such as ``4.3-IV0``) when given, else at Kafka's default."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    with KafkaPeer(workdir, release_version) as peer:
        peer.format()
        timings["format"] = time.monotonic() - started
        mark = time.monotonic()
        peer.start()
        timings["start"] = time.monotonic() - mark
        mark = time.monotonic()
        for step in workload:
            peer.admin(step)
        timings["workload"] = time.monotonic() - mark
        mark = time.monotonic()
        peer.wait_for_snapshot_after(snapshot_offsets(peer.log_dir / METADATA_PARTITION))
        timings["snapshot"] = time.monotonic() - mark
        mark = time.monotonic()
        peer.stop()
        timings["stop"] = time.monotonic() - mark
    timings["total"] = time.monotonic() - started
    return KafkaMetadataLog(
        log_dir=peer.log_dir,
        cluster_id=peer.cluster_id,
        node_id=NODE_ID,
        server_log=peer.server_log,
        timings=timings,
    )


if __name__ == "__main__":
    import sys
    import tempfile

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="kafka-peer-"))
    result = produce_metadata_log(target)
    print(result.log_dir)
    print({k: round(v, 2) for k, v in result.timings.items()})
