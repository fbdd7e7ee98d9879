"""The report's sections (pure, no Spark) against the image replayed record by record, on a simulated cluster,
a synthetic log with every entity kind and a real Kafka log, over the whole log and windows inside it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.history.risk import EVENT_KINDS, KINDS, risk_windows
from kraftlake.image.source import log_records
from kraftlake.records.envelope import MetadataRecord
from kraftlake.report.from_log import input_from_records
from kraftlake.report.model import REPORT_ENTITIES
from kraftlake.report.sections import build_report
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator
from kraftlake.sim.risk_scenarios import run_scenario
from kraftlake.sim.workloads.entities import write_synthetic_log
from tests.report import oracle

TABLES = REPORT_ENTITIES


def _simulated(seed: int) -> list[MetadataRecord]:
    sim = ClusterSimulator(
        ClusterSimConfig(brokers=5, topics=6, partitions_per_topic=3, events=1200, seed=seed, check_every=0)
    )
    sim.run()
    return list(sim.log.records)


def _synthetic(tmp: Path) -> list[MetadataRecord]:
    return list(log_records(write_synthetic_log(tmp, seed=5, steps=400)))


def _real() -> list[MetadataRecord]:
    return list(log_records(KAFKA_LOGS / "kafkademo-multi-epoch"))


def _windows(records: list[MetadataRecord]) -> list[tuple[int, int]]:
    last = records[-1].offset
    return [(0, last), (last // 3, 2 * last // 3), (last // 2, last // 2)]


def _state(row: dict[str, Any]) -> str | None:
    if row["fenced"]:
        return "fenced"
    return "controlled shutdown" if row["in_controlled_shutdown"] else None


def _partition_state(row: dict[str, Any]) -> str | None:
    if row["leader"] == -1:
        state = "offline"
    elif len(row["isr"]) < len(row["replicas"]):
        state = "under-replicated"
    else:
        return None
    return f"{row['topic']}\x00{state}"


def _kind(before: dict[str, Any], after: dict[str, Any]) -> str:
    leader = after["leader"]
    if leader == -1:
        return "offline"
    if after["leader_recovery_state"] == 1:
        return "unclean"
    if leader in before["isr"]:
        return "clean"
    if leader in (before["eligible_leader_replicas"] or []) or leader in (before["last_known_elr"] or []):
        return "elr"
    return "unclean"


def _check(records: list[MetadataRecord], lo: int, hi: int) -> Counter[str]:
    """Every section against the oracle; returns how many rows each section had."""
    report = build_report(input_from_records(records, lo, hi))
    seq = oracle.states(records, hi, TABLES)

    brokers = report.section("brokers").rows
    spans = {
        (r["broker"], r["event"], r["from_offset"], r["to_offset"])
        for r in brokers
        if r["event"] in ("fenced", "controlled shutdown")
    }
    assert spans == {(k[0], lab, f, t) for k, lab, f, t in oracle.run_spans(seq, "brokers", _state, lo, hi)}
    points = [
        (r["from_offset"], r["broker"], r["event"])
        for r in brokers
        if r["event"] not in ("fenced", "controlled shutdown")
    ]
    expected_points = [
        (o, k[0], "registered" if b is None else "unregistered" if a is None else "re-registered")
        for o, k, b, a in oracle.value_changes(seq, "brokers", lambda r: r["epoch"], lo, hi)
    ]
    assert sorted(points) == sorted(expected_points)

    avail = {
        (r["topic"], r["partition"], r["state"], r["from_offset"], r["to_offset"])
        for r in report.section("availability").rows
    }
    assert avail == {
        (lab.split("\x00")[0], k[1], lab.split("\x00")[1], f, t)
        for k, lab, f, t in oracle.run_spans(seq, "partitions", _partition_state, lo, hi)
    }

    moves = oracle.transitions(seq, "partitions", lo, hi)
    elections = [
        (r["offset"], r["topic"], r["partition"], r["previous_leader"], r["leader"], r["kind"])
        for r in report.section("elections").rows
    ]
    assert sorted(elections) == sorted(
        (o, a["topic"], a["partition"], b["leader"], a["leader"], _kind(b, a))
        for o, _k, b, a in moves
        if b["leader"] != a["leader"]
    )
    isr: dict[str, list[int]] = {}
    for _o, _k, b, a in moves:
        shrink, expand = bool(set(b["isr"]) - set(a["isr"])), bool(set(a["isr"]) - set(b["isr"]))
        if shrink or expand:
            t = isr.setdefault(a["topic"], [0, 0])
            t[0] += shrink
            t[1] += expand
    assert {r["topic"]: [r["shrinks"], r["expands"]] for r in report.section("isr").rows} == isr

    moving = {
        (r["topic"], r["partition"], r["from_offset"], r["to_offset"])
        for r in report.section("reassignments").rows
    }
    assert moving == {
        (lab, k[1], f, t)
        for k, lab, f, t in oracle.run_spans(
            seq,
            "partitions",
            lambda r: r["topic"] if r["adding_replicas"] or r["removing_replicas"] else None,
            lo,
            hi,
        )
    }

    for section, table, value in (
        ("configs", "configs", lambda r: r["value"]),
        ("quotas", "client_quotas", lambda r: r["value"]),
        ("features", "features", lambda r: r["level"]),
        ("topics", "topics", lambda r: r["name"]),
        ("acls", "acls", lambda r: r["id"]),
        ("scram", "scram", lambda r: r["salt"]),
        ("delegation_tokens", "delegation_tokens", lambda r: r["expiration_timestamp"]),
    ):
        got = [r["offset"] for r in report.section(section).rows]
        want = [o for o, *_ in oracle.value_changes(seq, table, value, lo, hi)]
        assert sorted(got) == sorted(want), section
    configs = {
        (r["offset"], r["resource_type"], r["resource_name"], r["name"], r["before"], r["after"])
        for r in report.section("configs").rows
    }
    assert configs == {
        (o, *k, b, a) for o, k, b, a in oracle.value_changes(seq, "configs", lambda r: r["value"], lo, hi)
    }

    leaders = [
        (r.offset, r.epoch, r.record.leader_id)
        for r in records
        if r.type == "LeaderChangeMessage" and lo <= r.offset <= hi
    ]
    assert [(r["offset"], r["epoch"], r["leader"]) for r in report.section("controller").rows] == leaders
    return Counter({s.key: len(s.rows) for s in report.sections})


@pytest.mark.parametrize("seed", [1, 2])
def test_simulated_cluster(seed: int) -> None:
    records = _simulated(seed)
    seen: Counter[str] = Counter()
    for lo, hi in _windows(records):
        seen += _check(records, lo, hi)
    # the checks compared something: the simulation fenced brokers, moved leaders and ISRs, changed configs
    for key in ("brokers", "availability", "elections", "isr", "topics", "configs"):
        assert seen[key] > 0, (key, seen)


def test_synthetic_log_every_entity(tmp_path: Path) -> None:
    records = _synthetic(tmp_path)
    seen: Counter[str] = Counter()
    for lo, hi in _windows(records):
        seen += _check(records, lo, hi)
    for key in ("quotas", "acls", "scram", "features", "delegation_tokens", "configs"):
        assert seen[key] > 0, (key, seen)


def test_real_kafka_log() -> None:
    records = _real()
    seen: Counter[str] = Counter()
    for lo, hi in _windows(records):
        seen += _check(records, lo, hi)
    assert seen["controller"] > 0 and seen["brokers"] > 0, seen


def test_durations_and_open_runs() -> None:
    """A run's duration is its end's time less its start's; one still holding at the window's end runs to the
    end's time and says so."""
    records = _simulated(1)
    last = records[-1].offset
    lo, hi = last // 3, 2 * last // 3
    data = input_from_records(records, lo, hi)
    stamps = {r.offset: r.timestamp for r in records}
    rows = build_report(data).section("availability").rows + build_report(data).section("brokers").rows
    assert rows
    for r in rows:
        if r["duration_ms"] is None:
            continue
        end = stamps[hi] if r["ongoing"] else stamps[r["to_offset"]]
        assert r["duration_ms"] == end - stamps[r["from_offset"]]
        assert r["ongoing"] == (r["to_offset"] is None)


def test_risk_section_equals_the_oracle_through_the_window() -> None:
    """Every risk scenario on one cluster: the section's windows are the oracle's (the log replayed offset by
    offset), seen through each window (a window that began before starts at ``lo``; one still open at ``hi``
    has no end; elections are the window's own)."""
    sim = run_scenario(["leader_only", "topic_min_isr", "broker_min_isr", "offline_elr", "unclean"], seed=3)
    records = list(sim.log.records)
    whole = risk_windows(records)
    kinds = set()
    for lo, hi in _windows(records):
        got = {
            (r["kind"], r["topic"], r["partition"], r["from_offset"], r["to_offset"], r["before_window"])
            for r in build_report(input_from_records(records, lo, hi)).section("risk").rows
        }
        want = set()
        for w in whole:
            if w.kind in EVENT_KINDS:
                if lo <= w.from_offset <= hi:
                    want.add((w.kind, w.topic, w.partition, w.from_offset, None, False))
            elif w.from_offset <= hi and (w.to_offset is None or w.to_offset > lo):
                end = w.to_offset if w.to_offset is not None and w.to_offset <= hi else None
                want.add((w.kind, w.topic, w.partition, max(w.from_offset, lo), end, w.from_offset < lo))
        assert got == want, (lo, hi, sorted(got ^ want)[:5])
        kinds |= {k for k, *_ in got}
    assert kinds == set(KINDS), kinds
