"""One commit path for the warehouse's writers (``ingest``'s slices, ``stream``'s micro-batches), each the
writer of one cluster: every row it writes carries the cluster, every Delta transaction id is the cluster's, and
its commit point, gaps and snapshots are the cluster's own, so writers of several clusters commit into one
warehouse side by side.

A writer resumes at the commit point (:func:`resume`); each slice of the log is then committed by
:func:`commit_slice`: its log leg (the ``metadata_log`` rows, :class:`LogLeg`) beside its history leg (a crossed
gap's snapshot and record, the history versions and closes: :func:`write_history_leg`), then ``offsets``, the
commit point, published to the SQL functions.

Exactly once: every write carries Delta ``txnVersion`` = the slice's last offset (a replayed slice is skipped per
table), the log leg appends only the rows past what ``metadata_log`` holds (a killed run's append is not repeated
when the resumed run slices differently), and ``offsets`` is written after both legs. A fleet's slices written
by its executors are committed by :func:`pipelines.slice_files.commit_written` under the same rules, from the same
resume point.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.history import HistoryBatch, HistoryBuilder, without_written
from kraftlake.image import EMPTY, MetadataImage
from kraftlake.image.errors import ImageError
from kraftlake.image.source import log_start
from kraftlake.spark.tables.bounds import (
    last_offset,
    publish_commit_point,
    record_gap,
    write_offsets,
    write_snapshot,
)
from kraftlake.spark.tables.layout import LOG, WarehouseError
from kraftlake.spark.tables.writes import retry_conflicts, write_history
from pipelines.reconstruct import image_at_offset

#: A gap a slice crossed: the first offset without a state and the image of the snapshot that ends it.
Jump = tuple[int, Any]


def resume_point(spark: SparkSession, warehouse: str | Path, cluster: str) -> int:
    """The commit point of ``cluster`` a writer resumes after (:func:`last_offset`), published to the SQL
    functions first: a writer killed between a commit and its publication left them behind it."""
    done = last_offset(spark, warehouse, cluster)
    if done >= 0:
        retry_conflicts(lambda: publish_commit_point(spark, warehouse, cluster, done))
    return done


class LogLeg:
    """A writer's ``metadata_log`` appends: only the rows past the highest offset the table holds.

    A run killed after its log append but before its commit point left rows past the commit point; the run that
    resumes may cut its slices differently, so it appends only what is not there yet (each append is atomic).
    """

    def __init__(self, logged: int) -> None:
        self.logged = logged

    def append(self, first: int, last: int, write: Callable[[int, int], None]) -> bool:
        """``write(start, last)`` of the offsets ``first..last`` not yet in ``metadata_log``; whether it ran."""
        start = max(first, self.logged + 1)
        if start > last:
            return False
        write(start, last)
        # after the write: a write that lost a commit conflict is tried again whole (retry_conflicts)
        self.logged = last
        return True


@dataclass
class Resume:
    """Where a writer resumes: the history builder at the commit point and what the warehouse already holds."""

    builder: HistoryBuilder
    committed: int
    """The commit point (one before ``start`` on a warehouse seeded from a snapshot; -1: nothing)."""
    start: int
    """The first offset to read."""
    log: LogLeg


def resume(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    starting: Callable[[], tuple[MetadataImage, int]],
    on_gap: Any = None,
    kept: Resume | None = None,
) -> Resume:
    """The writer's state at the commit point of ``cluster`` (:func:`resume_point`, published first).

    ``kept``: the state this process left after its last commit to the warehouse, taken as it is when the
    commit point is still its own (no image is rebuilt). Else the builder starts from the image at the commit
    point (:func:`pipelines.reconstruct.image_at_offset`), or, on a warehouse without one, from ``starting()``
    (image, first offset): a snapshot's image is stored as the warehouse's seed. ``on_gap``: the builder's
    resolver of the log's holes (:func:`kraftlake.image.gaps.gap_resolver`).
    """
    done = resume_point(spark, warehouse, cluster)
    if kept is not None and done >= 0 and kept.committed == done:
        kept.start = done + 1
        return kept  # this process wrote everything up to `done` and nothing after it
    if done >= 0:
        builder = HistoryBuilder(image_at_offset(spark, warehouse, cluster, done), on_gap)
        start = done + 1
    else:
        image, start = starting()
        builder = HistoryBuilder(image, on_gap)
        if image is not EMPTY:
            write_snapshot(spark, warehouse, image, cluster)
            write_history(spark, warehouse, builder.seed(), cluster)
    return Resume(builder, start - 1, start, LogLeg(last_offset(spark, warehouse, cluster, LOG)))


def starting_point(log_dir: str | Path) -> tuple[MetadataImage, int]:
    """The image to start from and the first offset to read (:func:`kraftlake.image.source.log_start`: a
    snapshot when the log does not start at 0), a log no usable snapshot covers as ``WarehouseError``."""
    try:
        return log_start(log_dir)
    except ImageError as exc:
        raise WarehouseError(str(exc)) from None


def crossed_gaps(batch: HistoryBatch) -> list[tuple[int, int]]:
    """The offsets (first, last) without a known state that a slice crossed (a snapshot's offset alone is none)."""
    return gaps_of_jumps(batch.jumps)


def gaps_of_jumps(jumps: list[Jump]) -> list[tuple[int, int]]:
    """:func:`crossed_gaps` of a slice's jumps."""
    return [(first, image.offset - 1) for first, image in jumps if first < image.offset]


def gap_line(first: int, last: int, snapshot_offset: int) -> str:
    """The one line that says a gap was crossed."""
    span = f"offset {first}" if first == last else f"offsets {first}..{last}"
    return (
        f"no history for {span}: the log skips them and goes on from the snapshot at {snapshot_offset} "
        f"(the SQL functions refuse them)"
    )


def write_history_leg(
    spark: SparkSession, warehouse: str | Path, cluster: str, batch: HistoryBatch, jumps: list[Jump]
) -> None:
    """A slice's history leg: each gap it crossed (the snapshot where reconstruction starts past the gap and the
    offsets without a state, found there by a replayed slice), then its versions and closes."""
    write_jumps(spark, warehouse, cluster, jumps)
    write_history(spark, warehouse, batch, cluster)


def write_jumps(spark: SparkSession, warehouse: str | Path, cluster: str, jumps: list[Jump]) -> None:
    """Each gap a slice crossed: the snapshot where reconstruction starts past it, and the gap recorded."""
    for first_missing, image in jumps:
        write_snapshot(spark, warehouse, image, cluster, seeds=False)
        record_gap(spark, warehouse, cluster, first_missing, image.offset - 1)


def commit_slice(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    batch: HistoryBatch,
    write_log: Callable[[int, int], None] | Future[None],
    written: dict[str, int] | None = None,
    phases: dict[str, float] | None = None,
) -> None:
    """Write one slice of ``cluster`` to every table it touches (its log leg and its history leg side by side), ``offsets``
    last (the commit point), which is then published to the SQL functions (:func:`publish_commit_point`).

    ``write_log(first, last)`` appends the slice's ``metadata_log`` rows beside the history; or it is the future of
    that append, started earlier by the caller (:func:`commit_replayed`), which is waited for before the commit
    point. ``written``: each history table's highest ``from_offset`` when a killed run may have written part of
    this slice (see :func:`without_written`). ``phases``: gets the seconds of ``log``, ``history`` (side by side)
    and ``offsets``.
    """
    jumps = batch.jumps
    if written is not None:
        batch = without_written(batch, written)
    t0 = time.monotonic()
    timed: dict[str, float] = {}

    def log() -> None:
        assert callable(write_log)
        write_log(batch.first_offset, batch.last_offset)
        timed["log"] = time.monotonic() - t0

    # the log and the history tables are independent until the commit point: written side by side
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftlake-log") as log_writer:
        logged = write_log if isinstance(write_log, Future) else log_writer.submit(retry_conflicts, log)
        write_history_leg(spark, warehouse, cluster, batch, jumps)
        timed["history"] = time.monotonic() - t0
        logged.result()
    t1 = time.monotonic()
    retry_conflicts(lambda: write_offsets(spark, warehouse, batch, cluster))
    if batch.offsets:
        retry_conflicts(lambda: publish_commit_point(spark, warehouse, cluster, batch.last_offset))
    timed["offsets"] = time.monotonic() - t1
    if phases is not None:
        phases.update(timed)


def commit_replayed(
    spark: SparkSession,
    warehouse: str | Path,
    cluster: str,
    log_leg: Callable[[], None],
    replay: Callable[[], HistoryBatch],
    phases: dict[str, float] | None = None,
) -> HistoryBatch:
    """Commit a slice whose log leg needs no replay (its rows are at hand): ``log_leg()`` starts at once, beside
    ``replay()``, which decodes the slice and feeds the builder, then :func:`commit_slice` of the batch it
    returns. A failed commit leaves no append running behind it (the next attempt replays the slice whole)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftlake-log") as log_writer:
        logged = log_writer.submit(retry_conflicts, log_leg)
        try:
            batch = replay()
            commit_slice(spark, warehouse, cluster, batch, logged, phases=phases)
        finally:
            wait([logged])
    return batch
