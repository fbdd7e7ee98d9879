"""One warehouse, many clusters: three logs (one with a hole crossed from a snapshot) ingested into one warehouse,
each cluster answering its own image, the refusals that keep two clusters apart, per-cluster resume, compaction
and guards, and ``_at_time`` over every cluster."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pytest
from warehouse_states import assert_entities_match, canon, query_at

from kraftlake.history import ENTITIES
from kraftlake.image import image_at
from kraftlake.image.source import log_records
from kraftlake.logformat import MetaProperties, write_meta_properties
from kraftlake.sim.workloads.entities import write_synthetic_log
from tests.history.test_gaps import gapped_log

A_ID, B_ID, C_ID = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB", "CCCCCCCCCCCCCCCCCCCCCC"


def _with_id(partition_dir: Path, cluster_id: str) -> Path:
    """A log dir's ``meta.properties`` naming its cluster id (beside ``__cluster_metadata-0``)."""
    write_meta_properties(
        partition_dir.parent / "meta.properties", MetaProperties(cluster_id, 1), fsync=False
    )
    return partition_dir


def _last(log_dir: Path) -> int:
    return max(r.offset for r in log_records(log_dir))


def _offsets(log_dir: Path) -> list[int]:
    last = _last(log_dir)
    return sorted({0, 5, last // 3, last // 2, last})


class Fleet:
    def __init__(self, root: Path) -> None:
        self.a = _with_id(write_synthetic_log(root / "a", seed=21, steps=120), A_ID)
        self.b = _with_id(write_synthetic_log(root / "b", seed=22, steps=100), B_ID)
        self.c_whole, gapped, self.first_missing, self.nxt = gapped_log(root / "c")
        self.c = _with_id(gapped, C_ID)
        self.warehouse = root / "warehouse"
        self.a_before: dict[str, dict[int, list[dict[str, Any]]]] = {}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Fleet:
    from pipelines.ingest import ingest
    from udfs.sql import register

    f = Fleet(tmp_path_factory.mktemp("fleet"))
    assert ingest(spark, f.a, f.warehouse, batch_records=150, cluster="a").cluster == "a"
    register(spark, f.warehouse)
    # a warehouse of one cluster answers without a name
    f.a_before = {t: query_at(spark, t, _offsets(f.a)) for t in ENTITIES}
    assert ingest(spark, f.b, f.warehouse, batch_records=120, cluster="b").cluster == "b"
    # named by the cluster id of its meta.properties
    assert ingest(spark, f.c, f.warehouse, batch_records=300).cluster == C_ID
    return f


@pytest.mark.slow
def test_every_cluster_answers_its_own_image(spark: Any, fleet: Fleet) -> None:
    """Every cluster of the warehouse answers its own image, and cluster a answers as it did alone.
    Slow: the module's warehouse is made first (logs of 199, 171 and 612 records ingested as three clusters,
    cluster a asked before the others came); then every entity of each cluster asked at 4 or 5 offsets, and
    cluster a's again: 44 Spark queries."""
    assert_entities_match(spark, fleet.a, _offsets(fleet.a), "a")
    assert_entities_match(spark, fleet.b, _offsets(fleet.b), "b")
    last = _last(fleet.c)
    offsets = [0, fleet.first_missing - 1, fleet.nxt, last]
    assert_entities_match(spark, fleet.c_whole, offsets, C_ID)
    # cluster a's answers are those it gave before b and c came
    for table in ENTITIES:
        got = query_at(spark, table, _offsets(fleet.a), "a")
        assert {n: canon(r) for n, r in got.items()} == {
            n: canon(r) for n, r in fleet.a_before[table].items()
        }, table


@pytest.mark.heavy
def test_every_table_carries_the_cluster_first_and_clusters_on_it(spark: Any, fleet: Fleet) -> None:
    """Every table of a fleet's warehouse has the cluster as its first column, never NULL, and as its first
    clustering column; each cluster's offsets are all there. Heavy: every table read through Spark (about 40 s);
    the module's other tests read the same warehouse through the functions."""
    from kraftlake.spark.tables.creation import WAREHOUSE_TABLES
    from kraftlake.spark.tables.layout import CLUSTER, CLUSTERS, table_path

    for table in WAREHOUSE_TABLES:
        if table == CLUSTERS:
            continue
        df = spark.read.format("delta").load(table_path(fleet.warehouse, table))
        assert df.columns[0] == CLUSTER, table
        assert df.where(f"{CLUSTER} IS NULL").count() == 0, table
        commit = Path(table_path(fleet.warehouse, table), "_delta_log", f"{0:020d}.json").read_text()
        domain = next(d for d in map(json.loads, commit.splitlines()) if "domainMetadata" in d)
        columns = json.loads(domain["domainMetadata"]["configuration"])["clusteringColumns"]
        assert columns[0] == [CLUSTER], table
    counts = {
        r["cluster"]: r["n"]
        for r in spark.sql(
            f"SELECT cluster, count(*) AS n FROM delta.`{table_path(fleet.warehouse, 'offsets')}` GROUP BY cluster"
        ).collect()
    }
    assert counts == {
        "a": _last(fleet.a) + 1,
        "b": _last(fleet.b) + 1,
        # the hole's offsets and the snapshot's own have no record
        C_ID: _last(fleet.c) + 1 - (fleet.nxt - fleet.first_missing),
    }


def _files_scanned(spark: Any, query: str) -> dict[str, int]:
    """The data files each table's scan read (its ``numFiles`` metric), by table directory name, once
    ``query`` ran (adaptive execution's final plan, subqueries included)."""
    df = spark.sql(query)
    df.collect()
    out: dict[str, int] = {}

    def walk(plan: Any) -> None:
        name = plan.nodeName()
        if name.startswith("AdaptiveSparkPlan"):
            walk(plan.executedPlan())
        elif "QueryStage" in name:
            walk(plan.plan())
        if name.startswith("Scan parquet"):
            table = str(plan.relation().location().rootPaths().head()).rstrip("/").rsplit("/", 1)[-1]
            out[table] = out.get(table, 0) + int(plan.metrics().apply("numFiles").value())
        for children in (plan.children(), plan.subqueries()):
            it = children.iterator()
            while it.hasNext():
                walk(it.next())

    walk(df._jdf.queryExecution().executedPlan())
    return out


def test_a_named_cluster_reads_its_own_files_only(spark: Any, fleet: Fleet) -> None:
    from kraftlake.delta.rewrite import snapshot, stats_of
    from kraftlake.spark.tables.layout import CLUSTER, table_path

    def own_files(table: str) -> int:
        files = snapshot(table_path(fleet.warehouse, table)).files.values()
        return sum(
            1
            for a in files
            if {(stats_of(a) or {}).get(k, {}).get(CLUSTER) for k in ("minValues", "maxValues")} == {"b"}
        )

    from udfs.sql import register_for_query

    query = f"SELECT * FROM partitions_at({_last(fleet.b)}, 'b')"
    session = spark.newSession()
    register_for_query(session, fleet.warehouse, query, None)  # the SQL function, as a catalog stores it
    scanned = _files_scanned(session, query)
    # Delta skips the other clusters' files by the literal the function is called with
    assert 0 < scanned["partitions"] <= own_files("partitions")
    assert 0 < scanned["bounds"] <= own_files("bounds")


def test_refusals_keep_the_clusters_apart(spark: Any, fleet: Fleet, tmp_path: Path) -> None:
    from jobs.ingest import log_dirs
    from kraftlake.errors import KraftlakeError
    from kraftlake.spark.tables.clusters import ClusterError
    from kraftlake.spark.tables.layout import WarehouseError, table_path
    from kraftlake.spark.tables.queries import NAME_ONE, NO_SUCH_CLUSTER
    from pipelines.ingest import ingest
    from udfs.sql import warehouse_errors

    offsets = table_path(fleet.warehouse, "offsets")
    before = spark.read.format("delta").load(offsets).count()
    # a name used for another cluster id, a cluster id under another name: refused before anything is written
    with pytest.raises(ClusterError, match=f"cluster 'a' is cluster id {A_ID}.*{B_ID}"):
        ingest(spark, fleet.b, fleet.warehouse, cluster="a")
    with pytest.raises(ClusterError, match=f"cluster id {A_ID} is already in the warehouse as cluster 'a'"):
        ingest(spark, fleet.a, fleet.warehouse, cluster="x")
    with pytest.raises(
        ClusterError, match=f"cluster id {C_ID} is already in the warehouse as cluster '{C_ID}'"
    ):
        ingest(spark, fleet.c, fleet.warehouse, cluster="c")
    assert spark.read.format("delta").load(offsets).count() == before
    # named by nothing but its cluster id, a log dir continues the cluster of that id (nothing new to write)
    assert ingest(spark, fleet.a, fleet.warehouse).cluster == "a"
    assert spark.read.format("delta").load(offsets).count() == before
    with pytest.raises(KraftlakeError, match="named by two --log-dir"):
        log_dirs([f"a={fleet.a}", f"a={fleet.b}"], None)
    assert log_dirs([f"a={fleet.a}", str(fleet.b)], None) == [("a", str(fleet.a)), (None, str(fleet.b))]
    # the SQL functions: a name the warehouse does not hold, none where it holds several
    with pytest.raises(WarehouseError, match=f"cluster zz {NO_SUCH_CLUSTER}"), warehouse_errors():
        spark.sql("SELECT * FROM partitions_at(3, 'zz')").collect()
    held = ", ".join(sorted(["a", "b", C_ID]))
    with (
        pytest.raises(WarehouseError, match=f"holds 3 clusters \\({held}\\): {NAME_ONE}"),
        warehouse_errors(),
    ):
        spark.sql("SELECT * FROM partitions_at(3)").collect()
    with pytest.raises(WarehouseError, match=NAME_ONE), warehouse_errors():
        spark.sql("SELECT * FROM broker_history(1)").collect()
    # and the commands, in one line
    from kraftlake.cli import main

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["state", "--warehouse", str(fleet.warehouse), "--offset", "3"])
    assert code == 2
    assert f"holds 3 clusters ({held})" in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1


def test_at_time_answers_every_cluster(spark: Any, fleet: Fleet) -> None:
    from kraftlake.image import EMPTY

    rows = spark.sql(
        "SELECT cluster, count(*) AS n FROM partitions_at_time(TIMESTAMP '2100-01-01') GROUP BY cluster"
    ).collect()
    images = {"a": image_at(fleet.a, _last(fleet.a)), "b": image_at(fleet.b, _last(fleet.b))}
    images[C_ID] = image_at(fleet.c_whole, _last(fleet.c))
    want = {c: i.partition_count() for c, i in images.items() if i.partition_count()}
    assert {r["cluster"]: r["n"] for r in rows} == want
    assert spark.sql("SELECT * FROM brokers_at_time(TIMESTAMP '2100-01-01')").columns[0] == "cluster"
    # each cluster at its own last offset at or before the time
    times = {r.offset: r.timestamp for r in log_records(fleet.b)}
    mid = times[_last(fleet.b) // 2]
    n = max(o for o, t in times.items() if t <= mid)
    got = spark.sql(
        f"SELECT cluster, count(*) AS n FROM brokers_at_time(timestamp_millis({mid}), 'b') GROUP BY cluster"
    ).collect()
    want_b = len(image_at(fleet.b, n).brokers)
    assert [(r["cluster"], r["n"]) for r in got] == ([("b", want_b)] if want_b else [])
    assert image_at(fleet.b, n) is not EMPTY


def test_history_views_take_the_cluster(spark: Any, fleet: Fleet) -> None:
    from kraftlake.spark.tables.layout import table_path

    parts = table_path(fleet.warehouse, "partitions")
    for cluster in ("a", "b"):
        row = spark.sql(
            f"SELECT topic, `partition`, count(*) AS n FROM delta.`{parts}` WHERE cluster = '{cluster}' "
            "GROUP BY topic, `partition` ORDER BY n DESC, topic, `partition` LIMIT 1"
        ).first()
        assert row is not None
        got = spark.sql(
            f"SELECT * FROM partition_history('{row.topic}', {row.partition}, '{cluster}')"
        ).count()
        assert got == row.n
        leaders = spark.sql(
            f"SELECT * FROM leader_history('{row.topic}', {row.partition}, '{cluster}')"
        ).count()
        assert 0 < leaders <= got


@pytest.mark.slow
@pytest.mark.heavy
def test_a_killed_cluster_resumes_and_the_other_keeps_its_answers(
    spark: Any, fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster whose ingest was killed resumes, and the other cluster keeps its answers.
    Slow: three ingest runs into a new warehouse (cluster a's 199 records in one slice, then b's 171 in
    40-record slices, killed after the first and resumed), then every entity of both clusters asked: 22 Spark
    queries."""
    import pipelines.ingest as ingest_module
    from kraftlake.spark.tables.bounds import last_offset
    from udfs.sql import register

    warehouse = tmp_path / "w"
    ingest_module.ingest(spark, fleet.a, warehouse, batch_records=200, cluster="a")
    commit = ingest_module.commit_slice
    commits: list[int] = []

    class Killed(RuntimeError):
        pass

    def dies_after_one(*args: Any, **kwargs: Any) -> None:
        if commits:
            raise Killed("killed after its first slice")
        commit(*args, **kwargs)
        commits.append(1)

    with monkeypatch.context() as m:
        m.setattr(ingest_module, "commit_slice", dies_after_one)
        with pytest.raises(Killed):
            ingest_module.ingest(spark, fleet.b, warehouse, batch_records=40, cluster="b")
    done = last_offset(spark, warehouse, "b")
    assert 0 < done < _last(fleet.b) and last_offset(spark, warehouse, "a") == _last(fleet.a)
    again = ingest_module.ingest(spark, fleet.b, warehouse, batch_records=40, cluster="b")
    assert again.first_offset == done + 1
    register(spark, warehouse)
    assert_entities_match(spark, fleet.b, _offsets(fleet.b), "b")
    assert_entities_match(spark, fleet.a, _offsets(fleet.a), "a")


@pytest.mark.slow
@pytest.mark.heavy
def test_compacting_one_cluster_keeps_the_others_history(spark: Any, fleet: Fleet, tmp_path: Path) -> None:
    """Compacting one cluster keeps the other clusters' history.
    Slow: a compaction of cluster a in a copy of the module's three-cluster warehouse (the image rebuilt with
    Spark, a snapshot written, DELETEs on the log and every history table), then every entity of the three
    clusters asked: about 35 Spark queries."""
    from kraftlake.spark.tables.bounds import retained_from
    from kraftlake.spark.tables.layout import WarehouseError
    from kraftlake.spark.tables.queries import BEFORE_RETAINED
    from pipelines.compact import compact
    from udfs.sql import register, warehouse_errors

    warehouse = tmp_path / "w"
    shutil.copytree(fleet.warehouse, warehouse)
    last = _last(fleet.a)
    result = compact(spark, warehouse, retain_offsets=0, cluster="a", optimize=False, progress=False)
    assert result.cluster == "a" and result.retained_from == last
    assert retained_from(spark, warehouse, "a") == last and retained_from(spark, warehouse, "b") is None
    register(spark, warehouse)
    with pytest.raises(WarehouseError, match=BEFORE_RETAINED), warehouse_errors():
        spark.sql("SELECT * FROM partitions_at(5, 'a')").collect()
    assert_entities_match(spark, fleet.a, [last], "a")
    # b and c keep every state
    assert_entities_match(spark, fleet.b, _offsets(fleet.b), "b")
    assert_entities_match(spark, fleet.c_whole, [0, fleet.first_missing - 1], C_ID)
