"""The quorum controller on a 3-voter raft quorum: hot standbys, failover without bootstrap, snapshots."""

from __future__ import annotations

import io
import json
import random
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from service_helpers import CLUSTER, fast_config
from waiting import wait_until

from kraftlake.cli import main as cli_main
from kraftlake.controller import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ConfigChange,
    ConfigOp,
    ControllerConfig,
    CreatableTopic,
    Listener,
    PartitionIsrUpdate,
    QuorumController,
    ResourceType,
    random_uuid,
)
from kraftlake.image import image_at, load_snapshot
from kraftlake.image.source import log_records
from kraftlake.logformat import METADATA_PARTITION_DIR, list_snapshots
from kraftlake.raft.config import QuorumConfig
from kraftlake.service.controller_host import ControllerQuorum
from kraftlake.service.errors import NotControllerError

NOW = 1_700_000_000_000


def quorum_of(
    tmp_path: Path,
    quorum: QuorumConfig | None = None,
    config: ControllerConfig | None = None,
    **options: Any,
) -> ControllerQuorum:
    """Three controllers under ``tmp_path`` on the tests' clock (fast timers, min ISR 2 unless given), not
    started."""
    return ControllerQuorum(
        3,
        tmp_path / "q",
        CLUSTER,
        fsync=False,
        quorum=quorum or fast_config(),
        config=config or ControllerConfig(min_insync_replicas=2),
        clock=lambda: NOW,
        **options,
    )


@pytest.fixture
def cq(tmp_path: Path) -> Iterator[ControllerQuorum]:
    with quorum_of(tmp_path) as q:
        yield q


def register_and_unfence(q: ControllerQuorum, brokers: int) -> dict[int, int]:
    epochs: dict[int, int] = {}
    for b in range(brokers):
        rng = random.Random(b)
        req = BrokerRegistrationRequest(
            b, random_uuid(rng), (Listener("PLAINTEXT", f"broker-{b}", 9092),), log_dirs=(random_uuid(rng),)
        )
        resp = q.submit(lambda c, req=req: c.handle_register_broker(req, NOW))
        assert resp.error.ok, resp
        epochs[b] = resp.data["broker_epoch"]
    for b in range(brokers):
        resp = q.submit(
            lambda c, b=b: c.handle_heartbeat(BrokerHeartbeatRequest(b, epochs[b], c.next_offset - 1), NOW)
        )
        assert resp.error.ok, resp
    return epochs


def create_topic(q: ControllerQuorum, name: str, partitions: int = 3, rf: int = 3) -> Any:
    resp = q.submit(lambda c: c.handle_create_topics([CreatableTopic(name, partitions, rf)]))
    assert resp.by_name()[name].error.ok, resp
    return resp


def shrink_isr(q: ControllerQuorum, epochs: dict[int, int], topic: str, pid: int) -> tuple[int, ...]:
    def command(c: QuorumController) -> Any:
        t = c.image.topics_by_name[topic]
        p = t.partitions[pid]
        new_isr = tuple(r for r in p.isr if r != next(r for r in p.isr if r != p.leader))
        return c.handle_alter_partition(
            AlterPartitionRequest(
                p.leader,
                epochs[p.leader],
                (PartitionIsrUpdate(t.id, pid, p.leader_epoch, p.partition_epoch, new_isr),),
            )
        )

    resp = q.submit(command)
    assert resp.error.ok, resp
    result = next(iter(resp.data["partitions"].values()))
    return tuple(result.isr) if hasattr(result, "isr") else result


def committed_end(q: ControllerQuorum) -> int:
    host = q.wait_active()
    return host.call(lambda c: c.next_offset - 1).result(5)


def converge(q: ControllerQuorum) -> Any:
    """Wait until every running host applied the active's last record; return the active's image."""
    host = q.wait_active()
    end = committed_end(q)
    q.wait_applied(end)
    return host.call(lambda c: c.image).result(5)


def assert_images_equal(q: ControllerQuorum) -> Any:
    image = converge(q)
    for h in q.running():
        other = h.call(lambda c: c.committed_image).result(5)
        assert other.state_equals(image), f"host {h.node_id}'s image differs from the active's"
    return image


def test_three_hosts_agree_and_the_log_is_a_kafka_metadata_log(cq: ControllerQuorum) -> None:
    first = cq.wait_active()
    assert first.stats.activations[0].bootstrapped
    epochs = register_and_unfence(cq, 4)
    create_topic(cq, "alpha", 3, 3)
    create_topic(cq, "beta", 2, 2)
    before = cq.wait_active().call(lambda c: c.image.topics_by_name["alpha"].partitions[0].isr).result(5)
    shrink_isr(cq, epochs, "alpha", 0)
    image = assert_images_equal(cq)
    p = image.topics_by_name["alpha"].partitions[0]
    assert len(p.isr) == len(before) - 1 and set(p.isr) < set(before)
    assert all(not b.fenced for b in image.brokers.values()) and len(image.brokers) == 4
    # a failed command writes nothing and answers with Kafka's error
    resp = cq.submit(lambda c: c.handle_create_topics([CreatableTopic("alpha", 1, 3)]))
    assert resp.by_name()["alpha"].error.error.name == "TOPIC_ALREADY_EXISTS"
    # every voter's log directory is a metadata log: decoded and replayed to the same image
    for node_id in cq.hosts:
        node_dir = cq.node_dir(node_id)
        assert image_at(node_dir).state_equals(image)
        out = io.StringIO()
        with redirect_stdout(out):
            assert cli_main(["decode", str(node_dir / METADATA_PARTITION_DIR)]) == 0
        types = [json.loads(line)["type"] for line in out.getvalue().splitlines()]
        assert types.count("TOPIC_RECORD") == 2 and "LeaderChange" in types
        assert types.count("REGISTER_BROKER_RECORD") == 4


def test_standby_refuses_commands(cq: ControllerQuorum) -> None:
    active = cq.wait_active()
    standby = next(h for h in cq.hosts.values() if h is not active)
    with pytest.raises(NotControllerError):
        standby.submit(lambda c: c.handle_create_topics([CreatableTopic("x", 1, 1)])).result(5)


def test_failover_serves_at_once_from_the_hot_image(cq: ControllerQuorum) -> None:
    epochs = register_and_unfence(cq, 3)
    for i in range(5):
        create_topic(cq, f"t{i}", 4, 3)
    shrink_isr(cq, epochs, "t0", 1)
    image = assert_images_equal(cq)
    old = cq.wait_active()
    replayed_at_kill = {h.node_id: h.stats.records_replayed for h in cq.hosts.values()}
    end_at_kill = image.offset
    killed = time.monotonic()
    cq.kill(old.node_id)
    new = cq.wait_active(exclude=old.node_id)
    activated = time.monotonic()
    resp = new.submit(lambda c: c.handle_create_topics([CreatableTopic("after-failover", 2, 2)])).result(10)
    served = time.monotonic()
    assert resp.by_name()["after-failover"].error.ok
    activation = new.stats.activations[-1]
    # no bootstrap, no replay from offset 0: the standby's image was hot; it replayed only the new epoch's
    # LeaderChange (and whatever was in flight) before serving
    assert not activation.bootstrapped
    assert activation.image_offset >= end_at_kill
    assert activation.records_replayed_before - replayed_at_kill[new.node_id] <= 3
    assert new.stats.resets == 0 and new.stats.snapshots_loaded == 0
    fast = fast_config()
    # Kafka's goal for a failover: within fetch timeout + 2 election timeouts
    assert served - killed < (fast.fetch_timeout_ms + 4 * fast.election_timeout_ms) / 1000 + 1.0
    print(
        f"failover: kill -> active {activated - killed:.3f} s, kill -> first command committed "
        f"{served - killed:.3f} s"
    )
    # the old node comes back as a standby and catches up
    cq.restart(old.node_id)
    image = assert_images_equal(cq)
    assert "after-failover" in image.topics_by_name


def test_snapshots_are_metadata_checkpoints_and_a_restart_loads_snapshot_plus_tail(tmp_path: Path) -> None:
    q = quorum_of(
        tmp_path, node_options={"snapshot_max_bytes": 4096, "segment_bytes": 8192, "retention_bytes": 0}
    )
    q.start()
    try:
        register_and_unfence(q, 3)
        for i in range(12):
            create_topic(q, f"s{i:02d}", 3, 3)
        image = assert_images_equal(q)
        leader = q.wait_active()
        follower = next(h for h in q.hosts if h != leader.node_id)
        snaps = wait_until(
            lambda: list_snapshots(q.node_dir(follower) / METADATA_PARTITION_DIR),
            10,
            f"a snapshot written by follower {follower}",
            0.05,
        )
        sid, path = snaps[-1]
        # a checkpoint of metadata records: the image at its end offset - 1, as kraftlake.image reads it
        assert load_snapshot(path).state_equals(image_at(q.node_dir(leader.node_id), sid.end_offset - 1))
        q.kill(follower)
        for i in range(12, 20):
            create_topic(q, f"s{i:02d}", 3, 3)
        host = q.hosts[follower]
        replayed = host.stats.records_replayed
        q.restart(follower)
        image = assert_images_equal(q)
        assert host.stats.snapshots_loaded >= 1
        end = image.offset
        tail = host.stats.records_replayed - replayed
        latest = list_snapshots(q.node_dir(follower) / METADATA_PARTITION_DIR)[-1][0]
        assert tail <= end + 1 - latest.end_offset + 2, (
            f"replayed {tail} records after a snapshot at {latest}"
        )
        assert len(image.topics_by_name) == 20
        assert image_at(q.node_dir(follower)).state_equals(image)
    finally:
        q.stop()


def test_commands_per_second_through_the_quorum(tmp_path: Path) -> None:
    # Kafka's default timers, not the tests' fast ones: 1000 pipelined commands on a loaded machine can hold a
    # follower's fetch past a 600 ms fetch timeout, and a leader resigning mid-run fails the commands
    steady = replace(
        fast_config(), election_timeout_ms=1000, fetch_timeout_ms=2000, election_backoff_max_ms=1000
    )
    with quorum_of(tmp_path, steady) as cq:
        register_and_unfence(cq, 3)
        create_topic(cq, "load", 50, 3)
        host = cq.wait_active()
        n = 1000
        started = time.monotonic()
        futures = []
        for i in range(n):
            # one ConfigRecord each, pipelined: the figure is what the quorum commits
            change = ConfigChange(ResourceType.TOPIC, "load", "retention.ms", ConfigOp.SET, str(60_000 + i))
            futures.append(host.submit(lambda c, change=change: c.handle_incremental_alter_configs([change])))
        for f in futures:
            assert f.result(30).error.ok
        elapsed = time.monotonic() - started
        print(f"{n} pipelined commands committed in {elapsed:.3f} s: {n / elapsed:,.0f} commands/s")
        image = assert_images_equal(cq)
        assert image.configs[(int(ResourceType.TOPIC), "load")]["retention.ms"] == str(60_000 + n - 1)


def test_a_command_of_many_batches_is_appended_between_raft_io_and_others_wait(tmp_path: Path) -> None:
    q = quorum_of(tmp_path, config=ControllerConfig(max_records_per_batch=10))
    with q:
        register_and_unfence(q, 3)
        host = q.wait_active()
        big = host.submit(lambda c: c.handle_create_topics([CreatableTopic("big", 95, 3)]))  # 96 records
        after = [
            host.submit(lambda c, i=i: c.handle_create_topics([CreatableTopic(f"small-{i}", 1, 3)]))
            for i in range(3)
        ]
        assert big.result(30).by_name()["big"].error.ok
        assert all(f.result(30).topics[0].error.ok for f in after)
        assert host.stats.commands >= 3 + 3 + 4
        image = assert_images_equal(q)
        assert len(image.topics_by_name["big"].partitions) == 95
        # the transaction's batches are contiguous: the commands that waited come after its end
        log_dir = q.node_dir(host.node_id)
        records = [r for r in log_records(log_dir / METADATA_PARTITION_DIR) if not r.is_control]
        kinds = [r.type for r in records]
        begin, end = kinds.index("BeginTransactionRecord"), kinds.index("EndTransactionRecord")
        assert end - begin == 97 and kinds[begin + 1 : end].count("PartitionRecord") == 95
        names = [r.record.name for r in records[end:] if r.type == "TopicRecord"]
        assert names == ["small-0", "small-1", "small-2"]
