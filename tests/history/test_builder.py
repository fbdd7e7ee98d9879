"""Entity versions (pure, no Spark): the versions valid at N equal the image at N, however the log is sliced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.history import ENTITIES, HistoryBatch, HistoryBuilder, entity_rows, without_written
from kraftlake.image import EMPTY, image_at, replay_all
from kraftlake.image.source import log_records
from kraftlake.protocol import messages as m
from kraftlake.sim.workloads.entities import write_synthetic_log
from tests.image.conftest import envelopes

FIXTURES = KAFKA_LOGS


def apply_table(tables: dict[str, list[dict[str, Any]]], batch: HistoryBatch, table: str) -> None:
    """One table's closes then versions of a slice, as the MERGE and the append do (asserting one open match)."""
    key = ENTITIES[table].key
    closes = batch.closes.get(table, [])
    # one close per key and slice: a MERGE refuses two source rows matching one target row
    assert len({tuple(c[k] for k in key) for c in closes}) == len(closes)
    for c in closes:
        open_ = [
            r
            for r in tables[table]
            if r["to_offset"] is None and all(r[k] == c[k] for k in key) and r["from_offset"] < c["to_offset"]
        ]
        assert len(open_) <= 1
        for r in open_:
            r["to_offset"] = c["to_offset"]
    tables[table].extend(dict(v) for v in batch.versions.get(table, []))


def apply_slices(log_dir: Path, size: int) -> dict[str, list[dict[str, Any]]]:
    """Feed the log in slices and apply closes/versions as the warehouse writes do."""
    recs = list(log_records(log_dir))
    builder = HistoryBuilder()
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in ENTITIES}
    for i in range(0, len(recs), size):
        batch = builder.feed(recs[i : i + size])
        assert batch.first_offset == recs[i].offset
        for table in batch.tables():
            apply_table(tables, batch, table)
    return tables


def _canon_tables(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    return {t: sorted(repr(sorted(r.items())) for r in rows) for t, rows in tables.items()}


@pytest.mark.parametrize(("killed", "resumed", "tables_done"), [(97, 13, 3), (40, 150, 7), (60, 60, 11)])
def test_resume_after_a_torn_slice_with_other_slicing(
    tmp_path: Path, killed: int, resumed: int, tables_done: int
) -> None:
    """A run killed inside its third slice (some tables written), resumed with another slice size, ends with
    exactly the tables of an uninterrupted run (``kraftlake.history.without_written``)."""
    log_dir = write_synthetic_log(tmp_path, seed=4, steps=300)
    recs = list(log_records(log_dir))
    want = _canon_tables(apply_slices(log_dir, 1000))
    builder = HistoryBuilder()
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in ENTITIES}
    for i in range(3):
        batch = builder.feed(recs[i * killed : (i + 1) * killed])
        for table in batch.tables()[:tables_done] if i == 2 else batch.tables():
            apply_table(tables, batch, table)
    written = {t: max((r["from_offset"] for r in rows), default=-1) for t, rows in tables.items()}
    done = 2 * killed  # the commit point: the first two slices
    builder = HistoryBuilder(image_at(log_dir, recs[done - 1].offset))
    for i in range(done, len(recs), resumed):
        batch = without_written(builder.feed(recs[i : i + resumed]), written)
        for table in batch.tables():
            apply_table(tables, batch, table)
    assert _canon_tables(tables) == want


def at(tables: dict[str, list[dict[str, Any]]], table: str, n: int) -> list[str]:
    rows = [
        {k: v for k, v in r.items() if k not in ("from_offset", "to_offset")}
        for r in tables[table]
        if r["from_offset"] <= n and (r["to_offset"] is None or r["to_offset"] > n)
    ]
    return sorted(repr(sorted(r.items())) for r in rows)


def expected(log_dir: Path, n: int) -> dict[str, list[str]]:
    return {
        t: sorted(repr(sorted(r.items())) for r in rows)
        for t, rows in entity_rows(image_at(log_dir, n)).items()
    }


@pytest.mark.parametrize(("seed", "size"), [(1, 1), (2, 37), (3, 1000)])
def test_versions_equal_the_image_at_every_offset(tmp_path: Path, seed: int, size: int) -> None:
    log_dir = write_synthetic_log(tmp_path, seed=seed, steps=300)
    tables = apply_slices(log_dir, size)
    last = max(r.offset for r in log_records(log_dir))
    for n in range(0, last + 1, 3):
        exp = expected(log_dir, n)
        for table in ENTITIES:
            assert at(tables, table, n) == exp[table], (n, table)
    # every kind of entity took part
    assert all(tables[t] for t in ENTITIES), {t: len(v) for t, v in tables.items()}


def test_fixture_logs() -> None:
    for name in ("kafkademo-multi-epoch", "minimal"):
        d = FIXTURES / name
        tables = apply_slices(d, 250)
        last = max(r.offset for r in log_records(d))
        for n in [*range(0, last + 1, max(1, last // 40)), last]:
            exp = expected(d, n)
            for table in ENTITIES:
                assert at(tables, table, n) == exp[table], (name, n, table)


def test_transaction_versions_start_at_end_transaction(tmp_path: Path) -> None:
    log_dir = write_synthetic_log(tmp_path, seed=5, steps=300)
    recs = list(log_records(log_dir))
    ends = [r.offset for r in recs if r.type == "EndTransactionRecord"]
    aborted_topics = set()
    in_txn: list[Any] = []
    for r in recs:
        if r.type == "BeginTransactionRecord":
            in_txn = []
        elif r.type == "AbortTransactionRecord":
            aborted_topics |= {x.record.topic_id for x in in_txn if x.type == "TopicRecord"}
        else:
            in_txn.append(r)
    tables = apply_slices(log_dir, 50)
    assert ends, "the seed has committed transactions"
    starts = {r["from_offset"] for r in tables["topics"]}
    assert starts & set(ends)
    assert not aborted_topics & {r["topic_id"] for r in tables["topics"]}


@pytest.mark.parametrize("size", [1, 2, 100])
def test_unregister_controller_closes_its_version(size: int) -> None:
    """Kafka 4.4's UnregisterControllerRecord ends the controller's version; a new registration opens one."""
    ep = m.RegisterControllerRecord.ControllerEndpoint(name="CONTROLLER", host="h", port=9093)
    recs = envelopes(
        [
            m.RegisterControllerRecord(
                controller_id=1, incarnation_id="v9meXjI1RVKB-NSvF0GXDA", end_points=(ep,)
            ),
            m.RegisterControllerRecord(
                controller_id=2, incarnation_id="hSCzevIQRUa-ojqTd_8C5w", end_points=(ep,)
            ),
            m.UnregisterControllerRecord(controller_id=1),
            m.NoOpRecord(),
            m.RegisterControllerRecord(
                controller_id=1, incarnation_id="AAAAAAAAAAAAAAAAAAAAAQ", end_points=(ep,)
            ),
        ]
    )
    builder = HistoryBuilder()
    tables: dict[str, list[dict[str, Any]]] = {t: [] for t in ENTITIES}
    for i in range(0, len(recs), size):
        batch = builder.feed(recs[i : i + size])
        for table in batch.tables():
            apply_table(tables, batch, table)
    for n in range(len(recs)):
        image = replay_all(EMPTY, recs[: n + 1])
        want = sorted(repr(sorted(r.items())) for r in entity_rows(image)["controllers"])
        assert at(tables, "controllers", n) == want, n
    assert [(r["from_offset"], r["to_offset"]) for r in tables["controllers"] if r["id"] == 1] == [
        (0, 2),
        (4, None),
    ]
