"""Following a 3-controller Kafka 4.3.1 quorum with a broker, all separate processes on 127.0.0.1.

The module's cluster snapshots every few KiB and keeps almost no log behind its snapshots, so by the last test
(Kafka's log cleaner first runs 60 s after a controller starts) a mirror stopped early has fallen behind the
leader's log start and must install a snapshot to go on.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peers.kafka_cluster import CONFIG_COMMAND, FIRST_BROKER_ID, KafkaCluster
from waiting import wait_until

from kraftlake import kafka_tools
from kraftlake.follow.errors import AuthorizationError, ClusterIdMismatchError
from kraftlake.follow.follower import Follower, FollowProgress
from kraftlake.follow.mirror import MetadataMirror
from kraftlake.follow.observer import parse_endpoints
from kraftlake.image import image_at
from kraftlake.wire.client_config import load_client_properties
from kraftlake.wire.errors import AuthenticationError, TlsError

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[2]
#: For a follower to reach what the quorum committed, on a loaded machine.
CATCH_UP_S = 60.0
#: Records each follower process of the kill -9 test adds to the mirror before it is killed (the controllers
#: commit a NoOp every 500 ms): each is killed mid-stream, and the mirror ends with more than the 10 records
#: `assert_mirror_is_the_log` needs to compare.
RECORDS_PER_ROUND = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(
        tmp_path_factory.mktemp("follow-quorum"),
        snapshot_bytes=4096,
        snapshot_interval_ms=2000,
        segment_bytes=16 * 1024,
        retention_bytes=1,
        retention_ms=1,
    ) as c:
        yield c


@pytest.fixture(scope="module")
def early_mirror(cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mirror followed only up to the cluster's start; the last test resumes it after retention ran."""
    path = tmp_path_factory.mktemp("early-mirror")
    # caught up can mean "with a high watermark of 0" while the quorum's first leader is still settling
    wait_until(
        lambda: follow(cluster, path, idle_stop_s=0.2).log_end,
        30,
        "a record in the early mirror",
        interval=0.5,
    )
    return path


def follow(
    cluster: KafkaCluster, path: Path, stop: threading.Event | None = None, **run: Any
) -> FollowProgress:
    with MetadataMirror(path, cluster_id=cluster.cluster_id, fsync=False) as mirror:
        follower = Follower(parse_endpoints(cluster.bootstrap_controllers), mirror, give_up_s=60)
        return follower.run(stop, **run)


class Background:
    """A follower on a thread, for tests that change the cluster meanwhile."""

    def __init__(self, cluster: KafkaCluster, path: Path) -> None:
        self.stop = threading.Event()
        self.result: list[Any] = []
        self.progress: FollowProgress | None = None  # the follower's own, updated as it goes
        self.thread = threading.Thread(
            target=lambda: self.result.append(self._run(cluster, path)), daemon=True
        )
        self.thread.start()

    def _run(self, cluster: KafkaCluster, path: Path) -> Any:
        try:
            return follow(cluster, path, self.stop, on_progress=self._seen, progress_every_s=0.1)
        except BaseException as exc:
            return exc

    def _seen(self, progress: FollowProgress) -> None:
        self.progress = progress

    def wait_until_caught_up(self, *, committed: int = 0, leader: int | None = None) -> FollowProgress:
        """Until the follower holds everything up to the leader's high watermark and at least `committed`
        records (a high watermark read from the quorum), following `leader` if given."""

        def caught_up() -> FollowProgress | None:
            assert not self.result, f"the follower stopped: {self.result}"
            p = self.progress
            if p is None or p.high_watermark <= 0 or p.lag or p.log_end < committed:
                return None
            return p if leader is None or p.leader_id == leader else None

        return wait_until(
            caught_up,
            CATCH_UP_S,
            f"the background follower caught up, at {committed} or later"
            + ("" if leader is None else f", following {leader}"),
            seen=lambda: self.progress.line() if self.progress else "no progress yet",
        )

    def finish(self) -> FollowProgress:
        self.stop.set()
        self.thread.join(60)
        (result,) = self.result
        if isinstance(result, BaseException):
            raise result
        return result


def high_watermark(cluster: KafkaCluster) -> int:
    """The quorum's high watermark as ``kafka-metadata-quorum describe --status`` reports it."""
    return int(cluster.describe_status()["HighWatermark"])


def records(files: list[str]) -> dict[int, dict[str, Any]]:
    """Offset -> record as ``kafka-dump-log --cluster-metadata-decoder`` prints it."""
    return {r.offset: r.as_dict() for f in kafka_tools.dump_log_parsed(sorted(files)) for r in f.records}


def log_files(metadata_dir: Path) -> list[str]:
    return glob.glob(str(metadata_dir / "*.log"))


def first_log_offset(mirror: Path) -> int:
    return min(int(Path(f).name[:20]) for f in log_files(mirror / "__cluster_metadata-0"))


def assert_mirror_is_the_log(cluster: KafkaCluster, mirror: Path, node: int) -> list[int]:
    """The mirror is contiguous from its first snapshot and equals node's own records where both have them."""
    ours = records(log_files(mirror / "__cluster_metadata-0"))
    theirs = records(log_files(cluster.metadata_dir(node)))
    offsets = sorted(ours)
    assert offsets == list(range(offsets[0], offsets[-1] + 1))
    shared = [o for o in offsets if o in theirs]
    assert len(shared) > 10
    assert all(ours[o] == theirs[o] for o in shared)
    return offsets


def test_follow_while_kafka_tools_change_the_cluster(
    cluster: KafkaCluster, early_mirror: Path, tmp_path: Path
) -> None:
    bg = Background(cluster, tmp_path)
    cluster.topics_create("orders", partitions=3)
    cluster.topics_create("scratch", partitions=2)
    cluster.admin(
        "org.apache.kafka.tools.TopicCommand",
        ["--bootstrap-server", "{bootstrap}", "--alter", "--topic", "orders", "--partitions", "5"],
    )
    cluster.admin(
        CONFIG_COMMAND,
        [
            "--bootstrap-server",
            "{bootstrap}",
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "orders",
            "--add-config",
            "retention.ms=3600000",
        ],
    )
    cluster.admin(
        "org.apache.kafka.tools.TopicCommand",
        ["--bootstrap-server", "{bootstrap}", "--delete", "--topic", "scratch"],
    )
    cluster.stop_node(FIRST_BROKER_ID)  # a controlled shutdown: fencing and leader changes
    cluster.start_node(FIRST_BROKER_ID)
    bg.wait_until_caught_up(committed=high_watermark(cluster))  # the tools' changes and the broker's return
    progress = bg.finish()
    assert progress.lag == 0 or progress.high_watermark - progress.log_end < 10
    leader = cluster.leader_id()
    offsets = assert_mirror_is_the_log(cluster, tmp_path, leader)
    # the oracle over the mirror agrees with the cluster
    image = image_at(tmp_path, offsets[-1])
    assert "orders" in image.topics_by_name and "scratch" not in image.topics_by_name
    assert len(image.topics_by_name["orders"].partitions) == 5


def test_kill_the_leader_while_following(cluster: KafkaCluster, tmp_path: Path) -> None:
    bg = Background(cluster, tmp_path)
    leader = cluster.leader_id()
    bg.wait_until_caught_up(leader=leader)  # following when the leader dies
    cluster.kill(leader)
    new_leader = cluster.wait_for_leader(not_in=[leader], timeout=60)
    cluster.topics_create("after-failover", partitions=1)
    bg.wait_until_caught_up(committed=high_watermark(cluster), leader=new_leader)
    progress = bg.finish()
    cluster.start_node(leader)
    assert progress.leader_id == new_leader and progress.epoch > 1
    offsets = assert_mirror_is_the_log(cluster, tmp_path, new_leader)
    assert "after-failover" in image_at(tmp_path, offsets[-1]).topics_by_name


def test_kill_9_the_follower_and_restart(cluster: KafkaCluster, tmp_path: Path) -> None:
    mirror, status_file = tmp_path / "mirror", tmp_path / "status.json"
    argv = [
        sys.executable,
        "-m",
        "kraftlake.cli",
        "follow",
        "--bootstrap-controller",
        cluster.bootstrap_controllers,
        "--data-dir",
        str(mirror),
        "--quiet",
        "--status-file",
        str(status_file),
        "--progress-every",
        "0.2",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def status() -> dict[str, Any]:
        return json.loads(status_file.read_text()) if status_file.exists() else {}

    def held(doc: dict[str, Any]) -> int:
        """Records in the mirror by the status: from its first snapshot (it starts from one) to its end."""
        snapshots = (mirror / "__cluster_metadata-0").glob("*.checkpoint")
        return doc["offset"] - min((int(p.name.split("-")[0]) for p in snapshots), default=0)

    for round_ in range(1, 3):
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def following(
            proc: subprocess.Popen[bytes] = proc, records: int = round_ * RECORDS_PER_ROUND
        ) -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            doc = status()
            return (
                doc.get("pid") == proc.pid
                and doc["high_watermark"] > 0
                and doc["lag"] == 0
                and held(doc) >= records
            )

        # killed while following, caught up, after adding records of its own
        wait_until(
            following,
            CATCH_UP_S,
            f"follower process {proc.pid} caught up, {round_ * RECORDS_PER_ROUND} records in the mirror",
            seen=status,
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    follow(cluster, mirror, idle_stop_s=0.5)
    assert_mirror_is_the_log(cluster, mirror, cluster.leader_id())


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("follow-sasl"), security="SASL_SSL", brokers=1) as c:
        yield c


def test_sasl_ssl_needs_cluster_action(sasl_cluster: KafkaCluster, tmp_path: Path) -> None:
    cluster = sasl_cluster
    cluster.add_user("mirror", "mirror-secret", mechanisms=("SCRAM-SHA-512",))
    props = cluster.client_properties("mirror", "mirror-secret", mechanism="SCRAM-SHA-512")
    security = load_client_properties(props)
    bootstrap = parse_endpoints(cluster.bootstrap_controllers)
    with (
        MetadataMirror(tmp_path / "refused", fsync=False) as mirror,
        pytest.raises(AuthorizationError, match=r"CLUSTER_ACTION.*--allow-principal User:mirror "),
    ):
        Follower(bootstrap, mirror, security=security, give_up_s=30).run()
    wrong = load_client_properties(cluster.client_properties("mirror", "wrong", mechanism="SCRAM-SHA-512"))
    with MetadataMirror(tmp_path / "wrong", fsync=False) as mirror, pytest.raises(AuthenticationError):
        Follower(bootstrap, mirror, security=wrong, give_up_s=30).run()
    # a plaintext client on the TLS listener is told so, at once
    with MetadataMirror(tmp_path / "plain", fsync=False) as mirror, pytest.raises(TlsError, match="TLS"):
        Follower(bootstrap, mirror, give_up_s=30).run()
    cluster.grant_cluster_action("mirror")
    # another cluster's id is refused by the quorum (INCONSISTENT_CLUSTER_ID)
    with (
        MetadataMirror(tmp_path / "other", cluster_id="AAAAAAAAAAAAAAAAAAAAAA", fsync=False) as mirror,
        pytest.raises(ClusterIdMismatchError, match="104"),
    ):
        Follower(bootstrap, mirror, security=security, give_up_s=30).run()
    with MetadataMirror(tmp_path / "granted", cluster_id=cluster.cluster_id, fsync=False) as mirror:
        progress = Follower(bootstrap, mirror, security=security, give_up_s=30).run(idle_stop_s=0.5)
    assert progress.log_end > 0
    assert_mirror_is_the_log(cluster, tmp_path / "granted", cluster.leader_id())


@pytest.mark.heavy
def test_fall_behind_the_log_start(cluster: KafkaCluster, early_mirror: Path) -> None:
    """Retention removed what the early mirror needs next: it installs the newer snapshot and goes on."""
    before = MetadataMirror(early_mirror, fsync=False)
    end = before.position.log_end
    before.close()
    first = first_log_offset(early_mirror)
    leader = cluster.leader_id()
    cluster.wait_for_log_start(leader, above=end, timeout=150)
    progress = follow(cluster, early_mirror, idle_stop_s=0.5)
    assert progress.snapshots == 1
    snapshots = sorted((early_mirror / "__cluster_metadata-0").glob("*.checkpoint"))
    assert int(snapshots[-1].name.split("-")[0]) > end
    # the history before the gap stays: the mirror still starts where it started (0, unless the cluster's own
    # start-up outlasted the log cleaner's first run and the early mirror began from a snapshot)
    assert first_log_offset(early_mirror) == first < end
    # the image at the end: newest snapshot + tail, equal to the leader's own
    last = progress.log_end - 1
    ours = image_at(early_mirror, last)
    theirs = image_at(cluster.metadata_dir(leader), last)
    assert ours.state_equals(theirs)


def test_an_observer_id_of_a_broker_is_refused(cluster: KafkaCluster, tmp_path: Path) -> None:
    """Issue 29: a new mirror fetching as a broker's id would make the leader track it as that broker."""
    from kraftlake.follow.first_contact import ObserverIdError

    broker = cluster.broker_ids[0]
    with (
        MetadataMirror(tmp_path, cluster_id=cluster.cluster_id, observer_id=broker, fsync=False) as mirror,
        pytest.raises(ObserverIdError, match=f"observer id {broker} is fetching from the quorum already"),
    ):
        Follower(parse_endpoints(cluster.bootstrap_controllers), mirror, give_up_s=30).run(idle_stop_s=0.5)
    assert mirror.position.log_end == 0


@pytest.mark.heavy
def test_a_quorum_without_a_majority_ends_in_no_progress(cluster: KafkaCluster, tmp_path: Path) -> None:
    """Issue 29: two of three controllers killed, the third answers every fetch (no leader): answers that never
    let following go on end in a typed one-line error at the give-up time (they used to keep it retrying for
    ever). Last in the module: the quorum stays without a majority."""
    from kraftlake.follow.errors import NoProgressError

    assert follow(cluster, tmp_path, idle_stop_s=0.5).log_end > 0
    for node_id in cluster.controller_ids[:2]:
        cluster.kill(node_id)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with MetadataMirror(tmp_path, cluster_id=cluster.cluster_id, fsync=False) as mirror:
                Follower(parse_endpoints(cluster.bootstrap_controllers), mirror, give_up_s=6).run()
        except BaseException as exc:
            errors.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the follower kept retrying a quorum without a majority"
    (error,) = errors
    assert isinstance(error, NoProgressError) and "no progress for 6s" in str(error)
    assert "\n" not in str(error) and time.monotonic() - started < 40
