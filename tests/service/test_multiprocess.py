"""3 voters as separate processes, appends under load from a client process, kill -9 of leader and follower.

Every acknowledged record must be present exactly once, in order, at its acknowledged offset, on every voter.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftlake.service import ObserverClient, QuorumClient
from kraftlake.service.errors import ServiceError, TransportError

CLUSTER = "mp-test"
HERE = Path(__file__).parent


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Cluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.secret = self.root / "append.secret"
        self.secret.write_text("test-append-credential\n")

    def start(self, node_id: int) -> None:
        log = open(self.root / f"node-{node_id}.out", "ab")  # noqa: SIM115 - owned by the process
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
                "--append-secret",
                str(self.secret),
                "--quiet",
                "--election-timeout-ms",
                "300",
                "--fetch-timeout-ms",
                "600",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill9(self, node_id: int) -> None:
        proc = self.procs.pop(node_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait(10)
        self.procs.clear()

    def endpoints(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.ports.values()]

    def leader(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node_id in list(self.procs):
                try:
                    description, from_leader = QuorumClient(
                        [("127.0.0.1", self.ports[node_id])], CLUSTER, timeout_s=1.0
                    ).describe()
                except (ServiceError, OSError):
                    continue
                if from_leader and description.leader_id in self.procs:
                    return description.leader_id
            time.sleep(0.1)
        raise AssertionError("no leader elected")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop_all()


def read_all(port: int, end: int) -> list[tuple[int, bytes]]:
    client = ObserverClient([("127.0.0.1", port)], CLUSTER, timeout_s=5.0)
    out: list[tuple[int, bytes]] = []
    offset = 0
    deadline = time.monotonic() + 20
    while offset < end and time.monotonic() < deadline:
        try:
            entries = client.fetch(offset, 5000, 500)
        except TransportError:  # a voter restarted a moment ago may not listen yet (a loaded machine)
            time.sleep(0.1)
            continue
        for entry in entries:
            if not entry.is_control:
                out.append((entry.offset, entry.value))
            offset = entry.offset + 1
    client.close()
    assert offset >= end, f"voter on {port} stopped at {offset} < {end}"
    return out


@pytest.mark.slow
def test_kill9_leader_and_follower_under_load(cluster: Cluster, tmp_path: Path) -> None:
    for node_id in (1, 2, 3):
        cluster.start(node_id)
    cluster.leader()
    acks, stop = tmp_path / "acks.txt", tmp_path / "stop"
    loader = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "mp_loader.py"),
            CLUSTER,
            str(acks),
            str(stop),
            str(cluster.secret),
            *(f"127.0.0.1:{p}" for p in cluster.ports.values()),
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        time.sleep(2.0)
        leader = cluster.leader()
        cluster.kill9(leader)
        cluster.leader()  # a new one among the survivors
        time.sleep(1.5)
        cluster.start(leader)
        time.sleep(1.5)
        new_leader = cluster.leader()
        follower = next(i for i in (1, 2, 3) if i != new_leader)
        cluster.kill9(follower)
        time.sleep(1.5)
        cluster.start(follower)
        time.sleep(2.0)
    finally:
        stop.touch()
        loader.wait(30)
    lines = [line.split(" ", 1) for line in acks.read_text().splitlines()]
    acked = [(int(offset), value.encode()) for offset, value in lines]
    assert len(acked) > 100, "too little load to mean anything"
    assert [o for o, _ in acked] == sorted(o for o, _ in acked)
    end = acked[-1][0] + 1
    logs = {node_id: read_all(port, end) for node_id, port in cluster.ports.items()}
    for node_id, log in logs.items():
        upto = [item for item in log if item[0] < end]
        values = [v for _, v in upto]
        assert len(values) == len(set(values)), f"node {node_id}: a value is committed twice"
        positions = dict(upto)
        for offset, value in acked:
            assert positions.get(offset) == value, f"node {node_id}: acked {value!r} not at offset {offset}"
        assert upto == [item for item in logs[1] if item[0] < end], "voters disagree on committed data"
