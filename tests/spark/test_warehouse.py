"""The warehouse against the oracle: ``<entity>_at(N)`` and ``reconstruct`` equal ``kraftlake.image`` at N.

Spark actions are kept few: one query per entity covers several offsets at once (``LATERAL`` over a VALUES
list), and one ingested warehouse serves the module.
"""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from warehouse_states import assert_entities_match, query_at
from warehouse_states import canon as _canon
from warehouse_states import plain as _plain

from kraftlake.history import ENTITIES, entity_rows
from kraftlake.image import image_at
from kraftlake.image.render import image_json
from kraftlake.image.source import log_records
from kraftlake.sim.workloads.entities import write_synthetic_log

PARTITION_COLUMNS = [
    "topic",
    "topic_id",
    "partition",
    "replicas",
    "isr",
    "removing_replicas",
    "adding_replicas",
    "leader",
    "leader_recovery_state",
    "leader_epoch",
    "partition_epoch",
    "directories",
    "eligible_leader_replicas",
    "last_known_elr",
    "from_offset",
]


def assert_state_matches(spark: Any, log_dir: Path, offsets: list[int]) -> None:
    images = assert_entities_match(spark, log_dir, offsets)
    # and partitions_at against the image's own JSON rendering, independently of entity_rows
    got = query_at(spark, "partitions", offsets)
    for n in offsets:
        doc = image_json(images[n])
        exp = [
            {"topic": t["name"], "topic_id": t["topic_id"], **p}
            for t in doc["topics"]
            for p in t["partitions"]
        ]
        assert _canon(got[n]) == _canon(exp), n


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[Path, Path, list[int]]:
    from pipelines.ingest import ingest
    from udfs.sql import register

    root = tmp_path_factory.mktemp("synthetic")
    log_dir = write_synthetic_log(root / "log", seed=11, steps=200)
    warehouse = root / "warehouse"
    result = ingest(spark, log_dir, warehouse, batch_records=300)
    assert result.slices >= 2
    register(spark, warehouse)
    last = max(r.offset for r in log_records(log_dir))
    return log_dir, warehouse, [0, 7, last // 3, last // 2, (2 * last) // 3, last]


@pytest.mark.slow
@pytest.mark.heavy
def test_image_at_offset_reads_the_tail_in_ranges(
    spark: Any, synthetic: tuple[Path, Path, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warehouse's image at N equals the log's, when the tail is read in many small offset ranges. Slow:
    the module's warehouse is ingested first (the 332-record log in 300-record slices, the functions
    registered); then two images rebuilt from it, the tail read 13 offsets at a time: about 35 Spark
    queries."""
    import pipelines.reconstruct as reconstruct

    log_dir, warehouse, offsets = synthetic
    monkeypatch.setattr(reconstruct, "TAIL_CHUNK", 13)
    for n in (offsets[2], offsets[-1]):
        assert reconstruct.image_at_offset_in_spark(spark, warehouse, "default", n).state_equals(
            image_at(log_dir, n)
        ), n


def test_partitions_at_columns(spark: Any, synthetic: tuple[Path, Path, list[int]]) -> None:
    assert spark.sql("SELECT * FROM partitions_at(0)").columns == PARTITION_COLUMNS


@pytest.mark.slow
def test_state_at_offsets_equals_image(spark: Any, synthetic: tuple[Path, Path, list[int]]) -> None:
    """Every entity at six offsets equals the image there.
    Slow: every entity asked at six offsets, then ``partitions_at`` again against the image's JSON: 12 Spark
    queries, each calling a table function through ``LATERAL`` at the six offsets."""
    log_dir, _, offsets = synthetic
    assert_state_matches(spark, log_dir, offsets)


@pytest.mark.slow
def test_reingest_is_a_no_op_and_a_torn_slice_is_replayed(
    spark: Any, synthetic: tuple[Path, Path, list[int]], tmp_path: Path
) -> None:
    """A second ingest adds nothing, and a slice torn after its ``metadata_log`` rows is replayed once.
    Slow: four writes into a new warehouse through Spark (a 200-record prefix ingested, a torn slice appended,
    the rest ingested, then an ingest with nothing to add), and three tables compared with the module's."""
    from kraftlake.spark.tables.layout import LOG, table_ref, to_stored_log
    from kraftlake.spark.tables.writes import append
    from pipelines.ingest import ingest

    log_dir, _, _ = synthetic
    warehouse = tmp_path / "w"
    recs = list(log_records(log_dir))
    # a run that committed offsets 0..199, then died after writing the next slice's metadata_log rows only
    first = ingest(spark, _prefix_log(log_dir, tmp_path / "prefix", 200), warehouse, batch_records=200)
    p = first.last_offset
    assert 150 < p < 200
    torn = (
        spark.read.format("kraftlake-log")
        .option("startOffset", p + 1)
        .option("endOffset", p + 200)
        .load(str(log_dir))
    )
    append(to_stored_log(torn, "default"), warehouse, LOG, p + 200, "default")
    again = ingest(spark, log_dir, warehouse, batch_records=200)
    assert again.first_offset == p + 1
    assert ingest(spark, log_dir, warehouse, batch_records=200).records == 0
    counts = spark.sql(
        f"SELECT count(*) AS n, count(DISTINCT offset) AS d FROM {table_ref(warehouse, LOG)}"
    ).first()
    assert counts["n"] == counts["d"] == len(recs)
    for table in ("partitions", "brokers", "topics"):
        a = spark.sql(f"SELECT * FROM {table_ref(warehouse, table)}").collect()
        b = spark.sql(f"SELECT * FROM {table_ref(synthetic[1], table)}").collect()
        assert _canon([_plain(r.asDict()) for r in a]) == _canon([_plain(r.asDict()) for r in b]), table


def _prefix_log(log_dir: Path, out: Path, records: int) -> Path:
    """A copy of the log holding only whole batches below offset ``records`` (segments truncated)."""
    from kraftlake.spark.logsource import scan_segment

    d = out / "__cluster_metadata-0"
    d.mkdir(parents=True)
    for seg in sorted(log_dir.glob("*.log")):
        keep = [end for _pos, end, _first, last in scan_segment(str(seg)) if last < records]
        if keep:
            (d / seg.name).write_bytes(seg.read_bytes()[: keep[-1]])
    return d


@pytest.mark.slow
@pytest.mark.heavy
def test_reconstruct_and_compact(spark: Any, synthetic: tuple[Path, Path, list[int]], tmp_path: Path) -> None:
    """The warehouse's image equals the log's before and after a compaction, and the cut is refused below.
    Slow: four images rebuilt from the warehouse with Spark and two compactions of a copy of the module's
    warehouse (the first writing a snapshot and its checkpoint file, DELETEs on the log and every history
    table), then every entity asked at three offsets and the refusals below the cut."""
    from kraftlake.image import load_snapshot
    from kraftlake.spark.tables.layout import WarehouseError
    from pipelines.compact import compact
    from pipelines.reconstruct import image_at_offset

    log_dir, src, offsets = synthetic
    warehouse = tmp_path / "w"
    shutil.copytree(src, warehouse)
    from udfs.sql import register

    last = offsets[-1]
    mid = offsets[3]
    txn = image_at(log_dir, mid).transaction
    if txn is not None:  # compaction snapshots the committed state before an open transaction
        mid = txn.begin_offset - 1
    assert image_at_offset(spark, warehouse, "default", mid).state_equals(image_at(log_dir, mid))
    # no OPTIMIZE: it changes no row, and answers after one are test_compact's (its second-compaction test)
    result = compact(
        spark,
        warehouse,
        offset=offsets[3],
        retain_offsets=0,
        checkpoint_dir=tmp_path / "ckpt",
        optimize=False,
    )
    assert result.retained_from == mid and result.deleted["metadata_log"] == mid + 1
    assert result.checkpoint is not None
    assert load_snapshot(result.checkpoint).state_equals(image_at(log_dir, mid))
    for n in (mid, mid + 1, last):
        assert image_at_offset(spark, warehouse, "default", n).state_equals(image_at(log_dir, n)), n
    with pytest.raises(WarehouseError, match="before the retained history"):
        image_at_offset(spark, warehouse, "default", mid - 1)
    register(spark, warehouse)
    try:
        assert_state_matches(spark, log_dir, [mid, (mid + last) // 2, last])
        assert_refused_before(spark, warehouse, mid)
    finally:
        register(spark, src)
    # compaction is idempotent
    assert compact(spark, warehouse, offset=mid, retain_offsets=0, optimize=False).snapshot_rows == 0


def assert_refused_before(spark: Any, warehouse: Path, retained: int) -> None:
    """Below the retained-from offset the functions and commands say so (they answered with the versions that
    outlived the cut: 0 rows, exit 0); at and above it they answer (``assert_state_matches``)."""
    from kraftlake.cli import main
    from kraftlake.spark.tables.bounds import retained_from
    from kraftlake.spark.tables.layout import WarehouseError
    from udfs.sql import warehouse_errors

    assert retained_from(spark, warehouse, "default") == retained
    # an offset below the cut; a time before every offset, on a table with no row there (scram)
    for query, message in (
        (f"SELECT * FROM partitions_at({retained - 1})", f"offset {retained - 1} lies"),
        ("SELECT * FROM scram_at_time(TIMESTAMP '1970-01-01 00:00:00')", "the time lies"),
        ("SELECT * FROM brokers_at(-1)", "offset -1 is negative"),
    ):
        with pytest.raises(WarehouseError, match=message), warehouse_errors():
            spark.sql(query).collect()
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        assert main(["state", "--warehouse", str(warehouse), "--offset", str(retained - 1)]) == 2
    assert err.getvalue() == (
        f"kraftlake state: error: offset {retained - 1} lies before the retained history: the "
        f"warehouse holds the states from offset {retained} on\n"
    )


def test_cli_state_and_sql(spark: Any, synthetic: tuple[Path, Path, list[int]]) -> None:
    from kraftlake.cli import main

    log_dir, warehouse, offsets = synthetic
    n = offsets[-1]
    out = io.StringIO()
    with redirect_stdout(out):
        assert (
            main(
                [
                    "state",
                    "--warehouse",
                    str(warehouse),
                    "--offset",
                    str(n),
                    "--entity",
                    "brokers",
                    "--format",
                    "jsonl",
                ]
            )
            == 0
        )
    got = [json.loads(line) for line in out.getvalue().splitlines()]
    exp = entity_rows(image_at(log_dir, n))["brokers"]
    assert [{k: v for k, v in g.items() if k != "from_offset"} for g in got] == exp
    out = io.StringIO()
    with redirect_stdout(out):
        assert (
            main(
                [
                    "sql",
                    "--warehouse",
                    str(warehouse),
                    f"SELECT topic, partition, isr FROM partitions_at({n}) WHERE size(isr) < 2 "
                    "ORDER BY topic, partition",
                ]
            )
            == 0
        )
    img = image_at(log_dir, n)
    under = sorted(
        (t.name, pid) for t in img.topics_by_id.values() for pid, p in t.partitions.items() if len(p.isr) < 2
    )
    lines = out.getvalue().splitlines()
    assert lines[-1] == f"({len(under)} row{'s' if len(under) != 1 else ''})"
    assert [tuple(x.strip() for x in line.split("|")[:2]) for line in lines[2:-1]] == [
        (t, str(p)) for t, p in under
    ]


@pytest.mark.slow
@pytest.mark.kafka
def test_kafka_peer_log(spark: Any, kafka_metadata_log: Any, tmp_path: Path) -> None:
    """A real Kafka's log ingested answers as the image, and so does the image rebuilt from the warehouse.
    Slow: needs the real Kafka peer's log (the first test of the run to ask starts a Kafka broker and runs
    eleven admin tools, each a JVM); then the log ingested into a new warehouse, every entity asked at four
    offsets and the image rebuilt from the warehouse."""
    from pipelines.ingest import ingest
    from pipelines.reconstruct import image_at_offset
    from udfs.sql import register

    log_dir = kafka_metadata_log.metadata_dir
    warehouse = tmp_path / "w"
    cluster = ingest(spark, log_dir, warehouse, batch_records=5000).cluster  # the peer's cluster id
    first = min(r.offset for r in log_records(log_dir))
    last = max(r.offset for r in log_records(log_dir))
    offsets = sorted({first, first + (last - first) // 3, first + 2 * (last - first) // 3, last})
    register(spark, warehouse)
    assert_state_matches(spark, log_dir, offsets)
    assert image_at_offset(spark, warehouse, cluster, last).state_equals(image_at(log_dir, last))


@pytest.mark.slow
@pytest.mark.heavy
def test_pending_closes_answer_as_folded_ones(
    spark: Any, synthetic: tuple[Path, Path, list[int]], tmp_path: Path
) -> None:
    """Closes appended but not folded give the same answers; a fold (also one cut short) gives the same tables.
    Slow: the 332-record log ingested again with its closes left pending, every entity asked at six offsets,
    the 11 history tables read by Spark from both warehouses up to three times, and two folds."""
    from kraftlake.spark.tables.fold import fold_closes, pending_closes
    from kraftlake.spark.tables.layout import CLOSES, table_ref
    from kraftlake.spark.tables.queries import history_query
    from pipelines.ingest import ingest
    from udfs.sql import register

    log_dir, folded, offsets = synthetic
    warehouse = tmp_path / "w"
    ingest(spark, log_dir, warehouse, batch_records=200, fold=False)
    pending = pending_closes(spark, warehouse)
    assert pending > 10
    assert (
        spark.sql(
            f"SELECT count(*) AS n FROM {table_ref(warehouse, 'partitions')} WHERE to_offset IS NULL"
        ).first()["n"]
        > spark.sql(
            f"SELECT count(*) AS n FROM {table_ref(folded, 'partitions')} WHERE to_offset IS NULL"
        ).first()["n"]
    )

    def rows(sql: str) -> list[str]:
        return _canon([_plain(r.asDict()) for r in spark.sql(sql).collect()])

    # the folded warehouse is read-only here: its tables are asked of Spark once
    folded_rows: dict[str, list[str]] = {}

    def assert_as_folded(raw: bool, tables: tuple[str, ...] = tuple(ENTITIES)) -> None:
        for table in tables:
            if table not in folded_rows:
                folded_rows[table] = rows(f"SELECT * EXCEPT (cluster) FROM {table_ref(folded, table)}")
            want = folded_rows[table]
            assert rows(history_query(warehouse, table, "'default'")) == want, table
            if raw:
                assert rows(f"SELECT * EXCEPT (cluster) FROM {table_ref(warehouse, table)}") == want, table

    try:
        register(spark, warehouse)
        assert_state_matches(spark, log_dir, offsets)
        assert_as_folded(raw=False)
        closes = spark.sql(f"SELECT * FROM {table_ref(warehouse, CLOSES)}").toArrow()
        assert fold_closes(spark, warehouse) == pending
        assert pending_closes(spark, warehouse) == 0
        assert_as_folded(raw=True)
        # a fold cut short after its MERGEs: the closes still pending are already in the tables
        spark.createDataFrame(closes).write.format("delta").mode("append").save(str(warehouse / CLOSES))
        got = query_at(spark, "partitions", offsets)
        for n in offsets:
            assert _canon(got[n]) == _canon(entity_rows(image_at(log_dir, n))["partitions"]), n
        assert_as_folded(raw=True, tables=("partitions", "brokers"))
        assert fold_closes(spark, warehouse) == pending
        assert_as_folded(raw=True, tables=("partitions",))
    finally:
        register(spark, folded)
