"""``stream --source log-dir``: tailing segment files while batches are appended, a torn tail held back."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from spark.test_warehouse import assert_state_matches
from waiting import wait_until

from kraftlake.image.source import segments
from kraftlake.sim.workloads.entities import write_synthetic_log
from kraftlake.spark.logtail_source import SegmentIndex, scan_from

#: Between the batches appended to the live log: the stream sees it grow across its triggers (0.3 s apart), as
#: a follower's mirror grows, not whole at once.
APPEND_EVERY_S = 0.05
#: How long the torn last batch stays on disk before the test checks the stream did not read it: several of the
#: stream's triggers, each of which could have read it.
TORN_HELD_S = 2.0


def _batches(log_dir: Path) -> list[tuple[str, bytes]]:
    """(segment file name, batch bytes) of every batch of a log, in order."""
    out = []
    for _, seg in segments(log_dir):
        data = seg.read_bytes()
        pos = 0
        for end, _, _ in scan_from(str(seg), 0):
            out.append((seg.name, data[pos:end]))
            pos = end
    return out


def test_segment_index_holds_back_a_torn_tail(tmp_path: Path) -> None:
    src = write_synthetic_log(tmp_path / "src", seed=3, steps=40)
    batches = _batches(src)
    live = tmp_path / "live" / "__cluster_metadata-0"
    live.mkdir(parents=True)
    index = SegmentIndex(str(live))
    assert index.refresh() == 0
    name, first = batches[0]
    with open(live / name, "ab") as f:
        f.write(first[:-5])
    assert index.refresh() == 0  # torn: not a whole batch yet
    with open(live / name, "ab") as f:
        f.write(first[-5:])
    after_first = index.refresh()
    assert after_first > 0
    with open(live / name, "ab") as f:
        f.write(batches[1][1][:20])  # less than a batch header
    assert index.refresh() == after_first


@pytest.mark.slow
def test_tail_a_growing_log(spark: Any, tmp_path: Path) -> None:
    """A stream tailing a growing log directory holds back a torn last batch and ends equal to the image.
    Slow: the 87-record log appended batch by batch (26 batches, two thirds of them while the stream runs), a
    micro-batch at each trigger committing to several Delta tables and a fold whenever 8 closes are pending;
    then every entity asked at four offsets."""
    from kraftlake.spark.tables.fold import pending_closes
    from pipelines.stream import stream
    from udfs.sql import register

    src = write_synthetic_log(tmp_path / "src", seed=9, steps=50)
    batches = _batches(src)
    live = tmp_path / "live" / "__cluster_metadata-0"
    live.mkdir(parents=True)
    third = len(batches) // 3
    for name, data in batches[:third]:
        with open(live / name, "ab") as f:
            f.write(data)
    warehouse = tmp_path / "wh"
    last = SegmentIndex(str(src)).refresh() - 1
    results: list[Any] = []
    errors: list[BaseException] = []
    committed: list[int] = []  # the stream's commit points, as it reports them (no Spark query per poll)

    def run() -> None:
        try:
            results.append(
                stream(
                    spark,
                    "log-dir",
                    {"path": str(live)},
                    warehouse,
                    trigger_interval_s=0.3,
                    max_records_per_batch=40,
                    until_offset=last,
                    timeout_s=600,
                    progress=lambda p: committed.append(p.last_offset),
                    fold_at=8,
                )
            )
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    try:
        from kraftlake.spark.tables.bounds import last_offset

        for name, data in batches[third:-1]:
            with open(live / name, "ab") as f:
                f.write(data)
            time.sleep(APPEND_EVERY_S)
        # a torn last batch: must not be read until complete
        name, data = batches[-1]
        with open(live / name, "ab") as f:
            f.write(data[: len(data) // 2])
        before_last = int.from_bytes(data[:8], "big") - 1

        def up_to_the_torn_batch() -> bool:
            assert not errors, errors
            assert t.is_alive(), "the stream ended before the torn batch was completed"
            return bool(committed) and committed[-1] >= before_last

        wait_until(
            up_to_the_torn_batch,
            480,
            f"the stream committed up to {before_last}",
            0.5,
            seen=lambda: committed[-3:],
        )
        assert committed[-1] == before_last, committed
        time.sleep(TORN_HELD_S)  # time for what must not happen: the stream reading the torn batch
        assert last_offset(spark, warehouse, "default") == before_last  # the torn batch still held back
        with open(live / name, "ab") as f:
            f.write(data[len(data) // 2 :])
    finally:
        t.join(600)
    assert not errors, errors
    result = results[0]
    assert SegmentIndex(str(live)).refresh() - 1 == last
    assert result.last_offset == last
    assert all(0 < p.records <= 40 for p in result.progress)  # batches of the log hold 1-6 records
    # closes folded during the run (after some batches) and at its end
    assert any(p.folded for p in result.progress) and pending_closes(spark, warehouse) == 0
    register(spark, warehouse)
    assert_state_matches(spark, src, [0, last // 3, (2 * last) // 3, last])


def test_segment_index_reports_a_gap(tmp_path: Path) -> None:
    """A mirror that installed a snapshot past its end has a hole: the index names it, reads cross it (the stream's
    history builder goes on from the snapshot that ends it: tests/spark/test_ingest_gaps.py)."""
    from kraftlake.spark.logtail_source import LogTailStreamReader

    src = write_synthetic_log(tmp_path / "src", seed=5, steps=30)
    batches = _batches(src)
    live = tmp_path / "live" / "__cluster_metadata-0"
    live.mkdir(parents=True)
    for name, data in batches[:3]:
        with open(live / name, "ab") as f:
            f.write(data)
    index = SegmentIndex(str(live))
    end = index.refresh()
    later = [(n, d) for n, d in batches if int.from_bytes(d[:8], "big") >= end + 5]
    base = int.from_bytes(later[0][1][:8], "big")
    with open(live / f"{base:020d}.log", "wb") as f:
        f.write(later[0][1])
    index.refresh()
    assert index.gaps == [(end, base)]
    reader = LogTailStreamReader({"path": str(live)})
    reader.index.refresh()
    parts = reader.partitions({"offset": 0}, {"offset": base + 1})
    offsets = sorted(o for p in parts for rb in reader.read(p) for o in rb.column("offset").to_pylist())
    assert offsets == [*range(end), base]
    assert reader.partitions({"offset": base}, {"offset": base + 1})


def test_the_driver_reads_each_micro_batch_as_the_source_does(spark: Any, tmp_path: Path) -> None:
    """A ``log-dir`` stream's small micro-batches are read by the driver itself (no Spark job): the query's
    offsets log gives each batch's range before the batch runs, and the records read from the log for that
    range are the micro-batch's rows."""
    from kraftlake.spark import logtail_source
    from pipelines.stream import planned_end

    logtail_source.register(spark)
    log_dir = write_synthetic_log(tmp_path / "src", seed=5, steps=20)  # 45 records in 16 batches
    last = SegmentIndex(str(log_dir)).refresh() - 1
    checkpoint = tmp_path / "checkpoint"
    seen: list[tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]] = []

    def compare(df: Any, batch_id: int) -> None:
        end = planned_end(checkpoint, batch_id)
        start = 0 if batch_id == 0 else planned_end(checkpoint, batch_id - 1)
        assert end is not None and start is not None
        rows = sorted((r.offset, bytes(r.raw)) for r in df.select("offset", "raw").collect())
        records = logtail_source.read_records(str(log_dir), start, end - 1)
        seen.append((rows, [(r.offset, r.raw) for r in records]))

    query = (
        spark.readStream.format("kraftlake-logdir")
        .option("path", str(log_dir))
        .option("maxRecordsPerBatch", "20")
        .load()
        .writeStream.foreachBatch(compare)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    assert len(seen) >= 3
    for rows, records in seen:
        assert rows == records
    assert [o for rows, _ in seen for o, _ in rows] == list(range(last + 1))
    assert planned_end(checkpoint, len(seen)) is None  # no such micro-batch
