"""kraftlake's own Delta appends (``kraftlake.delta.append``) against delta-spark's: the same rows read
back, the same file statistics, the same txn-version skipping; Delta's writers and checkpoints beside them; the
tables it must not append to go through Spark."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kraftlake.delta import append as delta_append
from kraftlake.delta.append import Appended, CommitConflict, DeltaAppendError, Unsupported
from kraftlake.image.source import log_records
from kraftlake.spark.tables.creation import create_table
from kraftlake.spark.tables.layout import (
    APP_ID,
    CLOSES,
    LOG,
    OFFSETS,
    app_id,
    arrow_rows,
    arrow_schema_of,
    schema_of,
    stored_log_rows,
    table_path,
    to_stored_log,
)
from kraftlake.spark.tables.writes import (
    append,
    append_arrow,
    append_frame,
    retry_conflicts,
    wait_checkpoints,
)


def _commits(path: str) -> list[list[dict[str, Any]]]:
    log = Path(path) / "_delta_log"
    versions = sorted(int(p.name[:20]) for p in log.glob("*.json"))
    return [[json.loads(x) for x in (log / f"{v:020d}.json").read_text().splitlines()] for v in versions]


def _adds(path: str, version: int) -> list[dict[str, Any]]:
    return [a["add"] for a in _commits(path)[version] if "add" in a]


def _stats(path: str, version: int) -> dict[str, Any]:
    (add,) = _adds(path, version)
    return json.loads(add["stats"])  # type: ignore[no-any-return]


def _engine(path: str, version: int) -> str:
    return str(_commits(path)[version][0]["commitInfo"]["engineInfo"])


def _rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    """A table's rows without its cluster column (the rows these tests append name none)."""
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).drop("cluster").collect())


def _partition_rows(n: int, first: int) -> list[dict[str, Any]]:
    return [
        {
            "topic": f"topic-{i % 3}",
            "topic_id": f"id-{i % 3:020d}",
            "partition": i,
            "replicas": [1, 2, 3],
            "isr": [1, 2] if i % 2 else [1, 2, 3],
            "leader": 1 + i % 3,
            "leader_epoch": i,
            "partition_epoch": i,
            "from_offset": first + i,
            "to_offset": None if i % 4 else first + i + 7,
        }
        for i in range(n)
    ]


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    return tmp_path / "wh"


def _pair(spark: Any, wh: Path, name: str) -> tuple[str, str]:
    """A table appended to by Spark and its twin appended to by kraftlake."""
    for w in (wh / "spark", wh / "ours"):
        create_table(spark, w, name)
    return table_path(wh / "spark", name), table_path(wh / "ours", name)


@pytest.mark.parametrize("name", ["partitions", OFFSETS, CLOSES])
def test_same_rows_and_statistics_as_delta_spark(spark: Any, wh: Path, name: str) -> None:
    rows = {
        "partitions": _partition_rows(40, 100),
        OFFSETS: [{"offset": o, "epoch": 3, "timestamp": 1_700_000_000_000 + o} for o in range(100, 160)],
        CLOSES: [{"entity": "partitions", "key": f"t\x01{i}", "to_offset": 200 + i} for i in range(30)],
    }[name]
    by_spark, ours = _pair(spark, wh, name)
    table = arrow_rows(name, rows)
    append(spark.createDataFrame(table, schema=schema_of(name)).coalesce(1), wh / "spark", name, 159, "c")
    append_arrow(spark, wh / "ours", name, table, 159, "c")
    assert _engine(ours, 1).startswith("kraftlake")
    assert "Delta-Lake" in _engine(by_spark, 1)
    assert _rows(spark, ours) == _rows(spark, by_spark)
    assert _stats(ours, 1) == _stats(by_spark, 1)
    theirs = next(a for a in _commits(by_spark)[1] if "txn" in a)["txn"]
    mine = next(a for a in _commits(ours)[1] if "txn" in a)["txn"]
    assert (mine["appId"], mine["version"]) == (theirs["appId"], theirs["version"]) == (app_id("c"), 159)


def test_metadata_log_rows_and_statistics(spark: Any, wh: Path, tmp_path: Path) -> None:
    from kraftlake.sim.workloads.entities import write_synthetic_log
    from kraftlake.spark import logsource

    log_dir = write_synthetic_log(tmp_path / "log", seed=3, steps=400)
    logsource.register(spark)
    df = to_stored_log(spark.read.format("kraftlake-log").load(str(log_dir)), "c")
    n = df.count()
    by_spark, ours = _pair(spark, wh, LOG)
    append(df.coalesce(1), wh / "spark", LOG, n - 1, "c")
    append_frame(spark, df, wh / "ours", LOG, n - 1, "c")
    assert _engine(ours, 1).startswith("kraftlake")
    assert _rows(spark, ours) == _rows(spark, by_spark)
    assert _stats(ours, 1) == _stats(by_spark, 1)
    # the stored schema, struct by struct, reads back as the table's
    assert spark.read.format("delta").load(ours).schema == spark.read.format("delta").load(by_spark).schema
    # built without Spark from the decoded records (a fleet task's log leg): the same rows and statistics
    create_table(spark, wh / "arrow", LOG)
    from_records = table_path(wh / "arrow", LOG)
    rows = stored_log_rows(list(log_records(log_dir)), "c", arrow_schema_of(LOG))
    delta_append.append(
        from_records, rows, schema_string=schema_of(LOG).json(), app_id=app_id("c"), txn_version=n - 1
    )
    assert _rows(spark, from_records) == _rows(spark, by_spark)
    assert _stats(from_records, 1) == _stats(by_spark, 1)


def test_txn_version_skips_replays_as_delta_spark_does(spark: Any, wh: Path) -> None:
    create_table(spark, wh, OFFSETS)
    path = table_path(wh, OFFSETS)

    def rows(first: int, last: int) -> pa.Table:
        return arrow_rows(
            OFFSETS, [{"offset": o, "epoch": 1, "timestamp": o} for o in range(first, last + 1)]
        )

    append_arrow(spark, wh, OFFSETS, rows(0, 9), 9, "c")
    append_arrow(spark, wh, OFFSETS, rows(0, 9), 9, "c")  # the same slice again
    append_arrow(spark, wh, OFFSETS, rows(0, 4), 4, "c")  # an older one
    assert len(_commits(path)) == 2
    # delta-spark reads our txn: its own append of the same version is skipped too
    append(spark.createDataFrame(rows(5, 9), schema=schema_of(OFFSETS)), wh, OFFSETS, 9, "c")
    assert len(_commits(path)) == 2
    # and ours reads delta-spark's
    append(spark.createDataFrame(rows(10, 19), schema=schema_of(OFFSETS)), wh, OFFSETS, 19, "c")
    delta_append.forget(path)
    append_arrow(spark, wh, OFFSETS, rows(10, 19), 19, "c")
    assert len(_commits(path)) == 3
    assert [r[0] for r in _rows(spark, path)] == list(range(20))


def test_a_table_created_again_at_its_path_is_read_again(spark: Any, wh: Path) -> None:
    """A warehouse deleted and made again in the same process: the new table's appends are not skipped by the
    txn versions of the old one, whether or not its ``_delta_log`` got the old directory's inode back."""
    import shutil

    def rows(o: int) -> pa.Table:
        return arrow_rows(OFFSETS, [{"offset": o, "epoch": 1, "timestamp": o}])

    for _ in range(3):
        shutil.rmtree(wh, ignore_errors=True)
        create_table(spark, wh, OFFSETS)
        path = table_path(wh, OFFSETS)
        for o in range(3):
            assert append_arrow_version(spark, wh, rows(o), o) is not None
        assert [r[0] for r in _rows(spark, path)] == [0, 1, 2]


def append_arrow_version(spark: Any, wh: Path, rows: pa.Table, txn: int) -> int | None:
    return delta_append.append(
        table_path(wh, OFFSETS),
        rows,
        schema_string=schema_of(OFFSETS).json(),
        app_id=APP_ID,
        txn_version=txn,
    ).version


def test_concurrent_writers_and_delta_operations(spark: Any, wh: Path) -> None:
    create_table(spark, wh, CLOSES)
    path = table_path(wh, CLOSES)

    def rows(i: int) -> pa.Table:
        return arrow_rows(CLOSES, [{"entity": "topics", "key": f"k{i}", "to_offset": i}])

    append_arrow(spark, wh, CLOSES, rows(1), 1, "c")
    # delta-spark commits in between: ours goes on at the next free version
    spark.sql(f"DELETE FROM delta.`{path}` WHERE to_offset = 1")
    append_arrow(spark, wh, CLOSES, rows(2), 2, "c")
    spark.sql(f"OPTIMIZE delta.`{path}`")
    append_arrow(spark, wh, CLOSES, rows(3), 3, "c")
    assert [r[2] for r in _rows(spark, path)] == [2, 3]
    # a metadata change under a cached state is a conflict, and the retry appends
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('kraftlake.test' = 'x')")
    attempts: list[int] = []
    retry_conflicts(
        lambda: append_arrow(spark, wh, CLOSES, rows(4), 4, "c"), backoff_s=0.01, on_retry=attempts.append
    )
    assert attempts == [0]
    assert [r[2] for r in _rows(spark, path)] == [2, 3, 4]

    # two processes of ours racing for the same versions (threads here, each with its own cached state)
    errors: list[BaseException] = []

    def writer(base: int) -> None:
        try:
            for i in range(base, base + 10):
                append_arrow(spark, wh, CLOSES, rows(i), i, "c")
        except BaseException as exc:
            errors.append(exc)

    delta_append.forget(path)
    threads = [threading.Thread(target=writer, args=(b,)) for b in (100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    got = [r[2] for r in _rows(spark, path)]
    # txn versions only grow: a writer skips what is below the other's latest, but never duplicates a row
    assert len(got) == len(set(got))
    assert set(range(200, 210)) <= set(got)


def test_checkpoints_written_by_delta_at_the_interval(spark: Any, wh: Path) -> None:
    create_table(spark, wh, OFFSETS)
    path = table_path(wh, OFFSETS)
    for o in range(25):
        append_arrow(
            spark, wh, OFFSETS, arrow_rows(OFFSETS, [{"offset": o, "epoch": 1, "timestamp": o}]), o, "c"
        )
    wait_checkpoints()
    log = Path(path) / "_delta_log"
    # Delta checkpoints the table as it is when the background thread gets to it: at or after the interval
    cp = json.loads((log / "_last_checkpoint").read_text())["version"]
    assert 20 <= cp <= 25
    assert (log / f"{cp:020d}.checkpoint.parquet").exists()
    # the state read again starts from the checkpoint (the txn version of commit cp, cp - 1, comes from it)
    hidden = range(cp + 1)  # as Delta's log cleanup leaves it: version 0 too
    for v in hidden:
        (log / f"{v:020d}.json").rename(log / f".{v:020d}.json.moved")
    try:
        delta_append.forget(path)
        append_arrow(
            spark, wh, OFFSETS, arrow_rows(OFFSETS, [{"offset": 99, "epoch": 1, "timestamp": 0}]), cp - 1, "c"
        )
        assert not (log / f"{26:020d}.json").exists()
        # the next append goes on from what is known (nothing read again without version 0)
        loaded = delta_append._TABLES[str(log)]
        append_arrow(
            spark, wh, OFFSETS, arrow_rows(OFFSETS, [{"offset": 25, "epoch": 1, "timestamp": 25}]), 25, "c"
        )
        assert delta_append._TABLES[str(log)] is loaded and loaded.version == 26
    finally:
        for v in hidden:
            (log / f".{v:020d}.json.moved").rename(log / f"{v:020d}.json")
    assert [r[0] for r in _rows(spark, path)] == list(range(26))


def test_files_written_apart_are_committed_once(spark: Any, wh: Path) -> None:
    """Files written where the rows are (a fleet task) and committed by another process (the driver): one commit
    of all of them, once per txn version; a second commit of the same version deletes its files; a table that
    needs more of a writer by the time of the commit gets the files' rows through Spark."""
    from pipelines.slice_files import TableFiles, commit_table

    create_table(spark, wh, OFFSETS)
    path = table_path(wh, OFFSETS)
    schema = schema_of(OFFSETS).json()

    def written(first: int, last: int) -> dict[str, Any]:
        rows = arrow_rows(
            OFFSETS, [{"offset": o, "epoch": 1, "timestamp": o} for o in range(first, last + 1)]
        )
        return delta_append.write_data_file(path, rows, schema_string=schema)

    adds = [written(0, 4), written(5, 9)]
    orphan = written(0, 9)  # a write never committed: in no snapshot
    assert json.loads(adds[0]["stats"])["minValues"]["offset"] == 0
    done = delta_append.commit_files(path, adds, schema_string=schema, app_id=APP_ID, txn_version=9)
    assert done == Appended(1)
    assert [a["path"] for a in _adds(path, 1)] == [a["path"] for a in adds]
    again = [written(0, 9)]
    assert delta_append.commit_files(path, again, schema_string=schema, app_id=APP_ID, txn_version=9) == (
        Appended(None)
    )
    assert not (Path(path) / again[0]["path"]).exists() and (Path(path) / orphan["path"]).exists()
    assert [r[0] for r in _rows(spark, path)] == list(range(10))
    late = [written(10, 11)]
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT positive CHECK (offset >= 0)")
    # the first try finds the constraint's commit (a conflict, retried as the driver does), the next refuses
    retry_conflicts(lambda: commit_table(spark, wh, OFFSETS, TableFiles(adds=late), 11, "c"))
    assert "Delta-Lake" in _engine(path, len(_commits(path)) - 1)
    assert not (Path(path) / late[0]["path"]).exists()
    assert [r[0] for r in _rows(spark, path)] == list(range(12))


def test_tables_it_cannot_append_to_go_through_spark(spark: Any, wh: Path) -> None:
    create_table(spark, wh, OFFSETS)
    path = table_path(wh, OFFSETS)
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT positive CHECK (offset >= 0)")
    one = arrow_rows(OFFSETS, [{"offset": 1, "epoch": 1, "timestamp": 0}])
    with pytest.raises(Unsupported, match="checkConstraints"):
        delta_append.append(path, one, schema_string=schema_of(OFFSETS).json(), app_id=APP_ID, txn_version=1)
    append_arrow(spark, wh, OFFSETS, one, 1, "c")
    assert "Delta-Lake" in _engine(path, len(_commits(path)) - 1)
    bad = arrow_rows(OFFSETS, [{"offset": -1, "epoch": 1, "timestamp": 0}])
    with pytest.raises(Exception, match="positive"):
        append_arrow(spark, wh, OFFSETS, bad, 2, "c")
    # a schema other than the rows': Spark's writer decides (here it refuses)
    other = tmp_table = table_path(wh, "other")
    spark.sql(f"CREATE TABLE delta.`{tmp_table}` (offset BIGINT, x STRING) USING DELTA")
    with pytest.raises(Unsupported, match="schema"):
        delta_append.append(other, one, schema_string=schema_of(OFFSETS).json(), app_id=APP_ID, txn_version=1)


def test_refusals_write_nothing(spark: Any, wh: Path) -> None:
    create_table(spark, wh, OFFSETS)
    path = table_path(wh, OFFSETS)
    nulls = pa.table(
        {
            "offset": pa.array([1, None], pa.int64()),
            "epoch": pa.array([1, 1], pa.int32()),
            "timestamp": pa.array([0, 0], pa.int64()),
        }
    )
    with pytest.raises(DeltaAppendError, match="NOT NULL column 'offset'"):
        delta_append.append(
            path, nulls, schema_string=schema_of(OFFSETS).json(), app_id=APP_ID, txn_version=1
        )
    assert len(_commits(path)) == 1
    assert not list(Path(path).glob("*.parquet"))
    assert not list((Path(path) / "_delta_log").glob(".*tmp"))


def test_no_table_and_bad_logs_are_typed_errors(tmp_path: Path) -> None:
    one = pa.table({"x": [1]})
    with pytest.raises(DeltaAppendError, match="no Delta table"):
        (tmp_path / "t" / "_delta_log").mkdir(parents=True)
        delta_append.append(tmp_path / "t", one, schema_string="{}", app_id="a", txn_version=1)
    (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").write_text('{"protocol": {"minReaderVersion": 1}\n')
    delta_append.forget(tmp_path / "t")
    with pytest.raises(DeltaAppendError, match="line 1 is not a JSON action"):
        delta_append.append(tmp_path / "t", one, schema_string="{}", app_id="a", txn_version=1)


def test_appended_reports_checkpoint_versions(tmp_path: Path) -> None:
    schema = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]}
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "x",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {"delta.checkpointInterval": "3"},
            }
        },
    ]
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    got = [
        delta_append.append(
            tmp_path / "t", pa.table({"x": [i]}), schema_string=json.dumps(schema), app_id="a", txn_version=i
        )
        for i in range(1, 7)
    ]
    assert got == [Appended(v, v % 3 == 0) for v in range(1, 7)]
    assert json.loads(_commits(str(tmp_path / "t"))[4][2]["add"]["stats"]) == {
        "numRecords": 1,
        "minValues": {"x": 4},
        "maxValues": {"x": 4},
        "nullCount": {"x": 0},
    }
    with pytest.raises(CommitConflict):
        (log / f"{7:020d}.json").write_text(
            json.dumps({"metaData": {**actions[1]["metaData"], "id": "y"}}) + "\n"
        )
        delta_append.append(
            tmp_path / "t", pa.table({"x": [7]}), schema_string=json.dumps(schema), app_id="a", txn_version=7
        )
