"""Snapshots in the service: Kafka's size policy, .checkpoint files, log start, restart, observers, followers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from service_helpers import CLUSTER, fast_config
from waiting import wait_until

from kraftlake.logformat import list_snapshots, read_batches
from kraftlake.protocol.control import ControlRecordType
from kraftlake.raft.messages import SnapshotId
from kraftlake.service import (
    Batch,
    LeaderAndEpoch,
    LocalQuorum,
    ObserverClient,
    SnapshotPolicy,
    SnapshotReader,
    SnapshotRequiredError,
    build_checkpoint,
    checkpoint_data_batches,
    checkpoint_values,
)

#: a snapshot every 8 KiB, the log deleted before each at once (retention 0)
SMALL = {"snapshot_max_bytes": 8 * 1024, "segment_bytes": 4 * 1024, "retention_bytes": 0}


#: For a voter to write a snapshot or catch up, on a loaded machine.
WAIT_S = 15.0


class Recorder:
    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.snapshots: list[SnapshotReader] = []

    def handle_commit(self, batch: Batch) -> None:
        self.values.extend(e.value for e in batch.entries if not e.is_control)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        self.snapshots.append(reader)
        self.values = checkpoint_values(reader.data)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass


@contextmanager
def restarted(
    root: Path, options: dict[str, int], ports: dict[int, int]
) -> Iterator[tuple[LocalQuorum, dict[int, Recorder]]]:
    """The quorum started again on its directories; yields once every node applied a new value ``b"after"``."""
    again = {i: Recorder() for i in (1, 2, 3)}
    q = LocalQuorum(
        3,
        root,
        CLUSTER,
        fsync=False,
        quorum=fast_config(),
        node_options=options,
        ports=ports,
        listeners={i: [r] for i, r in again.items()},
    )
    q.start()
    try:
        q.wait_for_leader().append([b"after"]).result(10)
        for recorder in again.values():
            wait_until(
                lambda r=recorder: r.values[-1:] == [b"after"],  # type: ignore[misc]
                WAIT_S,
                "a listener given the append after the restart",
                0.02,
                seen=lambda r=recorder: r.values[-3:],  # type: ignore[misc]
            )
        yield q, again
    finally:
        q.stop()


def _append_many(q: LocalQuorum, n: int, size: int = 200, tag: str = "v") -> list[bytes]:
    leader = q.wait_for_leader()
    values = [f"{tag}{i:06d}".encode().ljust(size, b".") for i in range(n)]
    for i in range(0, n, 10):
        leader.append(values[i : i + 10]).result(10)
    return values


def test_checkpoint_has_header_values_footer_and_round_trips() -> None:
    data = build_checkpoint(
        SnapshotId(120, 3), [b"a", b"bb", b"c" * 5000], 1_700_000_000_123, 1_700_000_001_000
    )
    batches = read_batches(data, "snap")
    assert batches[0].is_control and batches[-1].is_control
    assert [b.partition_leader_epoch for b in batches] == [3] * len(batches)
    assert batches[0].records[0].key == b"\x00\x00" + int(ControlRecordType.SNAPSHOT_HEADER).to_bytes(
        2, "big"
    )
    assert batches[-1].records[0].key == b"\x00\x00" + int(ControlRecordType.SNAPSHOT_FOOTER).to_bytes(
        2, "big"
    )
    assert [r.offset for b in batches for r in b.records] == list(range(5))
    assert checkpoint_values(data) == [b"a", b"bb", b"c" * 5000]
    # a later snapshot copies the earlier one's data batches and appends the new values after them
    later = build_checkpoint(SnapshotId(200, 4), [b"d"], 1, 2, previous=data)
    assert checkpoint_values(later) == [b"a", b"bb", b"c" * 5000, b"d"]
    assert [r.offset for b in read_batches(later, "later") for r in b.records] == list(range(6))
    assert checkpoint_data_batches(later)[1] == 4


def test_policy_triggers_on_bytes_or_interval() -> None:
    policy = SnapshotPolicy(max_bytes=100, interval_ms=1000)
    assert not policy.due(0)
    policy.committed(60, 10)
    assert not policy.due(500)
    assert policy.due(1010)  # interval since the first commit
    policy.committed(50, 20)
    assert policy.due(20)  # bytes
    policy.written(30)
    assert not policy.due(5000)  # nothing new since
    assert not SnapshotPolicy(max_bytes=100, interval_ms=0).due(10**9)


def test_size_policy_snapshots_advance_log_start_and_restart_replays_snapshot_plus_tail(
    tmp_path: Path,
) -> None:
    recorders = {i: Recorder() for i in (1, 2, 3)}
    q = LocalQuorum(
        3,
        tmp_path,
        CLUSTER,
        fsync=False,
        quorum=fast_config(),
        node_options=SMALL,
        listeners={i: [r] for i, r in recorders.items()},
    )
    q.start()
    try:
        values = _append_many(q, 200)
        leader = q.wait_for_leader()
        store = leader.runner.log_store
        assert store is not None
        wait_until(store.latest_snapshot, WAIT_S, "a snapshot on the leader", 0.02)
        part = tmp_path / f"node-{leader.node_id}" / "__cluster_metadata-0"

        def look() -> tuple:  # type: ignore[type-arg]
            # on the loop thread: no snapshot can be written while we look
            latest = store.latest_snapshot()
            assert latest is not None
            return (
                latest,
                leader.high_watermark,
                store.log_start_offset,
                [(f, path, path.read_bytes()) for f, path in list_snapshots(part)],
                sorted(int(p.name[:20]) for p in part.glob("*.log")),
                leader.runner.read_committed(latest.offset, 100_000),
            )

        latest, hw, start, files, segments, tail_entries = leader._loop.call(look)
        assert 0 < latest.offset <= hw and start == latest.offset
        # older snapshots are deleted (a newer one may be being written by the worker thread)
        files = [(f, path, data) for f, path, data in files if f.end_offset <= latest.offset]
        assert [f.end_offset for f, _, _ in files] == [latest.offset]
        assert files[0][1].name == f"{latest.offset:020d}-{latest.epoch:010d}.checkpoint"
        assert segments[0] > 0  # segments wholly below the snapshot are gone
        # snapshot values + tail = everything committed, in order
        snap_values = checkpoint_values(files[0][2])
        assert snap_values + [e.value for e in tail_entries if not e.is_control] == values
        ports = {i: p for i, (_, p) in q.endpoints.items()}
    finally:
        q.stop()
    with restarted(tmp_path, SMALL, ports) as (_, again):
        for recorder in again.values():
            assert recorder.snapshots, "restart loads the latest snapshot"
            assert recorder.values == [*values, b"after"]


def test_retention_keeps_the_log_behind_the_latest_snapshot_for_readers(tmp_path: Path) -> None:
    """With Kafka's retention (here 24 KiB, snapshots every 8 KiB) an observer behind the latest snapshot reads
    the records instead of being sent to the snapshot; older snapshots go once the log outgrows the retention;
    a restart starts the log at the oldest kept snapshot and the state machine at the latest."""
    retained = {**SMALL, "retention_bytes": 24 * 1024}
    recorders = {i: Recorder() for i in (1, 2, 3)}
    q = LocalQuorum(
        3,
        tmp_path,
        CLUSTER,
        fsync=False,
        quorum=fast_config(),
        node_options=retained,
        listeners={i: [r] for i, r in recorders.items()},
    )
    q.start()
    try:
        values = _append_many(q, 400)  # about 90 KiB: several snapshots, more than the retention
        leader = q.wait_for_leader()
        store = leader.runner.log_store
        assert store is not None
        wait_until(
            lambda: store.latest_snapshot() is not None and store.log_start_offset > 0,
            WAIT_S,
            "a snapshot on the leader and its log start past 0",
            0.02,
            seen=lambda: (store.latest_snapshot(), store.log_start_offset),
        )
        part = tmp_path / f"node-{leader.node_id}" / "__cluster_metadata-0"

        def look() -> tuple:  # type: ignore[type-arg]
            latest = store.latest_snapshot()
            assert latest is not None
            oldest, path = list_snapshots(part)[0]
            # an older retained snapshot is read from its file (only the latest is held in memory)
            assert store.read_snapshot(SnapshotId(oldest.end_offset, oldest.epoch)) == path.read_bytes()
            return (
                latest,
                store.log_start_offset,
                store.value_bytes(store.log_start_offset, store.end_offset),
                [f.end_offset for f, _ in list_snapshots(part)],
                store.end_offset,
            )

        looks: list[tuple] = []  # type: ignore[type-arg]

        def settled() -> tuple | None:  # type: ignore[type-arg]
            looks.append(leader._loop.call(look))
            return looks[-1] if looks[-2:-1] == looks[-1:] else None

        # until the snapshot written off the loop for the last appends is in: two looks 0.3 s apart agree
        latest, start, held, files, end = wait_until(
            settled,
            WAIT_S,
            "the leader's snapshots and log unchanged for 0.3 s",
            0.3,
            seen=lambda: looks[-2:],
        )
        assert 0 < start < latest.offset, (start, latest)  # the log reaches back past the latest snapshot
        assert start in files and latest.offset in files and min(files) == start
        assert held <= 24 * 1024 + 8 * 1024 + 4 * 1024  # at most a snapshot interval and a batch over
        client = ObserverClient([("127.0.0.1", leader.port)], CLUSTER)
        got: list[bytes] = []
        offset = start
        while offset < end:
            entries = client.fetch(offset, max_wait_ms=0)  # no SnapshotRequiredError: the records are there
            got.extend(e.value for e in entries if not e.is_control)
            offset = entries[-1].offset + 1
        client.close()
        assert got == values[len(values) - len(got) :] and len(got) > 0
        ports = {i: p for i, (_, p) in q.endpoints.items()}
    finally:
        q.stop()
    with restarted(tmp_path, retained, ports) as (q2, again):
        for node_id, recorder in again.items():
            assert recorder.snapshots and recorder.values == [*values, b"after"]
            node_store = q2.services[node_id].runner.log_store
            assert (
                node_store is not None
                and node_store.log_start_offset < recorder.snapshots[0].snapshot_id.offset
            )


def test_observer_below_log_start_downloads_the_snapshot_then_fetches_on(tmp_path: Path) -> None:
    q = LocalQuorum(3, tmp_path, CLUSTER, fsync=False, quorum=fast_config(), node_options=SMALL)
    q.start()
    try:
        values = _append_many(q, 150)
        leader = q.wait_for_leader()
        assert leader.snapshot_now() is not None or leader.runner.log_store.latest_snapshot() is not None  # type: ignore[union-attr]
        client = ObserverClient([("127.0.0.1", leader.port)], CLUSTER)
        with pytest.raises(SnapshotRequiredError) as info:
            client.fetch(0, max_wait_ms=0)
        snapshot_id = info.value.snapshot_id
        data = client.fetch_snapshot(snapshot_id, chunk_bytes=1000)  # several chunks
        got = checkpoint_values(data)
        offset = snapshot_id.offset
        while True:
            entries = client.fetch(offset, max_wait_ms=0)
            if not entries:
                break
            got.extend(e.value for e in entries if not e.is_control)
            offset = entries[-1].offset + 1
        assert got == values
        client.close()
    finally:
        q.stop()


def test_provider_supplies_the_payload_and_a_lagging_follower_installs_the_snapshot(tmp_path: Path) -> None:
    calls: list[SnapshotId] = []

    def provider(snapshot_id: SnapshotId) -> Iterable[bytes]:
        calls.append(snapshot_id)
        return [b"state", str(snapshot_id.offset).encode()]

    recorders = {i: Recorder() for i in (1, 2, 3)}
    q = LocalQuorum(
        3,
        tmp_path,
        CLUSTER,
        fsync=False,
        quorum=fast_config(),
        node_options=SMALL,
        snapshot_providers={i: provider for i in (1, 2, 3)},
        listeners={i: [r] for i, r in recorders.items()},
    )
    q.start()
    try:
        leader = q.wait_for_leader()
        follower = next(i for i in q.services if i != leader.node_id)
        q.stop_node(follower)
        _append_many(q, 150)
        store = leader.runner.log_store
        assert store is not None
        latest = wait_until(store.latest_snapshot, WAIT_S, "a snapshot on the leader", 0.02)
        assert latest in calls
        assert checkpoint_values(store.read_snapshot(latest)) == [b"state", str(latest.offset).encode()]
        restarted = q.restart_node(follower)
        wait_until(
            lambda: restarted.high_watermark >= leader.high_watermark > 0,
            WAIT_S,
            "the restarted follower's high watermark at the leader's",
            0.02,
            seen=lambda: (restarted.high_watermark, leader.high_watermark),
        )
        rec = recorders[follower]
        wait_until(
            lambda: any(s.snapshot_id.offset >= latest.offset for s in rec.snapshots),
            WAIT_S,
            f"the restarted follower's listener given a snapshot at {latest.offset} or later",
            0.02,
            seen=lambda: [s.snapshot_id.offset for s in rec.snapshots],
        )
        follower_store = restarted.runner.log_store
        assert follower_store is not None and follower_store.log_start_offset >= latest.offset
    finally:
        q.stop()
