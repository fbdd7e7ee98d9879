"""An in-process 3-voter quorum over real TCP on 127.0.0.1."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import pytest
from service_helpers import CLUSTER, fast_config, wait_until_committed
from waiting import wait_until

from kraftlake.logformat import MetadataLogDir
from kraftlake.service import (
    Batch,
    LeaderAndEpoch,
    LocalQuorum,
    NotLeaderError,
    ObserverClient,
    QuorumClient,
    SnapshotReader,
)


def values_of(entries: list) -> list[bytes]:  # type: ignore[type-arg]
    return [e.value for e in entries if not e.is_control]


def test_append_is_committed_and_readable_on_every_voter(quorum: LocalQuorum) -> None:
    leader = quorum.wait_for_leader()
    records = [f"record-{i}".encode() for i in range(50)]
    futures = [leader.append(records[i : i + 10]) for i in range(0, 50, 10)]
    offsets = [f.result(10) for f in futures]
    assert all(last - base == 9 for base, last in offsets)
    assert [b for b, _ in offsets] == sorted(b for b, _ in offsets)
    end = offsets[-1][1] + 1
    wait_until_committed(quorum, end)
    for service in quorum.services.values():
        committed = service.read_committed(0, 1000)
        assert values_of(committed) == records
        assert committed[0].is_control  # the leader's LeaderChange record
        assert [e.offset for e in committed] == list(range(len(committed)))
        assert all(e.timestamp > 1_600_000_000_000 for e in committed)
    # identical entries (with the leader's timestamps) on every voter
    views = [s.read_committed(0, 1000) for s in quorum.services.values()]
    assert views[0] == views[1] == views[2]


def test_leader_stop_elects_a_new_leader_and_not_leader_names_it(quorum: LocalQuorum) -> None:
    old = quorum.wait_for_leader()
    before = old.append([b"before"]).result(10)
    quorum.stop_node(old.node_id)
    new = quorum.wait_for_leader(exclude=old.node_id)
    assert new.node_id != old.node_id and new.epoch > 1
    after = new.append([b"after"]).result(10)
    assert after[0] > before[1]
    follower = next(s for s in quorum.services.values() if s.started and s.node_id != new.node_id)
    with pytest.raises(NotLeaderError) as info:
        follower.append([b"to a follower"]).result(10)
    assert info.value.leader_id == new.node_id
    assert info.value.leader_endpoint == f"127.0.0.1:{quorum.endpoints[new.node_id][1]}"
    assert values_of(new.read_committed(0)) == [b"before", b"after"]
    # the stopped voter comes back and catches up from its own files
    back = quorum.restart_node(old.node_id)
    end = new.append([b"again"]).result(10)[1] + 1
    wait_until(
        lambda: back.high_watermark >= end,
        10,
        f"the restarted voter's high watermark at {end}",
        0.02,
        seen=lambda: back.high_watermark,
    )
    assert values_of(back.read_committed(0)) == [b"before", b"after", b"again"]


def test_observer_client_reads_everything_committed(quorum: LocalQuorum) -> None:
    leader = quorum.wait_for_leader()
    records = [i.to_bytes(4, "big") * 64 for i in range(300)]
    for i in range(0, 300, 50):
        leader.append(records[i : i + 50]).result(10)
    bootstrap = [("127.0.0.1", p) for _, p in quorum.endpoints.values()]
    client = pickle.loads(pickle.dumps(ObserverClient(bootstrap, CLUSTER)))  # as shipped to an executor
    got: list = []  # type: ignore[type-arg]
    offset = 0
    while len(values_of(got)) < 300:
        batch = client.fetch(offset, max_records=64, max_wait_ms=1000)
        assert batch, "no progress"
        assert batch[0].offset == offset and len(batch) <= 64
        got.extend(batch)
        offset = batch[-1].offset + 1
    assert values_of(got) == records
    assert got == leader.read_committed(0, 10_000)[: len(got)]
    # long poll: nothing new -> empty after the wait; a new commit wakes it early
    start = time.monotonic()
    assert client.fetch(offset, 10, max_wait_ms=300) == []
    assert time.monotonic() - start >= 0.25
    leader.append([b"late"])
    late = client.fetch(offset, 10, max_wait_ms=5000)
    assert values_of(late) == [b"late"]


def test_quorum_client_appends_through_any_voter_and_describes(quorum: LocalQuorum) -> None:
    leader = quorum.wait_for_leader()
    follower = next(i for i in quorum.services if i != leader.node_id)
    client = QuorumClient([quorum.endpoints[follower]], CLUSTER, append_secret=quorum.append_secret_path)
    with pytest.raises(NotLeaderError) as info:
        client.append([b"x"])
    assert info.value.leader_id == leader.node_id
    base, last = client.append_retrying([b"y", b"z"])
    assert last == base + 1
    description, from_leader = client.describe()
    assert from_leader and description.leader_id == leader.node_id
    assert description.cluster_id == CLUSTER and description.high_watermark >= last + 1
    assert [v.node_id for v in description.voters] == [1, 2, 3]
    assert sorted(r.node_id for r in description.replicas) == [1, 2, 3]
    assert {r.status for r in description.replicas} == {"Leader", "Follower"}
    text = "\n".join(description.status_lines() + description.replication_lines())
    for field in (
        "ClusterId:",
        "LeaderId:",
        "LeaderEpoch:",
        "HighWatermark:",
        "MaxFollowerLag:",
        "MaxFollowerLagTimeMs:",
        "CurrentVoters:",
        "CurrentObservers:",
        "LogEndOffset",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "DirectoryId",
    ):
        assert field in text


class Recorder:
    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.leaders: list[LeaderAndEpoch] = []
        self.snapshots: list[SnapshotReader] = []

    def handle_commit(self, batch: Batch) -> None:
        self.batches.append(batch)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        self.snapshots.append(reader)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leaders.append(leader)


def test_listeners_and_restart_from_kafka_layout_files(tmp_path: Path) -> None:
    recorders = {i: Recorder() for i in (1, 2, 3)}
    q = LocalQuorum(
        3,
        tmp_path,
        CLUSTER,
        fsync=True,
        quorum=fast_config(),
        listeners={i: [r] for i, r in recorders.items()},
    )
    q.start()
    try:
        leader = q.wait_for_leader()
        results = [leader.append([f"{j}-{k}".encode() for k in range(5)]).result(10) for j in range(4)]
        end = results[-1][1] + 1
        wait_until_committed(q, end)
        wait_until(
            lambda: all(r.batches and r.batches[-1].last_offset == end - 1 for r in recorders.values()),
            10,
            f"every listener's last batch ending at {end - 1}",
            0.02,
            seen=lambda: {i: r.batches[-1].last_offset for i, r in recorders.items() if r.batches},
        )
        for recorder in recorders.values():
            offsets = [e.offset for b in recorder.batches for e in b.entries]
            assert offsets == list(range(end))
            data = [b for b in recorder.batches if not b.entries[0].is_control]
            assert [len(b.entries) for b in data] == [5, 5, 5, 5]  # one batch per append, as written
            assert recorder.leaders[-1] == LeaderAndEpoch(leader.node_id, leader.epoch)
    finally:
        q.stop()
    # the files are Kafka's layout, readable by the logformat readers
    log_dir = MetadataLogDir(tmp_path / "node-1")
    batches = list(log_dir.iter_batches())
    assert batches[0].is_control
    values = [r.value for b in batches if not b.is_control for r in b.records]
    assert values == [f"{j}-{k}".encode() for j in range(4) for k in range(5)]
    assert log_dir.quorum_state() is not None and log_dir.meta_properties().cluster_id == CLUSTER
    assert log_dir.leader_epochs()[0].epoch == batches[0].partition_leader_epoch
    # a restart replays the files and keeps everything committed
    q2 = LocalQuorum(
        3,
        tmp_path,
        CLUSTER,
        fsync=True,
        quorum=fast_config(),
        ports={i: p for i, (_, p) in q.endpoints.items()},
    )
    q2.start()
    try:
        leader = q2.wait_for_leader()
        leader.append([b"after restart"]).result(10)
        committed = values_of(leader.read_committed(0))
        assert committed == [*values, b"after restart"]
    finally:
        q2.stop()
