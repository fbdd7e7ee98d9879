"""A real multi-process KRaft Kafka cluster (separate controllers and brokers) from the cached Maven jars.

`KafkaCluster` formats one log dir per node with ``StorageTool format`` (a *static* quorum: every controller is
in ``controller.quorum.voters`` from the start, kraft.version 0), starts one ``kafka.Kafka`` JVM per node on
127.0.0.1 with free ports, and waits until every node says it started (a broker only says so once the quorum
has a leader and the broker is registered and unfenced). Controllers have ids 1..N, brokers 101...

``security="SASL_SSL"`` makes every listener (controllers' and brokers') SASL_SSL with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512, TLS from PEM files of a throwaway CA (made with the ``openssl`` CLI), the
``StandardAuthorizer`` and ``super.users=User:admin``. Nodes talk to each other as ``admin`` over PLAIN (SCRAM
credentials live in the metadata log, which controllers cannot read before they have a quorum); SCRAM
credentials for ``admin`` and the initial users are written at format time (``--add-scram``).

The cluster is a context manager that never leaves a JVM behind: every JVM runs in its own session and is
SIGTERMed then SIGKILLed by `stop()`, on any failure of `start()`, at interpreter exit, and (when started from
the main thread, with ``setpriv`` available) by the kernel if the Python process dies.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waiting import wait_until

from kraftlake import kafka_tools
from peers.kafka import (
    METADATA_PARTITION,
    KafkaPeerError,
    _log4j2_properties,
    free_port,
    snapshot_offsets,
)

STORAGE_TOOL = "kafka.tools.StorageTool"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka.admin.ConfigCommand (core) until 4.3
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
METADATA_QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"

CONTROLLER_LISTENER = "CONTROLLER"
FIRST_BROKER_ID = 101
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_SSL")

# metadata.log.segment.bytes refuses less than 8 MiB in 4.3.1; the internal (testing) key has no minimum
METADATA_SEGMENT_MIN_BYTES = 8 * 1024 * 1024

_STARTED = "Kafka Server started"
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_SAFE_SECRET = re.compile(r"[A-Za-z0-9._@+-]+")

# every live cluster, so a JVM never outlives the interpreter even if a test forgets to stop one
_LIVE: weakref.WeakSet[KafkaCluster] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for cluster in list(_LIVE):
        cluster.kill_all()


def random_cluster_id() -> str:
    """A cluster id as ``StorageTool random-uuid`` makes one (without starting a JVM for it)."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        # Kafka's Uuid.randomUuid() rejects the zero and metadata-topic ids and ids starting with '-'
        if not text.startswith("-") and raw not in (bytes(16), bytes(15) + b"\x01"):
            return text


# --- class-data sharing -----------------------------------------------------------------------------------
# A JVM spends most of its start-up loading and verifying Kafka's classes. A dynamic AppCDS archive, written
# by one run (-XX:ArchiveClassesAtExit) and mapped by the next (-XX:SharedArchiveFile), halves a server's
# start-up and a tool's run time. Archives live in the temp dir, keyed by the java binary and the jar set
# (the JVM itself ignores an archive whose class path does not match); KRAFTLAKE_CDS=0 turns this off.

CDS_ENV = "KRAFTLAKE_CDS"
# JVM warnings to stderr (a tool's stdout is parsed), without CDS's chatter
_JVM_LOGGING = ("-Xlog:disable", "-Xlog:all=warning,cds*=off:stderr")
_cds_counter = itertools.count()


def _cds_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"kraftlake-cds-{os.getuid()}"


def _cds_key() -> str:
    digest = hashlib.sha256()
    java = Path(os.path.realpath(kafka_tools.java_executable()))
    stat = java.stat()
    digest.update(f"{java}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    for jar in sorted(kafka_tools.kafka_jars_dir().glob("*.jar")):
        jstat = jar.stat()
        digest.update(f"|{jar.name}|{jstat.st_size}|{jstat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


@dataclass
class CdsArchive:
    """JVM options for one kind of JVM (``name``): map the archive, or write it at exit if there is none."""

    name: str
    options: tuple[str, ...] = ()
    pending: Path | None = None  # where this JVM writes an archive at exit...
    final: Path | None = None  # ...to be renamed to once the JVM exited normally

    @classmethod
    def for_name(cls, name: str, *, may_dump: bool = True) -> CdsArchive:
        if os.environ.get(CDS_ENV, "1").lower() in ("0", "false", "no", "off"):
            return cls(name)
        folder = _cds_dir()
        final = folder / f"{name}-{_cds_key()}.jsa"
        if final.exists() and final.stat().st_size > 0:
            return cls(name, (f"-XX:SharedArchiveFile={final}",))
        if not may_dump:
            return cls(name)
        folder.mkdir(parents=True, exist_ok=True)
        pending = folder / f"{final.name}.{os.getpid()}.{next(_cds_counter)}.tmp"
        return cls(name, (f"-XX:ArchiveClassesAtExit={pending}",), pending, final)

    def finish(self, *, completed: bool) -> None:
        """After the JVM exited: publish the archive it wrote (atomically) if it ``completed`` its exit
        (was not killed, so the file is whole); delete it otherwise."""
        pending, self.pending = self.pending, None
        if pending is None or self.final is None:
            return
        try:
            if completed and pending.exists() and pending.stat().st_size > 0:
                os.replace(pending, self.final)
        finally:
            pending.unlink(missing_ok=True)


def run_tool(main_class: str, args: Sequence[str], *, timeout: float = 120.0) -> str:
    """Run one of Kafka's tools to completion (with a CDS archive); its stdout. Raises `KafkaPeerError`."""
    cds = CdsArchive.for_name(main_class.rsplit(".", 1)[-1])
    argv = kafka_tools.java_command(main_class, args, jvm_options=(*_JVM_LOGGING, *cds.options))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        cds.finish(completed=False)  # killed: a half-written archive must not be published
        raise KafkaPeerError(f"{main_class} {' '.join(args)} did not finish within {timeout:.0f}s") from exc
    cds.finish(completed=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-3000:]
        raise KafkaPeerError(f"{main_class} {' '.join(args)} exited with {done.returncode}: {tail}")
    return done.stdout


@dataclass
class KafkaNode:
    """One ``kafka.Kafka`` process: its id, role, port and files."""

    node_id: int
    role: str  # "controller" or "broker"
    port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    _log_mark: int = 0  # server.log size when the current process was started
    started_at: float = 0.0
    cds: CdsArchive | None = None

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
    def log4j2_config(self) -> Path:
        return self.workdir / "log4j2.properties"

    @property
    def server_log(self) -> Path:
        return self.workdir / "server.log"

    @property
    def stdout_log(self) -> Path:
        return self.workdir / "server.stdout"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_since_start(self) -> str:
        if not self.server_log.exists():
            return ""
        with self.server_log.open("rb") as f:
            f.seek(self._log_mark)
            return f.read().decode(errors="replace")


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KafkaPeerError(f"openssl {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")


@dataclass(frozen=True)
class Tls:
    """The PEM files of a throwaway CA, a server certificate (127.0.0.1, localhost) and a client certificate."""

    ca_pem: Path
    server_keystore_pem: Path  # encrypted PKCS#8 key + certificate chain, for ssl.keystore.type=PEM
    server_key_password: str
    server_cert_pem: Path
    client_cert_pem: Path
    client_key_pem: Path  # unencrypted PKCS#8


def make_tls(folder: Path, key_password: str = "kraftlake-key-secret") -> Tls:
    """Generate the CA, server and client certificates in ``folder`` with the ``openssl`` CLI (EC P-256)."""
    if shutil.which("openssl") is None:
        raise KafkaPeerError("SASL_SSL needs the `openssl` command line tool")
    folder.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=kraftlake test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=folder,
    )
    for name, cn, ext in (
        (
            "server",
            "localhost",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth",
        ),
        ("client", "kraftlake-client", "extendedKeyUsage=clientAuth"),
    ):
        (folder / f"{name}.ext").write_text(f"basicConstraints=CA:FALSE\n{ext}\n")
        _openssl(
            "req",
            "-new",
            *ec,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={cn}",
            cwd=folder,
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-sha256",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.pem",
            cwd=folder,
        )
    # Kafka's file-based PEM key store insists on ssl.key.password, so its key is encrypted PKCS#8
    _openssl(
        "pkcs8",
        "-topk8",
        "-in",
        "server.key",
        "-out",
        "server.enc.key",
        "-passout",
        f"pass:{key_password}",
        "-v1",
        "PBE-SHA1-3DES",
        cwd=folder,
    )
    keystore = folder / "server.keystore.pem"
    keystore.write_text(
        (folder / "server.enc.key").read_text()
        + (folder / "server.pem").read_text()
        + (folder / "ca.pem").read_text()
    )
    return Tls(
        ca_pem=folder / "ca.pem",
        server_keystore_pem=keystore,
        server_key_password=key_password,
        server_cert_pem=folder / "server.pem",
        client_cert_pem=folder / "client.pem",
        client_key_pem=folder / "client.key",
    )


def _jaas(mechanism: str, user: str, password: str, server_users: Mapping[str, str] | None = None) -> str:
    parts = [_LOGIN_MODULES[mechanism], "required", f'username="{user}"', f'password="{password}"']
    if server_users is not None:
        parts.extend(f'user_{name}="{secret}"' for name, secret in server_users.items())
    return " ".join(parts) + ";"


def parse_status(text: str) -> dict[str, Any]:
    """``kafka-metadata-quorum describe --status`` output as a dict (ints and JSON lists decoded)."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep or not key.strip() or " " in key.strip():
            continue
        value = value.strip()
        if re.fullmatch(r"-?\d+", value):
            out[key.strip()] = int(value)
        elif value.startswith(("[", "{")):
            try:
                out[key.strip()] = json.loads(value)
            except json.JSONDecodeError:
                out[key.strip()] = value
        else:
            out[key.strip()] = value
    return out


class KafkaCluster:
    """N controllers and M brokers, each its own ``kafka.Kafka`` JVM, in ``workdir``.

    Use as a context manager (``with KafkaCluster(tmp) as cluster: ...``): entering starts it, leaving always
    kills every JVM.

    Metadata log knobs (None: Kafka's default), on every node: ``snapshot_bytes``
    (metadata.log.max.record.bytes.between.snapshots), ``snapshot_interval_ms``
    (metadata.log.max.snapshot.interval.ms), ``segment_bytes`` (metadata.log.segment.bytes, which refuses less
    than 8 MiB, so smaller values go to internal.metadata.log.segment.bytes), ``segment_ms``
    (metadata.log.segment.ms), ``retention_bytes`` / ``retention_ms`` (metadata.max.retention.bytes / .ms:
    applied by a 60 s timer, see `wait_for_log_start`), ``delete_delay_ms``
    (internal.metadata.delete.delay.millis). ``extra_config`` is appended to every node's properties.

    ``users`` (name -> password) exist from the start, for PLAIN (JAAS) and SCRAM-SHA-256/512 (format time);
    `add_user` adds SCRAM users later. ``admin_user`` is the super user the nodes themselves use.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        controllers: int = 3,
        brokers: int = 1,
        security: str = "PLAINTEXT",
        snapshot_bytes: int | None = None,
        snapshot_interval_ms: int | None = None,
        segment_bytes: int | None = None,
        segment_ms: int | None = None,
        retention_bytes: int | None = None,
        retention_ms: int | None = None,
        delete_delay_ms: int | None = None,
        users: Mapping[str, str] | None = None,
        admin_user: str = "admin",
        admin_password: str = "admin-secret",
        controller_heap: str = "256m",
        broker_heap: str = "384m",
        extra_config: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = (),
    ) -> None:
        if controllers < 1:
            raise ValueError("a cluster needs at least one controller")
        if security not in SECURITY_PROTOCOLS:
            raise ValueError(f"security must be one of {SECURITY_PROTOCOLS}, not {security!r}")
        for name, secret in {admin_user: admin_password, **(users or {})}.items():
            if not (_SAFE_SECRET.fullmatch(name) and _SAFE_SECRET.fullmatch(secret)):
                raise ValueError(f"user names and passwords must match {_SAFE_SECRET.pattern}: {name!r}")
        self.workdir = Path(workdir)
        self.security = security
        self.broker_listener = security  # the listener's name is its protocol: PLAINTEXT or SASL_SSL
        self.admin_user = admin_user
        self.admin_password = admin_password
        self.users: dict[str, str] = dict(users if users is not None else {"kraftlake": "kraftlake-secret"})
        self.controller_heap = controller_heap
        self.broker_heap = broker_heap
        self.extra_config = dict(extra_config or {})
        self.jvm_options = tuple(jvm_options)
        self.metadata_config: dict[str, int] = {}
        if snapshot_bytes is not None:
            self.metadata_config["metadata.log.max.record.bytes.between.snapshots"] = snapshot_bytes
        if snapshot_interval_ms is not None:
            self.metadata_config["metadata.log.max.snapshot.interval.ms"] = snapshot_interval_ms
        if segment_bytes is not None:
            key = (
                "metadata.log.segment.bytes"
                if segment_bytes >= METADATA_SEGMENT_MIN_BYTES
                else "internal.metadata.log.segment.bytes"
            )
            self.metadata_config[key] = segment_bytes
        if segment_ms is not None:
            self.metadata_config["metadata.log.segment.ms"] = segment_ms
        if retention_bytes is not None:
            self.metadata_config["metadata.max.retention.bytes"] = retention_bytes
        if retention_ms is not None:
            self.metadata_config["metadata.max.retention.ms"] = retention_ms
        if delete_delay_ms is not None:
            self.metadata_config["internal.metadata.delete.delay.millis"] = delete_delay_ms

        self.nodes: dict[int, KafkaNode] = {}
        for i in range(controllers):
            self.nodes[i + 1] = KafkaNode(i + 1, "controller", 0, self.workdir / f"controller-{i + 1}")
        for j in range(brokers):
            node_id = FIRST_BROKER_ID + j
            self.nodes[node_id] = KafkaNode(node_id, "broker", 0, self.workdir / f"broker-{node_id}")
        self._pick_ports()
        self.cluster_id = random_cluster_id()
        self.tls: Tls | None = None
        self.admin_properties: Path | None = None
        self.timings: dict[str, float] = {}  # seconds per phase of start()

    def _pick_ports(self) -> None:
        ports: set[int] = set()
        while len(ports) < len(self.nodes):
            ports.add(free_port())
        for node, port in zip(self.nodes.values(), sorted(ports), strict=True):
            node.port = port

    # --- addresses ------------------------------------------------------------------------------------

    @property
    def controller_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes.values() if n.role == "controller"]

    @property
    def broker_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes.values() if n.role == "broker"]

    @property
    def controller_endpoints(self) -> list[str]:
        """``127.0.0.1:port`` of each controller listener, by controller id."""
        return [self.nodes[i].endpoint for i in self.controller_ids]

    @property
    def bootstrap_controllers(self) -> str:
        return ",".join(self.controller_endpoints)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the brokers' listeners."""
        return ",".join(self.nodes[i].endpoint for i in self.broker_ids)

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{i}@{self.nodes[i].endpoint}" for i in self.controller_ids)

    def endpoint(self, node_id: int) -> str:
        return self._node(node_id).endpoint

    # --- TLS / SASL -----------------------------------------------------------------------------------

    @property
    def secured(self) -> bool:
        return self.security == "SASL_SSL"

    def _tls(self) -> Tls:
        if self.tls is None:
            raise KafkaPeerError("this cluster has no TLS (security=PLAINTEXT)")
        return self.tls

    @property
    def ca_pem(self) -> Path:
        return self._tls().ca_pem

    @property
    def client_cert_pem(self) -> Path:
        return self._tls().client_cert_pem

    @property
    def client_key_pem(self) -> Path:
        return self._tls().client_key_pem

    def client_properties(
        self, user: str | None = None, password: str | None = None, mechanism: str = "SCRAM-SHA-512"
    ) -> Path:
        """A Kafka client ``.properties`` file for Kafka's tools (``--command-config``); returns its path.

        Defaults to the admin user. On a PLAINTEXT cluster the file only says ``security.protocol=PLAINTEXT``.
        """
        user = self.admin_user if user is None else user
        password = self.admin_password if password is None else password
        folder = self.workdir / "clients"
        folder.mkdir(parents=True, exist_ok=True)
        if not self.secured:
            path = folder / "plaintext.properties"
            path.write_text("security.protocol=PLAINTEXT\n")
            return path
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(f"mechanism must be one of {SASL_MECHANISMS}, not {mechanism!r}")
        path = folder / f"{user}-{mechanism.lower()}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={mechanism}\n"
            f"sasl.jaas.config={_jaas(mechanism, user, password)}\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca_pem}\n"
        )
        return path

    # --- config files ---------------------------------------------------------------------------------

    def _security_config(self, node: KafkaNode) -> str:
        if not self.secured:
            return ""
        tls = self._tls()
        server_users = {self.admin_user: self.admin_password, **self.users}
        listeners = (
            [CONTROLLER_LISTENER]
            if node.role == "controller"
            else [CONTROLLER_LISTENER, self.broker_listener]
        )
        lines = [
            f"sasl.enabled.mechanisms={','.join(SASL_MECHANISMS)}",
            "sasl.mechanism.controller.protocol=PLAIN",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={tls.server_keystore_pem}",
            f"ssl.key.password={tls.server_key_password}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={tls.ca_pem}",
            "ssl.client.auth=requested",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            f"super.users=User:{self.admin_user}",
        ]
        if node.role == "broker":
            lines.append("sasl.mechanism.inter.broker.protocol=PLAIN")
        for listener in listeners:
            prefix = f"listener.name.{listener.lower()}"
            lines.append(
                f"{prefix}.plain.sasl.jaas.config="
                f"{_jaas('PLAIN', self.admin_user, self.admin_password, server_users)}"
            )
            for mech in SCRAM_MECHANISMS:
                lines.append(f"{prefix}.{mech.lower()}.sasl.jaas.config={_LOGIN_MODULES[mech]} required;")
        return "\n".join(lines) + "\n"

    def _server_properties(self, node: KafkaNode) -> str:
        proto = self.security
        protocol_map = f"{CONTROLLER_LISTENER}:{proto},{self.broker_listener}:{proto}"
        common = f"""\
process.roles={node.role}
node.id={node.node_id}
controller.quorum.voters={self.quorum_voters}
controller.listener.names={CONTROLLER_LISTENER}
listener.security.protocol.map={protocol_map}
log.dirs={node.log_dir}
background.threads=2
num.recovery.threads.per.data.dir=1
"""
        if node.role == "controller":
            role = f"""\
listeners={CONTROLLER_LISTENER}://{node.endpoint}
num.network.threads=1
num.io.threads=2
"""
        else:
            rf = min(len(self.broker_ids), 3)
            role = f"""\
listeners={self.broker_listener}://{node.endpoint}
advertised.listeners={self.broker_listener}://{node.endpoint}
inter.broker.listener.name={self.broker_listener}
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
log.cleaner.threads=1
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor={rf}
offsets.topic.num.partitions=1
transaction.state.log.replication.factor={rf}
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor={rf}
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
broker.heartbeat.interval.ms=1000
"""
        metadata = "".join(f"{k}={v}\n" for k, v in self.metadata_config.items())
        extra = "".join(f"{k}={v}\n" for k, v in self.extra_config.items())
        return common + role + self._security_config(node) + metadata + extra

    def _write_configs(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.secured and self.tls is None:
            self.tls = make_tls(self.workdir / "tls")
        for node in self.nodes.values():
            node.workdir.mkdir(parents=True, exist_ok=True)
            node.config.write_text(self._server_properties(node))
            node.log4j2_config.write_text(_log4j2_properties(node.server_log))
        if self.secured:
            self.admin_properties = self.client_properties(self.admin_user, self.admin_password, "PLAIN")

    # --- lifecycle ------------------------------------------------------------------------------------

    def format(self) -> None:
        """Write every node's config and format every log dir.

        One ``StorageTool format`` run (controller 1's config, with the SCRAM credentials); the other log
        dirs get a copy of its bootstrap metadata and its ``meta.properties`` with their own ``node.id`` and a
        fresh ``directory.id``: exactly what their own format runs would write, without a JVM each (four
        formats in parallel cost ~5 s on two cores, one ~1.5 s). The bootstrap metadata is
        ``bootstrap.checkpoint`` up to Kafka 4.3; from 4.4 it is the snapshot at offset 0 of the metadata
        log, which format writes for controllers only (a static quorum's holds no voters: the same for each).
        """
        self._write_configs()
        template = self.nodes[self.controller_ids[0]]
        args = ["format", "-t", self.cluster_id, "-c", str(template.config)]
        if self.secured:
            for name, secret in {self.admin_user: self.admin_password, **self.users}.items():
                for mech in SCRAM_MECHANISMS:
                    args += ["--add-scram", f"{mech}=[name={name},password={secret}]"]
        run_tool(STORAGE_TOOL, args)
        meta = (template.log_dir / "meta.properties").read_text()
        bootstrap = template.log_dir / "bootstrap.checkpoint"
        bootstrap_snapshot = template.metadata_dir / f"{0:020d}-{0:010d}.checkpoint"
        if f"node.id={template.node_id}\n" not in meta or "directory.id=" not in meta:
            raise KafkaPeerError(f"unexpected meta.properties from StorageTool format:\n{meta}")
        for node in self.nodes.values():
            if node is template:
                continue
            node.log_dir.mkdir(parents=True, exist_ok=True)
            if bootstrap.exists():
                shutil.copyfile(bootstrap, node.log_dir / "bootstrap.checkpoint")
            if bootstrap_snapshot.exists() and node.role == "controller":
                node.metadata_dir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(bootstrap_snapshot, node.metadata_dir / bootstrap_snapshot.name)
            mine = re.sub(r"(?m)^node\.id=.*$", f"node.id={node.node_id}", meta)
            mine = re.sub(r"(?m)^directory\.id=.*$", f"directory.id={random_cluster_id()}", mine)
            (node.log_dir / "meta.properties").write_text(mine)

    def start(self, timeout: float = 120.0, attempts: int = 3) -> KafkaCluster:
        """Format and start every node, and wait until all of them started (brokers registered, unfenced).

        A free port may be taken by someone else before its JVM binds it: then everything is killed, wiped
        and started again on new ports (up to ``attempts`` times).
        """
        t0 = time.monotonic()
        _LIVE.add(self)
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(t0, timeout)
                break
            except KafkaPeerError as exc:
                self.kill_all()
                if "Address already in use" not in str(exc) or attempt == attempts:
                    raise
                for node in self.nodes.values():
                    shutil.rmtree(node.workdir, ignore_errors=True)
                self._pick_ports()
                _LIVE.add(self)
            except BaseException:
                self.kill_all()
                raise
        self.timings["start"] = time.monotonic() - t0
        return self

    def _start_once(self, t0: float, timeout: float) -> None:
        self.format()
        self.timings["format"] = time.monotonic() - t0
        mark = time.monotonic()
        dumping: set[str] = set()
        for node in self.nodes.values():
            # while a role has no CDS archive yet, one node of that role writes it when it stops
            self._spawn(node, may_dump_cds=node.role not in dumping)
            dumping.add(node.role)
        self._wait_started(list(self.nodes.values()), timeout)
        self.timings["start_jvms"] = time.monotonic() - mark
        if not self.broker_ids:
            self.wait_for_leader(timeout=max(5.0, timeout - (time.monotonic() - t0)))

    def _spawn(self, node: KafkaNode, *, may_dump_cds: bool = False) -> None:
        if node.running:
            raise KafkaPeerError(f"node {node.node_id} is already running")
        heap = self.controller_heap if node.role == "controller" else self.broker_heap
        node.cds = CdsArchive.for_name(f"kafka-{node.role}", may_dump=may_dump_cds)
        argv = kafka_tools.java_command(
            "kafka.Kafka",
            [str(node.config)],
            heap=heap,
            log4j2_config=node.log4j2_config,
            jvm_options=("-Xms64m", *_JVM_LOGGING, *node.cds.options, *self.jvm_options),
        )
        # the kernel kills the JVM if this (main) thread dies: a crashed pytest leaves nothing behind
        if threading.current_thread() is threading.main_thread() and shutil.which("setpriv"):
            argv = ["setpriv", "--pdeathsig", "KILL", "--", *argv]
        node._log_mark = node.server_log.stat().st_size if node.server_log.exists() else 0
        node.started_at = time.monotonic()
        with node.stdout_log.open("ab") as out:
            # its own session, so signals reach exactly this JVM
            node.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _wait_started(self, nodes: list[KafkaNode], timeout: float) -> None:
        pending = list(nodes)

        def all_started() -> bool:
            for node in list(pending):
                if not node.running:
                    code = node.process.returncode if node.process is not None else None
                    why = ""
                    if "Address already in use" in node.log_since_start():
                        why = f" (port {node.port}: Address already in use)"
                    raise KafkaPeerError(
                        f"node {node.node_id} exited with {code} while starting{why}:\n"
                        f"{self.tail(node.node_id)}"
                    )
                if _STARTED in node.log_since_start() and _port_open(node.port):
                    self.timings[f"node_{node.node_id}"] = time.monotonic() - node.started_at
                    pending.remove(node)
            return not pending

        wait_until(
            all_started,
            timeout,
            f"nodes {[n.node_id for n in nodes]} started",
            0.1,
            seen=lambda: f"nodes {[n.node_id for n in pending]} not yet",
            fail=lambda msg: KafkaPeerError(f"{msg}:\n" + "\n".join(self.tail(n.node_id) for n in pending)),
        )

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a stopped or killed node again with the same config and log dir; wait until it started."""
        node = self._node(node_id)
        self._spawn(node)
        try:
            self._wait_started([node], timeout)
        except BaseException:
            self._signal(node, signal.SIGKILL)
            self._reap(node, 10.0)
            raise

    def stop_node(self, node_id: int, timeout: float = 30.0) -> None:
        """SIGTERM one node and wait for its clean shutdown (SIGKILL and raise if it does not exit in time).

        A quorum leader whose followers are all gone waits out Kafka's hard-coded 5 s graceful-resignation
        timeout (``KafkaRaftClientDriver``) before it exits.
        """
        node = self._node(node_id)
        if not node.running:
            return
        self._signal(node, signal.SIGTERM)
        if not self._reap(node, timeout):
            self._signal(node, signal.SIGKILL)
            self._reap(node, 10.0)
            raise KafkaPeerError(f"node {node_id} did not stop within {timeout:.0f}s of SIGTERM; killed it")

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL) to one node; with SIGKILL, wait until it is gone."""
        node = self._node(node_id)
        if not node.running:
            return
        self._signal(node, sig)
        if sig == signal.SIGKILL:
            self._reap(node, 30.0)

    def stop(self, timeout: float = 20.0, last_controller_grace: float = 1.0) -> None:
        """Stop everything and never raise: SIGTERM the brokers, then the controllers, SIGKILL what is left.

        Brokers go first (their controlled shutdown needs the controllers). The last controller still running
        can only be a leader waiting out its 5 s resignation timeout with nobody to resign to, so it gets
        ``last_controller_grace`` seconds before SIGKILL (unless it is writing a CDS archive).
        """
        try:
            brokers = [self.nodes[i] for i in self.broker_ids if self.nodes[i].running]
            self._terminate(brokers, timeout, 0)
            controllers = [self.nodes[i] for i in self.controller_ids if self.nodes[i].running]
            self._terminate(controllers, timeout, last_controller_grace)
        finally:
            self.kill_all()

    def _terminate(self, nodes: list[KafkaNode], timeout: float, last_grace: float) -> None:
        for node in nodes:
            self._signal(node, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        lone_since: float | None = None
        while True:
            alive = [n for n in nodes if n.running]
            for node in nodes:
                if not node.running:
                    self._reap(node, 1.0)
            if not alive:
                return
            now = time.monotonic()
            if (
                len(alive) == 1
                and len(nodes) > 1
                and last_grace > 0
                and alive[0].cds is not None
                and alive[0].cds.pending is None
            ):
                lone_since = now if lone_since is None else lone_since
                if now - lone_since > last_grace:
                    break
            if now > deadline:
                break
            time.sleep(0.05)
        for node in nodes:
            if node.running:
                self._signal(node, signal.SIGKILL)
            self._reap(node, 10.0)

    def kill_all(self) -> None:
        """SIGKILL every JVM of this cluster and reap it."""
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is None:
                self._signal(node, signal.SIGKILL)
        for node in self.nodes.values():
            self._reap(node, 10.0)
        _LIVE.discard(self)

    @staticmethod
    def _reap(node: KafkaNode, timeout: float) -> bool:
        """Wait for the node's JVM to exit; publish the CDS archive it wrote. False if it is still running."""
        if node.process is None:
            return True
        try:
            node.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        if node.cds is not None:
            node.cds.finish(completed=node.process.returncode != -signal.SIGKILL)
        return True

    @staticmethod
    def _signal(node: KafkaNode, sig: int) -> None:
        if node.process is None or node.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.process.pid, sig)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- files ----------------------------------------------------------------------------------------

    def _node(self, node_id: int) -> KafkaNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise KafkaPeerError(f"no node {node_id} (nodes: {sorted(self.nodes)})") from None

    def is_running(self, node_id: int) -> bool:
        return self._node(node_id).running

    def log_dir(self, node_id: int) -> Path:
        """The node's log dir (``meta.properties``, ``__cluster_metadata-0/``...)."""
        return self._node(node_id).log_dir

    def metadata_dir(self, node_id: int) -> Path:
        """The node's ``__cluster_metadata-0`` directory."""
        return self._node(node_id).metadata_dir

    def server_log(self, node_id: int) -> Path:
        return self._node(node_id).server_log

    def snapshot_offsets(self, node_id: int) -> list[int]:
        """End offsets of the node's ``.checkpoint`` snapshots, ascending."""
        return snapshot_offsets(self.metadata_dir(node_id))

    def wait_for_snapshot(self, node_id: int, after_offset: int = 0, timeout: float = 60.0) -> int:
        """Wait for a snapshot on ``node_id`` whose end offset is beyond ``after_offset``; returns that offset."""
        newer = wait_until(
            lambda: [o for o in self.snapshot_offsets(node_id) if o > after_offset],
            timeout,
            f"a snapshot beyond offset {after_offset} on node {node_id}",
            0.2,
            seen=lambda: self.snapshot_offsets(node_id),
            fail=lambda msg: KafkaPeerError(f"{msg}:\n{self.tail(node_id)}"),
        )
        return newer[-1]

    def log_start_offset(self, node_id: int) -> int:
        """The node's metadata log start offset: the base offset of its first live ``.log`` segment.

        (Deleted segments are renamed ``*.log.deleted`` at once and removed later.)
        """
        bases = [int(p.name.split(".")[0]) for p in self.metadata_dir(node_id).glob("*.log")]
        return min(bases, default=0)

    def wait_for_log_start(self, node_id: int, above: int = 0, timeout: float = 120.0) -> int:
        """Wait until the node's log start offset exceeds ``above``; returns it.

        Kafka 4.3.1 applies ``metadata.max.retention.*`` from a timer hard-coded to 60 s
        (``KafkaRaftClient.RaftMetadataLogCleanerManager``), first run 60 s after the node started: however small
        the retention, the log start offset cannot move before then.
        """

        def moved() -> list[int]:  # a list: offset 0 would read as "not yet"
            start = self.log_start_offset(node_id)
            return [start] if start > above else []

        (start,) = wait_until(
            moved,
            timeout,
            f"the log start offset of node {node_id} above {above}",
            0.5,
            seen=lambda: self.log_start_offset(node_id),
            fail=lambda msg: KafkaPeerError(f"{msg}:\n{self.tail(node_id)}"),
        )
        return start

    def tail(self, node_id: int, lines: int = 30) -> str:
        """The last lines of the node's log and stdout, for error messages."""
        node = self._node(node_id)
        out = [f"--- node {node_id} ({node.role}) {node.workdir}"]
        for path in (node.server_log, node.stdout_log):
            if path.exists():
                out.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(out)

    # --- Kafka's tools --------------------------------------------------------------------------------

    def admin(self, main_class: str, args: Sequence[str], timeout: float = 120.0) -> str:
        """Run one of Kafka's tools; returns its stdout.

        ``{bootstrap}`` in ``args`` becomes `bootstrap_servers`, ``{bootstrap_controller}``
        `bootstrap_controllers`; on a SASL_SSL cluster ``--command-config <admin.properties>`` goes first.
        """
        subst = [
            a.replace("{bootstrap_controller}", self.bootstrap_controllers).replace(
                "{bootstrap}", self.bootstrap_servers
            )
            for a in args
        ]
        if self.admin_properties is not None and "--command-config" not in subst:
            subst = ["--command-config", str(self.admin_properties), *subst]
        return run_tool(main_class, subst, timeout=timeout)

    def _bootstrap_args(self) -> list[str]:
        if self.broker_ids:
            return ["--bootstrap-server", "{bootstrap}"]
        return ["--bootstrap-controller", "{bootstrap_controller}"]

    def describe_status_text(self) -> str:
        return self.admin(
            METADATA_QUORUM_COMMAND,
            ["--bootstrap-controller", "{bootstrap_controller}", "describe", "--status"],
        )

    def describe_status(self) -> dict[str, Any]:
        """``kafka-metadata-quorum --bootstrap-controller ... describe --status`` as a dict (``LeaderId``...)."""
        return parse_status(self.describe_status_text())

    def describe_replication(self) -> str:
        """``kafka-metadata-quorum --bootstrap-controller ... describe --replication``: its text."""
        return self.admin(
            METADATA_QUORUM_COMMAND,
            ["--bootstrap-controller", "{bootstrap_controller}", "describe", "--replication"],
        )

    def leader_id(self) -> int:
        """The quorum leader's id as ``describe --status`` reports it (-1 when there is none)."""
        return int(self.describe_status().get("LeaderId", -1))

    def quorum_state(self, node_id: int) -> dict[str, Any] | None:
        """The node's ``quorum-state`` file (``leaderId``, ``leaderEpoch``, ``votedId``...), None if absent."""
        path = self.metadata_dir(node_id) / "quorum-state"
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            return None

    def _elected_leader(self, not_in: Sequence[int]) -> int | None:
        """The running controller whose quorum-state says it leads the highest epoch any running one knows."""
        states = {i: self.quorum_state(i) for i in self.controller_ids if self.nodes[i].running}
        epochs = [int(st.get("leaderEpoch", -1)) for st in states.values() if st]
        if not epochs:
            return None
        top = max(epochs)
        for node_id, st in states.items():
            if (
                st
                and st.get("leaderId") == node_id
                and st.get("leaderEpoch") == top
                and node_id not in not_in
            ):
                return node_id
        return None

    def wait_for_leader(self, *, not_in: Sequence[int] = (), timeout: float = 60.0) -> int:
        """Wait until a running controller not in ``not_in`` leads the quorum; returns its id.

        Polls the controllers' ``quorum-state`` files (a leader writes its election there), then confirms
        with `leader_id` (``describe --status``), which is what the caller gets.
        """
        last = ""

        def confirmed() -> int | None:
            nonlocal last
            candidate = self._elected_leader(not_in)
            if candidate is None:
                return None
            try:
                leader = self.leader_id()
            except KafkaPeerError as exc:
                last = str(exc)
                return None
            if leader == candidate:
                return leader  # a controller id, never 0
            last = f"describe --status says {leader}, quorum-state files say {candidate}"
            return None

        return wait_until(
            confirmed,
            timeout,
            f"a leader other than {list(not_in)}",
            0.2,
            seen=lambda: last,
            fail=lambda msg: KafkaPeerError(
                f"{msg}\nquorum-state: { {i: self.quorum_state(i) for i in self.controller_ids} }"
            ),
        )

    def topics_create(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
    ) -> str:
        args = [
            *self._bootstrap_args(),
            "--create",
            "--topic",
            name,
            "--partitions",
            str(partitions),
            "--replication-factor",
            str(replication_factor),
        ]
        for k, v in (config or {}).items():
            args += ["--config", f"{k}={v}"]
        return self.admin(TOPIC_COMMAND, args)

    def topics_list(self) -> list[str]:
        return self.admin(TOPIC_COMMAND, [*self._bootstrap_args(), "--list"]).split()

    def add_user(self, name: str, password: str, mechanisms: Sequence[str] = SCRAM_MECHANISMS) -> None:
        """Create or update SCRAM credentials (``ConfigCommand --alter --entity-type users``)."""
        if not (_SAFE_SECRET.fullmatch(name) and _SAFE_SECRET.fullmatch(password)):
            raise ValueError(f"user names and passwords must match {_SAFE_SECRET.pattern}")
        # one request per mechanism: 4.3.1 refuses two alterations of one user's credentials in one request
        # ("DuplicateResourceException: A user credential cannot be altered twice in the same request")
        for mech in mechanisms:
            self.admin(
                CONFIG_COMMAND,
                [
                    *self._bootstrap_args(),
                    "--alter",
                    "--add-config",
                    f"{mech}=[password={password}]",
                    "--entity-type",
                    "users",
                    "--entity-name",
                    name,
                ],
            )
        self.users[name] = password

    def grant_cluster_action(self, user: str) -> str:
        """Allow ``User:<user>`` ClusterAction on the cluster (what Fetch/FetchSnapshot from a controller need)."""
        return self.admin(
            ACL_COMMAND,
            [
                *self._bootstrap_args(),
                "--add",
                "--allow-principal",
                f"User:{user}",
                "--operation",
                "ClusterAction",
                "--cluster",
            ],
        )

    def acl(self, *args: str) -> str:
        """``AclCommand`` with the cluster's bootstrap and admin config, e.g. ``acl("--list")``."""
        return self.admin(ACL_COMMAND, [*self._bootstrap_args(), *args])


if __name__ == "__main__":
    import sys
    import tempfile

    sec = sys.argv[1] if len(sys.argv) > 1 else "PLAINTEXT"
    with (
        tempfile.TemporaryDirectory(prefix="kafka-cluster-") as tmp,
        KafkaCluster(Path(tmp), security=sec) as c,
    ):
        print("started", {k: round(v, 2) for k, v in c.timings.items()})
        t = time.monotonic()
        print(c.describe_status())
        print(f"describe --status took {time.monotonic() - t:.2f}s")
        t = time.monotonic()
        c.stop()
        print(f"stop took {time.monotonic() - t:.2f}s")
