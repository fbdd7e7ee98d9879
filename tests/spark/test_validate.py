"""``validate``: the GX suites pass on a warehouse of a simulated cluster's log and name what a corruption broke.

The log comes from the cluster simulator driving the quorum controllers of a 3-voter quorum, with failovers (so
it holds Kafka's invariants; the synthetic fixture log deliberately does not keep ISR within the replicas). One
ingested warehouse serves the module; the corrupted one is a copy.
"""

from __future__ import annotations

import io
import re
import shutil
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def sim_warehouse(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Path:
    from kraftlake.sim.cluster import DEFAULT_WEIGHTS, ClusterSimConfig
    from kraftlake.sim.quorum_cluster import simulate_on_quorum
    from pipelines.ingest import ingest
    from tests.sim.test_quorum_cluster import FAST

    root = tmp_path_factory.mktemp("validate")
    # written through the 3-voter quorum with frequent failovers and topic churn: the log in which controllers
    # restarted from their data directories once reused topic ids (and the partition epochs went back)
    weights = dict(DEFAULT_WEIGHTS, failover=1.0, create_topic=2.0, delete_topic=1.0)
    config = ClusterSimConfig(
        brokers=5, topics=6, partitions_per_topic=3, events=400, seed=5, check_every=50, weights=weights
    )
    result = simulate_on_quorum(config, root / "sim", fsync=False, quorum=FAST, events_per_call=10)
    assert result.summary.failovers >= 2 and result.records_by_type["RemoveTopicRecord"] >= 2
    warehouse = root / "warehouse"
    ingest(spark, result.node_dirs[result.leader_id], warehouse, batch_records=100_000)
    return warehouse


@pytest.mark.heavy
def test_good_warehouse_passes_and_builds_docs(spark: Any, sim_warehouse: Path) -> None:
    """Every suite passes on the simulated cluster's warehouse and Data Docs are built, a page per suite.
    Heavy: every table's suite and the docs site (about 50 s); the module's other tests run the suites on a
    corrupted copy and the quarantine."""
    from pipelines.validate import validate

    t0 = time.monotonic()
    report = validate(spark, sim_warehouse)
    print(
        f"GX validation of the good warehouse: {time.monotonic() - t0:.1f}s "
        f"({ {k: round(v, 1) for k, v in report.table_seconds.items()} })"
    )
    assert report.failures == []
    assert report.success
    assert report.evaluated >= 40
    index = Path(report.docs["local_site"].removeprefix("file://"))
    assert index.is_file() and index.is_relative_to(sim_warehouse.resolve())
    # one validation result page per table suite
    assert len(list((index.parent / "validations").rglob("*.html"))) >= len(report.table_seconds)


def test_corrupted_warehouse_fails_with_the_right_expectations(
    spark: Any, sim_warehouse: Path, tmp_path: Path
) -> None:
    from kraftlake.cli import main
    from kraftlake.spark.tables.layout import table_ref

    warehouse = tmp_path / "w"
    shutil.copytree(sim_warehouse, warehouse, ignore=shutil.ignore_patterns("_gx"))
    parts = table_ref(warehouse, "partitions")
    # a new partition of a live topic whose ISR holds a broker outside its replicas (leader kept in the ISR)
    spark.sql(f"""
        INSERT INTO {parts}
        SELECT cluster, topic, topic_id, 999, array(1, 2), array(1, 2, 77), CAST(array() AS ARRAY<INT>),
               CAST(array() AS ARRAY<INT>), 1, 0, 0, 0,
               array('AAAAAAAAAAAAAAAAAAAAAA', 'AAAAAAAAAAAAAAAAAAAAAA'), CAST(array() AS ARRAY<INT>),
               CAST(array() AS ARRAY<INT>), from_offset, NULL
        FROM {parts} WHERE to_offset IS NULL ORDER BY from_offset DESC LIMIT 1""")
    # a gap in the committed offsets
    offsets = table_ref(warehouse, "offsets")
    mid = spark.sql(f"SELECT CAST(avg(offset) AS BIGINT) AS m FROM {offsets}").first()["m"]
    spark.sql(f"DELETE FROM {offsets} WHERE offset = {mid}")
    # a commit point published past the last committed offset
    spark.sql(
        f"INSERT INTO {table_ref(warehouse, 'bounds')} SELECT max(cluster), max(offset) + 5, NULL, 0, NULL, NULL "
        f"FROM {offsets}"
    )
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(
            [
                "validate",
                "--warehouse",
                str(warehouse),
                "--table",
                "offsets",
                "--table",
                "partitions",
                "--table",
                "topics",
                "--table",
                "bounds",
            ]
        )
    text = out.getvalue()
    assert code == 1, text
    failed = set(re.findall(r"^FAILED (\w+): (\w+) ", text, re.M))
    assert failed == {
        ("partitions", "isr_subset_of_replicas"),
        ("offsets", "offsets_contiguous"),
        ("bounds", "bounds_commit_point_committed"),
    }, text
    assert "(unexpected_rows_expectation)" in text and "data docs (local_site): file://" in text


def test_validate_records_quarantines_bad_rows_and_keeps_the_rest(
    spark: Any, sim_warehouse: Path, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from kraftlake.spark.record_rules import QUARANTINE, quarantine, validate_records
    from kraftlake.spark.tables.layout import LOG, table_path

    log = spark.read.format("delta").load(table_path(sim_warehouse, LOG))
    total = log.count()
    victim = log.filter("type = 'PartitionRecord'").orderBy("offset").limit(1)
    bad_row = victim.withColumn(
        "partition_record", F.col("partition_record").withField("isr", F.array(F.lit(77)))
    )
    batch = log.filter(~F.col("offset").isin([r["offset"] for r in victim.collect()])).unionByName(bad_row)
    good, bad = validate_records(batch)
    bad_rows = bad.collect()
    assert len(bad_rows) == 1
    assert bad_rows[0]["reasons"] == [
        "record_partition_isr_subset_of_replicas",
        "record_partition_leader_in_isr_or_none",
    ]
    assert good.count() == total - 1
    assert good.schema == log.schema
    warehouse = tmp_path / "w"
    assert quarantine(spark, warehouse, bad, "a") == 1
    assert quarantine(spark, warehouse, bad, "a") == 0  # a replayed micro-batch adds nothing
    stored = spark.read.format("delta").load(table_path(warehouse, QUARANTINE)).collect()
    assert len(stored) == 1
    assert stored[0]["cluster"] == "a" and stored[0]["offset"] == bad_rows[0]["offset"]
    assert "isr_subset" in stored[0]["reason"] and stored[0]["raw"] == bad_rows[0]["raw"]
    # another cluster's record at the same offset is another row
    assert quarantine(spark, warehouse, bad, "b") == 1
    stored = spark.read.format("delta").load(table_path(warehouse, QUARANTINE))
    assert sorted(r["cluster"] for r in stored.collect()) == ["a", "b"]


def test_a_quarantine_made_before_clusters_gains_the_column(spark: Any, tmp_path: Path) -> None:
    from kraftlake.spark.record_rules import QUARANTINE, quarantine
    from kraftlake.spark.tables.layout import table_ref

    warehouse = tmp_path / "w"
    old_ddl = (
        "offset BIGINT, epoch INT, timestamp BIGINT, type STRING, raw BINARY, "
        "reasons ARRAY<STRING>, reason STRING, quarantined_at TIMESTAMP"
    )
    ref = table_ref(warehouse, QUARANTINE)
    spark.sql(f"CREATE TABLE {ref} ({old_ddl}) USING DELTA")
    spark.sql(f"INSERT INTO {ref} VALUES (7, 1, 0, 'PartitionRecord', X'00', array('r'), 'r', now())")
    bad = spark.sql(
        "SELECT 7L AS offset, 1 AS epoch, 0L AS timestamp, 'PartitionRecord' AS type, X'00' AS raw, "
        "array('r') AS reasons, 'r' AS reason"
    )
    assert quarantine(spark, warehouse, bad, "a") == 0  # the old row is cluster a's: nothing new
    rows = spark.sql(f"SELECT * FROM {ref}").collect()
    assert spark.table(ref).columns[0] == "cluster" and [(r["cluster"], r["offset"]) for r in rows] == [
        ("a", 7)
    ]


def _jobs_of(spark: Any, run: Any) -> tuple[int, Any]:
    """How many Spark jobs ``run()`` started, and what it returned."""
    sc = spark.sparkContext
    group = f"test-validate-{time.monotonic_ns()}"
    saved = {k: sc.getLocalProperty(k) for k in ("spark.jobGroup.id", "spark.job.description")}
    sc.setJobGroup(group, group)
    try:
        out = run()
    finally:
        for key, value in saved.items():
            sc.setLocalProperty(key, value)
    return len(sc.statusTracker().getJobIdsForGroup(group)), out


def test_a_tables_spark_jobs_do_not_depend_on_its_suite(
    spark: Any, sim_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """metadata_log's checks read the table alone: whatever its suite holds, the table costs the same jobs
    (Delta's listing of the table's files, then one job answering every expectation)."""
    from kraftlake.spark import validate as V
    from kraftlake.spark.tables.creation import open_cluster

    warehouse = tmp_path / "w"
    shutil.copytree(sim_warehouse, warehouse, ignore=shutil.ignore_patterns("_gx"))
    cluster = open_cluster(spark, warehouse, None)
    suites = V.warehouse_suites

    def suite_of(pick: Any) -> Any:
        return lambda w, c: {"metadata_log": pick(suites(w, c)["metadata_log"])}

    def run(pick: Any) -> tuple[int, Any]:
        monkeypatch.setattr(V, "warehouse_suites", suite_of(pick))
        return _jobs_of(
            spark,
            lambda: V.validate_warehouse(spark, warehouse, cluster, ["metadata_log"], build_docs=False),
        )

    def is_sql(e: Any) -> bool:
        return e.expectation_type == "unexpected_rows_expectation"

    run(lambda s: s)  # Delta's snapshot of the table computed once, and GX's project made
    full = suites(warehouse, cluster)["metadata_log"]
    assert sum(map(is_sql, full)) >= 10 and sum(not is_sql(e) for e in full) >= 2
    jobs = {}
    for label, pick in {
        "one column expectation": lambda s: [e for e in s if not is_sql(e)][:1],
        "one SQL check": lambda s: [e for e in s if is_sql(e)][:1],
        "the whole suite": lambda s: s,
    }.items():
        jobs[label], report = run(pick)
        assert report.success and report.evaluated == len(pick(full)), report.failures
    assert len(set(jobs.values())) == 1 and jobs["the whole suite"] < len(full), jobs


def test_a_failing_sql_check_fails_alone_and_reports_its_rows(
    spark: Any, sim_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import great_expectations as gx

    from kraftlake.spark import validate as V
    from kraftlake.spark.tables.creation import open_cluster
    from kraftlake.spark.tables.layout import table_path

    warehouse = tmp_path / "w"
    shutil.copytree(sim_warehouse, warehouse, ignore=shutil.ignore_patterns("_gx"))
    cluster = open_cluster(spark, warehouse, None)
    lowest = "SELECT offset, epoch FROM {batch} WHERE offset < (SELECT min(offset) + 3 FROM {batch})"
    extra = {
        "lowest_three": lowest,
        "no_such_column": "SELECT no_such_column FROM {batch}",
        "raises": "SELECT raise_error('boom') AS x FROM {batch}",
    }
    suites = V.warehouse_suites

    def with_extra(w: Any, c: str) -> dict[str, list[Any]]:
        return {
            "offsets": suites(w, c)["offsets"]
            + [
                gx.expectations.UnexpectedRowsExpectation(unexpected_rows_query=q, meta={"check": name})
                for name, q in extra.items()
            ]
        }

    monkeypatch.setattr(V, "warehouse_suites", with_extra)
    report = V.validate_warehouse(spark, warehouse, cluster, ["offsets"], build_docs=False)
    assert report.evaluated == len(suites(warehouse, cluster)["offsets"]) + len(extra)
    assert {(f.check, f.expectation) for f in report.failures} == {
        (name, "unexpected_rows_expectation") for name in extra
    }
    observed = {f.check: f.observed for f in report.failures}
    assert observed["lowest_three"] == 3

    expected = [
        r.asDict()
        for r in spark.read.format("delta")
        .load(table_path(warehouse, "offsets"))
        .orderBy("offset")
        .select("offset", "epoch")
        .limit(3)
        .collect()
    ]
    batch = V.materialize(spark, warehouse, cluster, "offsets", with_extra(warehouse, cluster)["offsets"])
    answer = batch.answers[lowest]
    assert answer.error is None and answer.count == 3
    assert sorted(answer.rows, key=lambda r: r["offset"]) == expected
    assert batch.answers[extra["no_such_column"]].error is not None
    assert "boom" in str(batch.answers[extra["raises"]].error)
    assert list(batch.frame.columns) == ["offset", "epoch"] and len(batch.frame) > 3
