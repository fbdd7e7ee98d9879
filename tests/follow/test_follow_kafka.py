"""`kraftlake follow` against a live single-node Kafka 4.3.1 (started from the jar cache on 127.0.0.1).

The mirror must equal the controller's own log record for record (``kafka-dump-log`` on both), resume after a
stop without a gap or a duplicate, and refuse what is not a controller listener with a one-line error.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from peers.kafka import NODE_ID, WORKLOAD, KafkaPeer
from waiting import wait_until

from kraftlake import kafka_tools
from kraftlake.cli import main
from kraftlake.follow.errors import ClusterIdMismatchError, FollowError, NotAControllerError
from kraftlake.follow.first_contact import ObserverIdError
from kraftlake.follow.follower import Follower
from kraftlake.follow.lock import LockedError
from kraftlake.follow.mirror import MetadataMirror
from kraftlake.follow.observer import Endpoint
from kraftlake.image import image_at
from kraftlake.logformat import read_meta_properties
from kraftlake.logformat.reader import iter_file_batches
from kraftlake.wire.client_config import parse_client_properties
from kraftlake.wire.errors import ConnectError, SecurityConfigError, TlsError, WireError

pytestmark = pytest.mark.kafka
#: How long the controller stays down in the outage test: past what ``--give-up 5`` would allow, so that the
#: service with ``--give-up never`` is seen to outlive an outage a patient-but-bounded follower would not.
OUTAGE_S = 8.0


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


# -- issue 29: a follower one can leave running -----------------------------------------------------------------


def test_the_cluster_id_is_recorded_on_first_contact_and_another_refused(
    kafka: KafkaPeer, tmp_path: Path
) -> None:
    with MetadataMirror(tmp_path, fsync=False) as mirror:  # no --cluster-id
        Follower(controller(kafka), mirror, give_up_s=20).run(idle_stop_s=0.5)
    assert read_meta_properties(tmp_path / "meta.properties").cluster_id == kafka.cluster_id
    # a mirror of another cluster: refused at the first contact, naming both ids, nothing fetched
    other = tmp_path / "other"
    with MetadataMirror(other, cluster_id="AAAAAAAAAAAAAAAAAAAABQ", fsync=False) as mirror:
        with pytest.raises(
            ClusterIdMismatchError, match=f"cluster {kafka.cluster_id}.*AAAAAAAAAAAAAAAAAAAABQ"
        ):
            Follower(controller(kafka), mirror, give_up_s=20).run(idle_stop_s=0.5)
        assert mirror.position.log_end == 0


def test_an_observer_id_of_the_quorums_nodes_is_refused(kafka: KafkaPeer, tmp_path: Path) -> None:
    # the peer is one process, controller and broker with node id 1
    with MetadataMirror(tmp_path, observer_id=NODE_ID, fsync=False) as mirror:
        with pytest.raises(ObserverIdError, match=f"observer id {NODE_ID} is a voter"):
            Follower(controller(kafka), mirror, give_up_s=20).run(idle_stop_s=0.5)
        assert mirror.position.log_end == 0


def test_a_missing_truststore_is_refused_before_any_connection(kafka: KafkaPeer, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    security = parse_client_properties(
        f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={missing}\n",
        "client.properties",
    )
    started = time.monotonic()
    with (
        MetadataMirror(tmp_path / "m", fsync=False) as mirror,
        pytest.raises(SecurityConfigError, match=str(missing)),
    ):
        Follower(controller(kafka), mirror, security=security, give_up_s=10).run(idle_stop_s=0.5)
    assert time.monotonic() - started < 2  # not retried as a network error until the give-up time


def test_until_offset_stops_at_the_batch_holding_it(kafka: KafkaPeer, tmp_path: Path) -> None:
    with MetadataMirror(tmp_path / "first", fsync=False) as mirror:
        start = Follower(controller(kafka), mirror, give_up_s=20).run(until_offset=0).log_end  # the snapshot

    def batches_from_start() -> list[tuple[int, int]]:
        theirs = [
            (b.base_offset, b.last_offset) for seg in segments(kafka.log_dir) for b in iter_file_batches(seg)
        ]
        return sorted(b for b in theirs if b[0] >= start)

    def six_batches() -> list[tuple[int, int]] | None:
        batches = batches_from_start()
        return batches if len(batches) > 5 else None

    # the controller's NoOps, one batch per 500 ms
    later = wait_until(
        six_batches, 30, f"6 batches from {start} in the controller's log", 0.5, seen=batches_from_start
    )
    base, last = later[3]
    target = base if base == last else base + 1
    # the mirror resumes at its end, inside the controller's log: one fetch brings all of it, only the batches
    # up to the one holding `target` are written
    with MetadataMirror(tmp_path / "first", fsync=False) as mirror:
        progress = Follower(controller(kafka), mirror, give_up_s=20).run(until_offset=target)
    assert progress.log_end == last + 1
    ours = [b.last_offset for seg in segments(tmp_path / "first") for b in iter_file_batches(seg)]
    assert ours[-1] == last


def test_one_follower_per_mirror(
    kafka: KafkaPeer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MetadataMirror(tmp_path, fsync=False):
        argv = ["follow", "--bootstrap-controller", f"127.0.0.1:{kafka.controller_port}"]
        code = main([*argv, "--data-dir", str(tmp_path), "--idle-stop", "0.5", "--quiet", "--no-fsync"])
        err = capsys.readouterr().err
        assert code == 2 and f"process {os.getpid()}" in err and len(err.strip().splitlines()) == 1
    # the lock of a process killed -9 is taken over
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from kraftlake.follow.mirror import MetadataMirror; "
            "m = MetadataMirror(sys.argv[1], fsync=False); print('held', flush=True); time.sleep(600)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        with pytest.raises(LockedError, match=f"process {holder.pid}"):
            MetadataMirror(tmp_path, fsync=False)
    finally:
        holder.kill()
        holder.wait(10)
    with MetadataMirror(tmp_path, fsync=False) as mirror:
        assert Follower(controller(kafka), mirror, give_up_s=20).run(idle_stop_s=0.5).log_end > 0


def test_a_service_outlives_a_controller_outage(kafka: KafkaPeer, tmp_path: Path) -> None:
    """``--give-up never``: the controller is stopped for longer than the default give-up time would allow a
    follower with ``--give-up 5``; the service keeps retrying, says so in its status file, and carries on
    when the controller is back. (Last in the module: it restarts the peer.)"""
    status_file = tmp_path / "status.json"
    args = ["follow", "--bootstrap-controller", f"127.0.0.1:{kafka.controller_port}", "--data-dir"]
    argv = [*args, str(tmp_path / "m"), "--give-up", "never", "--status-file", str(status_file)]
    service = subprocess.Popen(
        [sys.executable, "-m", "kraftlake.cli", *argv, "--quiet", "--no-fsync", "--progress-every", "0.5"],
        stderr=subprocess.PIPE,
    )
    try:

        def status() -> dict[str, Any]:
            return json.loads(status_file.read_text()) if status_file.exists() else {}

        def wait_for(check: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
            def checked() -> dict[str, Any] | None:
                doc = status()
                if doc and check(doc):
                    return doc
                assert service.poll() is None, service.stderr.read() if service.stderr else ""
                return None

            return wait_until(checked, timeout, what, 0.2, seen=status)

        before = wait_for(lambda d: d["lag"] == 0 and d["offset"] > 0, 60, "caught up")
        kafka.stop()
        outage = time.monotonic()
        down = wait_for(
            lambda d: d["last_error"] != "" and d["last_progress_age_s"] > 6, 60, "the outage seen"
        )
        assert down["state"] == "following" and down["offset"] >= before["offset"]
        assert before["leader"] == NODE_ID and down["leader"] == -1  # not the leader that stopped answering
        # a follower with a give-up time stops on the same outage, naming the cause
        with (
            MetadataMirror(tmp_path / "impatient", fsync=False) as mirror,
            pytest.raises((FollowError, WireError), match="no controller answered"),
        ):
            Follower(controller(kafka), mirror, give_up_s=2).run(idle_stop_s=0.5)
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - outage)))  # the outage's length is what is tested
        kafka.start()
        kafka.admin(WORKLOAD[3])
        after = wait_for(lambda d: d["offset"] > down["offset"] and d["last_error"] == "", 120, "carried on")
        assert after["state"] == "following" and service.poll() is None
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(30)
    assert status()["state"] == "stopped"
