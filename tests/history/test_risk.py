"""The data-at-risk oracle (pure, no Spark) on hand-made logs and on the simulator's risk scenarios, and the
interval computation over the history tables' rows against it."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kraftlake.history import HistoryBuilder
from kraftlake.history.risk import RiskWindow, risk_windows
from kraftlake.history.risk_intervals import risk_windows_from_history
from kraftlake.protocol import messages as m
from kraftlake.records.envelope import MetadataRecord
from kraftlake.sim.risk_scenarios import RISK_SCENARIOS
from kraftlake.sim.workloads.entities import synthetic_records
from tests.image.conftest import envelopes

T0, T1 = "hSCzevIQRUa-ojqTd_8C5w", "v9meXjI1RVKB-NSvF0GXDA"
TS = 1000  # tests.image.conftest.mr's timestamps: TS + offset


def broker(bid: int) -> Any:
    ep = m.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)
    return m.RegisterBrokerRecord(
        broker_id=bid, broker_epoch=10, incarnation_id=T1, end_points=(ep,), fenced=False
    )


def config(rtype: int, name: str, value: str | None) -> Any:
    return m.ConfigRecord(resource_type=rtype, resource_name=name, name="min.insync.replicas", value=value)


def partition(
    tid: str, pid: int, replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, **kw: Any
) -> Any:
    return m.PartitionRecord(partition_id=pid, topic_id=tid, replicas=replicas, isr=isr, leader=leader, **kw)


def change(tid: str, **kw: Any) -> Any:
    return m.PartitionChangeRecord(partition_id=0, topic_id=tid, **kw)


def w(
    kind: str, f: int, t: int | None, leader: int, isr: tuple[int, ...], *extra: Any, **kw: Any
) -> RiskWindow:
    topic = kw.pop("topic", "orders")
    tid = kw.pop("tid", T0)
    pid = kw.pop("pid", 0)
    # an election is one offset: both timestamps are its record's
    to_ts = TS + f if kind.endswith("_election") else None if t is None else TS + t
    return RiskWindow(kind, topic, tid, pid, f, t, TS + f, to_ts, leader, isr, *extra, **kw)


def via_history(records: list[MetadataRecord]) -> list[RiskWindow]:
    """The interval computation over the tables the history builder makes of ``records``."""
    versions = HistoryBuilder().feed(records).versions
    return risk_windows_from_history(
        versions.get("partitions", []),
        versions.get("configs", []),
        versions.get("brokers", []),
        {r.offset: r.timestamp for r in records},
    )


def check(records: list[Any], expected: list[RiskWindow]) -> None:
    log = envelopes(records)
    got = risk_windows(log)
    assert got == sorted(expected, key=RiskWindow.sort_key)
    assert via_history(log) == got


def test_min_isr_follows_topic_broker_cluster_and_default_as_they_change() -> None:
    """A config change mid window ends it; the topic's override wins, then the leader's broker config, the
    cluster default and Kafka's 1; a value that is not a number is passed over."""
    check(
        [
            broker(0),
            broker(1),
            broker(2),
            config(4, "", "2"),
            m.TopicRecord(name="orders", topic_id=T0),
            config(2, "orders", "3"),
            partition(T0, 0, (0, 1, 2), (0, 1), 0),  # 6: 2 < 3 (topic)
            config(2, "orders", "2"),  # 7: 2 >= 2
            config(4, "0", "3"),  # 8: the topic's 2 still wins
            config(2, "orders", None),  # 9: broker 0's 3
            config(4, "0", "x"),  # 10: not a number: the cluster's 2
            config(4, "", None),  # 11: Kafka's 1
            change(T0, isr=(0,)),  # 12: the leader alone
            config(4, "", "2"),  # 13: 1 < 2 (cluster)
            config(4, "", None),  # 14
            change(T0, leader=-1),  # 15: offline
            change(T0, leader=0),  # 16: back, from the ISR
        ],
        [
            w("under_min_isr", 6, 7, 0, (0, 1), 3, "topic"),
            w("under_min_isr", 9, 10, 0, (0, 1), 3, "broker"),
            w("under_min_isr", 13, 14, 0, (0,), 2, "cluster"),
            w("under_min_isr", 15, 16, -1, (0,), 1, "default"),
            w("isr_leader_only", 12, 15, 0, (0,)),
            w("isr_leader_only", 16, None, 0, (0,)),
            w("offline", 15, 16, -1, (0,)),
        ],
    )


def test_a_topic_deleted_at_risk_and_its_name_created_again() -> None:
    """Deleting the topic ends its windows; the same name with a new id has windows of its own. A fenced
    leader is offline; one replica alone is not at risk of the leader-only kind."""
    check(
        [
            broker(0),
            broker(1),
            m.TopicRecord(name="orders", topic_id=T0),
            partition(T0, 0, (0, 1), (0,), 0),  # 3
            partition(T0, 1, (1, 0), (1, 0), 1),
            m.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1),  # 5: p1's leader
            m.RemoveTopicRecord(topic_id=T0),  # 6
            m.TopicRecord(name="orders", topic_id=T1),
            partition(T1, 0, (0, 1), (0,), 0),  # 8
            partition(T1, 1, (1,), (1,), 1),  # 9: one replica, its leader fenced
        ],
        [
            w("isr_leader_only", 3, 6, 0, (0,)),
            w("offline", 5, 6, 1, (1, 0), pid=1),
            w("isr_leader_only", 8, None, 0, (0,), tid=T1),
            w("offline", 9, None, 1, (1,), tid=T1, pid=1),
        ],
    )


def test_elections_from_elr_and_unclean_and_a_transaction() -> None:
    """An election from the ELR, an unclean one with RECOVERING until RECOVERED, one from outside the ISR
    without it; a transaction's changes count at its end."""
    check(
        [
            broker(0),
            broker(1),
            broker(2),
            m.TopicRecord(name="orders", topic_id=T0),
            partition(T0, 0, (0, 1, 2), (0,), 0, eligible_leader_replicas=(1,), last_known_elr=()),  # 4
            change(T0, leader=1, isr=(1,), eligible_leader_replicas=()),  # 5: from the ELR
            change(T0, leader=2, isr=(2,), leader_recovery_state=1),  # 6: unclean, RECOVERING
            change(T0, leader_recovery_state=0),  # 7: RECOVERED
            change(T0, isr=(2, 0)),  # 8
            change(T0, leader=1, isr=(1, 2, 0)),  # 9: 1 was not in the ISR
            m.BeginTransactionRecord(name="t"),
            change(T0, isr=(1,)),
            m.EndTransactionRecord(),  # 12
        ],
        [
            w("elr_election", 5, 6, 1, (1,), previous_leader=0, previous_isr=(0,)),
            w("unclean_election", 6, 7, 2, (2,), previous_leader=1, previous_isr=(1,)),
            w("unclean_election", 9, 10, 1, (1, 2, 0), previous_leader=2, previous_isr=(2, 0)),
            w("recovering", 6, 7, 2, (2,)),
            w("isr_leader_only", 4, 5, 0, (0,)),
            w("isr_leader_only", 5, 6, 1, (1,)),
            w("isr_leader_only", 6, 8, 2, (2,)),
            w("isr_leader_only", 12, None, 1, (1,)),
        ],
    )
    # the point events' timestamps are their own record's
    event = risk_windows(
        envelopes(
            [
                broker(0),
                broker(1),
                m.TopicRecord(name="t", topic_id=T0),
                partition(T0, 0, (0, 1), (0,), 0),
                change(T0, leader=1, isr=(1,)),
            ]
        )
    )
    assert [(e.kind, e.from_timestamp, e.to_timestamp) for e in event if e.kind.endswith("election")] == [
        ("unclean_election", TS + 4, TS + 4)
    ]


def _of(windows: list[RiskWindow], kind: str) -> list[RiskWindow]:
    found = [x for x in windows if x.kind == kind]
    assert found, f"no {kind} window"
    return found


def _offset_of(records: list[MetadataRecord], predicate: Any) -> int:
    return next(r.offset for r in records if predicate(r.record))


def test_scenario_leader_only() -> None:
    log = RISK_SCENARIOS["leader_only"](0).log.records
    windows = risk_windows(log)
    (alone,) = _of(windows, "isr_leader_only")
    (under,) = _of(windows, "under_min_isr")
    assert (alone.leader, alone.isr, alone.to_offset is not None) == (0, (0,), True)
    assert (under.from_offset, under.to_offset, under.min_isr, under.min_isr_source) == (
        alone.from_offset,
        alone.to_offset,
        2,
        "cluster",
    )
    assert under.to_timestamp is not None and under.to_timestamp > under.from_timestamp


def test_scenario_topic_min_isr_deleted_and_recreated() -> None:
    log = RISK_SCENARIOS["topic_min_isr"](0).log.records
    windows = _of(risk_windows(log), "under_min_isr")
    removed = _offset_of(log, lambda r: isinstance(r, m.RemoveTopicRecord))
    lowered = _offset_of(
        log, lambda r: isinstance(r, m.ConfigRecord) and r.value == "2" and r.resource_type == 2
    )
    assert {x.min_isr_source for x in windows} == {"topic"}
    assert len({x.topic_id for x in windows}) == 2
    first, second, third = (
        windows if windows[0].topic_id == windows[1].topic_id else (*windows[1:], windows[0])
    )
    assert first.to_offset == lowered  # the override lowered mid window ends it
    assert second.to_offset == removed  # deleted while at risk
    assert third.to_offset is None and third.isr == (1, 3)


def test_scenario_broker_min_isr() -> None:
    log = RISK_SCENARIOS["broker_min_isr"](0).log.records
    (under,) = _of(risk_windows(log), "under_min_isr")
    deleted = _offset_of(
        log, lambda r: isinstance(r, m.ConfigRecord) and r.resource_type == 4 and r.value is None
    )
    assert (under.min_isr, under.min_isr_source, under.leader, under.to_offset) == (3, "broker", 0, deleted)


def test_scenario_offline_then_elected_from_elr() -> None:
    windows = risk_windows(RISK_SCENARIOS["offline_elr"](0).log.records)
    (offline,) = _of(windows, "offline")
    (elected,) = _of(windows, "elr_election")
    assert (offline.leader, offline.isr) == (-1, ())
    assert (elected.from_offset, elected.leader, elected.previous_leader) == (offline.to_offset, 2, -1)
    assert all(x.to_offset is not None for x in windows)


def test_scenario_unclean_election() -> None:
    windows = risk_windows(RISK_SCENARIOS["unclean"](0).log.records)
    (unclean,) = _of(windows, "unclean_election")
    (recovering,) = _of(windows, "recovering")
    (offline,) = _of(windows, "offline")
    assert unclean.previous_isr == (0,) and unclean.leader not in (0, -1)
    assert (recovering.from_offset, recovering.leader) == (unclean.from_offset, unclean.leader)
    assert recovering.to_offset is not None  # the new leader reported RECOVERED
    assert (offline.leader, offline.to_offset) == (0, unclean.from_offset)  # fenced, then replaced


@pytest.mark.parametrize("name", sorted(RISK_SCENARIOS))
def test_scenarios_are_deterministic_and_the_intervals_equal_the_oracle(name: str) -> None:
    log = RISK_SCENARIOS[name](3).log.records
    again = RISK_SCENARIOS[name](3).log.records
    windows = risk_windows(log)
    assert windows and windows == risk_windows(again)
    assert via_history(log) == windows


def _min_isr_configs(record: Any) -> Any:
    """The synthetic log's config ``a.b`` as ``min.insync.replicas`` (0-3, or not a number)."""
    if isinstance(record, m.ConfigRecord) and record.name == "a.b":
        value = (
            None
            if record.value is None
            else "x"
            if record.value.endswith("7")
            else str(int(record.value) % 4)
        )
        return record._replace(name="min.insync.replicas", value=value)
    return record


@pytest.mark.parametrize("seed", range(4))
def test_intervals_equal_the_oracle_on_random_logs(seed: int) -> None:
    """Random leaders, ISRs, ELRs, brokers, configs, deletions and transactions (some aborted)."""
    log = envelopes([_min_isr_configs(r) for r in synthetic_records(seed, 600)])
    windows = risk_windows(log)
    assert {x.kind for x in windows} >= {"under_min_isr", "offline", "unclean_election"}
    assert via_history(log) == windows


def _config_churn(seed: int, steps: int) -> list[Any]:
    """Three brokers, two topics of two partitions whose ISRs stay small, and at every step one of: the
    topic's, a broker's or the cluster's ``min.insync.replicas`` set (1-3, or not a number) or deleted, a broker
    fenced or unfenced, a partition's ISR or leader changed."""
    rng = random.Random(seed)
    topics = {T0: "orders", T1: "payments"}
    records: list[Any] = [broker(b) for b in range(3)]
    for tid, name in topics.items():
        records.append(m.TopicRecord(name=name, topic_id=tid))
        records += [partition(tid, pid, (0, 1, 2), (pid,), pid) for pid in range(2)]
    values = ["1", "2", "3", "x", None]
    for _ in range(steps):
        step = rng.randrange(6)
        if step == 0:
            records.append(config(2, rng.choice(list(topics.values())), rng.choice(values)))
        elif step == 1:
            records.append(config(4, str(rng.randrange(3)), rng.choice(values)))
        elif step == 2:
            records.append(config(4, "", rng.choice(values)))
        elif step == 3:
            fenced = rng.choice((1, -1))
            records.append(
                m.BrokerRegistrationChangeRecord(broker_id=rng.randrange(3), broker_epoch=10, fenced=fenced)
            )
        else:
            leader = rng.choice((-1, 0, 1, 2))
            isr = tuple(sorted(rng.sample(range(3), rng.randrange(1, 3))))
            if leader != -1 and leader not in isr:
                isr = (leader, *isr[1:])
            pid = rng.randrange(2)
            records.append(
                m.PartitionChangeRecord(
                    partition_id=pid, topic_id=rng.choice(list(topics)), leader=leader, isr=isr
                )
            )
    return records


@pytest.mark.parametrize("seed", range(3))
def test_intervals_equal_the_oracle_with_configs_changing_at_every_level_inside_windows(seed: int) -> None:
    """The column computation cuts an under-min-ISR window at each change of the topic's, the leader's broker's
    or the cluster's value (and where a level's value is not a number), and an offline one where the leader's
    broker is fenced or unfenced, as the replay judges them."""
    log = envelopes(_config_churn(seed, 400))
    windows = risk_windows(log)
    sources = {x.min_isr_source for x in windows if x.kind == "under_min_isr"}
    assert sources == {"topic", "broker", "cluster", "default"}
    assert sum(x.kind == "offline" for x in windows) > 10
    assert via_history(log) == windows
