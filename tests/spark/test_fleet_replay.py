"""A fleet's histories replayed on the executors (:mod:`pipelines.fleet_ingest`): the same two logs (one with a
hole crossed from a snapshot) ingested by the driver's replay, one after another, and on the executors, all at
once, give the same warehouse, table by table and row for row; so does a fleet ingest killed after its task
wrote the files of slices it never committed (one of them committed in part), then resumed, and a fleet of a
resumed cluster (its image rebuilt in its task) and a new one; a cluster whose replay fails keeps what it
committed before the failure, and the others are ingested whole; the writers opened in one pass refuse what
they would refuse opened one after another."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from warehouse_states import canon, plain

from kraftlake.image.errors import ImageError
from kraftlake.spark.tables.layout import WarehouseError
from tests.spark.test_fleet import B_ID, C_ID, Fleet, _last

#: Columns holding the wall-clock time of a write (differ between any two runs).
WALL_CLOCK = {"first_seen_ms", "recorded_at_ms"}


def _tables(spark: Any, warehouse: Path) -> dict[str, list[str]]:
    """Every Delta table of the warehouse as sorted rows, less the wall-clock columns (read by kraftlake's own
    reader, by Spark where that refuses a table)."""
    from kraftlake.delta.append import Unsupported
    from kraftlake.delta.scan import arrow_schema, read_rows, table_snapshot

    out = {}
    for path in sorted(p.parent for p in warehouse.glob("*/_delta_log")):
        try:
            snap = table_snapshot(path)
            rows = read_rows(snap, arrow_schema(snap)).to_pylist()
        except Unsupported:
            rows = [plain(r) for r in spark.read.format("delta").load(str(path)).collect()]
        out[path.name] = canon([{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in rows])
    return out


def test_a_fleet_replayed_on_the_executors_equals_the_driver_replay(tmp_path: Path, spark: Any) -> None:
    from pipelines.fleet_ingest import ingest_fleet
    from pipelines.ingest import ingest

    f = Fleet(tmp_path)
    dirs: list[tuple[str | None, str | Path]] = [("b", f.b), (None, f.c)]
    driver, executors = tmp_path / "driver", tmp_path / "executors"
    by_driver = [ingest(spark, d, driver, batch_records=250, cluster=n) for n, d in dirs]
    seen: list[tuple[str, int]] = []
    by_executors = ingest_fleet(
        spark, dirs, executors, batch_records=250, progress=lambda r: seen.append((r.cluster, r.slices))
    )
    assert [r.cluster for r in by_executors] == [r.cluster for r in by_driver]
    for d, e in zip(by_driver, by_executors, strict=True):
        assert (e.records, e.slices, e.first_offset, e.last_offset, e.gaps) == (
            d.records,
            d.slices,
            d.first_offset,
            d.last_offset,
            d.gaps,
        )
    assert sorted(seen) == sorted((r.cluster, i + 1) for r in by_executors for i in range(r.slices))
    assert by_executors[1].gaps and by_executors[1].slices > 1, "the gapped log's hole is crossed, in slices"
    # each cluster's closes folded by its own thread once its slices were committed
    assert by_executors[1].folded > 0 and sum(r.folded for r in by_executors) == sum(
        r.folded for r in by_driver
    )
    got, want = _tables(spark, executors), _tables(spark, driver)
    assert set(got) == set(want) and "closes" in got and "partitions" in got
    for table in want:
        assert got[table] == want[table], table
    # resumed: a second run finds every cluster at its last offset and commits nothing
    again = ingest_fleet(spark, dirs, executors, batch_records=250)
    assert [(r.records, r.slices) for r in again] == [(0, 0), (0, 0)]


def test_a_failing_replay_keeps_its_committed_slices_and_the_other_clusters(
    tmp_path: Path, spark: Any
) -> None:
    from kraftlake.spark.tables.bounds import last_offset
    from pipelines.fleet_ingest import ingest_fleet

    f = Fleet(tmp_path)
    # the gapped log without the snapshot that covers its hole: its replay stops at the hole
    shutil.rmtree(tmp_path / "c-broken", ignore_errors=True)
    broken = Path(shutil.copytree(f.c.parent, tmp_path / "c-broken")) / f.c.name
    for snap in broken.glob("*.checkpoint"):
        snap.unlink()
    warehouse = tmp_path / "warehouse"
    with pytest.raises((ImageError, WarehouseError)) as err:
        ingest_fleet(spark, [("b", f.b), ("c", broken)], warehouse, batch_records=60)
    assert f"{f.first_missing}" in str(err.value)
    assert last_offset(spark, warehouse, "b") == _last(f.b)
    assert last_offset(spark, warehouse, "c") == 59 < f.first_missing
    with pytest.raises(WarehouseError, match="given twice"):
        ingest_fleet(spark, [("a", f.a), (None, f.a)], tmp_path / "twice", batch_records=60)


@pytest.mark.heavy
def test_a_fleet_ingest_killed_after_its_task_wrote_files_resumes_to_the_same_tables(
    tmp_path: Path, spark: Any
) -> None:
    """A fleet ingest killed after its task wrote every slice's files and the driver committed some resumes to
    the tables of an ingest never killed. Heavy: two ingests of the same cluster and a resumed one; the
    module's other tests replay fleets on the executors."""
    from kraftlake.delta.scan import table_snapshot
    from kraftlake.spark.tables.layout import LOG, OFFSETS, table_path
    from pipelines.fleet_ingest import ingest_fleet, task_row
    from pipelines.ingest import ingest, open_writer
    from pipelines.replay_task import replay_cluster
    from pipelines.slice_files import commit_table, commit_written, table_formats

    f = Fleet(tmp_path)
    driver, killed = tmp_path / "driver", tmp_path / "killed"
    ingest(spark, f.b, driver, batch_records=40, cluster="b")
    # the task of a run killed in the driver: it wrote every slice's files; the driver committed the first
    # slice, then the log and one history table of the second, and no more
    writer = open_writer(spark, f.b, killed, 40, "b")
    rows = list(replay_cluster(task_row(writer, table_formats())))
    assert len(rows) > 3 and all(r["error"] is None for r in rows)
    first, second, third = (r["files"] for r in rows[:3])
    commit_written(spark, killed, "b", first)
    history = next(t for t in sorted(second.tables) if t not in (LOG, OFFSETS))
    for table in (LOG, history):
        commit_table(spark, killed, table, second.tables[table], second.last_offset, "b")
    orphan = Path(table_path(killed, LOG), third.tables[LOG].adds[0]["path"])
    assert orphan.exists()
    resumed = ingest_fleet(spark, [("b", f.b)], killed, batch_records=40)
    assert (resumed[0].first_offset, resumed[0].last_offset) == (second.first_offset, _last(f.b))
    assert _tables(spark, killed) == _tables(spark, driver)
    # the killed run's files of slices it never committed are in no table (VACUUM's to remove)
    live = {p for p, _ in table_snapshot(table_path(killed, LOG)).files}
    assert orphan.exists() and orphan.name not in live


def test_writers_opened_in_one_pass_refuse_as_if_opened_one_after_another(tmp_path: Path, spark: Any) -> None:
    from kraftlake.spark.tables.bounds import last_offset, last_offsets
    from kraftlake.spark.tables.clusters import ClusterError, registered
    from kraftlake.spark.tables.layout import CLUSTERS, table_path
    from pipelines.fleet_ingest import ingest_fleet

    f = Fleet(tmp_path)
    # a second log dir of b's cluster id, and of c's
    b_twin = Path(shutil.copytree(f.b.parent, tmp_path / "b-twin")) / f.b.name
    c_twin = Path(shutil.copytree(f.c.parent, tmp_path / "c-twin")) / f.c.name
    warehouse = tmp_path / "warehouse"
    commits = Path(table_path(warehouse, CLUSTERS), "_delta_log")
    # two names with one cluster id: the second writer is refused, the one before it ingested whole
    with pytest.raises(ClusterError, match=f"cluster id {B_ID} is already in the warehouse as cluster 'b'"):
        ingest_fleet(spark, [("b", f.b), ("twin", b_twin), (None, f.c)], warehouse, 400)
    assert [e.name for e in registered(spark, warehouse)] == ["b"]
    assert len(list(commits.glob("*.json"))) == 2, "the table's creation, then the registration"
    assert last_offset(spark, warehouse, "b") == _last(f.b)
    assert last_offsets(spark, warehouse, ["twin", C_ID]) == {"twin": -1, C_ID: -1}
    # a name held for another cluster id, refused before anything of it is written
    with pytest.raises(ClusterError, match=f"cluster 'b' is cluster id {B_ID} in the warehouse.*{C_ID}"):
        ingest_fleet(spark, [("b", f.c)], warehouse, 400)
    # one cluster from two log dirs: the second is named by its cluster id, the first's; the new clusters
    # before it registered in one commit
    with pytest.raises(ClusterError, match=re.escape(f"cluster 'x' is given twice (log dir {c_twin})")):
        ingest_fleet(spark, [("a", f.a), ("x", f.c), (None, c_twin)], warehouse, 400)
    assert sorted(e.name for e in registered(spark, warehouse)) == ["a", "b", "x"]
    assert len(list(commits.glob("*.json"))) == 3
    assert last_offset(spark, warehouse, "a") == _last(f.a)
    assert last_offset(spark, warehouse, "x") == _last(f.c)


def test_a_fleet_of_resumed_and_new_clusters_equals_the_driver_replay(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipelines.ingest as ingest_module
    from kraftlake.spark.tables.bounds import last_offset, last_offsets
    from kraftlake.warehouse import images
    from pipelines.fleet_ingest import ingest_fleet, task_row
    from pipelines.reconstruct import image_at_offset_in_spark
    from pipelines.slice_files import table_formats

    f = Fleet(tmp_path)
    dirs: list[tuple[str | None, str | Path]] = [("b", f.b), (None, f.c)]
    driver, mixed = tmp_path / "driver", tmp_path / "mixed"
    for n, d in dirs:
        ingest_module.ingest(spark, d, driver, batch_records=200, cluster=n)
    # c killed after its first slice (which crosses its log's hole): nothing kept in this process for it
    commit = ingest_module.commit_slice

    class Killed(RuntimeError):
        pass

    def dies_after_one(*args: Any, **kwargs: Any) -> None:
        if last_offset(spark, mixed, C_ID) >= 0:
            raise Killed("killed after its first slice")
        commit(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(ingest_module, "commit_slice", dies_after_one)
        with pytest.raises(Killed):
            ingest_module.ingest(spark, f.c, mixed, batch_records=200)
    done = last_offset(spark, mixed, C_ID)
    assert f.first_missing < done < _last(f.c) and last_offsets(spark, mixed, [C_ID, "b"]) == {
        C_ID: done,
        "b": -1,
    }
    # kraftlake's reader rebuilds the image Spark rebuilds, past the hole's snapshot
    assert images.image_at_offset(mixed, C_ID, done) == image_at_offset_in_spark(spark, mixed, C_ID, done)
    # opened for the executors: the new cluster's task gets its starting image, the resumed one its commit point
    writers, refused = ingest_module.open_writers(spark, dirs, mixed, 200, rebuild=False)
    rows = [task_row(w, table_formats()) for w in writers]
    assert refused is None and [r["cluster"] for r in rows] == ["b", C_ID]
    assert rows[0]["image"] is not None and rows[0]["rebuild_at"] is None
    assert rows[1]["image"] is None and rows[1]["rebuild_at"] == done and rows[1]["start"] == done + 1
    results = ingest_fleet(spark, dirs, mixed, batch_records=200)
    assert [(r.first_offset, r.last_offset) for r in results] == [(0, _last(f.b)), (done + 1, _last(f.c))]
    assert _tables(spark, mixed) == _tables(spark, driver)
