"""Transactions, batch vs record-by-record equivalence, snapshots, fixture logs, image at an offset."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_paths import KAFKA_LOGS
from sweeps import sweep

from kraftlake.image import EMPTY, ImageLoader, image_at, load_records, load_snapshot, replay_all
from kraftlake.image.errors import SnapshotWriteError, TransactionError
from kraftlake.image.render import image_json, shell_tree
from kraftlake.image.snapshot import snapshot_bytes, write_snapshot
from kraftlake.image.source import log_records, partition_dir, snapshots
from kraftlake.protocol import messages as m
from tests.image.conftest import ctrl, envelopes

FIXTURES = KAFKA_LOGS
T = ["hSCzevIQRUa-ojqTd_8C5w", "v9meXjI1RVKB-NSvF0GXDA", "AiSXPLrdRM-HREWplhnaNA"]


def base_records() -> list[Any]:
    return [
        m.FeatureLevelRecord(name="metadata.version", feature_level=21),
        m.TopicRecord(name="a", topic_id=T[0]),
        m.PartitionRecord(partition_id=0, topic_id=T[0], replicas=(1, 2), isr=(1, 2), leader=1),
    ]


def test_transaction_applied_atomically_at_end() -> None:
    recs = envelopes(
        [
            *base_records(),
            m.BeginTransactionRecord(name="create b"),
            m.TopicRecord(name="b", topic_id=T[1]),
            m.PartitionRecord(partition_id=0, topic_id=T[1], replicas=(2,), isr=(2,), leader=2),
            m.EndTransactionRecord(),
        ]
    )
    before = replay_all(EMPTY, recs[:3])
    for n in (4, 5, 6):  # inside the open transaction: the state before BeginTransaction
        img = replay_all(EMPTY, recs[:n])
        assert img.state_equals(before) and "b" not in img.topics_by_name
        assert img.provenance.offset == n - 1
        txn = img.transaction
        assert txn is not None and txn.name == "create b" and txn.begin_offset == 3
        assert len(txn.records) == n - 4
        assert image_json(img)["provenance"]["open_transaction"]["begin_offset"] == 3
        assert load_records(recs[:n]) == img
    done = replay_all(EMPTY, recs)
    assert done.transaction is None and "b" in done.topics_by_name
    assert load_records(recs) == done
    # resuming from an image inside the transaction
    mid = replay_all(EMPTY, recs[:5])
    assert replay_all(mid, recs[5:]) == done
    assert load_records(recs[5:], mid) == done
    with pytest.raises(SnapshotWriteError):
        snapshot_bytes(mid)


def test_aborted_transaction_is_not_applied() -> None:
    recs = envelopes(
        [
            *base_records(),
            m.BeginTransactionRecord(name="t"),
            m.TopicRecord(name="b", topic_id=T[1]),
            m.PartitionChangeRecord(partition_id=0, topic_id=T[0], leader=2),
            m.AbortTransactionRecord(reason="failover"),
            m.PartitionChangeRecord(partition_id=0, topic_id=T[0], isr=(1,)),
        ]
    )
    img = replay_all(EMPTY, recs)
    assert "b" not in img.topics_by_name
    p = img.topics_by_name["a"].partitions[0]
    assert p.leader == 1 and p.isr == (1,) and p.partition_epoch == 0  # -1 + one change
    assert load_records(recs) == img


def test_transaction_errors() -> None:
    with pytest.raises(TransactionError):
        replay_all(EMPTY, envelopes([m.EndTransactionRecord()]))
    with pytest.raises(TransactionError):
        load_records(envelopes([m.AbortTransactionRecord()]))
    with pytest.raises(TransactionError):
        replay_all(EMPTY, envelopes([m.BeginTransactionRecord(), m.BeginTransactionRecord()]))


def test_control_records_only_advance_provenance() -> None:
    img = replay_all(EMPTY, envelopes(base_records()))
    after = replay_all(img, [ctrl(m.LeaderChangeMessage(leader_id=1), 3, epoch=2)])
    assert after.state_equals(img) and after.provenance.offset == 3 and after.provenance.epoch == 2


# -- property: record-by-record replay == batch delta application ---------------------------------------------

BROKERS = [1, 2, 3]


@st.composite
def record_sequences(draw: st.DrawFn) -> list[Any]:
    """Random valid record sequences: each record is chosen against a model of what exists."""
    recs: list[Any] = [m.FeatureLevelRecord(name="metadata.version", feature_level=21)]
    epochs: dict[int, int] = {}
    topics: dict[str, tuple[str, int]] = {}  # id -> (name, partitions)
    acls: set[str] = set()
    in_txn = False
    n = draw(st.integers(1, 40))
    for i in range(n):
        kind = draw(
            st.sampled_from(
                [
                    "broker",
                    "fence",
                    "unreg",
                    "topic",
                    "change",
                    "remove",
                    "config",
                    "quota",
                    "pid",
                    "acl",
                    "scram",
                    "token",
                    "feature",
                    "txn",
                    "elr",
                ]
            )
        )
        if kind == "broker":
            b = draw(st.sampled_from(BROKERS))
            epochs[b] = i + 100
            recs.append(m.RegisterBrokerRecord(broker_id=b, broker_epoch=i + 100, incarnation_id=T[2]))
        elif kind == "fence" and epochs:
            b = draw(st.sampled_from(sorted(epochs)))
            recs.append(
                draw(
                    st.sampled_from(
                        [
                            m.FenceBrokerRecord(id=b, epoch=epochs[b]),
                            m.UnfenceBrokerRecord(id=b, epoch=epochs[b]),
                            m.BrokerRegistrationChangeRecord(
                                broker_id=b, broker_epoch=epochs[b], fenced=-1, in_controlled_shutdown=1
                            ),
                        ]
                    )
                )
            )
        elif kind == "unreg" and epochs:
            b = draw(st.sampled_from(sorted(epochs)))
            del epochs[b]
            recs.append(m.UnregisterBrokerRecord(broker_id=b, broker_epoch=0))
        elif kind == "topic":
            tid = draw(st.sampled_from(T))
            if tid in topics:
                continue
            name = draw(st.sampled_from(["x", "y", "z"]))
            if any(nm == name for nm, _ in topics.values()):
                continue
            nparts = draw(st.integers(0, 3))
            topics[tid] = (name, nparts)
            recs.append(m.TopicRecord(name=name, topic_id=tid))
            for p in range(nparts):
                recs.append(
                    m.PartitionRecord(
                        partition_id=p, topic_id=tid, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1
                    )
                )
        elif kind == "change" and any(np for _, np in topics.values()):
            tid = draw(st.sampled_from(sorted(t for t, (_, np) in topics.items() if np)))
            p = draw(st.integers(0, topics[tid][1] - 1))
            lists = st.none() | st.lists(st.sampled_from(BROKERS), max_size=3, unique=True).map(tuple)
            recs.append(
                m.PartitionChangeRecord(
                    partition_id=p,
                    topic_id=tid,
                    isr=draw(lists),
                    leader=draw(st.sampled_from([-2, -1, 1, 2, 3])),
                    leader_recovery_state=draw(st.sampled_from([-1, 0, 1])),
                    eligible_leader_replicas=draw(lists),
                    last_known_elr=draw(lists),
                    removing_replicas=draw(lists),
                )
            )
        elif kind == "elr" and topics:
            name = draw(st.sampled_from(["", *sorted(nm for nm, _ in topics.values())]))
            recs.append(m.ClearElrRecord(topic_name=name))
        elif kind == "remove" and topics:
            tid = draw(st.sampled_from(sorted(topics)))
            del topics[tid]
            recs.append(m.RemoveTopicRecord(topic_id=tid))
        elif kind == "config":
            recs.append(
                m.ConfigRecord(
                    resource_type=2,
                    resource_name=draw(st.sampled_from(["x", "y"])),
                    name=draw(st.sampled_from(["a", "b"])),
                    value=draw(st.none() | st.sampled_from(["1", "2"])),
                )
            )
        elif kind == "quota":
            ent = (
                m.ClientQuotaRecord.EntityData(
                    entity_type="user", entity_name=draw(st.sampled_from(["u", None]))
                ),
            )
            recs.append(m.ClientQuotaRecord(entity=ent, key="k", value=2.0, remove=draw(st.booleans())))
        elif kind == "pid":
            recs.append(m.ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=i * 1000))
        elif kind == "acl":
            aid = draw(st.sampled_from(T))
            if aid in acls:
                acls.discard(aid)
                recs.append(m.RemoveAccessControlEntryRecord(id=aid))
            else:
                acls.add(aid)
                recs.append(
                    m.AccessControlEntryRecord(id=aid, resource_name="r", principal="User:u", host="*")
                )
        elif kind == "scram":
            user = draw(st.sampled_from(["u", "v"]))
            recs.append(
                draw(
                    st.sampled_from(
                        [
                            m.UserScramCredentialRecord(name=user, mechanism=1, salt=b"s", iterations=i),
                            m.RemoveUserScramCredentialRecord(name=user, mechanism=1),
                        ]
                    )
                )
            )
        elif kind == "token":
            recs.append(
                draw(
                    st.sampled_from(
                        [
                            m.DelegationTokenRecord(token_id="t", owner="o"),
                            m.RemoveDelegationTokenRecord(token_id="t"),
                        ]
                    )
                )
            )
        elif kind == "feature":
            recs.append(m.FeatureLevelRecord(name="group.version", feature_level=draw(st.integers(0, 2))))
        elif kind == "txn":
            if in_txn:
                recs.append(draw(st.sampled_from([m.EndTransactionRecord(), m.AbortTransactionRecord()])))
                in_txn = False
                # an abort invalidates the model: stop here to keep the sequence valid
                if type(recs[-1]).__name__ == "AbortTransactionRecord":
                    break
            else:
                recs.append(m.BeginTransactionRecord(name="t"))
                in_txn = True
    return recs


@settings(max_examples=sweep(150, 40), deadline=None)
@given(record_sequences(), st.integers(1, 10))
def test_record_by_record_equals_batch(records: list[Any], cut: int) -> None:
    envs = envelopes(records)
    one_by_one = replay_all(EMPTY, envs)
    assert load_records(envs) == one_by_one
    # batches of arbitrary size, asking for an image at each boundary
    loader = ImageLoader()
    for i, e in enumerate(envs):
        loader.feed(e)
        if i % cut == 0:
            assert loader.image() == replay_all(EMPTY, envs[: i + 1])
    assert loader.image() == one_by_one
    if one_by_one.transaction is None:
        # snapshot round trip: image(snapshot(image)) == image
        data = snapshot_bytes(one_by_one)
        from kraftlake.logformat.reader import read_batches
        from kraftlake.records.reader import iter_records

        rebuilt = load_records(r for r in iter_records(read_batches(data)) if not r.is_control)
        assert rebuilt.state_equals(one_by_one)


def test_clear_elr_reaches_a_topic_deleted_and_created_again_in_one_delta() -> None:
    # found by test_record_by_record_equals_batch: the batch's delta skipped the re-created topic
    tid = "hSCzevIQRUa-ojqTd_8C5w"
    records = [
        m.FeatureLevelRecord(name="metadata.version", feature_level=21),
        m.TopicRecord(name="x", topic_id=tid),
        m.BeginTransactionRecord(name="t"),
        m.RemoveTopicRecord(topic_id=tid),
        m.EndTransactionRecord(),
        m.TopicRecord(name="x", topic_id=tid),
        m.PartitionRecord(partition_id=0, topic_id=tid, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1),
        m.PartitionChangeRecord(partition_id=0, topic_id=tid, leader=-2, last_known_elr=(1,)),
        m.ClearElrRecord(topic_name=""),
    ]
    envs = envelopes(records)
    batch = load_records(envs)
    assert batch == replay_all(EMPTY, envs)
    p = batch.topics_by_id[tid].partitions[0]
    assert (list(p.last_known_elr), p.partition_epoch) == ([], 1)


# -- files -----------------------------------------------------------------------------------------------------


def test_snapshot_file_round_trip(tmp_path: Path) -> None:
    img = replay_all(
        EMPTY,
        envelopes([*base_records(), m.ConfigRecord(resource_type=2, resource_name="a", name="k", value="v")]),
    )
    path = write_snapshot(img, tmp_path)
    assert path.name == "00000000000000000004-0000000001.checkpoint"
    assert load_snapshot(path) == img


@pytest.mark.parametrize("name", ["kafkademo-multi-epoch"])
def test_fixture_log_and_snapshot_agree(tmp_path: Path, name: str) -> None:
    d = partition_dir(FIXTURES / name)
    records = list(log_records(d))
    end = image_at(d)
    assert end == replay_all(EMPTY, records)
    assert end.provenance.offset == records[-1].offset
    # a snapshot at every 500th offset: image of the log at E-1 == image of the snapshot with end offset E
    work = tmp_path / "__cluster_metadata-0"
    shutil.copytree(d, work)
    for e in range(1, len(records), 500):
        img = image_at(work, e - 1)
        assert img.provenance.offset == e - 1
        assert load_snapshot(write_snapshot(img, work)) == img
    # snapshot plus the tail of the log gives the same images
    assert len(snapshots(work)) > 1
    for n in (0, 3, 501, 1700, records[-1].offset):
        assert image_at(work, n) == image_at(d, n)


def test_image_at_offset_includes_the_record_at_offset() -> None:
    d = partition_dir(FIXTURES / "kafkademo-multi-epoch")
    records = list(log_records(d))
    idx = next(i for i, r in enumerate(records) if r.type == "RegisterBrokerRecord")
    at = image_at(d, records[idx].offset)
    before = image_at(d, records[idx].offset - 1)
    reg = records[idx].record
    assert at.brokers[reg.broker_id].epoch == reg.broker_epoch
    assert (
        before.brokers.get(reg.broker_id) is None or before.brokers[reg.broker_id].epoch != reg.broker_epoch
    )


def test_fixture_shell_tree() -> None:
    d = partition_dir(FIXTURES / "minimal")
    text = shell_tree(image_at(d))
    assert "      PartitionRegistration(replicas=[1], directories=[AiSXPLrdRM-HREWplhnaNA], isr=[1]" in text
    assert "  metadataVersion:\n    Optional[3.8-IV0]\n" in text


def test_snapshot_values_reuse_the_bytes_of_unchanged_partitions() -> None:
    from kraftlake.image.snapshot import SnapshotValues, snapshot_records
    from kraftlake.records.serde import encode_metadata_record

    def encoded(image: Any) -> list[bytes]:
        return [encode_metadata_record(r, v) for r, v in snapshot_records(image)]

    records: list[Any] = [m.FeatureLevelRecord(name="metadata.version", feature_level=21)]
    for t, topic_id in enumerate(T):
        records.append(m.TopicRecord(name=f"t{t}", topic_id=topic_id))
        records += [
            m.PartitionRecord(
                partition_id=p, topic_id=topic_id, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1 + p % 3
            )
            for p in range(10)
        ]
    first = replay_all(EMPTY, envelopes(records))
    cache = SnapshotValues()
    assert list(cache.values(first)) == encoded(first)
    assert (cache.reused, cache.encoded) == (0, 30)
    changes = [
        m.PartitionChangeRecord(partition_id=4, topic_id=T[1], isr=(1, 2)),
        m.PartitionChangeRecord(partition_id=0, topic_id=T[2], leader=3, isr=(3,)),
        m.RemoveTopicRecord(topic_id=T[0]),
        m.TopicRecord(name="t0", topic_id="AAAAAAAAAAAAAAAAAAAAAA"),
        m.PartitionRecord(
            partition_id=0, topic_id="AAAAAAAAAAAAAAAAAAAAAA", replicas=(2,), isr=(2,), leader=2
        ),
    ]
    second = replay_all(first, envelopes(changes, start=len(records)))
    assert list(cache.values(second)) == encoded(second)
    assert (cache.reused, cache.encoded) == (18, 3)  # 20 partitions left in t1, t2 of which 2 changed; 1 new
    # 12 of the 33 cached records are of partitions gone or changed: more than a quarter, so it starts over
    assert list(cache.values(second)) == encoded(second) and (cache.reused, cache.encoded) == (0, 21)
    assert list(cache.values(second)) == encoded(second) and (cache.reused, cache.encoded) == (21, 0)


def test_shell_tree_prints_a_one_version_range_as_kafka_does() -> None:
    """A migrating ZooKeeper broker registers ``metadata.version`` min == max (its IBP); Kafka's
    ``VersionRange.toString`` prints one number then, a range otherwise."""
    feature = m.RegisterBrokerRecord.BrokerFeature
    reg = m.RegisterBrokerRecord(
        broker_id=0,
        broker_epoch=11,
        incarnation_id=T[2],
        is_migrating_zk_broker=True,
        features=(
            feature(name="kraft.version", min_supported_version=0, max_supported_version=1),
            feature(name="metadata.version", min_supported_version=21, max_supported_version=21),
        ),
    )
    text = shell_tree(load_records(envelopes([*base_records(), reg])))
    assert "supportedFeatures={kraft.version: 0-1, metadata.version: 21}" in text


def test_shell_tree_prints_a_delegation_token_as_kafka_does() -> None:
    """Kafka's ``DelegationTokenDataNode`` line (4.3.1's shell, seen on 3.9.1's token): unbalanced parentheses,
    the renewers joined by a space."""
    token = m.DelegationTokenRecord(
        owner="User:alice",
        requester="User:alice",
        renewers=("User:bob", "User:carol"),
        issue_timestamp=1000,
        max_timestamp=3000,
        expiration_timestamp=2000,
        token_id="tok-1",
    )
    text = shell_tree(load_records(envelopes([*base_records(), token])))
    assert (
        "delegationToken:\n  tok-1:\n    DelegationTokenDatatokenId=tok-1(owner=User:alice(tokenRequester=User:alice"
        "(renewers=User:bob User:carol, issueTimestamp=1000, maxTimestamp=3000), expiryTimestamp=2000\n"
    ) in text
