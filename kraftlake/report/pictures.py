"""The report's pictures' frames, from the same versions as its sections, in the columns
:mod:`kraftlake.plot.figures` draws: broker states over time and the under-replicated / offline counts."""

from __future__ import annotations

import numpy as np
import pandas as pd

from kraftlake.history import ENTITIES
from kraftlake.report.intervals import runs
from kraftlake.report.model import ReportInput
from kraftlake.report.sections import broker_state

_FIGURE_STATE = {
    "registered": "registered",
    "fenced": "fenced",
    "controlled shutdown": "in controlled shutdown",
}
BROKER_COLUMNS = ("broker", "state", "from_offset", "to_offset", "start_ms", "end_ms")
COUNT_COLUMNS = ("offset", "timestamp_ms", "under_replicated", "offline", "partitions")


def _clip(data: ReportInput, start: int, end: int | None) -> tuple[int, int | None, int | None]:
    lo, hi = data.window.lo, data.window.hi
    first = max(start, lo)
    last = end if end is not None and end <= hi else None
    end_ms = data.time_of(last) if last is not None else data.window.hi_ms
    return first, data.time_of(first), end_ms


def broker_segments(data: ReportInput) -> pd.DataFrame:
    """Each broker's runs of one state within the window (the broker figure's frame), with the times at the
    window's edges where a run began before it or holds past it; ``unregistered`` from a registration's end with
    none after it."""
    groups = data.groups("brokers", ENTITIES["brokers"].key)
    lo, hi = data.window.lo, data.window.hi
    out = []
    for state, name in _FIGURE_STATE.items():
        for run in runs(groups, lambda v, s=state: broker_state(v) == s):  # type: ignore[misc]
            if run.from_offset <= hi and (run.to_offset is None or run.to_offset > lo):
                first, start_ms, end_ms = _clip(data, run.from_offset, run.to_offset)
                to = run.to_offset if run.to_offset is not None and run.to_offset <= hi else None
                out.append((run.first["id"], name, first, to, start_ms, end_ms))
    for versions in groups.values():
        starts = {v["from_offset"] for v in versions}
        for v in versions:
            end = v["to_offset"]
            if end is not None and lo <= end <= hi and end not in starts:
                after = [s for s in starts if s > end]
                nxt = min(after) if after else None
                first, start_ms, end_ms = _clip(data, end, nxt)
                out.append(
                    (
                        v["id"],
                        "unregistered",
                        first,
                        nxt if nxt is not None and nxt <= hi else None,
                        start_ms,
                        end_ms,
                    )
                )
    segments = pd.DataFrame(out, columns=list(BROKER_COLUMNS))
    for col in ("from_offset", "to_offset", "start_ms", "end_ms"):
        segments[col] = segments[col].astype("Int64")
    return segments.sort_values(["broker", "from_offset"], ignore_index=True)


def availability_counts(data: ReportInput) -> pd.DataFrame:
    """The under-replicated, offline and existing partitions from each offset of the window where a count
    changes, and at both ends (the counts figure's frame)."""
    lo, hi = data.window.lo, data.window.hi
    pc = data.partition_columns()
    # ended by the window's first record: not in force at any offset of the window
    live = (pc.end == -1) | (pc.end > lo)
    # as the plot's counts: under-replicated whatever the leader, offline without one
    flags = np.stack(
        [pc.isr_len < pc.replicas_len, pc.leader == -1, np.ones(len(pc.leader), dtype=bool)], axis=1
    )
    flags = flags[live].astype(np.int64)
    starts, ends = np.maximum(pc.start[live], lo), pc.end[live]
    closing = (ends != -1) & (ends <= hi)
    at = np.concatenate([starts, ends[closing], [lo, hi]])
    step = np.concatenate([flags, -flags[closing], np.zeros((2, 3), dtype=np.int64)])
    offsets, where = np.unique(at, return_inverse=True)
    sums = np.stack(
        [np.bincount(where, weights=step[:, j], minlength=len(offsets)) for j in range(3)], axis=1
    ).astype(np.int64)
    totals = np.cumsum(sums, axis=0)
    shown = sums.any(axis=1) | (offsets == lo) | (offsets == hi)
    offsets, totals = offsets[shown], totals[shown]
    stamps, found = data.times_of(offsets)
    return pd.DataFrame(
        {
            "offset": offsets.astype(np.int64),
            "timestamp_ms": pd.arrays.IntegerArray(stamps.astype(np.int64), ~found),
            **{name: totals[:, j] for j, name in enumerate(COUNT_COLUMNS[2:])},
        }
    )
