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
from waiting import wait_until

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
        def elected() -> int | None:
            for node_id in list(self.procs):
                try:
                    description, from_leader = QuorumClient(
                        [("127.0.0.1", self.ports[node_id])], CLUSTER, timeout_s=1.0
                    ).describe()
                except (ServiceError, OSError):
                    continue
                if from_leader and description.leader_id in self.procs:
                    return description.leader_id
            return None

        return wait_until(elected, timeout, f"a leader among the running voters {sorted(self.procs)}")


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


#: Acknowledgements the loader must add in each phase of the test (the loader makes about 280 a second on a
#: quiet 2-core machine): every configuration of the quorum, each kill and restart, is seen under load, and the
#: whole run far exceeds the final check's minimum of 100.
ACKS_PER_PHASE = 200
#: A phase's load or a restarted voter's catching up, on a loaded machine.
PHASE_TIMEOUT_S = 60.0


def acked(acks: Path) -> list[str]:
    """The loader's acknowledgements so far: whole lines only (it may be writing the next one)."""
    text = acks.read_text() if acks.exists() else ""
    return text.splitlines()[: text.count("\n")]


def wait_for_load(loader: subprocess.Popen[bytes], acks: Path) -> None:
    """Until the loader acknowledged `ACKS_PER_PHASE` more records (it fails at once if the loader died)."""
    target = len(acked(acks)) + ACKS_PER_PHASE

    def loaded() -> bool:
        assert loader.poll() is None, f"the loader exited with {loader.returncode}"
        return len(acked(acks)) >= target

    wait_until(
        loaded,
        PHASE_TIMEOUT_S,
        f"{ACKS_PER_PHASE} more acknowledgements (up to {target})",
        seen=lambda: len(acked(acks)),
    )


def wait_for_rejoin(cluster: Cluster, node_id: int, acks: Path) -> None:
    """Until the restarted voter serves as committed the last record acknowledged before it was back: it has
    caught up and is a full member again before the next fault."""
    lines = acked(acks)
    offset = int(lines[-1].split(" ", 1)[0]) if lines else 0

    def holds() -> bool:
        client = ObserverClient([("127.0.0.1", cluster.ports[node_id])], CLUSTER, timeout_s=1.0)
        try:
            return bool(client.fetch(offset, 1, 200))
        finally:
            client.close()

    wait_until(
        holds,
        PHASE_TIMEOUT_S,
        f"restarted voter {node_id} serving offset {offset} as committed",
        retry=(ServiceError, OSError),  # not listening yet, or no leader known to it yet
    )


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
        wait_for_load(loader, acks)
        leader = cluster.leader()
        cluster.kill9(leader)
        cluster.leader()  # a new one among the survivors
        wait_for_load(loader, acks)
        cluster.start(leader)
        wait_for_rejoin(cluster, leader, acks)
        wait_for_load(loader, acks)
        new_leader = cluster.leader()
        follower = next(i for i in (1, 2, 3) if i != new_leader)
        cluster.kill9(follower)
        wait_for_load(loader, acks)
        cluster.start(follower)
        wait_for_rejoin(cluster, follower, acks)
        wait_for_load(loader, acks)
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
