"""kraftlake's own fold of the pending closes (``kraftlake.delta.rewrite``) against delta-spark's MERGE: the
same tables; Delta's readers, checkpoints and time travel over its commits; commit races; reading
deletion vectors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kraftlake.delta import rewrite as delta_rewrite
from kraftlake.delta.append import CommitConflict
from kraftlake.history import ENTITIES
from kraftlake.sim.workloads.entities import write_synthetic_log
from kraftlake.spark.tables.fold import _fold_with_spark, fold_closes, pending_closes
from kraftlake.spark.tables.layout import CLOSES, arrow_rows, table_path
from kraftlake.spark.tables.queries import history_query
from kraftlake.spark.tables.writes import append_arrow, retry_conflicts

TABLES = (*ENTITIES, CLOSES)


@pytest.fixture(scope="module")
def unfolded(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Path:
    """A warehouse ingested in slices whose closes are left pending."""
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("unfolded")
    log_dir = write_synthetic_log(root / "log", seed=12, steps=200)
    warehouse = root / "warehouse"
    ingest(spark, log_dir, warehouse, batch_records=150, fold=False)
    assert pending_closes(spark, warehouse) > 10
    return warehouse


#: The cluster of a synthetic log (no meta.properties), as an SQL literal.
DEFAULT = "'default'"


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _rows(spark: Any, path: str, version: int | None = None) -> list[str]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True) for r in reader.load(path).collect())


def _commits(path: str) -> list[list[dict[str, Any]]]:
    log = Path(path) / "_delta_log"
    versions = sorted(int(p.name[:20]) for p in log.glob("*.json"))
    return [[json.loads(x) for x in (log / f"{v:020d}.json").read_text().splitlines()] for v in versions]


def _checkpoint(spark: Any, path: str) -> None:
    jvm = spark.sparkContext._jvm
    none = jvm.scala.Option.empty()
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    log.checkpointAndCleanUpDeltaLog(log.update(False, none, none), none)
    assert (Path(path) / "_delta_log" / "_last_checkpoint").exists()


@pytest.mark.slow
@pytest.mark.heavy
def test_same_tables_as_the_spark_merge(spark: Any, unfolded: Path, tmp_path: Path) -> None:
    """kraftlake's fold of the pending closes gives the same tables as delta-spark's MERGE.
    Slow: the module's warehouse is ingested first (the 324-record log in 150-record slices, closes left
    pending); then both folds (Spark's: a MERGE per table), each of the 12 tables read by Spark from both
    copies, and a Delta checkpoint."""
    ours, theirs = _copy(unfolded, tmp_path / "ours"), _copy(unfolded, tmp_path / "theirs")
    partitions = table_path(ours, "partitions")
    before = _commits(partitions)
    folded = fold_closes(spark, ours)
    assert folded == _fold_with_spark(spark, theirs, retry_conflicts) == pending_closes(spark, unfolded)
    for table in TABLES:
        assert _rows(spark, table_path(ours, table)) == _rows(spark, table_path(theirs, table)), table
    assert pending_closes(spark, ours) == 0
    # one commit of ours per table: files replaced, none with a deletion vector
    (commit,) = _commits(partitions)[len(before) :]
    assert commit[0]["commitInfo"]["engineInfo"].startswith("kraftlake")
    adds = [a["add"] for a in commit if "add" in a]
    removes = [a["remove"] for a in commit if "remove" in a]
    assert adds and removes and not any("deletionVector" in a for a in adds)
    stats = json.loads(adds[0]["stats"])
    assert {"from_offset", "to_offset"} <= set(stats["nullCount"])
    # Delta reads the version before it, checkpoints it, and reads it again from the checkpoint
    assert _rows(spark, partitions, len(before) - 1) == _rows(spark, table_path(unfolded, "partitions"))
    _checkpoint(spark, partitions)
    after = _rows(spark, partitions)
    assert after == _rows(spark, table_path(theirs, "partitions"))
    # and a fold read from that checkpoint (nothing pending any more) changes nothing
    assert fold_closes(spark, ours) == 0
    assert _rows(spark, partitions) == after


@pytest.mark.slow
@pytest.mark.heavy
def test_files_with_deletion_vectors_are_read_less_their_deleted_rows(spark: Any, tmp_path: Path) -> None:
    """Our reading of Delta's deletion vectors against Spark's, DELETE after DELETE on one file of 300k rows
    (several 64k containers) and one of 1k: sparse rows (array containers), a range of 6k (run or bitmap), every
    other row of a 64k block (a bitmap container), the file's last rows. Slow: the 301,000 rows written
    through Spark, then five DELETEs, each followed by the table's rows collected from Spark into Python."""
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (offset BIGINT, tag STRING) USING DELTA "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    for n, tag in ((300_000, "CAST(id % 7 AS STRING)"), (1000, "'x'")):
        rows = spark.range(n).selectExpr("id AS offset", f"{tag} AS tag").coalesce(1)
        rows.write.format("delta").mode("append").save(path)
    for where in (
        "offset % 97 = 0",
        "offset BETWEEN 70000 AND 76000",
        "offset BETWEEN 131072 AND 196607 AND offset % 2 = 0",
        "offset > 299990",
        "tag = 'x' AND offset % 3 = 0",
    ):
        spark.sql(f"DELETE FROM delta.`{path}` WHERE {where}")
        snap = delta_rewrite.snapshot(path)
        assert any(f.get("deletionVector") for f in snap.files.values()), where
        ours = sorted(
            (o, t)
            for f in snap.files.values()
            for o, t in zip(*delta_rewrite.read_file(snap, f).to_pydict().values(), strict=True)
        )
        theirs = sorted((r[0], r[1]) for r in spark.read.format("delta").load(path).collect())
        assert ours == theirs, where


def test_a_file_with_a_deletion_vector_is_folded_here(spark: Any, unfolded: Path, tmp_path: Path) -> None:
    wh = _copy(unfolded, tmp_path / "wh")
    spark.sql(f"DELETE FROM delta.`{table_path(wh, 'partitions')}` WHERE to_offset IS NULL AND partition = 0")
    snap = delta_rewrite.snapshot(table_path(wh, "partitions"))
    assert any(f.get("deletionVector") for f in snap.files.values())
    tables = ("partitions", "brokers")
    want = {
        t: sorted(
            json.dumps(r.asDict(recursive=True), sort_keys=True)
            for r in spark.sql(
                f"SELECT 'default' AS cluster, h.* FROM ({history_query(wh, t, DEFAULT)}) h"
            ).collect()
        )
        for t in tables
    }
    assert fold_closes(spark, wh) > 0
    for table in tables:
        assert _rows(spark, table_path(wh, table)) == want[table], table
    last = _commits(table_path(wh, "partitions"))[-1]
    assert last[0]["commitInfo"]["engineInfo"].startswith("kraftlake")
    assert any("deletionVector" in a["remove"] for a in last if "remove" in a)


def test_commit_races(spark: Any, unfolded: Path, tmp_path: Path) -> None:
    wh = _copy(unfolded, tmp_path / "wh")
    path = table_path(wh, "partitions")
    snap = delta_rewrite.snapshot(path)
    first, second = sorted(snap.files.values(), key=lambda a: a["path"])[:2]
    rows = delta_rewrite.read_file(snap, first)
    # a blind append won the next version: the replacement goes in after it
    row = {c: None for c in ENTITIES["partitions"].names} | {
        "topic": "t",
        "topic_id": "x" * 22,
        "partition": 0,
        "replicas": [1],
        "isr": [1],
        "from_offset": 10**9,
        "to_offset": None,
    }
    append_arrow(spark, wh, "partitions", arrow_rows("partitions", [row], "default"), 10**9, "default")
    done = delta_rewrite.replace(snap, [first], [rows], operation="MERGE")
    assert done.version == snap.version + 2
    assert len(_rows(spark, path)) == len(_rows(spark, path, snap.version)) + 1
    # a winner that removed a file being replaced: a conflict, and no file of the loser is left
    rows2 = delta_rewrite.read_file(snap, second)
    delta_rewrite.replace(delta_rewrite.snapshot(path), [second], [rows2], operation="MERGE")
    names = {p.name for p in Path(path).iterdir()}
    with pytest.raises(CommitConflict, match="removed"):
        delta_rewrite.replace(snap, [second], [rows2], operation="MERGE")
    assert {p.name for p in Path(path).iterdir()} == names
    assert len(_rows(spark, path)) == len(_rows(spark, path, snap.version)) + 1


@pytest.mark.slow
@pytest.mark.heavy
def test_one_cluster_s_closes_folded_alone(spark: Any, unfolded: Path, tmp_path: Path) -> None:
    """A fold of one cluster's closes folds those alone, and what a fold of every cluster folds (the fleet's
    per-cluster fold; make test folds a whole warehouse in this module and test_fleet_replay). Slow: three folds over two copies of the module's warehouse, the pending closes counted by Spark before
    and after, and each of the 12 tables read by Spark from both copies."""
    alone, every = _copy(unfolded, tmp_path / "alone"), _copy(unfolded, tmp_path / "every")
    pending = pending_closes(spark, unfolded)
    assert fold_closes(spark, alone, cluster="another") == 0 and pending_closes(spark, alone) == pending
    assert fold_closes(spark, alone, cluster="default") == pending == fold_closes(spark, every)
    assert pending_closes(spark, alone) == 0
    for table in TABLES:
        assert _rows(spark, table_path(alone, table)) == _rows(spark, table_path(every, table)), table
