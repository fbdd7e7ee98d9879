"""The figures of ``kraftlake plot``, as altair (Vega-Lite) charts built from plain pandas frames.

Each builder takes the frame ``pipelines.plots`` computes from the warehouse, in the columns named here, and
nothing else: no Spark, no warehouse access, so each figure is tested on frames written by hand.

Time axes are wall-clock time in UTC, from the ``offsets`` table's record timestamps, their ticks and labels
chosen from the figure's span (:mod:`kraftlake.plot.time_axis`); every mark carries the
offsets it stands for in its tooltip (hover). Records of one batch share a timestamp, so a state that lasted
only inside one batch is a bar of no width: its offsets are in the data and the tooltips of its neighbours.

Frames (``*_ms`` are epoch milliseconds; ``to_offset`` is NULL/NA while a version is still current):

- counts: ``offset, timestamp_ms, under_replicated, offline, partitions``: the counts from ``offset`` on, one
  row where they change (and one at each end of the range);
- partition segments: ``role`` (``leader`` | ``isr``), ``broker`` (-1: no leader), ``from_offset``,
  ``to_offset``, ``start_ms``, ``end_ms`` (the segment clipped to the range);
- broker segments: ``broker, state, from_offset, to_offset, start_ms, end_ms`` with ``state`` one of
  :data:`BROKER_STATES`;
- config segments: ``key, value, from_offset, to_offset, start_ms, end_ms``.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from kraftlake.plot.time_axis import time_axis, utc_text

COUNT_COLUMNS = ("offset", "timestamp_ms", "under_replicated", "offline", "partitions")
PARTITION_COLUMNS = ("role", "broker", "from_offset", "to_offset", "start_ms", "end_ms")
BROKER_COLUMNS = ("broker", "state", "from_offset", "to_offset", "start_ms", "end_ms")
CONFIG_COLUMNS = ("key", "value", "from_offset", "to_offset", "start_ms", "end_ms")

#: A broker's state, in this order of precedence: Kafka keeps ``in_controlled_shutdown`` set after the
#: shutdown completes and fences the broker, so a fenced broker is "fenced" whatever that flag says; an
#: unfenced one with the flag is still serving while it hands its leaderships over.
BROKER_STATES = ("registered", "fenced", "in controlled shutdown", "unregistered")
_BROKER_COLOURS = ("#54a24b", "#e45756", "#f2b701", "#9d9d9d")
_ROLE_NAMES = {"isr": "in ISR", "leader": "leader", "offline": "no leader (offline)"}
_ROLE_COLOURS = ("#9ecae9", "#1f4e79", "#e45756")

WIDTH = 900
LANE_PX = 22


def range_text(lo: int, hi: int, lo_ms: int | None, hi_ms: int | None) -> str:
    """A subtitle naming a figure's range by offset and time."""
    return f"offsets {lo}..{hi}, {utc_text(lo_ms) or '?'} .. {utc_text(hi_ms) or '?'}"


def _time(ms: pd.Series) -> pd.Series:
    # tz-aware, so altair writes ISO strings with +00:00 that Vega reads as UTC (naive ones are local time)
    return pd.to_datetime(ms.astype("Int64"), unit="ms", utc=True)


def _until(to_offset: pd.Series) -> pd.Series:
    return to_offset.astype("Int64").map(lambda v: "still current" if pd.isna(v) else str(int(v)))


def _span(*columns: pd.Series) -> tuple[int | None, int | None]:
    """The first and last epoch milliseconds in ``columns`` (None, None without any)."""
    values = pd.concat([c.astype("Int64") for c in columns]).dropna()
    return (None, None) if values.empty else (int(values.min()), int(values.max()))


def _x(span: tuple[int | None, int | None]) -> alt.X:
    return alt.X("start:T", scale=alt.Scale(type="utc"), axis=alt.Axis(**time_axis(*span)))


def _size(frame: pd.DataFrame) -> dict[str, Any]:
    """A Gantt's size: its height grows with its lanes."""
    n = max(1, frame["lane"].nunique()) if len(frame) else 1
    return {"width": WIDTH, "height": max(60, LANE_PX * n)}


def _segment_tooltip(*first: alt.Tooltip) -> list[alt.Tooltip]:
    return [
        *first,
        alt.Tooltip("from_offset:Q", title="from offset", format="d"),
        alt.Tooltip("until:N", title="until offset"),
        alt.Tooltip("from_time:N", title="from"),
        alt.Tooltip("to_time:N", title="to"),
    ]


def _segments(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns every Gantt shares: times for the axis and texts for the tooltips."""
    out = frame.copy()
    out["start"] = _time(frame["start_ms"])
    out["end"] = _time(frame["end_ms"])
    out["from_time"] = frame["start_ms"].map(utc_text)
    out["to_time"] = frame["end_ms"].map(utc_text)
    out["until"] = _until(frame["to_offset"])
    out["from_offset"] = frame["from_offset"].astype("int64")
    return out.drop(columns=["start_ms", "end_ms", "to_offset"])


def under_replicated_figure(
    counts: pd.DataFrame, title: str = "Under-replicated and offline partitions", subtitle: str = ""
) -> alt.Chart:
    """Two step lines (under-replicated, offline) over time; the tooltip gives the offset each count starts at
    and the partitions existing then."""
    data = counts.copy()
    data["start"] = _time(counts["timestamp_ms"])
    data["time"] = counts["timestamp_ms"].map(utc_text)
    data = data.drop(columns=["timestamp_ms"])
    long = data.melt(
        id_vars=["offset", "start", "time", "partitions"],
        value_vars=["under_replicated", "offline"],
        var_name="series",
        value_name="count",
    )
    long["series"] = long["series"].map({"under_replicated": "under-replicated", "offline": "offline"})
    chart: alt.Chart = (
        alt.Chart(long, title=alt.Title(title, subtitle=subtitle))
        .mark_line(interpolate="step-after", point=True)
        .encode(
            x=_x(_span(counts["timestamp_ms"])),
            y=alt.Y("count:Q", title="partitions"),
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(domain=["under-replicated", "offline"], range=["#f58518", "#e45756"]),
            ),
            tooltip=[
                alt.Tooltip("series:N", title="series"),
                alt.Tooltip("count:Q", title="count"),
                alt.Tooltip("offset:Q", title="from offset", format="d"),
                alt.Tooltip("time:N", title="time"),
                alt.Tooltip("partitions:Q", title="partitions in all"),
            ],
        )
        .properties(width=WIDTH, height=300)
    )
    return chart


def partition_figure(
    segments: pd.DataFrame, topic: str, partition: int, subtitle: str = ""
) -> alt.LayerChart:
    """One lane per broker: a bar while it is in the ISR and a narrower one on top while it leads; periods
    without a leader (leader -1) on a lane of their own."""
    data = _segments(segments)
    span = _span(segments["start_ms"], segments["end_ms"])
    offline = data["broker"] < 0
    data["lane"] = data["broker"].map(lambda b: "no leader" if b < 0 else f"broker {b}")
    data["role_name"] = data["role"].map(_ROLE_NAMES)
    data.loc[offline, "role_name"] = _ROLE_NAMES["offline"]
    brokers = sorted(int(b) for b in data.loc[~offline, "broker"].unique())
    lanes = [f"broker {b}" for b in brokers] + (["no leader"] if offline.any() else [])
    base = alt.Chart(data).encode(
        x=_x(span),
        x2="end:T",
        y=alt.Y("lane:N", title=None, sort=lanes),
        color=alt.Color(
            "role_name:N",
            title=None,
            scale=alt.Scale(domain=list(_ROLE_NAMES.values()), range=list(_ROLE_COLOURS)),
        ),
        tooltip=_segment_tooltip(
            alt.Tooltip("lane:N", title="replica"), alt.Tooltip("role_name:N", title="role")
        ),
    )
    isr = base.transform_filter(alt.datum.role == "isr").mark_bar(size=16)
    lead = base.transform_filter(alt.datum.role == "leader").mark_bar(size=7)
    title = alt.Title(f"Leader and ISR of {topic}-{partition}", subtitle=subtitle)
    return alt.LayerChart(layer=[isr, lead], title=title, **_size(data))


def broker_figure(segments: pd.DataFrame, subtitle: str = "") -> alt.Chart:
    """One lane per broker, its state over time (:data:`BROKER_STATES`)."""
    data = _segments(segments)
    data["lane"] = data["broker"].map(lambda b: f"broker {b}")
    lanes = [f"broker {b}" for b in sorted(int(b) for b in data["broker"].unique())]
    chart: alt.Chart = (
        alt.Chart(data, title=alt.Title("Broker states", subtitle=subtitle))
        .mark_bar(size=16)
        .encode(
            x=_x(_span(segments["start_ms"], segments["end_ms"])),
            x2="end:T",
            y=alt.Y("lane:N", title=None, sort=lanes),
            color=alt.Color(
                "state:N",
                title=None,
                scale=alt.Scale(domain=list(BROKER_STATES), range=list(_BROKER_COLOURS)),
            ),
            tooltip=_segment_tooltip(
                alt.Tooltip("lane:N", title="broker"), alt.Tooltip("state:N", title="state")
            ),
        )
        .properties(**_size(data))
    )
    return chart


def config_figure(
    segments: pd.DataFrame, resource_type: str, resource_name: str, subtitle: str = ""
) -> alt.LayerChart:
    """One lane per config key: a bar per value it held (a gap where it was unset), the value written at the
    bar's start."""
    data = _segments(segments)
    data["lane"] = data["key"]
    data["value"] = data["value"].astype(str)
    name = resource_name if resource_name else "<default>"
    base = alt.Chart(data).encode(
        x=_x(_span(segments["start_ms"], segments["end_ms"])),
        y=alt.Y("lane:N", title=None, sort=sorted(data["lane"].unique())),
        tooltip=_segment_tooltip(alt.Tooltip("lane:N", title="key"), alt.Tooltip("value:N", title="value")),
    )
    bars = base.mark_bar(size=16, stroke="white", strokeWidth=1).encode(
        x2="end:T", color=alt.Color("value:N", legend=None, scale=alt.Scale(scheme="tableau20"))
    )
    labels = base.mark_text(align="left", dx=3, fontSize=10, color="black").encode(text="value:N")
    title = alt.Title(f"Configs of {resource_type.lower()} {name}", subtitle=subtitle)
    return alt.LayerChart(layer=[bars, labels], title=title, **_size(data))
