"""The fast paths of replay (partition records without a delta, the topic name view, shared tuples) agree with
the general path on a synthetic cluster log with churn, topic deletion and re-creation."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlake.image import EMPTY, ImageLoader, load_log, replay
from kraftlake.image.errors import ReplayError
from kraftlake.image.source import log_records
from kraftlake.protocol import messages as m
from kraftlake.sim.workloads.churn import generate_log
from tests.image.conftest import envelopes, mr

T1 = "hSCzevIQRUa-ojqTd_8C5w"
T2 = "v9meXjI1RVKB-NSvF0GXDA"


@pytest.fixture(scope="module")
def churn_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("churn") / "__cluster_metadata-0"
    generate_log(d, 60_000, 40, brokers=7, per_topic=10, seed=3)
    return d


def test_record_by_record_equals_batches_and_slices(churn_log: Path) -> None:
    records = list(log_records(churn_log))
    types = {r.type for r in records}
    assert {"PartitionChangeRecord", "RemoveTopicRecord", "BrokerRegistrationChangeRecord"} <= types
    one = EMPTY
    loader = ImageLoader()
    for i, r in enumerate(records):
        one = replay(one, r)
        loader.feed(r)
        if i % 997 == 0:
            assert loader.image() == one
    assert loader.image() == one
    assert load_log(churn_log) == one
    assert one.provenance.offset == records[-1].offset
    # names point at the live topic after deletions and re-creations under new ids
    assert sorted(one.topics_by_name) == [f"topic-{i:07d}" for i in range(40)]
    for name, t in one.topics_by_name.items():
        assert t.name == name and one.topics_by_id[t.id] is t


def test_partition_fast_path_errors_match_the_general_path() -> None:
    base = replay(EMPTY, mr(m.TopicRecord(name="a", topic_id=T1), 0))
    with pytest.raises(ReplayError):
        replay(base, mr(m.PartitionChangeRecord(topic_id=T1, partition_id=0, isr=(1,)), 1))
    with pytest.raises(ReplayError):
        replay(base, mr(m.PartitionRecord(topic_id=T2, partition_id=0, replicas=(1,), isr=(1,)), 1))


def test_topics_by_name_view_follows_deletes_and_renames() -> None:
    recs = [
        m.TopicRecord(name="a", topic_id=T1),
        m.PartitionRecord(topic_id=T1, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1),
        m.RemoveTopicRecord(topic_id=T1),
        m.TopicRecord(name="a", topic_id=T2),
    ]
    img = EMPTY
    for r in envelopes(recs):
        img = replay(img, r)
    assert list(img.topics_by_name) == ["a"] and img.topics_by_name["a"].id == T2
    assert "a" in img.topics_by_name and img.topics_by_name.get("b") is None and len(img.topics_by_name) == 1
    assert img.topic("a") is img.topics_by_id[T2]


def test_equal_replica_sets_share_one_tuple() -> None:
    recs = [m.TopicRecord(name="a", topic_id=T1)] + [
        m.PartitionRecord(topic_id=T1, partition_id=p, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
        for p in range(3)
    ]
    img = EMPTY
    for r in envelopes(recs):
        img = replay(img, r)
    parts = img.topics_by_id[T1].partitions
    assert parts[0].replicas is parts[2].replicas and parts[0].isr is parts[1].replicas
    assert parts[0].directories is parts[1].directories


def _feed_in_batches(loader: ImageLoader, records: list, size: int) -> None:
    """``feed_batch`` over runs of consecutive non-control records of one epoch (control records one by one)."""
    run: list = []

    def flush() -> None:
        if run:
            loader.feed_batch(
                [r.record for r in run], run[0].offset, run[0].epoch, [r.timestamp for r in run]
            )
            run.clear()

    for r in records:
        if r.is_control:
            flush()
            loader.feed(r)
            continue
        if run and (len(run) == size or r.epoch != run[0].epoch or r.offset != run[-1].offset + 1):
            flush()
        run.append(r)
    flush()


@pytest.mark.parametrize("size", [1, 7, 1000])
def test_feed_batch_equals_record_by_record(churn_log: Path, size: int) -> None:
    records = list(log_records(churn_log))[:20_000]
    loader = ImageLoader()
    _feed_in_batches(loader, records, size)
    expected = EMPTY
    for r in records:
        expected = replay(expected, r)
    got = loader.image()
    assert got == expected and got.provenance == expected.provenance


@pytest.mark.parametrize("size", [1, 3, 100])
def test_feed_batch_with_transactions(size: int) -> None:
    recs = [
        m.TopicRecord(name="a", topic_id=T1),
        m.PartitionRecord(topic_id=T1, partition_id=0, replicas=(1, 2), isr=(1, 2), leader=1),
        m.BeginTransactionRecord(name="t"),
        m.PartitionChangeRecord(topic_id=T1, partition_id=0, isr=(1,)),
        m.NoOpRecord(),
        m.EndTransactionRecord(),
        m.BeginTransactionRecord(name="u"),
        m.PartitionChangeRecord(topic_id=T1, partition_id=0, leader=2, isr=(2,)),
        m.AbortTransactionRecord(),
        m.TopicRecord(name="b", topic_id=T2),
        m.BeginTransactionRecord(name="v"),
        m.PartitionRecord(topic_id=T2, partition_id=0, replicas=(3,), isr=(3,), leader=3),
    ]
    envs = list(envelopes(recs))
    for cut in range(1, len(envs) + 1):
        loader = ImageLoader()
        _feed_in_batches(loader, envs[:cut], size)
        expected = EMPTY
        for r in envs[:cut]:
            expected = replay(expected, r)
        got = loader.image()
        assert (
            got == expected
            and got.provenance == expected.provenance
            and got.transaction == expected.transaction
        )
