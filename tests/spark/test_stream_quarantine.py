"""The stream runs the record-level suite per micro-batch: failing rows go to ``quarantine``, the batch commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kraftlake.logformat.batch import build_data_batch
from kraftlake.logformat.segment import segment_filename
from kraftlake.protocol import messages as m
from kraftlake.sim.workloads.entities import encode_latest as _encode
from kraftlake.sim.workloads.entities import synthetic_records


def _log_with_a_bad_record(root: Path) -> tuple[Path, int, int]:
    """A synthetic log plus one PartitionRecord whose ISR is not within its replicas; (dir, its offset, size)."""
    records = synthetic_records(11, 40)
    alive: list[str] = []  # topics created outside transactions and not removed before `at`
    in_txn = False
    at = 0
    for at, rec in enumerate(records):  # `at`: the first place past the middle outside a transaction
        if at >= len(records) // 2 and not in_txn and alive:
            break
        if isinstance(rec, m.BeginTransactionRecord):
            in_txn = True
        elif isinstance(rec, (m.EndTransactionRecord, m.AbortTransactionRecord)):
            in_txn = False
        elif isinstance(rec, m.TopicRecord) and not in_txn:
            alive.append(rec.topic_id)
        elif isinstance(rec, m.RemoveTopicRecord) and rec.topic_id in alive:
            alive.remove(rec.topic_id)
    topic_id = alive[0]
    bad = m.PartitionRecord(
        partition_id=999,
        topic_id=topic_id,
        replicas=(1, 2),
        isr=(1, 7),
        leader=1,
        leader_epoch=0,
        partition_epoch=0,
    )
    records.insert(at, bad)
    d = root / "__cluster_metadata-0"
    d.mkdir(parents=True)
    values = [_encode(r) for r in records]
    batches = [
        build_data_batch(i, 1, 1_700_000_000_000 + i, values[i : i + 5]) for i in range(0, len(values), 5)
    ]
    (d / segment_filename(0)).write_bytes(b"".join(batches))
    return d, at, len(values)


def test_failing_rows_are_quarantined_and_the_rest_commits(spark: Any, tmp_path: Path) -> None:
    from kraftlake.spark.record_rules import QUARANTINE
    from kraftlake.spark.tables.layout import table_ref
    from pipelines.stream import stream

    log_dir, bad_offset, n = _log_with_a_bad_record(tmp_path / "src")
    warehouse = tmp_path / "wh"
    result = stream(
        spark, "log-dir", {"path": str(log_dir)}, warehouse, available_now=True, max_records_per_batch=60
    )
    assert result.records == n and result.batches > 1
    assert result.quarantined == 1
    rows = spark.sql(f"SELECT offset, type, reasons FROM {table_ref(warehouse, QUARANTINE)}").collect()
    assert [(r["offset"], r["type"]) for r in rows] == [(bad_offset, "PartitionRecord")]
    assert "record_partition_isr_subset_of_replicas" in rows[0]["reasons"]
    logged = spark.sql(f"SELECT count(*) AS c FROM {table_ref(warehouse, 'metadata_log')}").first()["c"]
    assert logged == n  # nothing lost: the log keeps every record, as Kafka applied it
    part = spark.sql(
        f"SELECT isr FROM {table_ref(warehouse, 'partitions')} "
        f"WHERE `partition` = 999 AND from_offset = {bad_offset}"
    ).collect()
    assert [list(r["isr"]) for r in part] == [[1, 7]]  # the history is the image's, bad record included


def test_the_drivers_verdicts_are_the_suites_and_run_no_job(spark: Any, tmp_path: Path) -> None:
    """The verdicts of rows the driver holds (:func:`pipelines.verdicts.verdicts`: a local relation of the
    columns and fields the rules read) equal the record-level suite's over the same rows in a DataFrame, and
    no Spark job runs for them."""
    from kraftlake.image.source import log_records
    from kraftlake.spark.record_rules import validate_records
    from kraftlake.spark.tables.layout import LOG, arrow_schema_of, stored_log_rows
    from pipelines.verdicts import verdicts

    log_dir, bad_offset, n = _log_with_a_bad_record(tmp_path / "src")
    rows = stored_log_rows(list(log_records(log_dir)), "c", arrow_schema_of(LOG))
    assert rows.num_rows == n
    tracker = spark.sparkContext.statusTracker()
    jobs = set(tracker.getJobIdsForGroup(None))
    got = verdicts(spark, rows).to_pylist()
    assert set(tracker.getJobIdsForGroup(None)) == jobs
    bad = validate_records(spark.createDataFrame(rows))[1]
    expected = {r["offset"]: list(r["reasons"]) for r in bad.select("offset", "reasons").collect()}
    assert list(expected) == [bad_offset]
    assert {o: v for o, v in zip(rows.column("offset").to_pylist(), got, strict=True) if v} == expected
    assert verdicts(spark, rows.slice(0, 0)).to_pylist() == []
