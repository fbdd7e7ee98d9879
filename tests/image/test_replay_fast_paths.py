"""The fast paths of replay (partition records without a delta, the topic name view, shared tuples) agree with
the general path on a synthetic cluster log with churn, topic deletion and re-creation."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlake.bench.bench_image import generate_log
from kraftlake.image import EMPTY, ImageLoader, load_log, replay
from kraftlake.image.errors import ReplayError
from kraftlake.image.source import log_records
from kraftlake.protocol import messages as m
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
