"""The executor side of a fleet ingest (:mod:`pipelines.fleet_ingest`): one cluster's history replayed in a
Spark task, from the cluster's resume image shipped with the task, over the records of its log dir read where
the task runs, and each slice's data files written there into the warehouse's tables.

A task row names the cluster, its log dir, the first offset to read, the slice size, the resume image (pickled:
a new cluster's starting image, one the driver kept) or else the commit point at which the task rebuilds it
from the warehouse's tables (:func:`kraftlake.warehouse.images.image_at_offset`, kraftlake's Delta reader),
the warehouse and what the slices' files need (:class:`pipelines.slice_files.SliceWriter`: the tables' formats,
what a killed run left past the commit point); the task replays the log serially with
:class:`kraftlake.history.HistoryBuilder` (holes crossed from the log's snapshots,
:func:`kraftlake.image.gaps.gap_resolver`), cut into the slices the driver's replay cuts, writes each slice's
files and yields one row per slice: its :class:`pipelines.slice_files.WrittenSlice` (the files' ``add``
actions, not their rows) and its record count. A record the replay refuses, a hole no snapshot covers or a
file that cannot be written ends the task with one more row carrying that error, after the
slices before it (an image that cannot be rebuilt: before any), so the driver commits those and raises the
error typed as the task raised it. No Spark session runs here, nor any of pyspark's modules: the functions run
in the executors' Python workers over a plain RDD of task rows (no DataFrame to plan in the driver, no
generated code or Arrow conversion in the executors' JVMs).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from kraftlake.errors import KraftlakeError
from kraftlake.history import HistoryBuilder
from kraftlake.image.gaps import gap_resolver
from kraftlake.image.source import log_records
from kraftlake.warehouse.images import image_at_offset
from pipelines.slice_files import SliceWriter


def _slice_row(cluster: str, index: int, records: int, files: Any, error: Any) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "slice": index,
        "records": records,
        "files": files,
        "error": error,
    }


def replay_cluster(task: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The slices of one task row's cluster: ``cluster``, ``slice`` (its index), ``records`` and ``files``
    (the :class:`pipelines.slice_files.WrittenSlice`), or, last, ``error`` (the exception); the RDD's
    serializer pickles them on the way to the driver."""
    d = Path(task["log_dir"])
    cluster, size = task["cluster"], int(task["batch_records"])
    index = 0
    t0 = time.monotonic()
    try:
        if task["image"] is not None:
            image = pickle.loads(task["image"])
        else:  # a resumed cluster: its image at the commit point, from the warehouse's tables
            image = image_at_offset(task["warehouse"], cluster, int(task["rebuild_at"]))
        builder = HistoryBuilder(image, gap_resolver(d))
        written = None if task["written"] is None else pickle.loads(task["written"])
        files = SliceWriter(
            task["warehouse"], cluster, pickle.loads(task["formats"]), written, int(task["logged"])
        )
        records = log_records(d, int(task["start"]))
        while chunk := list(islice(records, size)):
            batch = builder.feed(chunk)
            out = files.write(batch, chunk)
            out.replay_s = time.monotonic() - t0 - out.write_s
            yield _slice_row(cluster, index, len(chunk), out, None)
            index += 1
            t0 = time.monotonic()
    except (KraftlakeError, OSError) as exc:
        yield _slice_row(cluster, index, 0, None, exc)


def warm_worker(items: Iterable[Any]) -> Iterator[Any]:
    """``mapPartitions`` over anything, returning nothing: run where an executor's Python worker starts, it has
    the worker import this module (the replay's, the image's and the Delta writer's), and Spark reuses that
    worker for the replay tasks after it."""
    for _ in items:
        pass
    return iter(())


def replay_tasks(tasks: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``mapPartitions`` over task rows: every cluster of the partition replayed, one after another."""
    for task in tasks:
        yield from replay_cluster(task)
