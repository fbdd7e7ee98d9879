"""A standalone ZooKeeper server on 127.0.0.1 from a Kafka release's own jars (3.x ships ZooKeeper's).

`ZooKeeperNode` writes a ``zoo.cfg`` (data in its work directory, no admin server), runs
``org.apache.zookeeper.server.ZooKeeperServerMain`` through `Release.java_command` in its own session, waits until
it answers ``ruok`` and SIGKILLs it when it stops (a context manager), on a failure to start and at interpreter
exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path

from peers.kafka import KafkaPeerError, free_port
from peers.kafka_release import Release

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

_LIVE: weakref.WeakSet[ZooKeeperNode] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for node in list(_LIVE):
        node.kill()


class ZooKeeperNode:
    """One ZooKeeper server of `release`'s jars in `workdir`, listening on ``127.0.0.1:<port>``."""

    def __init__(self, release: Release, workdir: Path, heap: str = "96m") -> None:
        self.release = release
        self.workdir = Path(workdir)
        self.heap = heap
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        """The ``zookeeper.connect`` string."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "zookeeper.log"

    def _config(self) -> Path:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(
            f"dataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\ntickTime=500\n"
            "maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n"
        )
        return cfg

    def start(self, timeout: float = 30.0) -> ZooKeeperNode:
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = self.release.java_command(
            MAIN_CLASS, [str(self._config())], heap=self.heap, log_file=self.log_file
        )
        _LIVE.add(self)
        with (self.workdir / "zookeeper.stdout").open("ab") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def _ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._ruok():
            if self.process is None or self.process.poll() is not None:
                raise KafkaPeerError(f"ZooKeeper of Kafka {self.release.version} exited:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise KafkaPeerError(f"ZooKeeper did not answer ruok within {timeout:.0f}s:\n{self.tail()}")
            time.sleep(0.2)

    def tail(self, lines: int = 30) -> str:
        out = [f"--- zookeeper ({self.release.version}) {self.workdir}"]
        for path in (self.log_file, self.workdir / "zookeeper.stdout"):
            if path.exists():
                out.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(out)

    def kill(self) -> None:
        """SIGKILL the server and reap it; never raises."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        _LIVE.discard(self)

    def __enter__(self) -> ZooKeeperNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
