"""The warehouse's tables, written as version 0 of a Delta log by kraftlake, are the tables delta-spark's
``CREATE TABLE ... CLUSTER BY ... TBLPROPERTIES`` makes: same schema, clustering, properties and protocol, and
Delta appends, reads, clusters (OPTIMIZE) and merges into them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kraftlake.spark.tables.bounds import last_offset
from kraftlake.spark.tables.creation import create_table, ensure_tables
from kraftlake.spark.tables.layout import HISTORY_TABLES, LOG, never_written, table_layout, table_path

DETAIL = (
    "format",
    "clusteringColumns",
    "properties",
    "minReaderVersion",
    "minWriterVersion",
    "tableFeatures",
)


def _by_spark(spark: Any, path: str, name: str) -> None:
    from delta.tables import DeltaTable

    schema, cluster, props = table_layout(spark, name)
    builder = DeltaTable.create(spark).location(path).addColumns(schema).clusterBy(*cluster)
    for k, v in props.items():
        builder = builder.property(k, v)
    builder.execute()


def _detail(spark: Any, path: str) -> dict[str, Any]:
    row = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().asDict()
    return {k: (sorted(row[k]) if isinstance(row[k], list) else row[k]) for k in DETAIL}


def _actions(path: str) -> dict[str, Any]:
    lines = (Path(path) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    out = {}
    for line in lines:
        ((kind, action),) = json.loads(line).items()
        if kind == "metaData":
            action = {k: v for k, v in action.items() if k not in ("id", "createdTime")}
        if kind == "commitInfo":
            action = {k: v for k, v in action.items() if k not in ("timestamp", "engineInfo", "txnId")}
        out[kind] = action
    return out


@pytest.mark.parametrize("name", [LOG, "partitions", "offsets", "closes", "snapshots", "retention", "bounds"])
def test_a_table_as_delta_spark_creates_it(spark: Any, tmp_path: Path, name: str) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert create_table(spark, ours, name)
    assert not create_table(spark, ours, name)  # there already
    _by_spark(spark, table_path(theirs, name), name)
    assert _detail(spark, table_path(ours, name)) == _detail(spark, table_path(theirs, name))
    assert _actions(table_path(ours, name)) == _actions(table_path(theirs, name))
    schema = spark.read.format("delta").load(table_path(ours, name)).schema
    assert schema == spark.read.format("delta").load(table_path(theirs, name)).schema


def test_delta_writes_clusters_and_merges_into_them(spark: Any, tmp_path: Path) -> None:
    ensure_tables(spark, tmp_path / "w")
    assert never_written(tmp_path / "w", "offsets") and last_offset(spark, tmp_path / "w", "default") == -1
    offsets = table_path(tmp_path / "w", "offsets")
    for lo in (0, 10):
        spark.range(lo, lo + 10).selectExpr(
            "'default' AS cluster", "id AS offset", "1 AS epoch", "id * 1000 AS timestamp"
        ).write.format("delta").mode("append").save(offsets)
    spark.sql(f"OPTIMIZE delta.`{offsets}`").collect()
    spark.sql(
        f"MERGE INTO delta.`{offsets}` t USING (SELECT 3L AS offset) s ON t.offset = s.offset "
        "WHEN MATCHED THEN UPDATE SET t.epoch = 2"
    )
    assert (
        not never_written(tmp_path / "w", "offsets") and last_offset(spark, tmp_path / "w", "default") == 19
    )
    rows = spark.read.format("delta").load(offsets).orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(20))
    assert [r.epoch for r in rows if r.epoch == 2] == [2]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{offsets}`").select("version", "operation").collect()
    assert sorted((r.version, r.operation) for r in history)[0] == (0, "CREATE TABLE")
    assert all(Path(table_path(tmp_path / "w", t), "_delta_log").is_dir() for t in HISTORY_TABLES)


def test_an_existing_table_whose_first_commit_was_cleaned_up_is_left_alone(
    spark: Any, tmp_path: Path
) -> None:
    assert create_table(spark, tmp_path, "offsets")
    log = Path(table_path(tmp_path, "offsets"), "_delta_log")
    (log / f"{0:020d}.json").rename(log / f"{0:020d}.checkpoint.parquet")  # as if only a checkpoint remained
    assert not create_table(spark, tmp_path, "offsets")
    assert not (log / f"{0:020d}.json").exists()


def test_a_table_made_before_a_new_record_type_gains_its_column(spark: Any, tmp_path: Path) -> None:
    """A warehouse made before Kafka 4.4.0's UnregisterControllerRecord: its metadata_log lacks the column
    appends write; the next writer adds it in one metadata-only commit, rows already there read it as null."""
    from kraftlake.delta import append as delta_append
    from kraftlake.spark.tables import creation as tables_module

    warehouse = tmp_path / "w"
    ensure_tables(spark, warehouse)
    path = table_path(warehouse, LOG)
    log = Path(path, "_delta_log")
    version, metadata = delta_append.table_metadata(path)
    full = json.loads(metadata["schemaString"])
    old = {**full, "fields": [f for f in full["fields"] if f["name"] != "unregister_controller_record"]}
    assert len(old["fields"]) == len(full["fields"]) - 1
    old_meta = {**metadata, "schemaString": json.dumps(old, separators=(",", ":"))}
    assert delta_append.put_commit(log, version + 1, [{"metaData": old_meta}])
    spark.sql(
        f"INSERT INTO delta.`{path}` (offset, epoch, timestamp, batch_offset, is_control, type, api_key, version, "
        "raw) VALUES (0, 1, 1000, 0, false, 'NoOpRecord', 23, 0, X'00')"
    )
    protocol = delta_append._load(log).protocol
    schema, _, _ = table_layout(spark, LOG)
    wanted = json.dumps(schema.jsonValue())
    with pytest.raises(delta_append.Unsupported, match="not the rows' schema"):
        delta_append.check_supported(Path(path), protocol, old_meta, wanted)

    tables_module._ENSURED.clear()
    ensure_tables(spark, warehouse)
    latest, migrated = delta_append.table_metadata(path)
    assert latest == version + 3 and json.loads(migrated["schemaString"]) == full
    delta_append.check_supported(Path(path), protocol, migrated, wanted)  # the fast append takes it again
    rows = spark.read.format("delta").load(path).select("offset", "unregister_controller_record").collect()
    assert [(r["offset"], r["unregister_controller_record"]) for r in rows] == [(0, None)]
    assert not tables_module.add_missing_columns(spark, warehouse, LOG)  # once
