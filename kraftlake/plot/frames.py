"""What a figure is drawn from, whichever reader computed it: the range of offsets it covers, the frames a
reader of the warehouse gives (:class:`FrameSource`: Spark SQL in ``pipelines.plots``, the Delta tables read
without a JVM in ``kraftlake.warehouse.plot_frames``), and a request's frame, figure and title
(:func:`figure_data`), with the refusals of a request that names nothing in the range."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from kraftlake.plot import figures
from kraftlake.plot.options import PlotError, PlotRequest
from kraftlake.plot.output import save


@dataclass(frozen=True)
class PlotRange:
    """The offsets of a cluster a figure covers, both included, and their record timestamps (epoch ms)."""

    cluster: str
    lo: int
    hi: int
    lo_ms: int | None = None
    hi_ms: int | None = None

    def text(self) -> str:
        return figures.range_text(self.lo, self.hi, self.lo_ms, self.hi_ms)


@dataclass(frozen=True)
class PlotResult:
    """A figure written: where, what range, and the frame behind it."""

    path: Path
    kind: str
    range: PlotRange
    data: pd.DataFrame
    title: str


class FrameSource(Protocol):
    """The frames of :mod:`kraftlake.plot.figures` over one warehouse, in its columns and row order."""

    def under_replicated(self, rng: PlotRange) -> pd.DataFrame: ...

    def partition_segments(self, topic: str, partition: int, rng: PlotRange) -> pd.DataFrame: ...

    def broker_segments(self, rng: PlotRange, broker: int | None = None) -> pd.DataFrame: ...

    def config_segments(self, resource_type: str, resource_name: str, rng: PlotRange) -> pd.DataFrame: ...


def frame_of(rows: Iterable[tuple[Any, ...]], columns: tuple[str, ...]) -> pd.DataFrame:
    """``rows`` as a frame of ``columns``; offsets, times and broker ids as nullable integers."""
    frame = pd.DataFrame(list(rows), columns=list(columns))
    for col in columns:
        if col.endswith("_ms") or col.endswith("offset") or col == "broker":
            frame[col] = frame[col].astype("Int64")
    return frame


def running_counts(steps: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    """The counts frame from per-offset changes (``steps``: one row per offset of ``COUNT_COLUMNS``, the
    counts as changes): the running sums, kept where a count changed and at ``lo`` and ``hi``."""
    steps = steps.sort_values("offset", ignore_index=True)
    counts = ["under_replicated", "offline", "partitions"]
    deltas = steps[counts].astype("int64")
    steps[counts] = deltas.cumsum()
    keep = (deltas != 0).any(axis=1) | steps["offset"].isin([lo, hi])
    return steps[keep].reset_index(drop=True)


def figure_data(source: FrameSource, request: PlotRequest, rng: PlotRange) -> tuple[pd.DataFrame, Any, str]:
    """The frame behind ``request``'s figure, the figure, and its title.

    Raises ``PlotError`` when the range holds nothing of what the request names (an unknown topic, broker or
    resource).
    """
    sub = rng.text()
    if request.kind == "under-replicated":
        data = source.under_replicated(rng)
        chart = figures.under_replicated_figure(data, subtitle=sub)
        return data, chart, "under-replicated and offline partitions"
    if request.kind == "partition":
        assert request.topic is not None and request.partition is not None
        data = source.partition_segments(request.topic, request.partition, rng)
        if data.empty:
            raise PlotError(
                f"partition {request.topic}-{request.partition} does not exist in offsets {rng.lo}..{rng.hi}"
            )
        return (
            data,
            figures.partition_figure(data, request.topic, request.partition, subtitle=sub),
            f"leader and ISR of {request.topic}-{request.partition}",
        )
    if request.kind == "brokers":
        data = source.broker_segments(rng, request.broker)
        if data.empty:
            which = "no broker" if request.broker is None else f"broker {request.broker}"
            raise PlotError(f"{which} is registered in offsets {rng.lo}..{rng.hi}")
        return data, figures.broker_figure(data, subtitle=sub), "broker states"
    assert request.kind == "configs" and request.resource is not None
    rtype, rname = request.resource
    data = source.config_segments(rtype, rname, rng)
    if data.empty:
        raise PlotError(
            f"{rtype.lower()} {rname or '<default>'} has no configs in offsets {rng.lo}..{rng.hi}"
        )
    return (
        data,
        figures.config_figure(data, rtype, rname, subtitle=sub),
        f"configs of {rtype.lower()} {rname or '<default>'}",
    )


def write_figure(source: FrameSource, request: PlotRequest, rng: PlotRange, out: str | Path) -> PlotResult:
    """``request``'s figure over ``rng`` written to ``out`` (.html, .png or .svg)."""
    data, chart, title = figure_data(source, request, rng)
    return PlotResult(save(chart, out, title), request.kind, rng, data, title)
