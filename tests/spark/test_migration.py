"""A warehouse made before clusters (no ``cluster`` column) migrated in place to the one cluster it holds, with
every answer unchanged.

``data/old_warehouse.tgz`` was made by the code of ``main`` before clusters (commit 983e57a): the synthetic log
``write_synthetic_log(seed=5, steps=60)`` ingested with ``batch_records=40, fold=False`` (three slices, 14 closes
left pending), and ``answers.json`` beside it holds what that code's SQL functions answered: every
``<entity>_at(N)`` at six offsets and the history views of three partitions and two brokers.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from warehouse_states import assert_entities_match, plain, query_at

from kraftlake.history import ENTITIES
from kraftlake.sim.workloads.entities import write_synthetic_log

FIXTURE = Path(__file__).parent / "data" / "old_warehouse.tgz"


def _unpack(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "warehouse", json.loads((tmp_path / "answers.json").read_text())


def _answers(spark: Any, old: dict[str, Any]) -> dict[str, Any]:
    """The same questions as ``old`` holds, asked of the migrated warehouse."""
    offsets = old["offsets"]
    out: dict[str, Any] = {"offsets": offsets, "at": {}, "views": {}}
    for table in ENTITIES:
        got = query_at(spark, table, offsets)
        out["at"][table] = {
            str(n): sorted(json.dumps(r, sort_keys=True, default=str) for r in got[n]) for n in offsets
        }
    # one Spark action per view: its calls (same columns) as a UNION ALL, each row tagged with its call
    by_view: dict[str, list[str]] = {}
    for call in old["views"]:
        by_view.setdefault(call.split("(")[0], []).append(call)
    for calls in by_view.values():
        rows: dict[str, list[str]] = {call: [] for call in calls}
        sql = " UNION ALL ".join(
            f"SELECT {i} AS _i, q.* FROM (SELECT * FROM {c}) q" for i, c in enumerate(calls)
        )
        for r in spark.sql(sql).collect():
            d = {k: plain(v) for k, v in r.asDict().items()}
            rows[calls[d.pop("_i")]].append(json.dumps(d, sort_keys=True, default=str))
        out["views"].update({call: sorted(got) for call, got in rows.items()})
    return out


def _versions(warehouse: Path) -> dict[str, int]:
    return {p.parent.parent.name: int(p.stem) for p in warehouse.glob("*/_delta_log/*.json")}


def _state(warehouse: Path, offset: int) -> tuple[str, str]:
    """``kraftlake state --entity brokers`` at ``offset`` in this process: (stdout, stderr)."""
    import contextlib
    import io

    from kraftlake.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = ["state", "--warehouse", str(warehouse), "--offset", str(offset), "--entity", "brokers"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(argv) == 0
    return out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_registration_migrates_an_old_warehouse_and_every_answer_stays(spark: Any, tmp_path: Path) -> None:
    """Registration migrates a warehouse made before clusters in place, and every answer stays what it was.
    Slow: the migration runs Spark's UPDATE and ALTER TABLE statements on each of the 16 tables (up to three
    Delta commits each); then each table is read and described, the functions created twice, every entity
    asked at six offsets, and the history views of three partitions and two brokers."""
    from kraftlake.spark.tables.clusters import DEFAULT_NAME, names, registered
    from kraftlake.spark.tables.creation import WAREHOUSE_TABLES, needs_migration
    from kraftlake.spark.tables.layout import CLUSTER, CLUSTERS, table_path
    from udfs.sql import register

    warehouse, old = _unpack(tmp_path)
    assert "cluster" not in spark.read.format("delta").load(table_path(warehouse, "offsets")).columns
    assert needs_migration(warehouse)
    # state reads without a JVM; an old warehouse goes through Spark, whose readers' registration migrates it
    through_spark, said = _state(warehouse, old["offsets"][-1])
    assert "made by an earlier kraftlake" in said and "answering through Spark" in said
    assert not needs_migration(warehouse)
    assert names(registered(spark, warehouse)) == [DEFAULT_NAME]
    migrated = [t for t in WAREHOUSE_TABLES if t != CLUSTERS]
    for table in migrated:
        path = table_path(warehouse, table)
        assert spark.read.format("delta").load(path).columns[0] == CLUSTER, table
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
        assert detail is not None and detail["clusteringColumns"][0] == CLUSTER, table
    # every row of every table names the cluster: one Spark action for all tables
    others = spark.sql(
        " UNION ALL ".join(
            f"SELECT '{t}' AS t, count_if(NOT {CLUSTER} <=> '{DEFAULT_NAME}') AS n, count(*) AS rows "
            f"FROM delta.`{table_path(warehouse, t)}`"
            for t in migrated
        )
    ).collect()
    assert {r["t"]: r["n"] for r in others} == dict.fromkeys(migrated, 0)
    assert sum(r["rows"] for r in others) > 0
    # the state command created only the function its query names (in this shared session): the answers need
    # every function over this warehouse
    register(spark, warehouse)
    assert _answers(spark, old) == old
    # once: a second registration commits nothing
    versions = _versions(warehouse)
    register(spark, warehouse)
    assert _versions(warehouse) == versions
    # migrated: state answers from the tables, the same lines
    assert _state(warehouse, old["offsets"][-1]) == (through_spark, "")
    assert through_spark.count("\n") > 2


@pytest.mark.slow
@pytest.mark.heavy
def test_a_migration_cut_short_is_finished_by_the_next_writer(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration cut short is finished by the next writer.
    Slow: two ingest runs over the old warehouse, each migrating its 16 tables with Spark's UPDATE and ALTER
    TABLE statements (the first killed before it registers the cluster, the second folding the 14 pending
    closes), then every entity asked at six offsets."""
    import kraftlake.spark.tables.creation as creation
    from kraftlake.spark.tables.clusters import names, registered
    from pipelines.ingest import ingest
    from udfs.sql import register

    warehouse, old = _unpack(tmp_path)
    log_dir = write_synthetic_log(tmp_path / "log", seed=5, steps=60)

    class Killed(RuntimeError):
        pass

    def killed(*_: Any) -> None:
        raise Killed("killed before the migration registered its cluster")

    with monkeypatch.context() as m:
        m.setattr(creation.clusters, "register", killed)
        with pytest.raises(Killed):
            ingest(spark, log_dir, warehouse, cluster="old")
    assert creation.needs_migration(warehouse)
    # the writer's own name for the one cluster; nothing to ingest past the commit point
    result = ingest(spark, log_dir, warehouse, cluster="old")
    assert result.records == 0 and result.folded == 14
    assert names(registered(spark, warehouse)) == ["old"]
    register(spark, warehouse)
    # the answers against the image of the same log (the registration test compares them with the old ones)
    assert_entities_match(spark, log_dir, old["offsets"], "old")
