"""``fleet_status`` compacted by its writer: the board alone on the shared session, no streams.

What must hold: the answers (``fleet_status()``, ``kraftlake fleet status``, the reader without a JVM) are the
same before and after a compaction; every transition of a cluster survives any number of lag rows between
them; the table's files stay bounded however many rows are appended; a second writer appending or compacting
meanwhile loses nothing.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Any

import pytest


def _board(spark: Any, warehouse: Path, **kw: Any) -> Any:
    from kraftlake.spark.tables.fleet_status import StatusBoard

    # a long interval: rows are written by the test's flushes (and at once on a new state by the thread)
    return StatusBoard(spark, warehouse, 3600.0, **kw)


def _all_rows(warehouse: Path) -> list[dict[str, Any]]:
    from kraftlake.delta.scan import arrow_schema, read_rows, table_snapshot

    snap = table_snapshot(warehouse / "fleet_status")
    rows = read_rows(snap, arrow_schema(snap)).to_pylist()
    return sorted(rows, key=lambda r: (r["cluster"], r["updated_ms"]))


def _transitions(rows: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        seq = out.setdefault(r["cluster"], [])
        change = (r["state"], r["last_error"] or "")
        if not seq or seq[-1] != change:
            seq.append(change)
    return out


def _live_files(warehouse: Path) -> int:
    from kraftlake.delta.rewrite import snapshot

    return len(snapshot(warehouse / "fleet_status").files)


def _cli(warehouse: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    from kraftlake.commands.fleet import run

    capsys.readouterr()
    assert run(argparse.Namespace(warehouse=str(warehouse), format=fmt)) == 0
    return capsys.readouterr().out


def test_the_answers_are_the_same_after_a_compaction(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kraftlake.warehouse.fleet_status import newest
    from udfs.sql import fleet_status_statement
    from udfs.table_functions import register_table_functions

    warehouse = tmp_path / "wh"
    # one sample window for every row (windows are aligned to the epoch: an hour's could end mid-test)
    board = _board(spark, warehouse, compact_every=10**6, sample_s=1e9)
    try:
        for i in range(12):
            board.set("c1", "following", lag=i, last_offset=100 + i, last_commit_ms=1_700_000_000_000 + i)
            board.flush(force=True)
        board.set("c2", "unreachable", error="127.0.0.1:1: Connection refused")
        board.flush(force=True)
        for i in range(5):
            board.set("c3", "following", lag=50 - i, last_offset=7 + i)
            board.flush(force=True)
        board.set("c3", "failed", error="disk full")
        board.flush(force=True)
        as_sql = spark.newSession()
        as_sql.sql(fleet_status_statement(warehouse, "TEMPORARY FUNCTION "))  # as a catalog stores it
        as_udtf = spark.newSession()
        register_table_functions(as_udtf, warehouse)  # as `register` gives it a session

        def answers() -> tuple[Any, ...]:
            sql, udtf = (
                [r.asDict() for r in s.sql("SELECT * FROM fleet_status() ORDER BY cluster").collect()]
                for s in (as_sql, as_udtf)
            )
            assert sql == udtf
            return newest(warehouse), sql, _cli(warehouse, "table", capsys), _cli(warehouse, "jsonl", capsys)

        before = answers()
        files_before = _live_files(warehouse)
        done = board.compact()
    finally:
        board.close()
    assert done is not None and len(done.removed) == files_before == 19
    # c1: its first row and its newest; c2: its one row; c3: first, newest (the failure)
    assert (done.rows_read, done.rows_kept) == (19, 5)
    assert _live_files(warehouse) == 1
    assert answers() == before
    assert [r["cluster"] for r in before[1]] == ["c1", "c2", "c3"]
    assert before[1][2]["state"] == "failed" and before[1][0]["lag"] == 11


def test_transitions_survive_and_the_files_stay_bounded_over_500_appends(spark: Any, tmp_path: Path) -> None:
    from kraftlake.spark.tables.writes import wait_checkpoints

    warehouse = tmp_path / "wh"
    every = 40
    board = _board(spark, warehouse, compact_every=every, retention_s=0.0)
    expected: dict[str, list[tuple[str, str]]] = {}
    states = [("following", ""), ("unreachable", "no route"), ("unreachable", "refused"), ("following", "")]
    most_files = 0
    try:
        for i in range(500):
            cluster = f"c{i % 3}"
            # many lag rows between two transitions, each cluster changing state every 23rd of its rows
            state, error = states[(i // 3 // 23) % len(states)]
            board.set(cluster, state, lag=1000 - i, last_offset=i, error=error)
            seq = expected.setdefault(cluster, [])
            if not seq or seq[-1] != (state, error):
                seq.append((state, error))
            board.flush(force=True)
            most_files = max(most_files, _live_files(warehouse))
    finally:
        board.close()
    wait_checkpoints()
    rows = _all_rows(warehouse)
    assert _transitions(rows) == expected
    assert {r["cluster"]: r["last_offset"] for r in rows} == {"c0": 498, "c1": 499, "c2": 497}
    assert most_files <= every + 1
    assert _live_files(warehouse) == 1
    # the replaced files are deleted (retention 0 here): what is on disk is what is live
    assert len(list((warehouse / "fleet_status").glob("*.parquet"))) == 1
    transitions = sum(len(s) for s in expected.values())
    assert len(rows) <= transitions + 3 * 2  # plus each cluster's newest row and a sample window's first
    assert (warehouse / "fleet_status" / "_delta_log" / "_last_checkpoint").is_file()


def test_a_second_writer_appending_or_compacting_meanwhile_loses_nothing(spark: Any, tmp_path: Path) -> None:
    from kraftlake.delta.append import CommitConflict
    from kraftlake.delta.rewrite import snapshot
    from kraftlake.spark.tables.fleet_compaction import compact_fleet_status

    warehouse = tmp_path / "wh"
    a = _board(spark, warehouse, compact_every=10**6)
    b = _board(spark, warehouse, compact_every=10**6)
    try:
        for i in range(6):
            a.set("a1", "following", lag=i)
            b.set("b1", "following", lag=i)
            a.flush(force=True)
            b.flush(force=True)
        path = warehouse / "fleet_status"
        # B appends after A read the table: A's commit keeps B's new file
        snap = snapshot(path)
        b.set("b1", "unreachable", error="gone")
        b.flush(force=True)
        done = compact_fleet_status(spark, warehouse, 3_600_000, snap)
        assert len(done.removed) == 12
        assert [(r["state"], r["last_error"]) for r in _all_rows(warehouse) if r["cluster"] == "b1"][-1] == (
            "unreachable",
            "gone",
        )
        # B compacts the files A read: A's commit is refused, and done again from a new snapshot
        a.set("a1", "failed", error="boom")
        a.flush(force=True)
        snap = snapshot(path)
        b.compact()
        with pytest.raises(CommitConflict):
            compact_fleet_status(spark, warehouse, 3_600_000, snap)
        a.compact()
        assert _live_files(warehouse) == 1

        # B appends a transition on every row while A compacts over and over: none may be dropped
        stop = threading.Event()
        errors: list[BaseException] = []

        def compact_loop() -> None:
            try:
                while not stop.is_set():
                    a.compact()
                    stop.wait(0.02)
            except BaseException as exc:
                errors.append(exc)

        compactor = threading.Thread(target=compact_loop)
        compactor.start()
        try:
            for i in range(40):
                b.set("b2", "following" if i % 2 else "failed", lag=i, error="" if i % 2 else f"e{i}")
                b.flush(force=True)
        finally:
            stop.set()
            compactor.join()
        assert not errors, errors
    finally:
        a.close()
        b.close()
    rows = _all_rows(warehouse)
    b2 = [(r["state"], r["lag"]) for r in rows if r["cluster"] == "b2"]
    assert b2 == [("following" if i % 2 else "failed", i) for i in range(40)]
    assert _transitions(rows)["a1"] == [("following", ""), ("failed", "boom")]
    assert _transitions(rows)["b1"] == [("following", ""), ("unreachable", "gone")]
    assert _live_files(warehouse) == 1


def test_a_table_made_without_the_short_retentions_gets_them(spark: Any, tmp_path: Path) -> None:
    from kraftlake.delta.append import table_metadata
    from kraftlake.spark.tables.fleet_status import ensure_fleet_status
    from kraftlake.spark.tables.layout import FLEET_STATUS_PROPERTIES

    warehouse = tmp_path / "wh"
    ensure_fleet_status(spark, warehouse)
    path = warehouse / "fleet_status"
    assert FLEET_STATUS_PROPERTIES.items() <= table_metadata(path)[1]["configuration"].items()
    # as a table made before them was
    keys = ", ".join(f"'{k}'" for k in FLEET_STATUS_PROPERTIES)
    spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES ({keys})")
    assert not FLEET_STATUS_PROPERTIES.keys() & table_metadata(path)[1]["configuration"].keys()
    ensure_fleet_status(spark, warehouse)
    version, metadata = table_metadata(path)
    assert FLEET_STATUS_PROPERTIES.items() <= metadata["configuration"].items()
    ensure_fleet_status(spark, warehouse)  # once
    assert table_metadata(path)[0] == version
