"""Compaction when scheduled often: a run with nothing new commits nothing; what it skips it reports.

The decisions (``needs_optimize``, ``note_removals`` / ``needs_vacuum``) are pure functions of a table's Delta
history and the compaction state: tested here without Spark on commit lists shaped as Delta reports them, then
on a real warehouse, where the Delta history is the witness.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kraftlake.image import image_at
from kraftlake.image.source import log_records
from kraftlake.sim.workloads.entities import write_synthetic_log
from pipelines.compact import HOUR_MS, Commit, needs_optimize, needs_vacuum, note_removals, vacuumed

NOW = 1_800_000_000_000


def _c(
    version: int,
    operation: str,
    ts: int = NOW,
    metrics: dict[str, str] | None = None,
    mode: str | None = None,
) -> Commit:
    return Commit(version, ts, operation, {} if mode is None else {"mode": mode}, metrics or {})


APPEND = {"numFiles": "1", "numOutputRows": "10", "numOutputBytes": "900"}
DELETE = {
    "numRemovedFiles": "1",
    "numAddedFiles": "0",
    "numDeletedRows": "10",
    "numDeletionVectorsAdded": "0",
}


def test_optimize_only_after_data_commits() -> None:
    optimized = [_c(5, "OPTIMIZE", metrics={"numRemovedFiles": "3", "numAddedFiles": "1"})]
    assert not needs_optimize([_c(7, "VACUUM END"), _c(6, "VACUUM START"), *optimized], None)
    assert needs_optimize([_c(6, "WRITE", metrics=APPEND, mode="Append"), *optimized], None)
    # a DELETE that matched nothing changed no file
    assert not needs_optimize(
        [_c(6, "DELETE", metrics={"numRemovedFiles": "0", "numAddedFiles": "0"}), *optimized], None
    )
    # an OPTIMIZE that had nothing to rewrite committed nothing: the version it saw stands for it
    writes = [_c(2, "WRITE", metrics=APPEND, mode="Append"), _c(1, "WRITE", metrics=APPEND, mode="Append")]
    assert needs_optimize(writes, None) and needs_optimize(writes, 1) and not needs_optimize(writes, 2)
    assert not needs_optimize([_c(0, "CREATE TABLE")], None)
    # a history longer than we read without an OPTIMIZE in it: not known to be optimized
    assert needs_optimize([_c(300, "VACUUM END")], None)


def test_vacuum_when_a_removal_ages_past_the_retention() -> None:
    retain = 168 * HOUR_MS
    mine: dict[str, Any] = {}
    note_removals(mine, [_c(3, "DELETE", NOW, DELETE), _c(2, "WRITE", NOW - 1, APPEND, "Append")])
    assert needs_vacuum(mine, NOW, retain)  # never vacuumed
    vacuumed(mine, NOW, retain)
    assert mine["removal_hours"] == [NOW // HOUR_MS]  # not yet deletable at the first VACUUM
    assert not needs_vacuum(mine, NOW + HOUR_MS, retain)
    # appends and vacuums remove nothing
    note_removals(
        mine,
        [
            _c(5, "VACUUM END", NOW + 2),
            _c(4, "WRITE", NOW + 1, APPEND, "Append"),
            _c(3, "DELETE", NOW, DELETE),
        ],
    )
    assert mine["removal_hours"] == [NOW // HOUR_MS]
    assert not needs_vacuum(mine, NOW + retain - HOUR_MS, retain)
    assert needs_vacuum(mine, NOW + retain + HOUR_MS, retain)
    vacuumed(mine, NOW + retain + 2 * HOUR_MS, retain)
    assert mine["removal_hours"] == []
    # a gap in what we read (more commits than the history limit): assume a removal since the last look
    note_removals(mine, [_c(900, "WRITE", NOW + retain + 3 * HOUR_MS, APPEND, "Append")])
    assert mine["removal_hours"] == [(NOW + 2) // HOUR_MS]
    # and a full listing once the last VACUUM is older than the retention, for files no commit knows of
    assert needs_vacuum({"vacuumed_at_ms": NOW, "removal_hours": []}, NOW + retain + 1, retain)


def test_no_vacuum_on_a_table_younger_than_the_retention() -> None:
    retain = 168 * HOUR_MS
    removed: dict[str, Any] = {}
    note_removals(removed, [_c(3, "DELETE", NOW - retain, DELETE)])
    for mine in ({}, removed, {"vacuumed_at_ms": NOW - 2 * retain, "removal_hours": []}):
        assert not needs_vacuum(mine, NOW, retain, created_at_ms=NOW - retain + 1)
        assert needs_vacuum(mine, NOW, retain, created_at_ms=NOW - retain - 1)
        assert needs_vacuum(mine, NOW, retain, created_at_ms=None)  # version 0 cleaned up: an old table


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[Path, Path, int]:
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("compact")
    log_dir = write_synthetic_log(root / "log", seed=3, steps=80)
    w = root / "warehouse"
    ingest(spark, log_dir, w, batch_records=120)
    return log_dir, w, max(r.offset for r in log_records(log_dir))


def _versions(warehouse: Path) -> dict[str, int]:
    """Each compacted table's newest Delta version: the number of the newest commit file in its ``_delta_log``
    (Delta names each commit by its version), read without a Spark action per table."""
    from kraftlake.spark.tables.layout import table_path
    from pipelines.compact import COMPACTED

    return {
        t: max(
            int(p.stem)
            for p in (Path(table_path(warehouse, t)) / "_delta_log").glob("*.json")
            if p.stem.isdigit()  # not a log compaction's <from>.<to>.compacted.json
        )
        for t in COMPACTED
    }


@pytest.mark.slow
@pytest.mark.heavy
def test_a_second_compaction_with_nothing_new_commits_nothing(
    spark: Any, warehouse: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """A second compaction with nothing new commits nothing; a later snapshot reworks only what it touches.
    Slow: the module's warehouse is ingested first (the 135-record log in 120-record slices); then three
    compactions of a copy, each reading the Delta history of its 16 tables (the first and the last also
    rebuilding the image with Spark, writing a snapshot, and running DELETEs and OPTIMIZEs), and the image
    rebuilt from the warehouse."""
    from pipelines.compact import COMPACTED, HISTORY_TABLES, compact
    from pipelines.reconstruct import image_at_offset

    log_dir, src, last = warehouse
    w = tmp_path / "w"
    shutil.copytree(src, w)
    mid = last // 2
    first = compact(spark, w, offset=mid, retain_offsets=0)
    s = first.retained_from
    assert s is not None and first.deleted["metadata_log"] > 0
    # tables that never got a row (an entity the log never names) have nothing to optimize
    assert {"metadata_log", "partitions", "offsets"} <= set(first.optimized)
    assert sorted(first.optimized + first.skipped.get("optimize", [])) == sorted(COMPACTED)
    # never vacuumed, but created less than the retention ago: no file is old enough to go, no listing
    assert first.vacuumed == [] and sorted(first.skipped["vacuum"]) == sorted(COMPACTED)
    before = _versions(w)

    again = compact(spark, w, offset=mid, retain_offsets=0)
    assert again.retained_from == s and again.snapshot_rows == 0
    assert again.optimized == [] and sorted(again.skipped["optimize"]) == sorted(COMPACTED)
    assert sorted(again.skipped["delete"]) == sorted(["metadata_log", "snapshots", *HISTORY_TABLES])
    assert set(again.deleted.values()) == {0}
    assert again.vacuumed == [] and sorted(again.skipped["vacuum"]) == sorted(COMPACTED)
    assert _versions(w) == before  # the Delta witness: no table got a commit

    # a later snapshot: only what it touches is reworked (offsets got no commit, so no OPTIMIZE there)
    later = compact(spark, w, retain_offsets=0)
    assert later.snapshot_offset > mid and later.snapshot_rows > 0
    assert "snapshots" in later.optimized and "offsets" in later.skipped["optimize"]
    after = _versions(w)
    assert after["offsets"] == before["offsets"] and after["snapshots"] > before["snapshots"]
    assert later.retained_from == later.snapshot_offset and later.deleted["metadata_log"] > 0
    assert image_at_offset(spark, w, "default", last).state_equals(image_at(log_dir, last))


@pytest.mark.slow
@pytest.mark.heavy
def test_a_concurrent_append_does_not_fail_the_compaction(
    spark: Any, warehouse: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """Blind appends to ``metadata_log`` (what the stream writes) while compaction deletes from and optimizes it.
    Slow: a compaction while a thread commits appends to ``metadata_log`` without pause (its DELETE retried up
    to eight times, with doubling waits, or deferred), then a second compaction that deletes what was left."""
    import threading

    from kraftlake.spark.tables.layout import LOG, table_path, table_ref
    from pipelines.compact import compact

    _, src, last = warehouse
    w = tmp_path / "w"
    shutil.copytree(src, w)
    # built from driver-side rows: a write whose DataFrame reads the table itself is not a blind append for
    # Delta (and conflicts with the DELETE, as the stream's appends do not)
    sample = spark.sql(f"SELECT * FROM {table_ref(w, LOG)} WHERE offset < 3")
    rows = spark.createDataFrame(sample.collect(), sample.schema)
    shift = 10_000_000
    done, appended, errors = threading.Event(), [0], []

    def appender() -> None:
        try:
            while not done.is_set() or appended[0] < 2:
                k = appended[0] + 1
                (
                    rows.withColumn("offset", rows["offset"] + shift * k)
                    .write.format("delta")
                    .mode("append")
                    .save(table_path(w, LOG))
                )
                appended[0] = k
        except Exception as exc:  # the test's own writer failing is reported, not swallowed
            errors.append(exc)

    thread = threading.Thread(target=appender)
    thread.start()
    try:
        # short waits between tries: the appender never pauses, so waiting longer would not win the DELETE
        result = compact(spark, w, offset=last // 2, retain_offsets=0, retry_backoff_s=0.05)
    finally:
        done.set()
        thread.join()
    assert not errors, errors
    # Delta OSS (Serializable, partition-level conflict check) makes every append committed during the DELETE
    # conflict with it: the DELETE won a retry, or it was deferred to the next run; the compaction did not fail
    if LOG in result.deferred.get("delete", []):
        assert result.retries >= 7 and result.deleted[LOG] == 0
    else:
        assert result.deleted[LOG] > 0
    assert "metadata_log" in result.optimized  # OPTIMIZE changes no data: appends never conflict with it
    # nothing appends now: whatever was left goes (the OPTIMIZE and VACUUM above are not what this checks again)
    again = compact(spark, w, offset=last // 2, retain_offsets=0, optimize=False)
    assert not again.deferred
    assert (
        spark.sql(f"SELECT min(offset) AS m FROM {table_ref(w, LOG)}").collect()[0]["m"]
        > result.snapshot_offset
    )
    n = spark.sql(f"SELECT count(*) AS n FROM {table_ref(w, LOG)} WHERE offset >= {shift}").collect()[0]["n"]
    assert n == 3 * appended[0]
