"""The run cells of many windows at once (offsets, times and duration clipped to the report's window), and the
two large sections' rows built by column operations: the risk section's from
:class:`~kraftlake.history.risk_intervals.RiskColumns`, the availability section's from the partition versions'
runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from kraftlake.history.column_order import distinct_count, lexsort_order
from kraftlake.history.risk import EVENT_KINDS, KINDS
from kraftlake.history.risk_intervals import NONE, SOURCES, RiskColumns
from kraftlake.report.column_rows import ColumnRows
from kraftlake.report.model import ReportInput
from kraftlake.report.partition_columns import PartitionColumns

#: The run columns of a section's rows, in their order.
RUN_COLUMNS = [
    "from_offset",
    "to_offset",
    "from_time_ms",
    "to_time_ms",
    "duration_ms",
    "before_window",
    "ongoing",
]
_EVENTS = np.array([k in EVENT_KINDS for k in KINDS])


def sorted_codes(names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``names`` in order, and each one's index among them (by hashing, not a sort of them all)."""
    codes, distinct = pd.factorize(names, sort=True)
    return np.asarray(distinct, dtype=object), codes.astype(np.int64)


def _ints(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    return pa.array(values.astype(np.int64), pa.int64(), mask=None if valid is None else ~valid)


def run_columns(
    data: ReportInput, first: np.ndarray, end: np.ndarray, event: np.ndarray | None = None
) -> dict[str, pa.Array]:
    """The run cells of runs ``[first, end)`` (``end`` -1 while open) that hold in the window: one that began
    before it starts at ``lo`` (``before_window``), one still holding at ``hi`` has no end (``ongoing``) and
    lasts up to ``hi``'s time. An ``event`` (a one-offset election) has no end, duration nor ``ongoing``."""
    lo, hi = data.window.lo, data.window.hi
    is_event = np.zeros(len(first), dtype=bool) if event is None else event
    start = np.maximum(first, lo)
    ends = (end != -1) & (end <= hi) & ~is_event
    start_ms, start_found = data.times_of(start)
    end_ms, end_found = data.times_of(np.where(ends, end, lo))
    end_found &= ends
    if data.window.hi_ms is None:
        stop_ms, stop_found = end_ms, end_found
    else:
        stop_ms = np.where(ends, end_ms, data.window.hi_ms)
        stop_found = end_found | ~ends
    lasts = start_found & stop_found & ~is_event
    return {
        "from_offset": _ints(start),
        "to_offset": _ints(end, ends),
        "from_time_ms": _ints(start_ms, start_found),
        "to_time_ms": _ints(end_ms, end_found),
        "duration_ms": _ints(stop_ms - start_ms, lasts),
        "before_window": pa.array(first < lo),
        "ongoing": pa.array(~ends & ~is_event),
    }


@dataclass(frozen=True)
class RiskRows:
    """The risk section's rows and what its summary counts: per kind, the windows, the distinct partitions
    (by topic name and index) and the longest duration (None: none known)."""

    rows: ColumnRows
    partitions: int
    counts: dict[str, int]
    partitions_of: dict[str, int]
    longest: dict[str, int | None]


def _names(names: Sequence[str] | np.ndarray, codes: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """``names[codes]`` as a dictionary column of strings, each name held once (null where not ``valid``)."""
    indices = pa.array(np.where(codes >= 0, codes, 0), pa.int64(), mask=None if valid is None else ~valid)
    return pa.DictionaryArray.from_arrays(indices, pa.array(list(names), pa.string()))


def risk_rows(data: ReportInput, c: RiskColumns | None) -> RiskRows:
    """The windows of ``c`` that hold in the report's window (an election only inside it), clipped to it,
    sorted by start, topic, partition and kind."""
    lo, hi = data.window.lo, data.window.hi
    keep = np.zeros(0, dtype=bool)
    if c is not None:
        event = _EVENTS[c.kind]
        keep = (c.start <= hi) & ~((c.end != -1) & (c.end <= lo)) & ~(event & (c.start < lo))
    if c is None or not keep.any():
        empty = np.zeros(0, dtype=np.int64)
        columns = {
            "kind": pa.array([], pa.string()),
            "topic": pa.array([], pa.string()),
            **{k: _ints(empty) for k in ("partition", "leader")},
            "isr": pa.array([], pa.list_(pa.int64())),
            "min_isr": _ints(empty),
            "min_isr_source": pa.array([], pa.string()),
            "previous_leader": _ints(empty),
            **run_columns(data, empty, empty),
        }
        return RiskRows(ColumnRows.of(columns), 0, {}, {}, {})
    v = c.versions
    kept = np.flatnonzero(keep)
    at = c.at[kept]
    names, topic_of = sorted_codes(v.rows["topic"].to_numpy())
    topic_code = topic_of[at]
    partition = v.rows["partition"].to_numpy(dtype=np.int64)[at]
    kind_rank = np.argsort(np.argsort(np.array(KINDS, dtype=str)))[c.kind[kept]]
    order = lexsort_order((kind_rank, partition, topic_code, np.maximum(c.start[kept], lo)))
    topic_code, partition, chosen = topic_code[order], partition[order], kept[order]
    kind, at, f, t, event = c.kind[chosen], c.at[chosen], c.start[chosen], c.end[chosen], event[chosen]
    min_isr, source, previous = c.min_isr[chosen], c.source[chosen], c.previous[chosen]
    runs = run_columns(data, f, t, event)
    rows = ColumnRows.of(
        {
            "kind": _names(KINDS, kind),
            "topic": _names(names, topic_code),
            "partition": _ints(partition),
            "leader": _ints(v.leader[at]),
            # each version's ISR held once, as the dictionary of the rows starting at it
            "isr": pa.DictionaryArray.from_arrays(
                pa.array(at, pa.int64()), pa.array(v.isr, pa.list_(pa.int64()))
            ),
            "min_isr": _ints(min_isr, min_isr != NONE),
            "min_isr_source": _names(SOURCES, source, source != NONE),
            "previous_leader": _ints(v.leader[np.maximum(previous, 0)], previous >= 0),
            **runs,
        }
    )
    pair = topic_code * (int(partition.max()) + 1) + partition
    duration = runs["duration_ms"]
    lasts = duration.is_valid().to_numpy(zero_copy_only=False)
    spans = duration.fill_null(0).to_numpy()
    counts: dict[str, int] = {}
    partitions_of: dict[str, int] = {}
    longest: dict[str, int | None] = {}
    for k, name in enumerate(KINDS):
        mine = kind == k
        if mine.any():
            counts[name] = int(mine.sum())
            partitions_of[name] = distinct_count(pair[mine])
            known = mine & lasts
            longest[name] = int(spans[known].max()) if known.any() else None
    return RiskRows(rows, distinct_count(pair), counts, partitions_of, longest)


#: The availability states, in their sort order.
STATES = ("offline", "under-replicated")


def _lists(cells: np.ndarray) -> pa.Array:
    """Array cells (None: empty) as a list column."""
    return pa.array([() if x is None else x for x in cells.tolist()], pa.list_(pa.int64()))


@dataclass(frozen=True)
class AvailabilityRows:
    """The availability section's rows, and per topic in the order its summary names them (longest window
    first): the distinct partitions and the longest duration of each state."""

    rows: ColumnRows
    offline: int
    under: int
    topics: list[tuple[str, dict[str, tuple[int, int | None]]]]
    topic_count: int


def availability_rows(data: ReportInput, versions: PartitionColumns, top: int) -> AvailabilityRows:
    """Runs of partition versions offline (no leader) or under-replicated (fewer in the ISR than assigned)
    holding in the window, sorted by start, topic, partition and state; the ``top`` topics summed up."""
    lo, hi = data.window.lo, data.window.hi
    offline = versions.leader == -1
    under = ~offline & (versions.isr_len < versions.replicas_len)
    firsts, lasts, states = [], [], []
    for code, holds in ((1, under), (0, offline)):
        first, last = versions.run_bounds(holds)
        firsts.append(first)
        lasts.append(last)
        states.append(np.full(len(first), code, dtype=np.int64))
    first, last, state = (np.concatenate(x).astype(np.int64) for x in (firsts, lasts, states))
    start, end = versions.start[first], versions.end[last]
    inside = (start <= hi) & ((end == -1) | (end > lo))
    first, state, start, end = first[inside], state[inside], start[inside], end[inside]
    names, topic_of = sorted_codes(
        versions.frame["topic"].to_numpy() if len(versions.frame) else np.zeros(0, dtype=object)
    )
    topic = topic_of[first] if len(first) else first
    partition = versions.frame["partition"].to_numpy(dtype=np.int64)[first] if len(first) else first
    order = lexsort_order((state, partition, topic, np.maximum(start, lo)))
    first, state, start, end, topic, partition = (
        x[order] for x in (first, state, start, end, topic, partition)
    )
    runs = run_columns(data, start, end)
    frame = versions.frame
    rows = ColumnRows.of(
        {
            "topic": _names(names, topic),
            "partition": _ints(partition),
            "state": _names(STATES, state),
            "isr": _lists(frame["isr"].to_numpy()[first])
            if len(first)
            else _lists(np.zeros(0, dtype=object)),
            "replicas": _lists(frame["replicas"].to_numpy()[first])
            if len(first)
            else _lists(np.zeros(0, dtype=object)),
            **runs,
        }
    )
    pair = topic * (int(partition.max()) + 1 if len(partition) else 1) + partition
    durations = runs["duration_ms"]
    known = durations.is_valid().to_numpy(zero_copy_only=False)
    spans = durations.fill_null(0).to_numpy()
    worst = np.zeros(len(names), dtype=np.int64)
    np.maximum.at(worst, topic, spans)
    seen = np.full(len(names), len(topic), dtype=np.int64)
    np.minimum.at(seen, topic, np.arange(len(topic)))
    present = seen < len(topic)
    topics = []
    for t in [t for t in np.lexsort((seen, -worst)).tolist() if present[t]][:top]:
        about: dict[str, tuple[int, int | None]] = {}
        for code, name in enumerate(STATES):
            mine = (topic == t) & (state == code)
            if mine.any():
                lasting = mine & known
                about[name] = (
                    len(np.unique(partition[mine])),
                    int(spans[lasting].max()) if lasting.any() else None,
                )
        topics.append((str(names[t]), about))
    return AvailabilityRows(
        rows,
        distinct_count(pair[state == 0]),
        distinct_count(pair[state == 1]),
        topics,
        int(present.sum()),
    )
