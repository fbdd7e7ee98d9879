"""IMAGE1 + RECORDS -> IMAGE2 cases for every record type (Kafka's MetadataDelta semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from kraftlake.image import EMPTY, ImageLoader, MetadataImage, replay_all
from kraftlake.image.errors import ReplayError, TopicIdReusedError
from kraftlake.image.model import MIGRATING_DIR, Provenance
from kraftlake.protocol import messages as m
from tests.image.conftest import envelopes

T1 = "hSCzevIQRUa-ojqTd_8C5w"
T2 = "v9meXjI1RVKB-NSvF0GXDA"
D1 = "AiSXPLrdRM-HREWplhnaNA"
D2 = "g9EoeQygSS6o-hycpAfV-g"


def apply(image: MetadataImage, *records: Any) -> MetadataImage:
    start = image.provenance.offset + 1
    return replay_all(image, envelopes(list(records), start))


def broker(bid: int, epoch: int = 10, **kw: Any) -> Any:
    ep = m.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)
    return m.RegisterBrokerRecord(
        broker_id=bid, broker_epoch=epoch, incarnation_id=T1, end_points=(ep,), **kw
    )


def topic_with_partition(**kw: Any) -> MetadataImage:
    base = dict(
        partition_id=0,
        topic_id=T1,
        replicas=(1, 2, 3),
        isr=(1, 2, 3),
        leader=1,
        leader_epoch=5,
        partition_epoch=7,
    )
    base.update(kw)
    return apply(EMPTY, m.TopicRecord(name="orders", topic_id=T1), m.PartitionRecord(**base))


def part(image: MetadataImage, topic: str = "orders", pid: int = 0) -> Any:
    t = image.topics_by_name[topic]
    return t.partitions[pid]


def test_partition_record_defaults_directories_to_migrating() -> None:
    p = part(topic_with_partition())
    assert p.replicas == (1, 2, 3) and p.isr == (1, 2, 3) and p.leader == 1
    assert p.directories == (MIGRATING_DIR,) * 3
    assert p.elr == () and p.last_known_elr == ()
    assert (p.leader_epoch, p.partition_epoch) == (5, 7)


def test_partition_change_leader_unchanged_keeps_leader_epoch() -> None:
    img = apply(topic_with_partition(), m.PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 2)))
    p = part(img)
    assert p.isr == (1, 2) and p.leader == 1
    assert p.leader_epoch == 5 and p.partition_epoch == 8


def test_partition_change_same_leader_still_bumps_leader_epoch() -> None:
    img = apply(topic_with_partition(), m.PartitionChangeRecord(partition_id=0, topic_id=T1, leader=1))
    p = part(img)
    assert p.leader == 1 and p.leader_epoch == 6 and p.partition_epoch == 8


def test_partition_change_no_leader() -> None:
    p = part(apply(topic_with_partition(), m.PartitionChangeRecord(partition_id=0, topic_id=T1, leader=-1)))
    assert p.leader == -1 and p.leader_epoch == 6


def test_partition_change_null_list_unchanged_empty_list_empties() -> None:
    img = topic_with_partition(removing_replicas=(3,), adding_replicas=(4,))
    p = part(apply(img, m.PartitionChangeRecord(partition_id=0, topic_id=T1, removing_replicas=())))
    assert p.removing_replicas == () and p.adding_replicas == (4,) and p.isr == (1, 2, 3)
    p = part(apply(img, m.PartitionChangeRecord(partition_id=0, topic_id=T1, isr=())))
    assert p.isr == () and p.removing_replicas == (3,)


def test_partition_change_with_no_fields_bumps_partition_epoch_only() -> None:
    before = part(topic_with_partition())
    after = part(apply(topic_with_partition(), m.PartitionChangeRecord(partition_id=0, topic_id=T1)))
    assert after.partition_epoch == before.partition_epoch + 1
    assert after.leader_epoch == before.leader_epoch and after.isr == before.isr


def test_leader_recovery_state() -> None:
    img = apply(
        topic_with_partition(),
        m.PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2, leader_recovery_state=1),
    )
    assert part(img).leader_recovery_state == 1
    img = apply(img, m.PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(2,)))
    assert part(img).leader_recovery_state == 1  # -1 = unchanged
    img = apply(img, m.PartitionChangeRecord(partition_id=0, topic_id=T1, leader_recovery_state=0))
    assert part(img).leader_recovery_state == 0


def test_directories_and_replica_change() -> None:
    img = topic_with_partition(directories=(D1, D2, D1))
    assert part(img).directories == (D1, D2, D1)
    # replicas change without directories on known dirs: lengths mismatch, as in Kafka
    with pytest.raises(ReplayError):
        apply(img, m.PartitionChangeRecord(partition_id=0, topic_id=T1, replicas=(1, 2)))
    p = part(
        apply(
            img, m.PartitionChangeRecord(partition_id=0, topic_id=T1, replicas=(1, 2), directories=(D2, D2))
        )
    )
    assert p.replicas == (1, 2) and p.directories == (D2, D2)
    # unknown (migrating) directories follow the replica count
    p = part(
        apply(
            topic_with_partition(),
            m.PartitionChangeRecord(partition_id=0, topic_id=T1, replicas=(1, 2, 3, 4)),
        )
    )
    assert p.directories == (MIGRATING_DIR,) * 4
    with pytest.raises(ReplayError):
        apply(
            EMPTY,
            m.TopicRecord(name="x", topic_id=T2),
            m.PartitionRecord(partition_id=0, topic_id=T2, replicas=(1, 2), directories=(D1,)),
        )


def test_elr_and_clear_elr() -> None:
    img = apply(
        topic_with_partition(),
        m.PartitionChangeRecord(
            partition_id=0, topic_id=T1, isr=(1,), eligible_leader_replicas=(2, 3), last_known_elr=(3,)
        ),
    )
    p = part(img)
    assert p.elr == (2, 3) and p.last_known_elr == (3,) and p.partition_epoch == 8
    cleared = apply(img, m.ClearElrRecord(topic_name="orders"))
    p = part(cleared)
    assert p.elr == () and p.last_known_elr == () and p.partition_epoch == 9 and p.leader_epoch == 5
    assert part(apply(img, m.ClearElrRecord(topic_name=""))) == p
    # partitions without ELR are untouched
    assert part(apply(cleared, m.ClearElrRecord(topic_name=""))).partition_epoch == 9
    with pytest.raises(ReplayError):
        apply(img, m.ClearElrRecord(topic_name="nope"))


def test_remove_topic_removes_partitions_and_configs() -> None:
    img = apply(
        topic_with_partition(),
        m.PartitionRecord(partition_id=1, topic_id=T1, replicas=(2,), isr=(2,), leader=2),
        m.ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1"),
        m.ConfigRecord(resource_type=2, resource_name="other", name="retention.ms", value="2"),
        m.ConfigRecord(resource_type=4, resource_name="1", name="x", value="y"),
    )
    assert len(img.topics_by_name["orders"].partitions) == 2
    after = apply(img, m.RemoveTopicRecord(topic_id=T1))
    assert len(after.topics_by_id) == 0 and len(after.topics_by_name) == 0
    assert (2, "orders") not in after.configs
    assert after.configs[(2, "other")] == {"retention.ms": "2"}
    assert after.configs[(4, "1")] == {"x": "y"}
    with pytest.raises(ReplayError):
        apply(after, m.RemoveTopicRecord(topic_id=T1))
    with pytest.raises(ReplayError):
        apply(after, m.PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2))


def test_recreate_topic_with_same_name() -> None:
    img = apply(
        topic_with_partition(), m.RemoveTopicRecord(topic_id=T1), m.TopicRecord(name="orders", topic_id=T2)
    )
    assert img.topics_by_name["orders"].id == T2 and list(img.topics_by_id) == [T2]
    assert img.topics_by_name["orders"].partitions == {}


def test_config_set_and_null_value_deletes() -> None:
    img = apply(
        EMPTY,
        m.ConfigRecord(resource_type=4, resource_name="", name="a", value="1"),
        m.ConfigRecord(resource_type=4, resource_name="", name="b", value="2"),
    )
    assert img.configs[(4, "")] == {"a": "1", "b": "2"}
    img = apply(img, m.ConfigRecord(resource_type=4, resource_name="", name="a", value=None))
    assert img.configs[(4, "")] == {"b": "2"}
    img = apply(img, m.ConfigRecord(resource_type=4, resource_name="", name="b", value=None))
    assert (4, "") not in img.configs


def test_register_broker_and_reregistration_with_new_epoch_replaces() -> None:
    img = apply(EMPTY, broker(1, 10, rack="r1", log_dirs=(D2, D1)))
    b = img.brokers[1]
    assert b.epoch == 10 and b.fenced and b.rack == "r1"
    assert b.directories == tuple(
        sorted((D1, D2), key=lambda u: __import__("kraftlake.image.model", fromlist=["x"]).uuid_sort_key(u))
    )
    img = apply(img, m.UnfenceBrokerRecord(id=1, epoch=10))
    assert not img.brokers[1].fenced
    img = apply(img, broker(1, 20))
    b = img.brokers[1]
    assert b.epoch == 20 and b.fenced and b.rack == "" and b.directories == ()


def test_fence_unfence_and_stale_epoch() -> None:
    img = apply(EMPTY, broker(1, 10))
    img = apply(img, m.UnfenceBrokerRecord(id=1, epoch=10))
    assert not img.brokers[1].fenced
    img = apply(img, m.FenceBrokerRecord(id=1, epoch=10))
    assert img.brokers[1].fenced
    with pytest.raises(ReplayError):
        apply(img, m.UnfenceBrokerRecord(id=1, epoch=9))
    with pytest.raises(ReplayError):
        apply(img, m.FenceBrokerRecord(id=2, epoch=10))


def test_unregister_broker_ignores_the_epoch() -> None:
    # Kafka's ClusterDelta removes the broker whatever epoch the record carries
    img = apply(EMPTY, broker(1, 10), broker(2, 11))
    after = apply(img, m.UnregisterBrokerRecord(broker_id=1, broker_epoch=3))
    assert list(after.brokers) == [2]
    assert apply(after, m.UnregisterBrokerRecord(broker_id=7, broker_epoch=1)).brokers == after.brokers


def test_broker_registration_change() -> None:
    img = apply(EMPTY, broker(1, 10))
    img = apply(img, m.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1))
    assert not img.brokers[1].fenced
    img = apply(img, m.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=1))
    assert img.brokers[1].in_controlled_shutdown and not img.brokers[1].fenced
    img = apply(img, m.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, log_dirs=(D1,)))
    assert img.brokers[1].directories == (D1,)
    img = apply(img, m.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, log_dirs=()))
    assert img.brokers[1].directories == (D1,)  # an empty list means unchanged
    img = apply(img, m.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1))
    assert img.brokers[1].fenced
    with pytest.raises(ReplayError):
        apply(img, m.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=5))
    with pytest.raises(ReplayError):
        apply(img, m.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=11, fenced=1))


def test_register_controller() -> None:
    ep = m.RegisterControllerRecord.ControllerEndpoint(
        name="CONTROLLER", host="h", port=9093, security_protocol=0
    )
    img = apply(EMPTY, m.RegisterControllerRecord(controller_id=3000, incarnation_id=T2, end_points=(ep,)))
    assert img.controllers[3000].listeners[0].port == 9093


def test_unregister_controller() -> None:
    # Kafka 4.4's UnregisterControllerRecord: ClusterDelta removes the registration, and does not check
    # that there was one (the controller did before writing it)
    ep = m.RegisterControllerRecord.ControllerEndpoint(
        name="CONTROLLER", host="h", port=9093, security_protocol=0
    )
    img = apply(
        EMPTY,
        m.RegisterControllerRecord(controller_id=3000, incarnation_id=T2, end_points=(ep,)),
        m.RegisterControllerRecord(controller_id=3001, incarnation_id=T2, end_points=(ep,)),
    )
    img = apply(img, m.UnregisterControllerRecord(controller_id=3000))
    assert sorted(img.controllers) == [3001]
    assert apply(img, m.UnregisterControllerRecord(controller_id=7)).controllers == img.controllers


def test_features_and_level_zero_removes() -> None:
    img = apply(
        EMPTY,
        m.FeatureLevelRecord(name="metadata.version", feature_level=20),
        m.FeatureLevelRecord(name="kraft.version", feature_level=1),
    )
    assert img.features == {"metadata.version": 20, "kraft.version": 1} and img.metadata_version == 20
    img = apply(img, m.FeatureLevelRecord(name="kraft.version", feature_level=0))
    assert img.features == {"metadata.version": 20}
    with pytest.raises(ReplayError):
        apply(img, m.FeatureLevelRecord(name="metadata.version", feature_level=0))


def test_client_quotas() -> None:
    ent = (
        m.ClientQuotaRecord.EntityData(entity_type="user", entity_name="alice"),
        m.ClientQuotaRecord.EntityData(entity_type="client-id", entity_name=None),
    )
    img = apply(EMPTY, m.ClientQuotaRecord(entity=ent, key="producer_byte_rate", value=1024.0))
    key = (("client-id", None), ("user", "alice"))
    assert img.client_quotas[key] == {"producer_byte_rate": 1024.0}
    img = apply(img, m.ClientQuotaRecord(entity=ent, key="producer_byte_rate", remove=True))
    assert key not in img.client_quotas


def test_producer_ids() -> None:
    assert EMPTY.next_producer_id == -1
    img = apply(EMPTY, m.ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=1000))
    assert img.next_producer_id == 1000


def test_acls() -> None:
    acl = m.AccessControlEntryRecord(
        id=T1,
        resource_type=2,
        resource_name="orders",
        pattern_type=3,
        principal="User:alice",
        host="*",
        operation=3,
        permission_type=3,
    )
    img = apply(EMPTY, acl)
    assert img.acls[T1].principal == "User:alice"
    img = apply(img, m.RemoveAccessControlEntryRecord(id=T1))
    assert len(img.acls) == 0
    with pytest.raises(ReplayError):
        apply(img, m.RemoveAccessControlEntryRecord(id=T1))


def test_scram() -> None:
    rec = m.UserScramCredentialRecord(
        name="alice", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v", iterations=4096
    )
    img = apply(EMPTY, rec)
    assert img.scram[(1, "alice")].iterations == 4096
    img = apply(img, m.RemoveUserScramCredentialRecord(name="alice", mechanism=1))
    assert not img.scram


def test_delegation_tokens() -> None:
    rec = m.DelegationTokenRecord(
        owner="User:a",
        requester="User:a",
        renewers=("User:b",),
        issue_timestamp=1,
        max_timestamp=3,
        expiration_timestamp=2,
        token_id="tok",
    )
    img = apply(EMPTY, rec)
    assert img.delegation_tokens["tok"].renewers == ("User:b",)
    img = apply(img, m.RemoveDelegationTokenRecord(token_id="tok"))
    assert not img.delegation_tokens


def test_noop_and_zk_migration_only_advance_provenance() -> None:
    img = topic_with_partition()
    after = apply(img, m.NoOpRecord(), m.ZkMigrationStateRecord(zk_migration_state=3))
    assert after.state_equals(img)
    assert after.provenance == Provenance(3, 1, 1003)
    assert after != img


def test_a_topic_id_live_under_another_name_is_refused_naming_the_offset() -> None:
    img = topic_with_partition()  # orders under T1, offsets 0-1
    with pytest.raises(TopicIdReusedError) as info:
        apply(img, m.TopicRecord(name="payments", topic_id=T1))
    assert info.value.offset == 2 and str(info.value).startswith("offset 2: ")
    assert "'payments'" in str(info.value) and T1 in str(info.value) and "'orders'" in str(info.value)
    # the same within one delta: created and reused before the image is published
    with pytest.raises(TopicIdReusedError):
        replay_all(
            EMPTY,
            envelopes([m.TopicRecord(name="a", topic_id=T2), m.TopicRecord(name="b", topic_id=T2)]),
        )
    # and through the batch path the controllers replay with
    loader = ImageLoader(img)
    with pytest.raises(TopicIdReusedError) as info:
        loader.feed_batch(
            [
                m.ConfigRecord(resource_type=2, resource_name="orders", name="x", value="1"),
                m.TopicRecord(name="payments", topic_id=T1),
            ],
            10,
            1,
        )
    assert info.value.offset == 11


def test_a_deleted_topics_id_is_not_live_any_more() -> None:
    # the image holds live state only: a deleted topic's id is the validation suites' and the controller's
    # concern (Kafka's replay does not look back either)
    img = apply(
        topic_with_partition(), m.RemoveTopicRecord(topic_id=T1), m.TopicRecord(name="other", topic_id=T1)
    )
    assert img.topics_by_id[T1].name == "other"
