"""The history rules the simulators check after every command: topic ids never reused, epochs never back."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kraftlake.controller import TopicIdMinter, random_uuid
from kraftlake.image import EMPTY, MetadataImage, replay_all
from kraftlake.protocol import messages as m
from kraftlake.sim.cluster import DEFAULT_WEIGHTS, ClusterSimConfig, ClusterSimulator
from kraftlake.sim.errors import InvariantViolation
from kraftlake.sim.history_rules import HistoryRules
from tests.image.conftest import envelopes

T1 = "hSCzevIQRUa-ojqTd_8C5w"


def _apply(image: MetadataImage, *records: Any) -> MetadataImage:
    return replay_all(image, envelopes(list(records), image.provenance.offset + 1))


def _step(rules: HistoryRules, image: MetadataImage, *records: Any) -> MetadataImage:
    after = _apply(image, *records)
    rules.check(records, after)
    return after


def _partition(**kw: Any) -> Any:
    base: dict[str, Any] = dict(partition_id=0, topic_id=T1, replicas=(1, 2), isr=(1, 2), leader=1)
    base.update(kw)
    return m.PartitionRecord(**base)


def test_a_deleted_topics_id_reused_is_a_violation() -> None:
    rules = HistoryRules(EMPTY)
    img = _step(rules, EMPTY, m.TopicRecord(name="a", topic_id=T1), _partition())
    img = _step(rules, img, m.PartitionChangeRecord(topic_id=T1, partition_id=0, leader=2))
    img = _step(rules, img, m.RemoveTopicRecord(topic_id=T1))
    with pytest.raises(InvariantViolation) as info:
        _step(rules, img, m.TopicRecord(name="b", topic_id=T1), _partition())
    assert info.value.invariant == "topic_id_unique" and "'a'" in str(info.value)
    assert rules.checked == 3


def test_partition_and_leader_epochs_never_go_back() -> None:
    rules = HistoryRules(EMPTY)
    img = _step(
        rules, EMPTY, m.TopicRecord(name="a", topic_id=T1), _partition(leader_epoch=4, partition_epoch=9)
    )
    with pytest.raises(InvariantViolation) as info:
        # a partition written again from scratch under its id: its epochs start over
        _step(rules, img, _partition(leader_epoch=0, partition_epoch=0))
    assert info.value.invariant == "partition_epochs_increase"
    rules = HistoryRules(img)  # from an image: the epochs it holds are the history so far
    with pytest.raises(InvariantViolation) as info:
        _step(rules, img, _partition(leader_epoch=3, partition_epoch=10))
    assert info.value.invariant == "leader_epochs_never_decrease"


class StartingOverMinter(TopicIdMinter):
    """Bug: the generator starts over at each term, as a controller rebuilt from its data directory did."""

    def start_term(self, epoch: int, end_offset: int) -> None:
        self._rng = random.Random(self.seed)

    def mint(self, image: MetadataImage) -> str:
        while (topic_id := random_uuid(self._rng)) in image.topics_by_id:
            pass
        return topic_id


def test_the_simulator_catches_a_controller_that_reuses_topic_ids() -> None:
    weights = dict(DEFAULT_WEIGHTS, failover=2.0, create_topic=4.0, delete_topic=3.0)
    config = ClusterSimConfig(
        brokers=4, topics=4, partitions_per_topic=2, events=400, seed=11, weights=weights
    )
    sim = ClusterSimulator(config)
    for c in sim.controllers:
        c.topic_ids = StartingOverMinter(c.topic_ids.seed, c.node_id, EMPTY)
    with pytest.raises(InvariantViolation) as info:
        sim.run()
    assert info.value.invariant == "topic_id_unique"
    # the same simulation with the controllers' own minters keeps every rule
    sim = ClusterSimulator(config)
    summary = sim.run()
    assert summary.failovers >= 2 and sim.history_rules is not None and sim.history_rules.checked > 200


def _broker(bid: int, epoch: int) -> Any:
    ep = m.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)
    return m.RegisterBrokerRecord(broker_id=bid, broker_epoch=epoch, incarnation_id=T1, end_points=(ep,))


def test_broker_epochs_and_producer_id_blocks_never_repeat() -> None:
    rules = HistoryRules(EMPTY)
    img = _step(
        rules, EMPTY, _broker(1, 10), m.ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000)
    )
    img = _step(
        rules, img, _broker(1, 20), m.ProducerIdsRecord(broker_id=1, broker_epoch=20, next_producer_id=2000)
    )
    with pytest.raises(InvariantViolation) as info:
        _step(rules, img, _broker(1, 20))
    assert info.value.invariant == "broker_epochs_increase"
    with pytest.raises(InvariantViolation) as info:
        # a block handed out again (a controller serving from a state that lost the last block)
        HistoryRules(img).check(
            [m.ProducerIdsRecord(broker_id=1, broker_epoch=20, next_producer_id=2000)], img
        )
    assert info.value.invariant == "producer_id_blocks_disjoint"
