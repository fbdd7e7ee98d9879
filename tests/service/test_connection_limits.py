"""Issue 25: idle connections time out, unproven ones make room for new ones, voters keep theirs, refusals are
logged once a minute, and `quorum append` fails in one line."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import pytest
from service_helpers import CLUSTER, fast_config
from waiting import wait_until

from kraftlake.cli import main
from kraftlake.service import LocalQuorum, ObserverClient


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end closed `sock` (without reading from it)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_idle_connections_time_out_and_new_clients_get_in_past_the_cap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    quorum = LocalQuorum(
        3,
        tmp_path / "q",
        CLUSTER,
        fsync=False,
        quorum=fast_config(),
        node_options={"max_connections": 12, "reserved_connections": 6, "connections_max_idle_ms": 1000},
    )
    quorum.start()
    try:
        leader = quorum.wait_for_leader()
        leader.append([b"before"]).result(10)
        host, port = quorum.endpoints[leader.node_id]
        with caplog.at_level("INFO", logger="kraftlake.service.connections"):
            idle = [socket.create_connection((host, port), timeout=5) for _ in range(30)]
            # all 30 admitted: all but the unproven share (max_connections - reserved_connections) evicted
            wait_until(
                lambda: sum(map(closed_by_peer, idle)) >= 30 - (12 - 6),
                5,
                "24 of the 30 idle connections evicted",
                0.01,
                seen=lambda: sum(map(closed_by_peer, idle)),
            )
            # the voters' own connections (proven by their requests) stay: appends commit
            leader.append([b"during"]).result(10)
            # a new client gets in: the oldest unproven connection makes room
            observer = ObserverClient([(host, port)], CLUSTER)
            assert [e.value for e in observer.fetch(0, max_wait_ms=0) if not e.is_control][:1] == [b"before"]
            observer.close()
            # and the idle ones are closed by the voter after connections.max.idle.ms (1 s here)
            deadline = time.monotonic() + 5
            for sock in idle:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                with contextlib.suppress(ConnectionResetError):
                    assert sock.recv(1) == b""
                sock.close()
            leader.append([b"after"]).result(10)
        evicted = [r for r in caplog.records if "closing the oldest unproven one" in r.getMessage()]
        idle_closed = [r for r in caplog.records if "closing a connection idle" in r.getMessage()]
        # 24 evictions and the idle closes, logged once per cause a minute
        assert len(evicted) == 1 and 1 <= len(idle_closed) <= 3
    finally:
        quorum.stop()


def test_quorum_append_to_a_quorum_closing_every_connection_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a voter whose slots were all held did to `quorum append`: it ended in a ConnectionError traceback."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def close_everything() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                conn.close()

    threading.Thread(target=close_everything, daemon=True).start()
    secret = tmp_path / "append.secret"
    secret.write_text("x\n")
    try:
        argv = ["--bootstrap", f"127.0.0.1:{port}", "--append-secret", str(secret), "--timeout", "0.5"]
        code = main(["quorum", "append", *argv, "v"])
    finally:
        server.close()
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("kraftlake quorum: error: ")
