"""kraftlake's own Delta checkpoints (``kraftlake.delta.checkpoint``) against delta-spark's: the same state in the
file, read by Spark as its own (with the commits before it gone), written over by Spark's MERGE and DELETE and
checkpointed again by Delta; tombstones kept for their retention; the writers' background checkpoints
written here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kraftlake.delta import checkpoint as delta_checkpoint
from kraftlake.delta.append import Unsupported, log_segment, put_commit
from kraftlake.delta.rewrite import snapshot
from kraftlake.history import ENTITIES
from kraftlake.sim.workloads.entities import write_synthetic_log
from kraftlake.spark.tables.fold import fold_closes
from kraftlake.spark.tables.layout import CLOSES, table_path
from kraftlake.spark.tables.writes import wait_checkpoints
from tests.spark.test_delta_rewrite import _checkpoint, _rows

TABLES = ("partitions", "topics", "brokers", CLOSES)


@pytest.fixture(scope="module")
def sliced(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Path:
    """A warehouse ingested in many slices (its tables' logs past a checkpoint interval), closes folded (files
    removed: tombstones)."""
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("sliced")
    log_dir = write_synthetic_log(root / "log", seed=5, steps=100)
    warehouse = root / "warehouse"
    ingest(spark, log_dir, warehouse, batch_records=20, fold=False)
    fold_closes(spark, warehouse)
    wait_checkpoints()
    return warehouse


def _without_checkpoints(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for table in TABLES:
        log = Path(table_path(dst, table)) / "_delta_log"
        for p in log.iterdir():
            if ".checkpoint." in p.name or p.name == "_last_checkpoint":
                p.unlink()
    return dst


def _content(path: str) -> dict[str, Any]:
    """A checkpoint's actions, comparable: the files by path with their size and statistics, the tombstones'
    paths, the transactions, the domain metadata, the metadata and protocol."""
    log = Path(path) / "_delta_log"
    latest, start, _ = log_segment(log)
    assert start == latest, f"{path}: no checkpoint at its latest version {latest}"
    data = pq.read_table(log / f"{start:020d}.checkpoint.parquet").to_pylist()
    out: dict[str, Any] = {"add": {}, "remove": set(), "txn": {}, "domainMetadata": {}}
    for row in data:
        if (add := row["add"]) is not None:
            out["add"][add["path"]] = (add["size"], json.loads(add["stats"]), add["deletionVector"])
        elif row["remove"] is not None:
            out["remove"].add(row["remove"]["path"])
        elif row["txn"] is not None:
            out["txn"][row["txn"]["appId"]] = row["txn"]["version"]
        elif row["domainMetadata"] is not None:
            out["domainMetadata"][row["domainMetadata"]["domain"]] = row["domainMetadata"]["configuration"]
        elif row["metaData"] is not None:
            meta = row["metaData"]
            out["metaData"] = (meta["id"], meta["schemaString"], sorted(meta["configuration"] or []))
        elif row["protocol"] is not None:
            out["protocol"] = row["protocol"]
    return out


@pytest.mark.slow
@pytest.mark.heavy
def test_the_same_checkpoint_as_delta_spark_reads_it_as_its_own_and_writes_over_it(
    spark: Any, sliced: Path, tmp_path: Path
) -> None:
    """kraftlake's checkpoint of a table is delta-spark's: Spark reads it as its own and writes over it.
    Slow: the module's warehouse is ingested first (the 176-record log in 20-record slices, the closes
    folded); then Delta checkpoints four tables through the JVM, Spark reads the four tables of both copies,
    and runs a DELETE, a MERGE and a checkpoint on each copy of ``partitions``."""
    ours = _without_checkpoints(sliced, tmp_path / "ours")
    theirs = _without_checkpoints(sliced, tmp_path / "theirs")
    for table in TABLES:
        mine, delta = table_path(ours, table), table_path(theirs, table)
        done = delta_checkpoint.write_checkpoint(mine)
        _checkpoint(spark, delta)
        assert done is not None and done.version == log_segment(Path(mine) / "_delta_log")[0] > 0, table
        assert done.version >= 10 or table != "partitions"
        assert _content(mine) == _content(delta), table
        last = json.loads((Path(mine) / "_delta_log" / "_last_checkpoint").read_text())
        assert last["version"] == done.version and last["numOfAddFiles"] == len(snapshot(mine).files)
    # the table is read from the checkpoint: every commit before it gone
    for table in TABLES:
        log = Path(table_path(ours, table)) / "_delta_log"
        version = log_segment(log)[1]
        for v in range(version):
            (log / f"{v:020d}.json").unlink()
        assert _rows(spark, table_path(ours, table)) == _rows(spark, table_path(theirs, table)), table
        assert snapshot(table_path(ours, table)).files == snapshot(table_path(theirs, table)).files, table
    # Spark's writes over it, and Delta's checkpoint after them
    path_ours, path_theirs = table_path(ours, "partitions"), table_path(theirs, "partitions")
    for path in (path_ours, path_theirs):
        spark.sql(f"DELETE FROM delta.`{path}` WHERE partition = 0")
        spark.sql(
            f"MERGE INTO delta.`{path}` t USING (SELECT 1 AS p) s ON t.partition = s.p "
            "WHEN MATCHED THEN UPDATE SET t.leader = -1"
        )
        _checkpoint(spark, path)
    assert _rows(spark, path_ours) == _rows(spark, path_theirs)
    # the files written are Spark's own (names, deletion vectors): the same number of them, the rest equal
    mine, delta = _content(path_ours), _content(path_theirs)
    assert len(mine.pop("add")) == len(delta.pop("add")) and len(mine.pop("remove")) == len(
        delta.pop("remove")
    )
    assert mine == delta
    # and a data-skipping filter prunes the same files
    files = [
        sorted(spark.read.format("delta").load(p).where("from_offset > 150").inputFiles())
        for p in (path_ours, path_theirs)
    ]
    assert len(files[0]) == len(files[1]) > 0


def test_tombstones_kept_for_their_retention(sliced: Path, tmp_path: Path) -> None:
    ours = _without_checkpoints(sliced, tmp_path / "ours")
    path = table_path(ours, "partitions")
    removed = {
        a["remove"]["path"]
        for v in range(log_segment(Path(path) / "_delta_log")[0] + 1)
        for line in (Path(path) / "_delta_log" / f"{v:020d}.json").read_text().splitlines()
        if "remove" in (a := json.loads(line))
    }
    assert removed
    delta_checkpoint.write_checkpoint(path)
    assert _content(path)["remove"] == removed - {k[0] for k in snapshot(path).files}
    # eight days on: the week's tombstones are gone from the next checkpoint, the files are not
    later = tmp_path / "later"
    shutil.copytree(ours, later)
    path = table_path(later, "partitions")
    log = Path(path) / "_delta_log"
    version = log_segment(log)[0]
    assert put_commit(log, version + 1, [{"commitInfo": {"operation": "NOOP"}}])
    done = delta_checkpoint.write_checkpoint(path, now_ms=_newest_ms(log) + 8 * 86_400_000)
    assert done is not None and done.version == version + 1
    assert _content(path)["remove"] == set()
    assert set(_content(path)["add"]) == {k[0] for k in snapshot(path).files}


def _newest_ms(log: Path) -> int:
    return max(int(p.stat().st_mtime * 1000) for p in log.iterdir())


def test_a_table_needing_more_of_a_writer_gets_delta_s_checkpoint(sliced: Path, tmp_path: Path) -> None:
    ours = _without_checkpoints(sliced, tmp_path / "ours")
    path = table_path(ours, "topics")
    log = Path(path) / "_delta_log"
    version = log_segment(log)[0]
    meta = dict(snapshot(path).metadata)
    meta["configuration"] = {**meta["configuration"], "delta.checkpointPolicy": "v2"}
    assert put_commit(log, version + 1, [{"metaData": meta}])
    with pytest.raises(Unsupported, match="checkpointPolicy"):
        delta_checkpoint.write_checkpoint(path)
    assert not list(log.glob("*.checkpoint*")) and not (log / "_last_checkpoint").exists()


def test_the_writers_checkpoints_are_kraftlake_s(sliced: Path) -> None:
    """The ingest's background checkpoints were written here (no Spark job): every table past its interval
    has one, not in Delta's parquet-mr's hand."""
    seen = 0
    for table in (*ENTITIES, CLOSES):
        log = Path(table_path(sliced, table)) / "_delta_log"
        if not (log / "_last_checkpoint").exists():
            continue
        version = json.loads((log / "_last_checkpoint").read_text())["version"]
        created_by = pq.ParquetFile(log / f"{version:020d}.checkpoint.parquet").metadata.created_by
        assert "parquet-cpp-arrow" in created_by, (table, created_by)
        seen += 1
    assert seen >= 1
