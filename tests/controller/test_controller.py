"""Quorum controller: every command's records and error codes, controlled shutdown, ELR, failover."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from kraftlake.controller import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ConfigChange,
    ConfigOp,
    ControllerConfig,
    CreatableTopic,
    Errors,
    FeatureUpdate,
    Listener,
    MemoryMetadataLog,
    NotActiveError,
    PartitionIsrUpdate,
    QuorumController,
    ResourceType,
    UpgradeType,
    random_uuid,
)
from kraftlake.controller.config import LATEST_PRODUCTION
from kraftlake.image import load_records
from kraftlake.sim.cluster import check_image


class Cluster:
    """An active controller, a standby replaying the in-memory log, and helpers acting as brokers."""

    def __init__(self, brokers: int = 3, config: ControllerConfig | None = None) -> None:
        self.now = 1_000
        self.log = MemoryMetadataLog()
        self.rng = random.Random(7)  # the brokers' own ids (incarnations, directories)
        self.active = QuorumController(config, node_id=1, seed=7)
        self.standby = QuorumController(config, node_id=2, seed=8)
        self.log.listeners.append(self.active.handle_commit)
        self.log.listeners.append(self.standby.handle_commit)
        self.active.activate(1, self.log, self.now)
        self.epochs: dict[int, int] = {}
        for b in range(brokers):
            self.register(b)
            self.heartbeat(b)

    def run(self, result: Any) -> Any:
        before = self.log.end_offset()
        self.active.execute(result)
        if result.error is not None and not result.error.ok:
            assert self.log.end_offset() == before, "a failed command wrote records"
        return result.response

    def register(self, b: int, previous_epoch: int = -1, incarnation: str | None = None) -> Any:
        req = BrokerRegistrationRequest(
            b,
            incarnation or random_uuid(self.rng),
            (Listener("PLAINTEXT", "localhost", 9092 + b),),
            log_dirs=(random_uuid(self.rng),),
            previous_broker_epoch=previous_epoch,
        )
        resp = self.run(self.active.handle_register_broker(req, self.now))
        if resp.error.ok:
            self.epochs[b] = resp.data["broker_epoch"]
        return resp

    def heartbeat(self, b: int, **kw: Any) -> Any:
        req = BrokerHeartbeatRequest(b, self.epochs[b], self.active.next_offset - 1, **kw)
        return self.run(self.active.handle_heartbeat(req, self.now))

    @property
    def image(self) -> Any:
        return self.active.image

    def partition(self, topic: str, pid: int = 0) -> Any:
        return self.image.topics_by_name[topic].partitions[pid]

    def records_since(self, offset: int) -> list[Any]:
        return [r.record for r in self.log.records[offset:]]

    def create(self, name: str, partitions: int = 1, rf: int = 3, **configs: str) -> Any:
        return self.run(
            self.active.handle_create_topics([CreatableTopic(name, partitions, rf, configs=configs)])
        )

    def alter_isr(self, topic: str, pid: int, new_isr: tuple[int, ...], **over: Any) -> Any:
        p = self.partition(topic, pid)
        t = self.image.topics_by_name[topic]
        u = PartitionIsrUpdate(
            t.id,
            pid,
            over.get("leader_epoch", p.leader_epoch),
            over.get("partition_epoch", p.partition_epoch),
            new_isr,
        )
        broker = over.get("broker", p.leader)
        req = AlterPartitionRequest(broker, over.get("broker_epoch", self.epochs[broker]), (u,))
        return self.run(self.active.handle_alter_partition(req)).data["partitions"][(t.id, pid)]


def test_bootstrap_writes_metadata_version_first() -> None:
    c = Cluster(brokers=0)
    first = c.log.records[0].record
    assert type(first).__name__ == "FeatureLevelRecord"
    assert (first.name, first.feature_level) == ("metadata.version", LATEST_PRODUCTION)
    assert c.image.features["eligible.leader.replicas.version"] == 1


def test_registration_epoch_is_the_record_offset_and_broker_is_fenced_until_caught_up() -> None:
    c = Cluster(brokers=0)
    off = c.log.end_offset()
    resp = c.register(0)
    rec = c.log.records[off]
    assert rec.type == "RegisterBrokerRecord" and rec.version == 4
    assert resp.data["broker_epoch"] == off == rec.record.broker_epoch
    assert c.image.brokers[0].fenced
    behind = c.run(c.active.handle_heartbeat(BrokerHeartbeatRequest(0, off, off - 1), c.now))
    assert behind.data["is_fenced"] and c.log.end_offset() == off + 1
    resp = c.heartbeat(0)
    assert not resp.data["is_fenced"]
    change = c.log.records[-1]
    assert change.type == "BrokerRegistrationChangeRecord" and change.record.fenced == -1
    assert not c.image.brokers[0].fenced


def test_stale_broker_epoch_and_unknown_broker() -> None:
    c = Cluster(brokers=1)
    resp = c.run(c.active.handle_heartbeat(BrokerHeartbeatRequest(0, c.epochs[0] - 1, 100), c.now))
    assert resp.error.error == Errors.STALE_BROKER_EPOCH
    resp = c.run(c.active.handle_heartbeat(BrokerHeartbeatRequest(9, 1, 100), c.now))
    assert resp.error.error == Errors.BROKER_ID_NOT_REGISTERED
    resp = c.run(c.active.handle_allocate_producer_ids(0, 12345))
    assert resp.error.error == Errors.STALE_BROKER_EPOCH


def test_duplicate_registration_while_session_alive() -> None:
    c = Cluster(brokers=1)
    resp = c.register(0)  # another incarnation while broker 0 is unfenced and heart-beating
    assert resp.error.error == Errors.DUPLICATE_BROKER_REGISTRATION
    c.now += 10_000
    while (r := c.active.handle_fence_stale_broker(c.now)) is not None:
        c.run(r)
    assert c.image.brokers[0].fenced
    assert c.register(0).error.ok


def test_create_topic_records_and_assignment() -> None:
    c = Cluster(brokers=4)
    off = c.log.end_offset()
    resp = c.create("orders", 8, 3, **{"retention.ms": "1000"})
    res = resp.by_name()["orders"]
    assert res.error.ok and res.num_partitions == 8 and res.replication_factor == 3
    types = [r.type for r in c.log.records[off:]]
    assert types == ["TopicRecord", "ConfigRecord"] + ["PartitionRecord"] * 8
    assert {r.version for r in c.log.records[off + 2 :]} == {2}
    t = c.image.topics_by_name["orders"]
    leaders = Counter(p.leader for p in t.partitions.values())
    assert sorted(leaders.values()) == [2, 2, 2, 2]  # round robin spreads leaders evenly
    for p in t.partitions.values():
        assert len(set(p.replicas)) == 3 and p.isr == p.replicas and p.leader == p.replicas[0]
        assert all(
            d == c.image.brokers[r].directories[0] for r, d in zip(p.replicas, p.directories, strict=True)
        )
    assert c.image.configs[(2, "orders")] == {"retention.ms": "1000"}


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (CreatableTopic("dup", 1, 1), Errors.TOPIC_ALREADY_EXISTS),
        (CreatableTopic("bad name!", 1, 1), Errors.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("..", 1, 1), Errors.INVALID_TOPIC_EXCEPTION),
        (CreatableTopic("zero", 0, 1), Errors.INVALID_PARTITIONS),
        (CreatableTopic("rf0", 1, 0), Errors.INVALID_REPLICATION_FACTOR),
        (CreatableTopic("rf9", 1, 9), Errors.INVALID_REPLICATION_FACTOR),
        (CreatableTopic("cfg", 1, 1, configs={"no.such.config": "1"}), Errors.INVALID_CONFIG),
        (CreatableTopic("cfg2", 1, 1, configs={"min.insync.replicas": "0"}), Errors.INVALID_CONFIG),
        (CreatableTopic("man", assignments={0: (0, 0)}), Errors.INVALID_REPLICA_ASSIGNMENT),
        (CreatableTopic("man2", assignments={0: (0, 7)}), Errors.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_create_topic_errors_write_nothing(topic: CreatableTopic, code: Errors) -> None:
    c = Cluster(brokers=3)
    c.create("dup", 1, 1)
    off = c.log.end_offset()
    resp = c.run(c.active.handle_create_topics([topic]))
    assert resp.by_name()[topic.name].error.error == code
    assert c.log.end_offset() == off


def test_delete_topic_and_create_partitions() -> None:
    c = Cluster(brokers=3)
    c.create("a", 2, 2, **{"retention.ms": "5"})
    resp = c.run(c.active.handle_create_partitions({"a": 5}))
    assert resp.by_name()["a"].error.ok and len(c.image.topics_by_name["a"].partitions) == 5
    assert [r.type for r in c.log.records[-3:]] == ["PartitionRecord"] * 3
    for count, code in ((5, Errors.INVALID_PARTITIONS), (3, Errors.INVALID_PARTITIONS)):
        assert c.run(c.active.handle_create_partitions({"a": count})).by_name()["a"].error.error == code
    assert (
        c.run(c.active.handle_create_partitions({"nope": 3})).by_name()["nope"].error.error
        == Errors.UNKNOWN_TOPIC_OR_PARTITION
    )
    topic_id = c.image.topics_by_name["a"].id
    resp = c.run(c.active.handle_delete_topics(["a", "nope"]))
    assert resp.by_name()["a"].error.ok
    assert resp.by_name()["nope"].error.error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    last = c.log.records[-1]
    assert last.type == "RemoveTopicRecord" and last.record.topic_id == topic_id
    assert "a" not in c.image.topics_by_name and (2, "a") not in c.image.configs


def test_alter_partition_shrink_expand_and_epoch_checks() -> None:
    c = Cluster(brokers=3)
    c.create("t", 1, 3)
    p = c.partition("t")
    leader = p.leader
    follower = next(r for r in p.replicas if r != leader)
    err, after = c.alter_isr("t", 0, tuple(r for r in p.isr if r != follower))
    assert err.ok and after == c.partition("t")
    assert follower not in after.isr and after.partition_epoch == p.partition_epoch + 1
    assert after.leader_epoch == p.leader_epoch  # no leader bump on shrink since 3.6
    # stale partition epoch / leader epoch / not the leader / stale broker epoch
    assert (
        c.alter_isr("t", 0, p.isr, partition_epoch=p.partition_epoch)[0].error
        == Errors.INVALID_UPDATE_VERSION
    )
    assert c.alter_isr("t", 0, p.isr, leader_epoch=p.leader_epoch + 5)[0].error == Errors.FENCED_LEADER_EPOCH
    assert c.alter_isr("t", 0, p.isr, broker=follower)[0].error == Errors.INVALID_REQUEST
    assert c.alter_isr("t", 0, (leader, 42))[0].error == Errors.INVALID_REQUEST
    t = c.image.topics_by_name["t"]
    req = AlterPartitionRequest(leader, c.epochs[leader] + 1, (PartitionIsrUpdate(t.id, 0, 0, 1, p.isr),))
    assert c.run(c.active.handle_alter_partition(req)).error.error == Errors.STALE_BROKER_EPOCH
    req = AlterPartitionRequest(
        leader, c.epochs[leader], (PartitionIsrUpdate("AAAAAAAAAAAAAAAAAAAAAg", 0, 0, 0, (0,)),)
    )
    resp = c.run(c.active.handle_alter_partition(req))
    assert resp.data["partitions"][("AAAAAAAAAAAAAAAAAAAAAg", 0)][0].error == Errors.UNKNOWN_TOPIC_ID
    # expand back; a fenced replica is ineligible
    err, after = c.alter_isr("t", 0, p.isr)
    assert err.ok and set(after.isr) == set(p.replicas)
    err, _ = c.alter_isr("t", 0, tuple(r for r in p.isr if r != follower))
    c.run(
        c.active.handle_heartbeat(
            BrokerHeartbeatRequest(follower, c.epochs[follower], 0, want_fence=True), c.now
        )
    )
    assert c.alter_isr("t", 0, p.isr)[0].error == Errors.INELIGIBLE_REPLICA


def test_controlled_shutdown_moves_every_leadership_in_one_result() -> None:
    c = Cluster(brokers=4)
    for i in range(5):
        c.create(f"t{i}", 8, 3)
    victim = 1
    led = [
        (t.name, pid)
        for t in c.image.topics_by_id.values()
        for pid, p in t.partitions.items()
        if p.leader == victim
    ]
    in_isr = [
        (t.name, pid)
        for t in c.image.topics_by_id.values()
        for pid, p in t.partitions.items()
        if victim in p.isr
    ]
    assert led and len(in_isr) == 30
    batches_before = len(c.log.batches)
    off = c.log.end_offset()
    resp = c.heartbeat(victim, want_shutdown=True)
    assert not resp.data["should_shut_down"]
    assert len(c.log.batches) == batches_before + 1  # one batch
    recs = c.log.records[off:]
    assert recs[0].type == "BrokerRegistrationChangeRecord" and recs[0].record.in_controlled_shutdown == 1
    assert [r.type for r in recs[1:]] == ["PartitionChangeRecord"] * len(in_isr)
    img = c.image
    assert img.brokers[victim].in_controlled_shutdown
    for t in img.topics_by_id.values():
        for p in t.partitions.values():
            assert p.leader != victim and victim not in p.isr
    check_image(img, elr_enabled=True)
    # the broker saw the batch: it may shut down now, and is fenced
    resp = c.heartbeat(victim, want_shutdown=True)
    assert resp.data["should_shut_down"] and c.image.brokers[victim].fenced


def test_controlled_shutdown_batch_over_the_record_limit_is_a_transaction() -> None:
    c = Cluster(brokers=3, config=ControllerConfig(max_records_per_batch=10))
    c.create("big", 30, 3)  # 31 records: a metadata transaction over 4 batches
    types = [r.type for r in c.log.records if r.type.endswith("TransactionRecord")]
    assert types == ["BeginTransactionRecord", "EndTransactionRecord"]
    assert len(c.image.topics_by_name["big"].partitions) == 30
    assert c.standby.committed_image.state_equals(c.image)


def test_session_timeout_fences_and_unfence_elects_leaderless() -> None:
    c = Cluster(brokers=3)
    c.create("t", 3, 3)
    c.now += 5_000
    for b in (0, 1):
        c.heartbeat(b)
    c.now += 5_000  # broker 2 silent for 10 s
    result = c.active.handle_fence_stale_broker(c.now)
    assert result is not None
    c.run(result)
    assert c.active.handle_fence_stale_broker(c.now) is None
    assert c.image.brokers[2].fenced
    assert all(2 not in p.isr and p.leader != 2 for p in c.image.topics_by_name["t"].partitions.values())


def test_reassignment_add_then_complete_and_cancel() -> None:
    c = Cluster(brokers=4)
    c.create("r", 1, 3, **{"min.insync.replicas": "1"})
    p = c.partition("r")
    new = next(b for b in range(4) if b not in p.replicas)
    target = (new, *p.replicas[1:])
    resp = c.run(c.active.handle_alter_reassignments({("r", 0): target}))
    assert resp.data["partitions"][("r", 0)].ok
    q = c.partition("r")
    assert q.adding_replicas == (new,) and q.removing_replicas == (p.replicas[0],)
    assert set(q.replicas) == set(p.replicas) | {new}
    # the new replica catches up: the leader adds it to the ISR, completing the reassignment
    err, _after = c.alter_isr("r", 0, (*q.isr, new))
    assert err.error in (Errors.NONE, Errors.NEW_LEADER_ELECTED)
    done = c.partition("r")
    assert done.replicas == target and not done.adding_replicas and not done.removing_replicas
    assert p.replicas[0] not in done.isr and done.leader in target
    assert (
        c.run(c.active.handle_alter_reassignments({("r", 0): None})).data["partitions"][("r", 0)].error
        == Errors.NO_REASSIGNMENT_IN_PROGRESS
    )
    assert (
        c.run(c.active.handle_alter_reassignments({("r", 0): (0, 0)})).data["partitions"][("r", 0)].error
        == Errors.INVALID_REPLICA_ASSIGNMENT
    )
    assert (
        c.run(c.active.handle_alter_reassignments({("x", 0): (0,)})).data["partitions"][("x", 0)].error
        == Errors.UNKNOWN_TOPIC_OR_PARTITION
    )
    # start another and cancel it
    c.run(c.active.handle_alter_reassignments({("r", 0): (p.replicas[0], *target[1:])}))
    assert c.partition("r").adding_replicas
    c.run(c.active.handle_alter_reassignments({("r", 0): None}))
    back = c.partition("r")
    # Kafka's revert keeps the current order minus the adding replicas
    assert set(back.replicas) == set(target) and not back.adding_replicas and not back.removing_replicas


def test_cancelling_a_reassignment_whose_isr_holds_only_adding_replicas_is_refused() -> None:
    c = Cluster(brokers=4)
    c.create("r", 1, 2, **{"min.insync.replicas": "1"})
    p = c.partition("r")
    target = tuple(b for b in range(4) if b not in p.replicas)
    c.run(c.active.handle_alter_reassignments({("r", 0): target}))
    q = c.partition("r")
    c.alter_isr("r", 0, (*q.isr, target[0]))
    for b in p.replicas:  # the original replicas go away: only an adding replica is left in the ISR
        c.heartbeat(b, want_fence=True)
    q = c.partition("r")
    assert q.isr == (target[0],) and q.adding_replicas == target
    resp = c.run(c.active.handle_alter_reassignments({("r", 0): None}))
    assert resp.data["partitions"][("r", 0)].error == Errors.INVALID_REPLICA_ASSIGNMENT
    assert c.partition("r") == q  # nothing written: the ISR never leaves the replicas


def test_incremental_configs() -> None:
    c = Cluster(brokers=1)
    c.create("c", 1, 1)
    ch = [
        ConfigChange(ResourceType.TOPIC, "c", "cleanup.policy", ConfigOp.SET, "delete"),
        ConfigChange(ResourceType.TOPIC, "c", "cleanup.policy", ConfigOp.APPEND, "compact"),
        ConfigChange(ResourceType.TOPIC, "c", "retention.ms", ConfigOp.SET, "10"),
    ]
    resp = c.run(c.active.handle_incremental_alter_configs(ch))
    assert resp.data["resources"][(2, "c")].ok
    assert c.image.configs[(2, "c")] == {"cleanup.policy": "delete,compact", "retention.ms": "10"}
    c.run(
        c.active.handle_incremental_alter_configs(
            [
                ConfigChange(ResourceType.TOPIC, "c", "retention.ms", ConfigOp.DELETE),
                ConfigChange(ResourceType.TOPIC, "c", "cleanup.policy", ConfigOp.SUBTRACT, "delete"),
            ]
        )
    )
    assert c.image.configs[(2, "c")] == {"cleanup.policy": "compact"}
    assert c.log.records[-2].record.value is None
    off = c.log.end_offset()
    bad = c.run(
        c.active.handle_incremental_alter_configs(
            [
                ConfigChange(ResourceType.TOPIC, "nope", "retention.ms", ConfigOp.SET, "1"),
                ConfigChange(ResourceType.TOPIC, "c", "min.insync.replicas", ConfigOp.SET, "x"),
                ConfigChange(ResourceType.BROKER, "abc", "x", ConfigOp.SET, "1"),
            ]
        )
    )
    assert bad.data["resources"][(2, "nope")].error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert bad.data["resources"][(2, "c")].error == Errors.INVALID_CONFIG
    assert bad.data["resources"][(4, "abc")].error == Errors.INVALID_REQUEST
    assert c.log.end_offset() == off


def test_feature_updates() -> None:
    c = Cluster(brokers=1)
    off = c.log.end_offset()
    bad = [
        [FeatureUpdate("no.such.feature", 1)],
        [FeatureUpdate("metadata.version", 99)],
        [FeatureUpdate("metadata.version", 20, UpgradeType.UPGRADE)],
        [FeatureUpdate("metadata.version", 20, UpgradeType.SAFE_DOWNGRADE)],
        [FeatureUpdate("group.version", 0, UpgradeType.UPGRADE)],
    ]
    for updates in bad:
        resp = c.run(c.active.handle_update_features(updates))
        assert resp.error.error == Errors.INVALID_UPDATE_VERSION
    assert c.log.end_offset() == off
    assert c.run(c.active.handle_update_features([FeatureUpdate("metadata.version", 31)])).error.ok
    assert c.image.metadata_version == 31
    resp = c.run(
        c.active.handle_update_features(
            [FeatureUpdate("eligible.leader.replicas.version", 0, UpgradeType.SAFE_DOWNGRADE)]
        )
    )
    assert resp.error.ok
    assert [r.type for r in c.log.records[-2:]] == ["FeatureLevelRecord", "ClearElrRecord"]
    assert "eligible.leader.replicas.version" not in c.image.features


def test_producer_id_blocks() -> None:
    c = Cluster(brokers=2)
    r1 = c.run(c.active.handle_allocate_producer_ids(0, c.epochs[0]))
    r2 = c.run(c.active.handle_allocate_producer_ids(1, c.epochs[1]))
    assert (r1.data["producer_id_start"], r2.data["producer_id_start"]) == (0, 1000)
    assert c.image.next_producer_id == 2000
    assert c.log.records[-1].type == "ProducerIdsRecord"


def _fence(c: Cluster, b: int) -> None:
    c.run(
        c.active.handle_heartbeat(
            BrokerHeartbeatRequest(b, c.epochs[b], c.active.next_offset, want_fence=True), c.now
        )
    )


@pytest.mark.parametrize("elr", [True, False])
def test_last_replica_standing(elr: bool) -> None:
    """Jepsen 2013 / KIP-966: ISR {0,1,2}, min ISR 2; 0 and 1 drop out, 2 leads alone and then crashes
    uncleanly (losing its unflushed tail). With ELR, 2 comes back ineligible and 1 (which holds every
    committed record) is the one elected; without ELR, 2 is re-elected and committed data is lost."""
    features = {"eligible.leader.replicas.version": 1 if elr else 0}
    cfg = ControllerConfig(min_insync_replicas=2, features=features, metadata_version=LATEST_PRODUCTION)
    c = Cluster(brokers=3, config=cfg)
    c.run(c.active.handle_create_topics([CreatableTopic("j", assignments={0: (0, 1, 2)})]))
    assert c.partition("j").isr == (0, 1, 2)
    _fence(c, 0)
    _fence(c, 1)
    p = c.partition("j")
    assert p.leader == 2 and p.isr == (2,)
    if elr:
        assert p.elr == (1,)
    # broker 2 crashes: fenced by the session timeout
    c.now += 10_000
    for b in (0, 1):
        c.heartbeat(b, want_fence=True)
    while (r := c.active.handle_fence_stale_broker(c.now)) is not None:
        c.run(r)
    p = c.partition("j")
    assert p.leader == -1
    if elr:
        assert p.isr == () and set(p.elr) == {1, 2}
    else:
        assert p.isr == (2,)
    # 2 restarts after an unclean shutdown (previous epoch unknown) and catches up
    c.register(2, previous_epoch=-1)
    c.heartbeat(2)
    p = c.partition("j")
    if elr:
        assert p.leader == -1 and 2 not in p.elr  # not eligible: it may have lost committed records
        # 1 comes back (it never lost data): elected from the ELR
        c.register(1, previous_epoch=c.epochs[1])
        c.heartbeat(1)
        p = c.partition("j")
        assert p.leader == 1 and p.isr == (1,)
    else:
        assert p.leader == 2  # the data-losing election KIP-966 prevents
    check_image(c.image, elr_enabled=elr)


def test_standby_failover_serves_at_once() -> None:
    c = Cluster(brokers=3)
    c.create("f", 4, 3)
    c.heartbeat(0, want_shutdown=True)
    assert c.standby.committed_image.state_equals(c.image)
    # the active dies; the standby takes over with its hot image at the log end
    c.active.deactivate()
    before = c.log.end_offset()
    assert c.standby.activate(2, c.log, c.now) is None  # no bootstrap
    assert c.log.end_offset() == before
    new = c.standby
    resp = new.handle_create_topics([CreatableTopic("g", 2, 2)])
    new.execute(resp)
    assert resp.response.by_name()["g"].error.ok and "g" in new.image.topics_by_name
    # the broker in controlled shutdown finishes it against the new controller
    hb = new.handle_heartbeat(
        BrokerHeartbeatRequest(0, c.epochs[0], new.next_offset - 1, want_shutdown=True), c.now
    )
    new.execute(hb)
    assert hb.response.data["should_shut_down"]
    assert c.active.committed_image.state_equals(new.image)  # the old active now replays as a standby
    # the whole log replayed from scratch gives the same image
    assert load_records(c.log.records).state_equals(new.image)


def test_failover_inside_a_transaction_aborts_it_and_steps_stop_on_deactivation() -> None:
    c = Cluster(brokers=3, config=ControllerConfig(max_records_per_batch=10))
    before = c.image
    steps = c.active.execute_steps(c.active.handle_create_topics([CreatableTopic("big", 30, 3)]))
    next(steps)  # Begin + the first batch appended and committed; the leader dies before the rest
    assert c.standby.committed_image.transaction is not None
    c.active.deactivate()
    with pytest.raises(NotActiveError):
        next(steps)
    start = c.log.end_offset()
    assert c.standby.activate(2, c.log, c.now) is None
    assert [r.type for r in c.log.records[start:]] == ["AbortTransactionRecord"]
    new = c.standby
    assert new.image.transaction is None and new.image.state_equals(before)
    # the new leader's own transaction stands on its own, and the log replays to its image
    result = new.handle_create_topics([CreatableTopic("big", 30, 3)])
    assert new.execute(result)[1] == c.log.end_offset() - 1
    assert len(new.image.topics_by_name["big"].partitions) == 30
    assert load_records(c.log.records).state_equals(new.image)
    assert c.active.committed_image.state_equals(new.image)


def test_execute_steps_in_short_batches_only_inside_a_transaction() -> None:
    c = Cluster(brokers=3, config=ControllerConfig(max_records_per_batch=10))
    start = len(c.log.batches)
    steps = c.active.execute_steps(
        c.active.handle_create_topics([CreatableTopic("big", 30, 3)]), step_records=4
    )
    n = 0
    with pytest.raises(StopIteration):
        while True:
            next(steps)
            n += 1
    sizes = [count for _, count in c.log.batches[start:]]
    assert sizes == [4] * 8 + [1] and n == 8  # Begin + 31 records + End in steps of 4
    assert c.standby.committed_image.state_equals(c.image) and c.image.transaction is None
    start = len(c.log.batches)
    small = c.active.execute_steps(
        c.active.handle_create_topics([CreatableTopic("small", 5, 3)]), step_records=2
    )
    with pytest.raises(StopIteration):
        next(small)
    assert [count for _, count in c.log.batches[start:]] == [6]  # fits in one batch: one, atomic
    assert load_records(c.log.records).state_equals(c.image)
