"""Ingesting a log directory with a hole (a follower's mirror that installed a snapshot past its end): the
warehouse crosses it from the snapshot, answers every state outside it as the whole log does, and refuses the
offsets inside it (issue 29)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraftlake.image import image_at
from kraftlake.image.source import log_records
from tests.history.test_gaps import gapped_log
from tests.spark.test_warehouse import assert_state_matches


@pytest.mark.slow
@pytest.mark.heavy
def test_ingest_crosses_a_gap_and_refuses_offsets_inside_it(spark: Any, tmp_path: Path) -> None:
    """An ingest crosses a gap from its snapshot and refuses the offsets inside it.
    Slow: the 612-record gapped log ingested in 60-record slices (about ten), every entity asked at 6 offsets,
    the refusals by offset and by time, and a second ingest run with nothing to add: about 20 Spark
    queries."""
    from kraftlake.spark.tables.bounds import bounds_of, gaps_of
    from kraftlake.spark.tables.layout import WarehouseError
    from kraftlake.spark.tables.queries import IN_GAP
    from pipelines.ingest import ingest
    from udfs.sql import register, warehouse_errors

    whole, gapped, first_missing, nxt = gapped_log(tmp_path)
    warehouse = tmp_path / "wh"
    # small slices: the hole falls inside one, and slices on both sides of it
    result = ingest(spark, gapped, warehouse, batch_records=60)
    assert result.gaps == [(first_missing, nxt - 2)]
    assert gaps_of(spark, warehouse, "default") == [(first_missing, nxt - 2)]
    retained, committed = bounds_of(spark, warehouse, "default")
    assert retained is None and committed == result.last_offset
    register(spark, warehouse)
    last = result.last_offset
    assert_state_matches(spark, whole, [0, first_missing - 1, nxt - 1, nxt, (nxt + last) // 2, last])
    for n in (first_missing, (first_missing + nxt) // 2, nxt - 2):
        with pytest.raises(WarehouseError, match=IN_GAP), warehouse_errors():
            spark.sql(f"SELECT * FROM partitions_at({n})").collect()
    # by time: after the last record before the hole the state is unknown (the missing records' times are);
    # from the first record after it, it is known again
    times = {r.offset: r.timestamp for r in log_records(gapped)}
    before, after = times[first_missing - 1], times[nxt]
    assert before < after
    with pytest.raises(WarehouseError, match=IN_GAP), warehouse_errors():
        spark.sql(f"SELECT * FROM partitions_at_time(timestamp_millis({before + 1}))").collect()
    got = spark.sql(f"SELECT count(*) FROM partitions_at_time(timestamp_millis({after}))").first()[0]
    assert got == image_at(whole, max(o for o, t in times.items() if t <= after)).partition_count()
    # a resumed run over the same directory adds nothing and records the gap once
    again = ingest(spark, gapped, warehouse, batch_records=60)
    assert again.records == 0 and gaps_of(spark, warehouse, "default") == [(first_missing, nxt - 2)]


@pytest.mark.slow
def test_stream_crosses_a_gap(spark: Any, tmp_path: Path) -> None:
    """``stream --source log-dir`` over the same directory: it refused the hole before (and told the user to
    ingest into a new warehouse, which crashed). Slow: the 612-record gapped log streamed into a new warehouse
    (every table created), every entity asked at 3 offsets, and the validation suites of two tables."""
    from kraftlake.spark.tables.bounds import gaps_of
    from kraftlake.spark.tables.layout import WarehouseError
    from kraftlake.spark.tables.queries import IN_GAP
    from pipelines.stream import stream
    from udfs.sql import register, warehouse_errors

    whole, gapped, first_missing, nxt = gapped_log(tmp_path)
    warehouse = tmp_path / "wh"
    result = stream(spark, "log-dir", {"path": str(gapped)}, warehouse, available_now=True, fold_at=None)
    assert result.gaps == [(first_missing, nxt - 2)] and gaps_of(spark, warehouse, "default") == result.gaps
    register(spark, warehouse)
    assert_state_matches(spark, whole, [first_missing - 1, nxt - 1, result.last_offset])
    with pytest.raises(WarehouseError, match=IN_GAP), warehouse_errors():
        spark.sql(f"SELECT * FROM partitions_at({first_missing})").collect()
    # the warehouse's own checks take the recorded hole of offsets as it is
    from pipelines.validate import validate

    report = validate(spark, warehouse, ["offsets", "bounds"], build_docs=False)
    assert report.success, report.failures


def test_a_bounds_table_made_before_gaps_gets_their_columns(spark: Any, tmp_path: Path) -> None:
    import shutil

    from kraftlake.spark.tables import bounds, creation, layout

    warehouse = tmp_path / "old"
    creation.ensure_tables(spark, warehouse)
    path = layout.table_path(warehouse, layout.BOUNDS)
    shutil.rmtree(path)
    old = spark.createDataFrame(
        [("default", 5, None, 1)],
        "cluster STRING, committed_to BIGINT, retained_from BIGINT, recorded_at_ms BIGINT",
    )
    old.write.format("delta").save(path)
    creation._ENSURED.clear()
    creation.ensure_tables(spark, warehouse)
    assert bounds.record_gap(spark, warehouse, "default", 3, 4)
    assert bounds.gaps_of(spark, warehouse, "default") == [(3, 4)] and bounds.bounds_of(
        spark, warehouse, "default"
    ) == (None, 5)
