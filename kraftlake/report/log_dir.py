"""A report on a metadata log directory: the window its bounds name, and the input replayed from its records
(from the snapshot that covers the log's start, across holes a mirror's installed snapshots end)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from kraftlake.image.gaps import gap_resolver
from kraftlake.image.source import log_records, log_start, partition_dir
from kraftlake.plot.options import Bound, parse_bound
from kraftlake.report.errors import ReportError
from kraftlake.report.from_log import input_from_records
from kraftlake.report.model import ReportInput


def window_offsets(
    offsets: Sequence[int] | np.ndarray,
    stamps: Sequence[int] | np.ndarray,
    start: Bound | None,
    end: Bound | None,
    where: str,
) -> tuple[int, int]:
    """The offsets ``[lo, hi]`` that ``start``/``end`` name among the records ``offsets`` (in offset order) of
    timestamps ``stamps``: an offset itself, for ``start`` a time the first record at or after it, for ``end``
    the last at or before it.

    Raises
    ------
    ReportError
        Nothing to report on: no record, a bound outside the records, a window without a record.
    """
    if not len(offsets):
        raise ReportError(f"{where} holds no record")
    held, times = np.asarray(offsets, dtype=np.int64), np.asarray(stamps, dtype=np.int64)
    first, last = int(held[0]), int(held[-1])
    if start is None:
        lo = first
    elif start.offset is not None:
        lo = start.offset
    else:
        after = held[times >= (start.time_ms or 0)]
        lo = int(after.min()) if len(after) else last + 1
    if end is None:
        hi = last
    elif end.offset is not None:
        hi = end.offset
    else:
        before = held[times <= (end.time_ms or 0)]
        hi = int(before.max()) if len(before) else first - 1
    if lo < first:
        raise ReportError(f"--from {start.text if start else ''}: {where} holds offsets {first}..{last}")
    if hi > last:
        raise ReportError(f"--to {end.text if end else ''}: {where} holds offsets {first}..{last}")
    if lo > hi:
        raise ReportError(
            f"the window holds no record of {where} (offsets {first}..{last}): --from is offset {lo}, --to {hi}"
        )
    return lo, hi


def report_input(
    log_dir: str | os.PathLike[str], start: str | None, end: str | None, cluster: str | None = None
) -> ReportInput:
    """The input of a report on ``log_dir`` between the bounds ``start`` and ``end`` (texts as the command
    takes them: offsets or ISO-8601 times)."""
    d = partition_dir(log_dir)
    image, first = log_start(d)
    bounds = [parse_bound(t) if t is not None else None for t in (start, end)]
    times = [(r.offset, r.timestamp) for r in log_records(d, first)]
    lo, hi = window_offsets([o for o, _ in times], [t for _, t in times], bounds[0], bounds[1], str(d))
    return input_from_records(log_records(d, first), lo, hi, cluster, start=image, on_gap=gap_resolver(d))
