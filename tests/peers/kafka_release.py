"""A real KRaft Kafka of any release from its own jars (``.cache/jars/kafka-releases/<version>``).

`Release` knows a release's jar directory, the main classes its tools live in (found in its jars: TopicCommand,
DumpLogSegments... moved from ``kafka.*`` to ``org.apache.kafka.tools`` over the 3.x line) and how to run them
(log4j 1 through reload4j before 4.0, log4j2 from 4.0). `ReleaseCluster` starts 1 or 3 combined
(broker+controller) nodes on 127.0.0.1, with a *static* quorum (``controller.quorum.voters``, every release) or
a *dynamic* one (``controller.quorum.bootstrap.servers``, formatted with ``--standalone`` or
``--initial-controllers``, 3.9 and later), formatted by that release's ``StorageTool``; topics are created,
altered and deleted by that release's ``TopicCommand``. Every JVM runs in its own session and is SIGKILLed when
the cluster stops (a context manager), on any failure to start, and at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import time
import weakref
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from waiting import wait_until

from kraftlake import kafka_tools
from peers.kafka import METADATA_PARTITION, KafkaPeerError, free_port, snapshot_offsets
from peers.kafka_cluster import random_cluster_id

RELEASES_DIR = "kafka-releases"
TOKEN_SECRET = "kraftlake-compat-token-secret"
"""``delegation.token.secret.key`` of a cluster with a SCRAM listener (the 3.x name; ``delegation.token.master.key``
before 3.0)."""
SCRAM_USER = ("alice", "alice-secret")
STARTED = "Kafka Server started"

_LIVE: weakref.WeakSet[ReleaseCluster] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for cluster in list(_LIVE):
        cluster.kill_all()


def releases_root() -> Path:
    """``$KRAFTLAKE_JARS/kafka-releases``."""
    return kafka_tools.jars_root() / RELEASES_DIR


@dataclass(frozen=True)
class Release:
    """One Kafka release whose jars are in the cache."""

    version: str

    @property
    def key(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))

    @property
    def jars(self) -> Path:
        return releases_root() / self.version

    @property
    def available(self) -> bool:
        return (self.jars / ".done").exists() and any(self.jars.glob("kafka-clients-*.jar"))

    @property
    def dynamic_quorums(self) -> bool:
        """KIP-853 (``--standalone`` / ``--initial-controllers``) came in 3.9."""
        return self.key >= (3, 9)

    @property
    def has_shell(self) -> bool:
        return any(self.jars.glob("kafka-shell-*.jar"))

    def main_class(self, *candidates: str) -> str:
        """The first of `candidates` this release's jars hold."""
        classes = _classes(self.jars)
        for name in candidates:
            if name.replace(".", "/") + ".class" in classes:
                return name
        raise KafkaPeerError(f"Kafka {self.version} has none of {candidates}")

    @property
    def topic_command(self) -> str:
        return self.main_class("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand")

    @property
    def config_command(self) -> str:
        return self.main_class("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")

    @property
    def dump_log_class(self) -> str:
        return self.main_class("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")

    @property
    def acl_command(self) -> str:
        return self.main_class("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand")

    @property
    def feature_command(self) -> str:
        return self.main_class("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand")

    @property
    def oldest_metadata_version(self) -> str:
        """The oldest ``metadata.version`` its ``StorageTool format --release-version`` takes (3.3-IV0 in 3.x;
        4.x dropped everything before 3.3-IV3)."""
        return "3.3-IV0" if self.key < (4, 0) else "3.3-IV3"

    @property
    def elr_feature(self) -> bool:
        """``eligible.leader.replicas.version`` (KIP-966) is a feature from 4.0."""
        return self.key >= (4, 0)

    @property
    def scram_in_kraft(self) -> bool:
        """SCRAM credentials in the metadata log (UserScramCredentialRecord, KIP-900) came in 3.5."""
        return self.key >= (3, 5)

    @property
    def delegation_tokens_in_kraft(self) -> bool:
        """Delegation tokens in the metadata log (DelegationTokenRecord, KAFKA-15219) came in 3.6."""
        return self.key >= (3, 6)

    @property
    def delegation_token_command(self) -> str:
        return self.main_class(
            "org.apache.kafka.tools.DelegationTokenCommand", "kafka.admin.DelegationTokenCommand"
        )

    @property
    def zk_migration(self) -> bool:
        """A ZooKeeper cluster migrates to KRaft (KIP-866) from 3.4; 4.0 dropped ZooKeeper."""
        return (3, 4) <= self.key < (4, 0)

    @property
    def quorum_command(self) -> str:
        return self.main_class(
            "org.apache.kafka.tools.MetadataQuorumCommand", "kafka.admin.MetadataQuorumCommand"
        )

    def java_command(
        self, main_class: str, args: Sequence[str], *, heap: str = "256m", log_file: Path | None = None
    ) -> list[str]:
        """``java -cp <this release's jars>/* main_class args``, logging to `log_file` (else WARN to stderr)."""
        log4j1, log4j2 = _log_configs(log_file)
        tool = ["-XX:TieredStopAtLevel=1"] if log_file is None else []
        return [
            kafka_tools.java_executable(),
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            *tool,
            f"-Dlog4j.configuration=file:{log4j1}",
            f"-Dlog4j2.configurationFile={log4j2}",
            "-cp",
            f"{self.jars}/*",
            main_class,
            *args,
        ]

    def run(self, main_class: str, args: Sequence[str], *, timeout: float = 120.0) -> str:
        """Run one of this release's tools to completion; its stdout. Raises `KafkaPeerError`."""
        argv = self.java_command(main_class, args)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise KafkaPeerError(f"{self.version} {main_class} did not finish within {timeout:.0f}s") from exc
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip()[-3000:]
            raise KafkaPeerError(
                f"{self.version} {main_class} {' '.join(args)} exited {done.returncode}: {tail}"
            )
        return done.stdout

    def dump_log(self, files: Sequence[Path]) -> list[kafka_tools.DumpedFile]:
        """This release's ``kafka-dump-log --cluster-metadata-decoder`` of `files`, parsed."""
        names = ",".join(str(f) for f in files)
        return kafka_tools.parse_dump_log(
            self.run(self.dump_log_class, ["--cluster-metadata-decoder", "--files", names])
        )


@functools.cache
def _classes(jars: Path) -> frozenset[str]:
    names: set[str] = set()
    for jar in jars.glob("kafka*.jar"):
        with zipfile.ZipFile(jar) as z:
            names.update(n for n in z.namelist() if n.endswith(".class"))
    return frozenset(names)


def _log_configs(log_file: Path | None) -> tuple[Path, Path]:
    """log4j 1 and log4j2 configurations: INFO to `log_file`, or (tools) WARN to stderr."""
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"kraftlake-release-log-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    if log_file is None:
        name = "tools"
        log1 = (
            "log4j.rootLogger=WARN, err\nlog4j.appender.err=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.err.Target=System.err\nlog4j.appender.err.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.err.layout.ConversionPattern=%p %m%n\n"
        )
        return _write(folder / f"{name}.log4j.properties", log1), kafka_tools.tools_log4j2_config()
    log1 = (
        "log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={log_file}\nlog4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
    )
    log2 = (
        "status = error\nappender.file.type = File\nappender.file.name = FILE\n"
        f"appender.file.fileName = {log_file}\nappender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = INFO\n"
        "rootLogger.appenderRef.file.ref = FILE\n"
    )
    return (
        _write(log_file.with_name("log4j.properties"), log1),
        _write(log_file.with_name("log4j2.properties"), log2),
    )


def _write(path: Path, text: str) -> Path:
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


@dataclass
class Node:
    """One combined broker+controller JVM."""

    node_id: int
    broker_port: int
    controller_port: int
    workdir: Path
    directory_id: str = field(default_factory=random_cluster_id)
    sasl_port: int = 0
    """A SASL_PLAINTEXT (SCRAM-SHA-256) listener's port; 0: none."""
    process: subprocess.Popen[bytes] | None = None
    log_mark: int = 0

    @property
    def log_dir(self) -> Path:
        return self.workdir / "kraft-logs"

    @property
    def metadata_dir(self) -> Path:
        return self.log_dir / METADATA_PARTITION

    @property
    def config(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def server_log(self) -> Path:
        return self.workdir / "server.log"

    @property
    def controller(self) -> str:
        return f"127.0.0.1:{self.controller_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class ReleaseCluster:
    """`nodes` combined nodes of `release` in `workdir`, static or dynamic quorum; a context manager.

        Metadata snapshots come often (``snapshot_bytes`` between snapshots, every ``snapshot_interval_ms``) so a
        short run has several. With ``entities`` the nodes have racks (``broker.rack=rack-<id>``) and the
        ``StandardAuthorizer`` (``super.users=User:ANONYMOUS``, so the PLAINTEXT tools keep every right), are
        formatted at the oldest ``metadata.version`` the release takes, and `entity_workload` upgrades it (and ELR from
        4.0) with ``kafka-features`` and writes configs, quotas, SCRAM credentials and ACLs; from 3.6 the nodes have a
    SASL_PLAINTEXT (SCRAM-SHA-256) listener too, through which `entity_workload` creates a delegation token. With ``retention_ms``
        (``metadata.max.retention.ms``) the nodes delete the segments below their latest snapshot once that old.
    """

    def __init__(
        self,
        release: Release,
        workdir: Path,
        *,
        nodes: int = 1,
        dynamic: bool = False,
        snapshot_bytes: int = 4096,
        snapshot_interval_ms: int = 3000,
        heap: str = "320m",
        entities: bool = False,
        retention_ms: int | None = None,
    ) -> None:
        if dynamic and not release.dynamic_quorums:
            raise ValueError(f"Kafka {release.version} has no dynamic quorums (3.9 and later)")
        self.release = release
        self.workdir = Path(workdir)
        self.dynamic = dynamic
        self.snapshot_bytes = snapshot_bytes
        self.snapshot_interval_ms = snapshot_interval_ms
        self.heap = heap
        self.entities = entities
        self.retention_ms = retention_ms
        self.token_output = ""
        """What ``kafka-delegation-tokens --create`` printed (`entity_workload`, 3.6+)."""
        self.cluster_id = random_cluster_id()
        ports: list[int] = []
        while len(ports) < 2 * nodes:
            p = free_port()
            if p not in ports:
                ports.append(p)
        self.nodes = {
            i + 1: Node(i + 1, ports[2 * i], ports[2 * i + 1], self.workdir / f"node-{i + 1}")
            for i in range(nodes)
        }
        if entities and release.delegation_tokens_in_kraft:
            for node in self.nodes.values():
                while node.sasl_port in (0, *ports):
                    node.sasl_port = free_port()
                ports.append(node.sasl_port)

    # --- addresses ----------------------------------------------------------------------------------------

    @property
    def voters(self) -> str:
        """Kafka's ``controller.quorum.voters`` string: ``1@127.0.0.1:P1,2@...``."""
        return ",".join(f"{n.node_id}@{n.controller}" for n in self.nodes.values())

    @property
    def controllers(self) -> str:
        """``127.0.0.1:P1,...``: the controller listeners."""
        return ",".join(n.controller for n in self.nodes.values())

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.broker_port}" for n in self.nodes.values() if n.running)

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id]

    # --- lifecycle ----------------------------------------------------------------------------------------

    def _properties(self, node: Node) -> str:
        quorum = (
            f"controller.quorum.bootstrap.servers={self.controllers}"
            if self.dynamic
            else f"controller.quorum.voters={self.voters}"
        )
        rf = 1
        sasl = f",SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}" if node.sasl_port else ""
        return (
            f"""\
process.roles=broker,controller
node.id={node.node_id}
{quorum}
listeners=PLAINTEXT://127.0.0.1:{node.broker_port},CONTROLLER://{node.controller}{sasl}
advertised.listeners=PLAINTEXT://127.0.0.1:{node.broker_port}{sasl}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
log.dirs={node.log_dir}
num.partitions=1
num.network.threads=1
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.enable=false
offsets.topic.replication.factor={rf}
offsets.topic.num.partitions=1
transaction.state.log.replication.factor={rf}
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
broker.heartbeat.interval.ms=1000
metadata.log.max.record.bytes.between.snapshots={self.snapshot_bytes}
metadata.log.max.snapshot.interval.ms={self.snapshot_interval_ms}
metadata.log.segment.ms=5000
"""
            + (f"metadata.max.retention.ms={self.retention_ms}\n" if self.retention_ms is not None else "")
            + (
                f"broker.rack=rack-{node.node_id}\n"
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                "super.users=User:ANONYMOUS\n"
                if self.entities
                else ""
            )
            + (
                "sasl.enabled.mechanisms=SCRAM-SHA-256\n"
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
                f"delegation.token.secret.key={TOKEN_SECRET}\n"
                if node.sasl_port
                else ""
            )
        )

    def format(self) -> None:
        """Write each node's config; format node 1 with the release's ``StorageTool`` and give the others a
        copy with their own ``node.id`` (and ``directory.id``): what their own format runs would write."""
        for node in self.nodes.values():
            node.workdir.mkdir(parents=True, exist_ok=True)
            node.config.write_text(self._properties(node))
        first = self.nodes[1]
        args = ["format", "-t", self.cluster_id, "-c", str(first.config)]
        if self.entities:
            args += ["--release-version", self.release.oldest_metadata_version]
        if self.dynamic and len(self.nodes) == 1:
            args.append("--standalone")
        elif self.dynamic:
            initial = ",".join(f"{n.node_id}@{n.controller}:{n.directory_id}" for n in self.nodes.values())
            args += ["--initial-controllers", initial]
        self.release.run("kafka.tools.StorageTool", args)
        meta = (first.log_dir / "meta.properties").read_text()
        if f"node.id={first.node_id}" not in meta:
            raise KafkaPeerError(f"unexpected meta.properties from StorageTool format:\n{meta}")
        if self.dynamic and len(self.nodes) > 1 and f"directory.id={first.directory_id}" not in meta:
            raise KafkaPeerError(f"StorageTool did not take node 1's directory id:\n{meta}")
        for node in list(self.nodes.values())[1:]:
            shutil.copytree(first.log_dir, node.log_dir)
            mine = re.sub(r"(?m)^node\.id=.*$", f"node.id={node.node_id}", meta)
            mine = re.sub(r"(?m)^directory\.id=.*$", f"directory.id={node.directory_id}", mine)
            (node.log_dir / "meta.properties").write_text(mine)

    def start(self, timeout: float = 90.0) -> ReleaseCluster:
        """`launch`, killing every JVM on any failure."""
        _LIVE.add(self)
        try:
            self.launch(timeout)
        except BaseException:
            self.kill_all()
            raise
        return self

    def launch(self, timeout: float) -> None:
        """Format and start every node; wait until each says it started."""
        self.format()
        for node in self.nodes.values():
            self._spawn(node)
        self._wait_started(list(self.nodes.values()), timeout)

    def _spawn(self, node: Node) -> None:
        node.log_mark = node.server_log.stat().st_size if node.server_log.exists() else 0
        argv = self.release.java_command(
            "kafka.Kafka", [str(node.config)], heap=self.heap, log_file=node.server_log
        )
        with (node.workdir / "server.stdout").open("ab") as out:
            node.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _wait_started(self, nodes: list[Node], timeout: float, message: str = STARTED) -> None:
        waiting = list(nodes)

        def all_started() -> bool:
            for node in list(waiting):
                if node.process is None or node.process.poll() is not None:
                    raise KafkaPeerError(
                        f"Kafka {self.release.version} node {node.node_id} exited:\n{self.tail(node)}"
                    )
                if node.server_log.exists():
                    with node.server_log.open("rb") as f:
                        f.seek(node.log_mark)
                        if message.encode() in f.read():
                            waiting.remove(node)
            return not waiting

        wait_until(
            all_started,
            timeout,
            f"Kafka {self.release.version} nodes {[n.node_id for n in nodes]} logged {message!r}",
            0.2,
            seen=lambda: f"nodes {[n.node_id for n in waiting]} not yet",
            fail=lambda msg: KafkaPeerError(f"{msg}:\n" + "\n".join(self.tail(n) for n in waiting)),
        )

    def kill(self, node_id: int) -> None:
        """SIGKILL one node and reap it."""
        node = self.nodes[node_id]
        if node.process is not None and node.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(30)

    def restart(self, node_id: int, timeout: float = 90.0) -> None:
        """Start a stopped node again (same config and log dir) and wait until it started."""
        node = self.nodes[node_id]
        self._spawn(node)
        self._wait_started([node], timeout)

    def stop(self) -> None:
        """SIGTERM every node, SIGKILL what is left after 5 s; never raises."""
        try:
            for node in self.nodes.values():
                if node.running and node.process is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(node.process.pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(n.running for n in self.nodes.values()):
                time.sleep(0.1)
        finally:
            self.kill_all()

    def kill_all(self) -> None:
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.process.wait(10)
        _LIVE.discard(self)

    def __enter__(self) -> ReleaseCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- state --------------------------------------------------------------------------------------------

    def tail(self, node: Node, lines: int = 30) -> str:
        out = [f"--- node {node.node_id} ({self.release.version}) {node.workdir}"]
        for path in (node.server_log, node.workdir / "server.stdout"):
            if path.exists():
                out.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(out)

    def quorum_state(self, node_id: int) -> dict[str, int]:
        """``leaderId`` and ``leaderEpoch`` of the node's ``quorum-state`` file (-1 when absent)."""
        import json

        path = self.nodes[node_id].metadata_dir / "quorum-state"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {"leaderId": -1, "leaderEpoch": -1}
        return {"leaderId": int(data.get("leaderId", -1)), "leaderEpoch": int(data.get("leaderEpoch", -1))}

    def leader(self, timeout: float = 60.0, not_in: Sequence[int] = ()) -> int:
        """The running node whose ``quorum-state`` says it leads the highest epoch; waits for one."""
        states: dict[int, dict[str, int]] = {}

        def elected() -> int | None:
            nonlocal states
            states = {i: self.quorum_state(i) for i, n in self.nodes.items() if n.running}
            top = max((s["leaderEpoch"] for s in states.values()), default=-1)
            for i, s in states.items():
                if s["leaderId"] == i and s["leaderEpoch"] == top and i not in not_in:
                    return i  # a node id, never 0
            return None

        return wait_until(
            elected,
            timeout,
            f"a leader of Kafka {self.release.version} other than {list(not_in)}",
            0.2,
            seen=lambda: states,
            fail=KafkaPeerError,
        )

    def snapshot_offsets(self, node_id: int) -> list[int]:
        return snapshot_offsets(self.nodes[node_id].metadata_dir)

    def wait_for_snapshot(self, node_id: int, after_offset: int = 0, timeout: float = 60.0) -> int:
        newer = wait_until(
            lambda: [o for o in self.snapshot_offsets(node_id) if o > after_offset],
            timeout,
            f"a snapshot past {after_offset} on node {node_id}",
            0.2,
            seen=lambda: self.snapshot_offsets(node_id),
            fail=KafkaPeerError,
        )
        return newer[-1]

    def log_start(self, node_id: int) -> int:
        """The base offset of `node_id`'s oldest metadata log segment on disk."""
        return min(int(p.name.split(".")[0]) for p in self.node(node_id).metadata_dir.glob("*.log"))

    def wait_for_log_start(self, node_id: int, past: int = 0, timeout: float = 60.0) -> int:
        """Wait until `node_id` has deleted its segments up to past `past` (``retention_ms``): its log start."""

        def moved() -> list[int]:  # a list: offset 0 would read as "not yet"
            start = self.log_start(node_id)
            return [start] if start > past else []

        (start,) = wait_until(
            moved,
            timeout,
            f"node {node_id}'s log start past {past}",
            0.2,
            seen=lambda: self.log_start(node_id),
            fail=KafkaPeerError,
        )
        return start

    # --- the release's own tools --------------------------------------------------------------------------

    def topics(self, *args: str) -> str:
        """That release's ``TopicCommand --bootstrap-server <brokers> args``."""
        return self.release.run(
            self.release.topic_command, ["--bootstrap-server", self.bootstrap_servers, *args]
        )

    def create_topic(self, name: str, partitions: int) -> str:
        return self.topics(
            "--create", "--topic", name, "--partitions", str(partitions), "--replication-factor", "1"
        )

    def workload(self, prefix: str = "t") -> None:
        """Topics created, altered (more partitions) and deleted, by the release's ``TopicCommand``."""
        self.create_topic(f"{prefix}-orders", 3)
        self.create_topic(f"{prefix}-scratch", 2)
        self.topics("--alter", "--topic", f"{prefix}-orders", "--partitions", "5")
        self.topics("--delete", "--topic", f"{prefix}-scratch")

    def entity_workload(self, prefix: str = "t") -> None:
        """``metadata.version`` upgraded to the release's newest (and ELR enabled from 4.0) by its
        ``kafka-features``; configs (topic, broker default), a client quota, SCRAM credentials (3.5+) and an ACL
        by its ``ConfigCommand`` and ``AclCommand`` (run after `workload`)."""
        r = self.release
        boot = ["--bootstrap-server", self.bootstrap_servers]
        newest = ".".join(r.version.split(".")[:2])  # "3.3": that line's newest metadata.version
        r.run(r.feature_command, [*boot, "upgrade", "--metadata", newest])
        if r.elr_feature:
            r.run(r.feature_command, [*boot, "upgrade", "--feature", "eligible.leader.replicas.version=1"])

        def configs(*args: str) -> None:
            r.run(r.config_command, [*boot, "--alter", *args])

        configs(
            "--entity-type",
            "topics",
            "--entity-name",
            f"{prefix}-orders",
            "--add-config",
            "retention.ms=3600000",
        )
        configs("--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=7200000")
        configs(
            "--entity-type", "clients", "--entity-name", "app1", "--add-config", "consumer_byte_rate=2048"
        )
        if r.scram_in_kraft:
            configs(
                "--entity-type",
                "users",
                "--entity-name",
                "alice",
                "--add-config",
                f"SCRAM-SHA-256=[iterations=4096,password={SCRAM_USER[1]}]",
            )
        r.run(
            r.acl_command,
            [
                *boot,
                "--add",
                "--allow-principal",
                "User:alice",
                "--operation",
                "Read",
                "--topic",
                f"{prefix}-orders",
            ],
        )
        if any(n.sasl_port for n in self.nodes.values()):
            self.token_output = self.create_delegation_token()

    def create_delegation_token(self, timeout: float = 30.0) -> str:
        """A delegation token of the SCRAM user, created by the release's ``kafka-delegation-tokens`` through
        the SASL_PLAINTEXT listener (a token needs a SASL-authenticated owner); its output. Retried until the
        broker knows the user's credential (the record may not have reached it yet)."""
        user, password = SCRAM_USER
        props = self.workdir / "scram-client.properties"
        props.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";\n'
        )
        sasl = ",".join(f"127.0.0.1:{n.sasl_port}" for n in self.nodes.values() if n.running and n.sasl_port)
        args = ["--bootstrap-server", sasl, "--create", "--max-life-time-period", "-1"]
        args += ["--command-config", str(props)]
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.release.run(self.release.delegation_token_command, args)
            except KafkaPeerError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
