"""The ``bounds`` table: what the SQL functions answer for (the published commit point, the retained-from offset).

The functions read both bounds from it; writers publish the commit point after each ``offsets`` commit and again
when they start (a run killed between the two); a warehouse made before the table existed gets it filled from
``offsets`` and the old ``retention`` table.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kraftlake.history import entity_rows
from kraftlake.image import image_at
from kraftlake.image.source import log_records
from kraftlake.sim.workloads.entities import write_synthetic_log
from tests.spark.test_warehouse import _canon, _prefix_log, query_at


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_log(tmp_path_factory.mktemp("bounds") / "log", seed=5, steps=120)


def assert_partitions_at(spark: Any, log: Path, n: int) -> None:
    """``partitions_at(n)`` equals the image at n."""
    assert _canon(query_at(spark, "partitions", [n])[n]) == _canon(
        entity_rows(image_at(log, n))["partitions"]
    )


@pytest.mark.slow
@pytest.mark.heavy
def test_a_commit_not_yet_published_is_refused_until_the_writer_starts_again(
    spark: Any, log_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit not yet published is refused until the writer starts again and publishes it.
    Slow: four ingest runs into one warehouse (half of the 213-record log in one slice; a run killed after its
    first commit, before publishing it; one killed at its first commit; the rest in 40-record slices), with
    the bounds and ``partitions_at`` asked of Spark after them."""
    import pipelines.commit as commit_module
    import pipelines.ingest as ingest_module
    from kraftlake.spark.tables.bounds import bounds_of, last_offset
    from kraftlake.spark.tables.layout import WarehouseError
    from kraftlake.spark.tables.queries import AFTER_COMMITTED
    from udfs.sql import register, warehouse_errors

    warehouse = tmp_path / "w"
    last = max(r.offset for r in log_records(log_dir))
    prefix = _prefix_log(log_dir, tmp_path / "prefix", last // 2)
    first = ingest_module.ingest(spark, prefix, warehouse, batch_records=200)
    p = first.last_offset
    assert bounds_of(spark, warehouse, "default") == (None, p)

    class Killed(RuntimeError):
        pass

    publish = commit_module.publish_commit_point
    calls: list[int] = []

    def killed(spark: Any, warehouse: Path, cluster: str, offset: int) -> None:
        calls.append(offset)
        if offset > p:
            raise Killed("killed between the commit and its publication")
        publish(spark, warehouse, cluster, offset)

    def dies(*_: Any) -> None:
        raise Killed("killed before its first commit")

    # the next slice commits (offsets written), and the run dies before publishing it
    with monkeypatch.context() as m:
        # both publications: after each commit (commit_slice) and at the start (the writer's opening)
        m.setattr(commit_module, "publish_commit_point", killed)
        m.setattr(ingest_module, "publish_commit_point", killed)
        with pytest.raises(Killed):
            ingest_module.ingest(spark, log_dir, warehouse, batch_records=40)
    q = last_offset(spark, warehouse, "default")
    assert calls == [p, q] and p < q < last
    assert bounds_of(spark, warehouse, "default") == (None, p)
    register(spark, warehouse)
    assert_partitions_at(spark, log_dir, p)
    with pytest.raises(WarehouseError, match=f"offset {q} {AFTER_COMMITTED} \\({p}\\)"), warehouse_errors():
        spark.sql(f"SELECT * FROM partitions_at({q})").collect()
    # a writer publishes the commit point it starts from (here it dies again at its first commit)
    with monkeypatch.context() as m:
        m.setattr(ingest_module, "commit_slice", dies)
        with pytest.raises(Killed):
            ingest_module.ingest(spark, log_dir, warehouse, batch_records=40)
    assert bounds_of(spark, warehouse, "default") == (None, q)
    assert_partitions_at(spark, log_dir, q)
    again = ingest_module.ingest(spark, log_dir, warehouse, batch_records=40)
    assert again.first_offset == q + 1
    assert bounds_of(spark, warehouse, "default") == (None, last)
    for n in (q, last):
        assert_partitions_at(spark, log_dir, n)


@pytest.mark.slow
def test_a_warehouse_made_before_bounds_gets_them_from_offsets_and_retention(
    spark: Any, log_dir: Path, tmp_path: Path
) -> None:
    """A warehouse made before ``bounds`` gets them from ``offsets`` and the old ``retention`` table.
    Slow: a new warehouse ingested from the 213-record log (every table created), the ``retention`` table
    created and written with Spark, the functions registered twice and ``partitions_at`` asked three times."""
    from kraftlake.spark.tables.bounds import bounds_of
    from kraftlake.spark.tables.creation import create_table
    from kraftlake.spark.tables.layout import BOUNDS, RETENTION, WarehouseError, arrow_frame, table_path
    from kraftlake.spark.tables.queries import BEFORE_RETAINED
    from pipelines.ingest import ingest
    from udfs.sql import register, warehouse_errors

    warehouse = tmp_path / "old"
    last = ingest(spark, log_dir, warehouse, batch_records=500).last_offset
    # as an older kraftlake left it: no bounds, the retained-from offset in its own table
    shutil.rmtree(table_path(warehouse, BOUNDS))
    retained = last // 3
    create_table(spark, warehouse, RETENTION)
    rows = [{"retained_from": retained, "recorded_at_ms": 1}]
    arrow_frame(spark, RETENTION, rows).write.format("delta").mode("append").save(
        table_path(warehouse, RETENTION)
    )
    register(spark, warehouse)
    assert bounds_of(spark, warehouse, "default") == (retained, last)
    register(spark, warehouse)  # filled once
    assert spark.sql(f"SELECT count(*) FROM delta.`{table_path(warehouse, BOUNDS)}`").first()[0] == 1
    assert_partitions_at(spark, log_dir, last)
    with pytest.raises(WarehouseError, match=BEFORE_RETAINED), warehouse_errors():
        spark.sql(f"SELECT * FROM partitions_at({retained - 1})").collect()
    with pytest.raises(WarehouseError, match="after the last committed offset"), warehouse_errors():
        spark.sql(f"SELECT * FROM partitions_at({last + 1})").collect()


@pytest.mark.slow
@pytest.mark.heavy
def test_history_views_refuse_below_the_retained_history(spark: Any, log_dir: Path, tmp_path: Path) -> None:
    """Issue 25: after a cut, leader_history returned the 6 intervals that outlived it of 9, silently. Slow: a
    new warehouse ingested from the 213-record log (every table created), then the history views asked on both
    sides of the cut: about 14 Spark queries."""
    from kraftlake.spark.tables.bounds import record_retained_from
    from kraftlake.spark.tables.layout import WarehouseError
    from kraftlake.spark.tables.queries import BEFORE_RETAINED
    from pipelines.ingest import ingest
    from udfs.sql import register, warehouse_errors

    warehouse = tmp_path / "cut"
    last = ingest(spark, log_dir, warehouse, batch_records=500).last_offset
    register(spark, warehouse)
    rows = spark.sql(
        f"SELECT topic, `partition`, min(from_offset) AS f FROM delta.`{warehouse / 'partitions'}` "
        "GROUP BY topic, `partition` ORDER BY f"
    ).collect()
    old, young = rows[0], rows[-1]
    cut = young["f"]  # the youngest partition's first version: the cut falls after the oldest one's
    assert old["f"] < cut <= last
    views = ("partition_history", "isr_history", "leader_history")
    before = {v: spark.sql(f"SELECT * FROM {v}('{old['topic']}', {old['partition']})").count() for v in views}
    assert all(before.values())
    record_retained_from(spark, warehouse, "default", cut)
    for view in views:
        with pytest.raises(WarehouseError, match=BEFORE_RETAINED), warehouse_errors():
            spark.sql(f"SELECT * FROM {view}('{old['topic']}', {old['partition']})").collect()
        # a partition whose whole history lies after the cut still answers
        assert spark.sql(f"SELECT * FROM {view}('{young['topic']}', {young['partition']})").count() > 0
    # nothing left of it: refused too, never an empty answer
    with pytest.raises(WarehouseError, match="none left"), warehouse_errors():
        spark.sql("SELECT * FROM partition_history('no-such-topic', 0)").collect()
    broker = spark.sql(
        f"SELECT id FROM delta.`{warehouse / 'brokers'}` GROUP BY id ORDER BY min(from_offset) LIMIT 1"
    ).first()
    assert broker is not None
    with pytest.raises(WarehouseError, match=BEFORE_RETAINED), warehouse_errors():
        spark.sql(f"SELECT * FROM broker_history({broker['id']})").collect()
