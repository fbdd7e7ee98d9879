"""The frames of ``kraftlake plot``'s figures read from the warehouse without Spark: the same rows, in the same
order and types, as ``pipelines.plots`` computes in Spark SQL (:class:`WarehouseFrames`, a
:class:`kraftlake.plot.frames.FrameSource`), and the range a request's bounds name (:func:`resolve_range`).

The history tables are read as readers see them (:func:`.versions.versions`: pending closes applied). Counts are
per-offset sums of +1 where a version starts and -1 where it ends, in numpy; runs of versions (a leader, an ISR
member, a broker state) are merged as the SQL's gaps and islands merge them: a version continues the run before
it when the value is the same and the previous version ended where it starts. Every segment is clipped to the
range and carries the record timestamps of its clipped ends (None where ``offsets`` has no row there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.delta.scan import Bound as RowBound
from kraftlake.errors import KraftlakeError
from kraftlake.plot import figures
from kraftlake.plot.frames import PlotRange, frame_of, running_counts
from kraftlake.plot.options import Bound
from kraftlake.warehouse.answers import BEFORE_RETAINED, limits
from kraftlake.warehouse.tables import OFFSETS, Warehouse, WarehouseError
from kraftlake.warehouse.versions import versions

#: The name a range gives the one cluster of a warehouse whose tables name none (the Spark readers migrate
#: such a warehouse to it, :data:`kraftlake.spark.tables.clusters.DEFAULT_NAME`).
DEFAULT_CLUSTER = "default"


def _offset_of(
    bound: Bound,
    which: str,
    first: int,
    last: int,
    retained: int | None,
    at_time: int | None,
    error: Callable[[str], KraftlakeError],
) -> int:
    """A bound as an offset: itself, or the last offset at or before its time (``at_time``)."""
    if bound.offset is not None:
        offset = bound.offset
    elif at_time is not None:
        offset = at_time
    elif which == "--from" and retained is None:
        return first  # before the first record of a warehouse holding the whole log: plot from its start
    else:
        raise error(
            f"{which} {bound.text} is before the warehouse's first record kept "
            f"(offset {max(first, retained or 0)})"
        )
    if retained is not None and offset < retained:
        raise error(
            f"{which} {bound.text} (offset {offset}) lies {BEFORE_RETAINED}: the warehouse "
            f"holds the states from offset {retained} on"
        )
    if offset > last:
        raise error(f"{which} {bound.text} is past the warehouse's last offset {last}")
    return max(offset, first)


def range_offsets(
    start: Bound | None,
    end: Bound | None,
    first: int,
    last: int,
    retained: int | None,
    at_times: tuple[int | None, int | None],
    error: Callable[[str], KraftlakeError],
) -> tuple[int, int]:
    """``[lo, hi]`` that ``start`` and ``end`` name among the offsets ``first..last`` the warehouse answers for
    (``at_times``: the last offset at or before each bound's time), refused through ``error`` (the reader's
    ``WarehouseError``) below the retained history, past the last offset, or empty."""
    lo = first if start is None else _offset_of(start, "--from", first, last, retained, at_times[0], error)
    hi = last if end is None else _offset_of(end, "--to", first, last, retained, at_times[1], error)
    if lo > hi:
        raise error(f"the range is empty: --from is offset {lo}, --to offset {hi}")
    return lo, hi


def resolve_range(
    wh: Warehouse, start: Bound | None = None, end: Bound | None = None, where: str | None = None
) -> PlotRange:
    """The offsets ``[lo, hi]`` of the warehouse's cluster that ``start``/``end`` name (default: all it answers
    for), as ``pipelines.plots.resolve_range``; ``where`` names the warehouse in the refusals."""
    wh.resolve_cluster()
    offsets = wh.read(OFFSETS, columns=["offset", "timestamp"])
    if offsets.num_rows == 0:
        raise WarehouseError(f"{where or wh.path} holds no records yet")
    span = pc.min_max(offsets.column("offset")).as_py()
    first, last = int(span["min"]), int(span["max"])
    lim = limits(wh)
    retained = None if lim.retained < 0 else lim.retained
    first = max(first, retained or 0)

    def at_time(bound: Bound | None) -> int | None:
        if bound is None or bound.time_ms is None:
            return None
        ms = int(bound.time_ms)
        before = pc.less_equal(offsets.column("timestamp"), pa.scalar(ms, pa.int64()))
        top = pc.max(offsets.column("offset").filter(before)).as_py()
        return None if top is None else int(top)

    lo, hi = range_offsets(start, end, first, last, retained, (at_time(start), at_time(end)), WarehouseError)
    stamps = _Stamps(wh, lo, hi)
    return PlotRange(wh.cluster or DEFAULT_CLUSTER, lo, hi, stamps.at(lo), stamps.at(hi))


class _Stamps:
    """The record timestamps of the offsets ``lo..hi``."""

    def __init__(self, wh: Warehouse, lo: int, hi: int) -> None:
        rows = wh.read(
            OFFSETS, (RowBound("offset", ">=", lo), RowBound("offset", "<=", hi)), ["offset", "timestamp"]
        ).sort_by("offset")
        self.offsets = rows.column("offset").to_numpy()
        self.times = rows.column("timestamp").to_numpy(zero_copy_only=False)

    def at(self, offset: int) -> int | None:
        i = int(np.searchsorted(self.offsets, offset))
        if i < len(self.offsets) and self.offsets[i] == offset:
            return int(self.times[i])
        return None


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def _nulls_first(value: Any) -> tuple[bool, Any]:
    return (value is not None, value)


def _runs(
    versions_of: Iterable[dict[str, Any]],
    group: Callable[[dict[str, Any]], Any],
    same: Callable[[Any, Any], bool],
) -> list[tuple[dict[str, Any], int, int | None]]:
    """The runs of versions per ``group``, in ``from_offset`` order: a version continues the run before it when
    ``same(previous, version)`` and the previous one ended where it starts. Each run: its first version, its
    ``from_offset`` and the ``to_offset`` of its last version."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for v in versions_of:
        groups.setdefault(group(v), []).append(v)
    out: list[tuple[dict[str, Any], int, int | None]] = []
    for rows in groups.values():
        rows.sort(key=lambda r: r["from_offset"])
        prev: dict[str, Any] | None = None
        for v in rows:
            continues = (
                prev is not None
                and prev["to_offset"] is not None
                and prev["to_offset"] == v["from_offset"]
                and same(prev, v)
            )
            if continues:
                first, start, _ = out[-1]
                out[-1] = (first, start, v["to_offset"])
            else:
                out.append((v, v["from_offset"], v["to_offset"]))
            prev = v
    return out


@dataclass
class WarehouseFrames:
    """The figures' frames read from ``wh`` without Spark (:class:`kraftlake.plot.frames.FrameSource`)."""

    wh: Warehouse

    def _clipped(
        self, segments: Iterable[tuple[Any, Any, int, int | None]], rng: PlotRange, columns: tuple[str, ...]
    ) -> pd.DataFrame:
        """``segments`` (two values, ``from_offset``, ``to_offset``) cut to the range, with the times of the
        clipped ends, ordered by the two values and ``from_offset``: a segment still open, or ending after
        ``hi``, is drawn up to ``hi``."""
        stamps = _Stamps(self.wh, rng.lo, rng.hi)
        out = []
        for a, b, start, end in segments:
            if start > rng.hi or (end is not None and end <= rng.lo):
                continue
            shown_to = rng.hi if end is None or end > rng.hi else end
            out.append((a, b, start, end, stamps.at(max(start, rng.lo)), stamps.at(shown_to)))
        out.sort(key=lambda r: (_nulls_first(r[0]), _nulls_first(r[1]), r[2]))
        return frame_of(out, columns)

    def under_replicated(self, rng: PlotRange) -> pd.DataFrame:
        lo, hi = rng.lo, rng.hi
        v = versions(
            self.wh, "partitions", (RowBound("from_offset", "<=", hi),), columns=["isr", "replicas", "leader"]
        )
        # as Spark's size(isr) < size(replicas) and leader = -1: NULL is false
        ur = pc.fill_null(
            pc.less(pc.list_value_length(v.column("isr")), pc.list_value_length(v.column("replicas"))), False
        )
        off = pc.fill_null(pc.equal(v.column("leader"), pa.scalar(-1, v.schema.field("leader").type)), False)
        ur_n = ur.to_numpy(zero_copy_only=False).astype(np.int64)
        off_n = off.to_numpy(zero_copy_only=False).astype(np.int64)
        starts = v.column("from_offset").to_numpy()
        to = v.column("to_offset")
        ended = pc.fill_null(pc.less_equal(to, pa.scalar(hi, pa.int64())), False).to_numpy(
            zero_copy_only=False
        )
        ends = pc.fill_null(to, 0).to_numpy()[ended]
        at = np.maximum(np.concatenate([starts, ends, [lo, hi]]), lo)
        changes = np.stack(
            [
                np.concatenate([ur_n, -ur_n[ended], [0, 0]]),
                np.concatenate([off_n, -off_n[ended], [0, 0]]),
                np.concatenate([np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64), [0, 0]]),
            ]
        )
        points, where = np.unique(at, return_inverse=True)
        sums = np.zeros((3, len(points)), dtype=np.int64)
        for i in range(3):
            np.add.at(sums[i], where, changes[i])
        stamps = _Stamps(self.wh, lo, hi)
        steps = frame_of(
            (
                (int(p), stamps.at(int(p)), int(sums[0][i]), int(sums[1][i]), int(sums[2][i]))
                for i, p in enumerate(points)
            ),
            figures.COUNT_COLUMNS,
        )
        return running_counts(steps, lo, hi)

    def partition_segments(self, topic: str, partition: int, rng: PlotRange) -> pd.DataFrame:
        bounds = (RowBound("topic", "==", topic), RowBound("partition", "==", int(partition)))
        found = _rows(versions(self.wh, "partitions", bounds, columns=["topic_id", "leader", "isr"]))
        leaders = _runs(found, lambda v: v["topic_id"], lambda a, b: a["leader"] == b["leader"])
        members = [
            {
                "topic_id": v["topic_id"],
                "member": m,
                "from_offset": v["from_offset"],
                "to_offset": v["to_offset"],
            }
            for v in found
            for m in v["isr"] or ()
        ]
        isr = _runs(members, lambda v: (v["topic_id"], v["member"]), lambda a, b: True)
        segments = [("leader", first["leader"], s, e) for first, s, e in leaders]
        segments += [("isr", first["member"], s, e) for first, s, e in isr]
        return self._clipped(segments, rng, figures.PARTITION_COLUMNS)

    def broker_segments(self, rng: PlotRange, broker: int | None = None) -> pd.DataFrame:
        bounds = () if broker is None else (RowBound("id", "==", int(broker)),)
        found = _rows(
            versions(self.wh, "brokers", bounds, columns=["id", "fenced", "in_controlled_shutdown"])
        )
        for v in found:
            v["state"] = (
                "fenced"
                if v["fenced"]
                else "in controlled shutdown"
                if v["in_controlled_shutdown"]
                else "registered"
            )
        runs = _runs(found, lambda v: v["id"], lambda a, b: a["state"] == b["state"])
        segments: list[tuple[Any, Any, int, int | None]] = [(f["id"], f["state"], s, e) for f, s, e in runs]
        by_id: dict[int, list[dict[str, Any]]] = {}
        for v in found:
            by_id.setdefault(v["id"], []).append(v)
        for rows in by_id.values():
            rows.sort(key=lambda r: r["from_offset"])
            for v, nxt in zip(rows, [*rows[1:], None], strict=True):
                next_from = None if nxt is None else nxt["from_offset"]
                # a version that ended with no next one at its end: unregistered until the next registration
                if v["to_offset"] is not None and (next_from is None or next_from > v["to_offset"]):
                    segments.append((v["id"], "unregistered", v["to_offset"], next_from))
        return self._clipped(segments, rng, figures.BROKER_COLUMNS)

    def config_segments(self, resource_type: str, resource_name: str, rng: PlotRange) -> pd.DataFrame:
        bounds = (
            RowBound("resource_type", "==", resource_type),
            RowBound("resource_name", "==", resource_name),
        )
        found = _rows(versions(self.wh, "configs", bounds, columns=["name", "value"]))
        segments = [(v["name"], v["value"], v["from_offset"], v["to_offset"]) for v in found]
        return self._clipped(segments, rng, figures.CONFIG_COLUMNS)
