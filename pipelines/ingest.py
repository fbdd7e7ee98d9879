"""``ingest``: a Kafka ``__cluster_metadata-0`` directory into the warehouse, slice by slice, exactly once.

Each slice of about ``batch_records`` records is written as: its ``metadata_log`` rows (decoded by the
``kraftlake-log`` source in executors, from the files) and, side by side, the history versions it creates and
the closes of those it ends (one append per touched table, computed in the driver by
:class:`kraftlake.history.HistoryBuilder`, which replays the records with the image), and finally its
``offsets`` rows, the commit point. The closes are folded into the tables once, at the end. Tables the slice does not touch are not written.

Every write carries the slice's last offset as Delta ``txnVersion``, so a run killed anywhere and started again
resumes after the last committed slice and replays the unfinished one without duplicates. A resumed run may cut
its slices differently from the killed one; when the killed run left writes past the commit point
(``metadata_log`` rows beyond it), the resumed run appends only versions above each table's highest
``from_offset`` and turns the versions it leaves out into closes (a repeated close changes no answer).

Speed: the history of slice k is written by one writer thread while the driver replays slice k+1 (the JVM
and the Python replay overlap; commits stay in order), and the replayed image is kept in the process between
calls on the same warehouse (the streaming pipeline's micro-batches), checked against the commit point.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kraftlake.errors import KraftlakeError
from kraftlake.history import HistoryBatch, HistoryBuilder, without_written
from kraftlake.image import EMPTY, MetadataImage, load_snapshot
from kraftlake.image.errors import SkippedSnapshotWarning
from kraftlake.image.gaps import gap_resolver
from kraftlake.image.source import log_records, partition_dir, segments, snapshots
from kraftlake.spark import logsource
from kraftlake.spark.tables import (
    LOG,
    append,
    ensure_tables,
    fold_closes,
    last_offset,
    max_from_offsets,
    publish_commit_point,
    record_gap,
    resume_point,
    retry_conflicts,
    to_stored_log,
    wait_checkpoints,
    write_history,
    write_offsets,
    write_snapshot,
)
from pipelines.reconstruct import image_at_offset


@dataclass
class IngestResult:
    records: int = 0
    slices: int = 0
    first_offset: int = -1
    last_offset: int = -1
    seconds: float = 0.0
    folded: int = 0
    """Pending closes folded into the history tables at the end (see :func:`kraftlake.spark.tables.write_history`)."""
    gaps: list[tuple[int, int]] = field(default_factory=list)
    """The offsets (first, last) at which no state is known: holes of the log crossed from a snapshot."""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # deleted meanwhile (a mirror resetting its log to a snapshot)
        return 0


def starting_point(log_dir: str | Path) -> tuple[MetadataImage, int]:
    """The image to start from and the first offset to read: a snapshot when the log does not start at 0
    (or holds no record, only snapshots).

    The oldest snapshot that covers the log's start, skipping (with a `SkippedSnapshotWarning`) one Kafka would
    not load (`kraftlake.image.load_snapshot` refuses it) for the next.
    """
    d = partition_dir(log_dir)
    # empty segments hold no offset: a fresh mirror's empty segment 0 is still there (or already gone, its next
    # one not yet made) when the follower reports a snapshot installed; the log then starts at the snapshot
    segs = [(base, path) for base, path in segments(d) if _size(path) > 0]
    base = segs[0][0] if segs else max((s.end_offset for s in snapshots(d)), default=0)
    if base == 0:
        return EMPTY, 0
    skipped = []
    for snap in (s for s in snapshots(d) if s.end_offset >= base):
        try:
            return load_snapshot(snap.path), snap.end_offset
        except KraftlakeError as exc:
            skipped.append(snap.path.name)
            warnings.warn(f"skipped snapshot {snap.path}: {exc}", SkippedSnapshotWarning, stacklevel=2)
    from kraftlake.spark.tables import WarehouseError

    unusable = f" (unusable: {', '.join(skipped)})" if skipped else ""
    raise WarehouseError(f"{d}: the log starts at offset {base} and no usable snapshot covers it{unusable}")


def gap_line(first: int, last: int, snapshot_offset: int) -> str:
    """The one line that says a gap was crossed."""
    span = f"offset {first}" if first == last else f"offsets {first}..{last}"
    return (
        f"no history for {span}: the log skips them and goes on from the snapshot at {snapshot_offset} "
        f"(the SQL functions refuse them)"
    )


def slices(records: Iterator[Any], size: int) -> Iterator[list[Any]]:
    while chunk := list(islice(records, size)):
        yield chunk


def commit_slice(
    spark: SparkSession,
    warehouse: str | Path,
    batch: HistoryBatch,
    write_log: Callable[[int, int], None] | Future[None],
    written: dict[str, int] | None = None,
    phases: dict[str, float] | None = None,
) -> None:
    """Write one slice to every table it touches (``metadata_log`` and the history tables side by side),
    ``offsets`` last (the commit point), which is then published to the SQL functions
    (:func:`kraftlake.spark.tables.publish_commit_point`).

    ``write_log(first, last)`` appends the slice's ``metadata_log`` rows beside the history; or it is the future of
    that append, started earlier by the caller, which is waited for before the commit point.
    ``written``: each history table's highest ``from_offset`` when a killed run may have written part of this
    slice (see :func:`without_written`). ``phases``: gets the seconds of ``log``, ``history`` (side by side)
    and ``offsets``.
    """
    jumps = batch.jumps
    if written is not None:
        batch = without_written(batch, written)
    t0 = time.monotonic()
    # a gap the slice crossed: its snapshot (where reconstruction starts past the gap) and the offsets without
    # a state, both before the commit point (a replayed slice finds them there)
    for first_missing, image in jumps:
        write_snapshot(spark, warehouse, image, seeds=False)
        record_gap(spark, warehouse, first_missing, image.offset - 1)
    timed: dict[str, float] = {}

    def log() -> None:
        assert callable(write_log)
        write_log(batch.first_offset, batch.last_offset)
        timed["log"] = time.monotonic() - t0

    # the log and the history tables are independent until the commit point: written side by side
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftlake-log") as log_writer:
        logged = write_log if isinstance(write_log, Future) else log_writer.submit(retry_conflicts, log)
        write_history(spark, warehouse, batch)
        timed["history"] = time.monotonic() - t0
        logged.result()
    t1 = time.monotonic()
    retry_conflicts(lambda: write_offsets(spark, warehouse, batch))
    if batch.offsets:
        retry_conflicts(lambda: publish_commit_point(spark, warehouse, batch.last_offset))
    timed["offsets"] = time.monotonic() - t1
    if phases is not None:
        phases.update(timed)


@dataclass
class _Resume:
    """A warehouse's replayed state kept between ``ingest`` calls of one process."""

    builder: HistoryBuilder
    committed: int
    start: int
    written: dict[str, int] | None = field(default=None)


_RESUME: dict[tuple[int, str], _Resume] = {}


def _resume(spark: SparkSession, warehouse: str | Path, d: Path, key: tuple[int, str]) -> tuple[_Resume, int]:
    """The builder at the commit point and the highest offset already in ``metadata_log``."""
    done = resume_point(spark, warehouse)
    kept = _RESUME.pop(key, None)
    if kept is not None and done >= 0 and kept.committed == done:
        kept.start = done + 1
        return kept, done  # this process wrote everything up to `done` and nothing after it
    if done >= 0:
        state = _Resume(
            HistoryBuilder(image_at_offset(spark, warehouse, done), gap_resolver(d)), done, done + 1
        )
    else:
        image, start = starting_point(d)
        state = _Resume(HistoryBuilder(image, gap_resolver(d)), done, start)
        if image is not EMPTY:
            write_snapshot(spark, warehouse, image)
            write_history(spark, warehouse, state.builder.seed())
    logged = last_offset(spark, warehouse, LOG)
    if logged > done:
        state.written = max_from_offsets(spark, warehouse)
    return state, logged


def ingest(
    spark: SparkSession,
    log_dir: str | Path,
    warehouse: str | Path,
    batch_records: int = 500_000,
    progress: Callable[[IngestResult], None] | None = None,
    fold: bool = True,
) -> IngestResult:
    """Import (or resume importing) a metadata log directory into ``warehouse``.

    ``progress`` is called with the result so far after each slice's commit point.
    ``fold``: fold the slices' closes into the history tables at the end (else they stay pending in ``closes``).
    """
    t0 = time.monotonic()
    d = partition_dir(log_dir)
    logsource.register(spark)
    ensure_tables(spark, warehouse)
    key = (id(spark), str(Path(warehouse).resolve()))
    state, logged_max = _resume(spark, warehouse, d, key)

    # a run killed after its metadata_log append but before its commit point left rows past the commit point:
    # a resumed run may slice differently, so it appends only what is not there yet (each append is atomic)
    logged = [logged_max]

    def write_log(first: int, last: int) -> None:
        first = max(first, logged[0] + 1)
        if first > last:
            return
        logged[0] = last
        df = (
            spark.read.format("kraftlake-log")
            .option("startOffset", first)
            .option("endOffset", last)
            .option("recordsPerPartition", max(batch_records // 2, 1))
            .load(str(d))
        )
        append(to_stored_log(df), warehouse, LOG, last)

    result = IngestResult()

    def commit(batch: HistoryBatch, records: int) -> None:
        commit_slice(spark, warehouse, batch, write_log, state.written)
        result.gaps.extend((first, image.offset - 1) for first, image in batch.jumps if first < image.offset)
        state.committed = batch.last_offset
        result.records += records
        result.slices += 1
        if result.first_offset < 0:
            result.first_offset = batch.first_offset
        result.last_offset = batch.last_offset
        result.seconds = time.monotonic() - t0
        if progress is not None:
            progress(result)

    # one writer thread: slice k is written while the driver replays slice k+1; commits stay in order
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftlake-ingest") as writer:
        pending: Future[None] | None = None
        for chunk in slices(log_records(d, state.start), batch_records):
            batch = state.builder.feed(chunk)
            if pending is not None:
                pending.result()
            pending = writer.submit(commit, batch, len(chunk))
        if pending is not None:
            pending.result()
    if state.written is not None and result.slices:
        state.written = None  # every slice past the killed run's writes is now committed whole
    # the slices appended their closes; one fold writes them all into the tables (one MERGE per table)
    if fold:
        result.folded = fold_closes(spark, warehouse)
    wait_checkpoints()
    _RESUME[key] = state
    result.seconds = time.monotonic() - t0
    return result
