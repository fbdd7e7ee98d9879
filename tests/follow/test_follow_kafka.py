"""`kraftlake follow` against a live single-node Kafka 4.3.1 (started from the jar cache on 127.0.0.1).

The mirror must equal the controller's own log record for record (``kafka-dump-log`` on both), resume after a
stop without a gap or a duplicate, and refuse what is not a controller listener with a one-line error.
"""

from __future__ import annotations

import glob
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peers.kafka import WORKLOAD, KafkaPeer

from kraftlake import kafka_tools
from kraftlake.cli import main
from kraftlake.follow.errors import FollowError, NotAControllerError
from kraftlake.follow.follower import Follower
from kraftlake.follow.mirror import MetadataMirror
from kraftlake.follow.observer import Endpoint
from kraftlake.image import image_at
from kraftlake.wire.client_config import parse_client_properties
from kraftlake.wire.errors import ConnectError, TlsError, WireError

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaPeer]:
    with KafkaPeer(Path(tmp_path_factory.mktemp("follow-kafka"))) as peer:
        peer.format()
        peer.start()
        for step in WORKLOAD[:3]:
            peer.admin(step)
        # the first test starts from a snapshot: on a loaded machine the controller may not have written one yet
        peer.wait_for_snapshot_after([0], timeout=60)
        yield peer


def controller(peer: KafkaPeer) -> list[Endpoint]:
    return [Endpoint("127.0.0.1", peer.controller_port)]


def follow(peer: KafkaPeer, data_dir: Path, **run: Any) -> Any:
    with MetadataMirror(data_dir, cluster_id=peer.cluster_id, fsync=False) as mirror:
        return Follower(controller(peer), mirror, give_up_s=20).run(**run)


def dumped(files: list[str]) -> dict[int, dict[str, Any]]:
    return {r.offset: r.as_dict() for f in kafka_tools.dump_log_parsed(sorted(files)) for r in f.records}


def segments(directory: Path) -> list[str]:
    return glob.glob(str(directory / "__cluster_metadata-0" / "*.log"))


def test_mirror_equals_the_controllers_log_and_resumes(kafka: KafkaPeer, tmp_path: Path) -> None:
    first = follow(kafka, tmp_path, idle_stop_s=1.0)
    # the controller had snapshotted already: the mirror starts from its snapshot, as a broker would
    assert first.snapshots == 1 and first.log_end > 0
    for step in WORKLOAD[3:6]:
        kafka.admin(step)
    second = follow(kafka, tmp_path, idle_stop_s=1.0)
    assert second.snapshots == 0 and second.log_end > first.log_end
    ours = dumped(segments(tmp_path))
    theirs = dumped(segments(kafka.log_dir))
    offsets = sorted(ours)
    # contiguous, no duplicate, and every record is the controller's own
    assert offsets == list(range(offsets[0], offsets[-1] + 1))
    assert all(ours[o] == theirs[o] for o in offsets)
    # the mirror's snapshot is the controller's file, byte for byte
    (snapshot,) = sorted((tmp_path / "__cluster_metadata-0").glob("*.checkpoint"))
    assert snapshot.read_bytes() == (kafka.log_dir / "__cluster_metadata-0" / snapshot.name).read_bytes()
    # the oracle reads the mirror: the image at its end has the workload's topics
    image = image_at(tmp_path, offsets[-1])
    assert {"orders", "payments"} <= set(image.topics_by_name)


def test_follow_command_until_offset(
    kafka: KafkaPeer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "follow",
            "--bootstrap-controller",
            f"127.0.0.1:{kafka.controller_port}",
            "--data-dir",
            str(tmp_path),
            "--cluster-id",
            kafka.cluster_id,
            "--idle-stop",
            "0.5",
            "--quiet",
            "--no-fsync",
        ]
    )
    assert code == 0
    assert "log end" in capsys.readouterr().out
    # the observer id is kept in meta.properties, and Kafka lists it as an observer while it fetches
    meta = (tmp_path / "meta.properties").read_text()
    observer_id = int(next(line.split("=")[1] for line in meta.splitlines() if line.startswith("node.id")))
    stop = threading.Event()
    mirror = MetadataMirror(tmp_path, fsync=False)
    thread = threading.Thread(target=lambda: Follower(controller(kafka), mirror).run(stop), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        text = ""
        while time.monotonic() < deadline and str(observer_id) not in text:
            text = kafka_tools.run_class(
                "org.apache.kafka.tools.MetadataQuorumCommand",
                ["--bootstrap-controller", f"127.0.0.1:{kafka.controller_port}", "describe", "--replication"],
            )
        assert any(
            line.split()[0] == str(observer_id) and "Observer" in line for line in text.splitlines()[1:]
        )
    finally:
        stop.set()
        thread.join(10)
        mirror.close()


def test_a_broker_listener_is_not_a_controller(kafka: KafkaPeer, tmp_path: Path) -> None:
    with (
        MetadataMirror(tmp_path, fsync=False) as mirror,
        pytest.raises(NotAControllerError, match="not a controller listener"),
    ):
        Follower([Endpoint("127.0.0.1", kafka.broker_port)], mirror, give_up_s=10).run()
    assert not segments(tmp_path) or all(Path(s).stat().st_size == 0 for s in segments(tmp_path))


def test_unreachable_controllers_fail_with_the_cause(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with MetadataMirror(tmp_path, fsync=False) as mirror, pytest.raises(ConnectError, match="refused"):
        Follower([Endpoint("127.0.0.1", port)], mirror, give_up_s=2).run()
    assert time.monotonic() - started < 10


def test_tls_to_a_plaintext_listener_is_named(kafka: KafkaPeer, tmp_path: Path) -> None:
    security = parse_client_properties("security.protocol=SSL\n", "client.properties")
    with MetadataMirror(tmp_path, fsync=False) as mirror, pytest.raises(TlsError, match="TLS"):
        Follower(controller(kafka), mirror, security=security, give_up_s=5).run()


def test_garbage_and_oversized_frames_from_a_peer(tmp_path: Path) -> None:
    """A peer that answers with junk or announces a huge frame: a clear error naming it, no hang, nothing written."""
    cases = {
        b"\x7f\xff\xff\xff" + b"x" * 16: "frame of 2147483647 bytes",
        b"\x00\x00\x00\x08garbage!": "did not answer ApiVersions as a Kafka server would",
        b"HTTP/1.1 400 Bad\r\n\r\n": "not a Kafka response",
    }
    for reply, text in cases.items():
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        port = server.getsockname()[1]
        done = threading.Event()

        def answer(srv: socket.socket = server, data: bytes = reply, stop: threading.Event = done) -> None:
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except TimeoutError:
                    continue
                conn.recv(65536)
                conn.sendall(data)
                conn.close()

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        started = time.monotonic()
        try:
            with (
                MetadataMirror(tmp_path / str(port), fsync=False) as mirror,
                pytest.raises((FollowError, WireError), match=text),
            ):
                Follower([Endpoint("127.0.0.1", port)], mirror, timeout_s=2, give_up_s=1).run()
        finally:
            done.set()
            t.join(5)
            server.close()
        assert time.monotonic() - started < 10
        assert mirror.position.log_end == 0
