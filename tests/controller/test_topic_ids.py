"""Topic ids never collide: across restarts of a seeded controller, across terms and voters, and with ids seen."""

from __future__ import annotations

import random

from kraftlake.controller import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
    Listener,
    MemoryMetadataLog,
    QuorumController,
    TopicIdMinter,
    random_uuid,
)
from kraftlake.image import EMPTY
from kraftlake.protocol import messages as m


def _brokers(c: QuorumController, n: int = 3) -> None:
    rng = random.Random(1)
    for b in range(n):
        req = BrokerRegistrationRequest(
            b, random_uuid(rng), (Listener("PLAINTEXT", "localhost", 9092 + b),), log_dirs=(random_uuid(rng),)
        )
        res = c.handle_register_broker(req, 0)
        c.execute(res)
    for b, reg in c.image.brokers.items():
        c.execute(c.handle_heartbeat(BrokerHeartbeatRequest(b, reg.epoch, c.next_offset - 1), 0))


def _create(c: QuorumController, *names: str) -> list[str]:
    res = c.handle_create_topics([CreatableTopic(n, 1, 1) for n in names])
    c.execute(res)
    return [r.topic_id for r in res.response.topics]


def test_a_seeded_controller_rebuilt_from_its_log_never_draws_an_earlier_terms_ids() -> None:
    log = MemoryMetadataLog()
    first = QuorumController(node_id=1, seed=42)
    first.activate(1, log, 0)
    _brokers(first)
    old = _create(first, "a", "b", "c", "d")
    first.execute(first.handle_delete_topics(["a", "b", "c", "d"]))
    # the node restarts: a new controller with the same seed replays the log, and leads again at epoch 3
    again = QuorumController(node_id=1, seed=42)
    again.handle_commit(log.records)
    again.activate(3, log, 0)
    new = _create(again, "e", "f", "g", "h")
    assert not set(new) & set(old)
    # reproducible: the same seed, node, epoch and log end draw the same ids
    twin_log = MemoryMetadataLog()
    twin = QuorumController(node_id=1, seed=42)
    twin.activate(1, twin_log, 0)
    _brokers(twin)
    assert _create(twin, "a", "b", "c", "d") == old


def test_voters_with_one_seed_draw_apart_and_unseeded_controllers_draw_at_random() -> None:
    ids = []
    for node, epoch in ((1, 1), (2, 2), (3, 3)):
        c = QuorumController(node_id=node, seed=7)
        c.activate(epoch, MemoryMetadataLog(), 0)
        _brokers(c)
        ids.extend(_create(c, "x", "y"))
    assert len(set(ids)) == 6
    drawn = []
    for _ in range(2):
        c = QuorumController(node_id=1)
        c.activate(1, MemoryMetadataLog(), 0)
        _brokers(c)
        drawn.extend(_create(c, "x", "y"))
    assert len(set(drawn)) == 4


def test_a_draw_equal_to_an_id_seen_is_drawn_again() -> None:
    probe = TopicIdMinter(5, 1, EMPTY)
    probe.start_term(2, 100)
    first = probe.mint(EMPTY)
    minter = TopicIdMinter(5, 1, EMPTY)
    minter.start_term(2, 100)
    minter.observe_all([m.TopicRecord(name="gone", topic_id=first)])  # a deleted topic of the history
    drawn = minter.mint(EMPTY)
    assert drawn != first and minter.taken(drawn) and minter.taken(first)
