"""Run Apache Kafka's own tools from the local jar cache, and parse what `kafka-dump-log` prints.

Kafka's tools are the reference kraftlake is checked against (tests) and measured against (benchmarks):
``kafka-dump-log --cluster-metadata-decoder`` (`org.apache.kafka.tools.DumpLogSegments`) and
``kafka-metadata-shell`` (`org.apache.kafka.shell.MetadataShell`). They run as plain ``java -cp`` processes
from the jars `make setup` puts in ``$KRAFTLAKE_JARS`` (default ``<repo>/.cache/jars``); nothing is resolved at
run time. Pure Python: this module starts JVMs but imports nothing from Spark.

Two class paths, two releases: ``kafka/`` holds Kafka 4.4.0 (broker, controller, dump-log, the other tools),
``kafka-shell/`` Kafka 4.3.1's metadata shell with its own 4.3.1 dependencies: 4.4.0 published no
``kafka-shell`` artifact, and 4.3.1's shell does not run on 4.4.0's jars (classes it links moved). The shell
therefore reads what 4.3.1 reads: it knows no metadata.version past 4.4-IV0 (a log at 4.4.0's default, 4.4-IV2,
leaves its image without one, which its loader refuses to publish) and no ``UnregisterControllerRecord``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlake.errors import KraftlakeError

JARS_ENV = "KRAFTLAKE_JARS"

DUMP_LOG_CLASS = "org.apache.kafka.tools.DumpLogSegments"
METADATA_SHELL_CLASS = "org.apache.kafka.shell.MetadataShell"

# Tools log WARN and above to stderr, like Kafka's bin/ scripts with tools-log4j2.yaml; without a config
# log4j2 would print its default configuration to stdout and mix with the tool's output.
_TOOLS_LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""


class KafkaToolError(KraftlakeError):
    """Raised when a Kafka tool cannot be started, exits non-zero, or prints output that cannot be parsed."""


def jars_root() -> Path:
    """The jar cache root: ``$KRAFTLAKE_JARS`` or ``<repo>/.cache/jars``."""
    env = os.environ.get(JARS_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / ".cache" / "jars"


def kafka_jars_dir() -> Path:
    """The folder holding Kafka's jars (4.4.0); raises `KafkaToolError` if it does not hold kafka-clients."""
    folder = jars_root() / "kafka"
    if not any(folder.glob("kafka-clients-*.jar")):
        raise KafkaToolError(f"no Kafka jars in {folder} (run `make setup`, or set ${JARS_ENV})")
    return folder


def shell_jars_dir() -> Path:
    """The folder holding ``kafka-metadata-shell`` and its dependencies (Kafka 4.3.1's: see the module doc);
    raises `KafkaToolError` if it does not hold kafka-shell."""
    folder = jars_root() / "kafka-shell"
    if not any(folder.glob("kafka-shell-*.jar")):
        raise KafkaToolError(f"no kafka-shell jar in {folder} (run `make setup`, or set ${JARS_ENV})")
    return folder


def java_executable() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java`` when set, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise KafkaToolError("no `java` on PATH and no JAVA_HOME: Kafka's tools need a JDK 17+")
    return found


def tools_log4j2_config() -> Path:
    """A log4j2 configuration sending tool logs (WARN+) to stderr, written once per user to the temp dir."""
    path = Path(tempfile.gettempdir()) / f"kraftlake-tools-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _TOOLS_LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_TOOLS_LOG4J2)
        tmp.replace(path)
    return path


def java_command(
    main_class: str,
    args: Sequence[str],
    *,
    heap: str = "256m",
    log4j2_config: Path | None = None,
    jvm_options: Sequence[str] = (),
    jars_dir: Path | None = None,
) -> list[str]:
    """The argv that runs ``main_class`` with the jars of ``jars_dir`` (default `kafka_jars_dir`) on the
    class path."""
    config = log4j2_config if log4j2_config is not None else tools_log4j2_config()
    return [
        java_executable(),
        f"-Xmx{heap}",
        "-XX:+UseSerialGC",
        # short-lived tools: the C1 compiler alone starts faster and is plenty for a few thousand records
        "-XX:TieredStopAtLevel=1",
        f"-Dlog4j2.configurationFile={config}",
        *jvm_options,
        "-cp",
        f"{jars_dir if jars_dir is not None else kafka_jars_dir()}/*",
        main_class,
        *args,
    ]


def run_class(main_class: str, args: Sequence[str], *, timeout: float = 300.0) -> str:
    """Run a Kafka main class to completion and return its stdout; a non-zero exit raises `KafkaToolError`."""
    argv = java_command(main_class, args)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise KafkaToolError(f"{main_class} did not finish within {timeout:.0f}s") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-2000:]
        raise KafkaToolError(f"{main_class} exited with {done.returncode}: {tail}")
    return done.stdout


def dump_log(files: Iterable[str | os.PathLike[str]], *, timeout: float = 300.0) -> str:
    """``kafka-dump-log --cluster-metadata-decoder --files F1,F2,...``: its stdout.

    Segments (``.log``), snapshots (``.checkpoint``) and ``bootstrap.checkpoint`` may be mixed; one JVM
    dumps them all, in the order given.
    """
    names = [str(Path(f)) for f in files]
    if not names:
        raise KafkaToolError("dump_log needs at least one file")
    for name in names:
        if "," in name:
            raise KafkaToolError(f"kafka-dump-log splits --files on ',': cannot pass {name!r}")
    return run_class(
        DUMP_LOG_CLASS, ["--cluster-metadata-decoder", "--files", ",".join(names)], timeout=timeout
    )


class MetadataShellSession:
    """``kafka-metadata-shell --snapshot F`` driven interactively through a pipe.

    The shell's one-shot mode (command on its command line) runs the command as soon as the loader applied
    *anything*, so on a loaded machine it answers from a half-loaded image. Driving the interactive shell lets
    the caller ask for ``/image/provenance`` until the whole file is applied, then run its command once.
    """

    def __init__(
        self, snapshot: str | os.PathLike[str], *, heap: str = "256m", jvm_options: Sequence[str] = ()
    ) -> None:
        self.snapshot = str(snapshot)
        argv = java_command(
            METADATA_SHELL_CLASS,
            ["--snapshot", self.snapshot],
            heap=heap,
            jvm_options=jvm_options,
            jars_dir=shell_jars_dir(),
        )
        # a file, not a pipe: a chatty JVM never blocks on it; closed by close()
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1
        )
        self.lines: list[str] = []
        stdout = self.proc.stdout
        assert stdout is not None
        self._reader = threading.Thread(
            target=lambda: self.lines.extend(iter(stdout.readline, "")), daemon=True
        )
        self._reader.start()
        self._seen = 0

    def provenance(self, wait_s: float) -> list[str]:
        """Ask for ``/image/provenance``; the provenance lines printed since the last ask, after ``wait_s``."""
        if self.proc.poll() is not None:
            self._stderr.seek(0)
            raise KafkaToolError(
                f"{METADATA_SHELL_CLASS} exited with {self.proc.returncode} while loading "
                f"{self.snapshot}: {self._stderr.read()[-2000:]}"
            )
        self._send("cat /image/provenance\n")
        time.sleep(wait_s)
        new = self.lines[self._seen :]
        self._seen += len(new)
        return [line for line in new if "offset" in line and "epoch" in line]

    def finish(self, command: str, timeout: float) -> str:
        """Run ``command``, exit the shell, and return what the command printed (without the prompts)."""
        mark = len(self.lines)
        self._send(command + "\nexit\n")
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=60)
        return "".join(
            line.replace(">> ", "") for line in self.lines[mark:] if line.strip() not in (">>", "")
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()

    def _send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text)
        self.proc.stdin.flush()


def metadata_shell(
    snapshot: str | os.PathLike[str], command: str | Sequence[str], *, timeout: float = 120.0
) -> str:
    """``kafka-metadata-shell --snapshot F`` running ``command`` (e.g. ``"ls /image/topics/byName"``): its output.

    ``snapshot`` may be a ``.checkpoint`` or a ``.log`` segment; the shell replays it into an image. The
    command runs once ``/image/provenance`` stops changing (the whole file is applied; see
    :class:`MetadataShellSession`).
    """
    words = command.split() if isinstance(command, str) else list(command)
    shell = MetadataShellSession(snapshot)
    deadline = time.monotonic() + timeout
    try:
        last, stable = None, 0
        while stable < 3:
            if time.monotonic() > deadline:
                raise KafkaToolError(f"{METADATA_SHELL_CLASS} did not load {snapshot} within {timeout:.0f}s")
            answers = shell.provenance(0.3)
            if answers:
                stable = stable + 1 if answers[-1] == last else 1
                last = answers[-1]
        return shell.finish(" ".join(words), max(deadline - time.monotonic(), 5.0))
    finally:
        shell.close()


# ---------------------------------------------------------------------------------------------------------
# Parsing `kafka-dump-log --cluster-metadata-decoder` output


@dataclass(frozen=True)
class DumpedBatch:
    """One batch line: ``baseOffset: .. lastOffset: .. count: .. partitionLeaderEpoch: .. position: ..``."""

    base_offset: int
    last_offset: int
    count: int | None
    partition_leader_epoch: int
    is_control: bool
    is_transactional: bool
    position: int
    max_timestamp: int
    size: int
    magic: int
    compression: str
    crc: int
    is_valid: bool


@dataclass(frozen=True)
class DumpedRecord:
    """One record line.

    For a metadata record ``type`` is Kafka's `MetadataRecordType` name (``TOPIC_RECORD``), ``version`` its
    version and ``data`` the JSON Kafka prints. For a control record ``type`` is the name dump-log prints
    (``LeaderChange``, ``SnapshotHeader``, ``SnapshotFooter``, ``KRaftVersion``, ``KRaftVoters``), ``data``
    its JSON and ``version`` that JSON's ``version`` field (a control record's first field is its version).
    ``error`` holds Kafka's message when it could not decode the payload (``Error at N, skipping. ...``).
    """

    offset: int
    timestamp: int
    timestamp_type: str
    key_size: int
    value_size: int
    batch_offset: int
    control: bool
    type: str | None
    version: int | None
    data: dict[str, Any] | None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{"offset", "type", "version", "data", "control"}`` (plus ``"error"`` when Kafka failed)."""
        out: dict[str, Any] = {
            "offset": self.offset,
            "type": self.type,
            "version": self.version,
            "data": self.data,
            "control": self.control,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class DumpedFile:
    """What dump-log printed for one file: its kind, batches, records and any trailing-bytes warning."""

    path: str
    kind: str  # "segment", "snapshot" or "bootstrap"
    start_offset: int | None = None  # a segment's base offset (from its name)
    snapshot_end_offset: int | None = None
    snapshot_epoch: int | None = None
    batches: list[DumpedBatch] = field(default_factory=list)
    records: list[DumpedRecord] = field(default_factory=list)
    invalid_trailing_bytes: int = 0


_DUMPING = re.compile(r"^Dumping (?P<path>.+)$")
_LOG_START = re.compile(r"^Log starting offset: (?P<offset>-?\d+)$")
_SNAPSHOT = re.compile(r"^Snapshot end offset: (?P<offset>-?\d+), epoch: (?P<epoch>-?\d+)$")
_TRAILING = re.compile(r"^Found (?P<bytes>\d+) invalid bytes at the end of (?P<name>.+)$")
_BATCH = re.compile(
    r"^baseOffset: (?P<base>-?\d+) lastOffset: (?P<last>-?\d+) count: (?P<count>-?\d+|null)"
    r" .*?partitionLeaderEpoch: (?P<epoch>-?\d+) isTransactional: (?P<txn>true|false)"
    r" isControl: (?P<control>true|false) .*? position: (?P<position>\d+)"
    r" (?P<ttype>\w+): (?P<ts>-?\d+) size: (?P<size>\d+) magic: (?P<magic>\d+)"
    r" compresscodec: (?P<codec>\w+) crc: (?P<crc>-?\d+) isvalid: (?P<valid>true|false)$"
)
_RECORD = re.compile(
    r"^\| offset: (?P<offset>-?\d+) (?P<ttype>\w+): (?P<ts>-?\d+) keySize: (?P<ksize>-?\d+)"
    r" valueSize: (?P<vsize>-?\d+) sequence: -?\d+ headerKeys: \[[^\]]*\](?P<rest>.*)$"
)
# control records: " LeaderChange: {...}" (with a colon) or " SnapshotHeader {...}" (without)
_CONTROL = re.compile(r"^ (?P<name>\w+):? (?P<json>\{.*\})$")
_UNKNOWN_CONTROL = re.compile(r"^ controlType: (?P<name>\S+)\((?P<id>-?\d+)\)$")
_PAYLOAD = re.compile(r"^ payload: (?P<payload>.*)$")


def _file_kind(path: str) -> str:
    name = Path(path).name
    if name == "bootstrap.checkpoint":
        return "bootstrap"
    if name.endswith(".checkpoint"):
        return "snapshot"
    return "segment"


def _json_object(text: str, line_no: int) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KafkaToolError(f"dump-log output line {line_no}: bad JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise KafkaToolError(f"dump-log output line {line_no}: expected a JSON object, got {text[:80]!r}")
    return value


def _parse_record(match: re.Match[str], batch: DumpedBatch, line_no: int) -> DumpedRecord:
    rest = match.group("rest")
    common: dict[str, Any] = {
        "offset": int(match.group("offset")),
        "timestamp": int(match.group("ts")),
        "timestamp_type": match.group("ttype"),
        "key_size": int(match.group("ksize")),
        "value_size": int(match.group("vsize")),
        "batch_offset": batch.base_offset,
        "control": batch.is_control,
    }
    if batch.is_control:
        control = _CONTROL.match(rest)
        if control is not None:
            data = _json_object(control.group("json"), line_no)
            version = data.get("version")
            return DumpedRecord(
                **common,
                type=control.group("name"),
                version=version if isinstance(version, int) else None,
                data=data,
            )
        unknown = _UNKNOWN_CONTROL.match(rest)
        if unknown is not None:
            return DumpedRecord(**common, type=unknown.group("name"), version=None, data=None)
        raise KafkaToolError(f"dump-log output line {line_no}: unrecognised control record {rest[:120]!r}")
    if rest == "":
        # a record with a null value: dump-log prints no payload
        return DumpedRecord(**common, type=None, version=None, data=None)
    payload = _PAYLOAD.match(rest)
    if payload is None:
        raise KafkaToolError(f"dump-log output line {line_no}: unrecognised record contents {rest[:120]!r}")
    text = payload.group("payload")
    if not text.startswith("{"):
        return DumpedRecord(**common, type=None, version=None, data=None, error=text)
    envelope = _json_object(text, line_no)
    try:
        return DumpedRecord(
            **common, type=str(envelope["type"]), version=int(envelope["version"]), data=envelope["data"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise KafkaToolError(f"dump-log output line {line_no}: payload lacks type/version/data") from exc


def parse_dump_log(text: str) -> list[DumpedFile]:
    """Parse ``kafka-dump-log --cluster-metadata-decoder`` output into one `DumpedFile` per dumped file.

    Lines the tool prints outside of files (the non-consecutive offsets summary) are ignored; any other
    line that does not fit the format raises `KafkaToolError`, so a change in Kafka's output cannot go
    unnoticed.
    """
    files: list[DumpedFile] = []
    current: DumpedFile | None = None
    batch: DumpedBatch | None = None
    in_summary = False
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        dumping = _DUMPING.match(line)
        if dumping is not None:
            current = DumpedFile(path=dumping.group("path"), kind=_file_kind(dumping.group("path")))
            files.append(current)
            batch = None
            in_summary = False
            continue
        if in_summary:
            continue
        if current is None:
            raise KafkaToolError(f"dump-log output line {line_no}: {line[:120]!r} before any 'Dumping' line")
        if (m := _RECORD.match(line)) is not None:
            if batch is None:
                raise KafkaToolError(f"dump-log output line {line_no}: a record before any batch")
            current.records.append(_parse_record(m, batch, line_no))
        elif (m := _BATCH.match(line)) is not None:
            count = m.group("count")
            batch = DumpedBatch(
                base_offset=int(m.group("base")),
                last_offset=int(m.group("last")),
                count=None if count == "null" else int(count),
                partition_leader_epoch=int(m.group("epoch")),
                is_control=m.group("control") == "true",
                is_transactional=m.group("txn") == "true",
                position=int(m.group("position")),
                max_timestamp=int(m.group("ts")),
                size=int(m.group("size")),
                magic=int(m.group("magic")),
                compression=m.group("codec"),
                crc=int(m.group("crc")),
                is_valid=m.group("valid") == "true",
            )
            current.batches.append(batch)
        elif (m := _LOG_START.match(line)) is not None:
            current.start_offset = int(m.group("offset"))
        elif (m := _SNAPSHOT.match(line)) is not None:
            current.snapshot_end_offset = int(m.group("offset"))
            current.snapshot_epoch = int(m.group("epoch"))
        elif line == "KRaft bootstrap snapshot":
            current.kind = "bootstrap"
        elif (m := _TRAILING.match(line)) is not None:
            current.invalid_trailing_bytes = int(m.group("bytes"))
        elif line.startswith("Non-consecutive offsets in"):
            in_summary = True
        else:
            raise KafkaToolError(f"dump-log output line {line_no}: unrecognised line {line[:120]!r}")
    return files


def dump_log_parsed(files: Iterable[str | os.PathLike[str]], *, timeout: float = 300.0) -> list[DumpedFile]:
    """Run `dump_log` on ``files`` and parse its output."""
    return parse_dump_log(dump_log(files, timeout=timeout))
