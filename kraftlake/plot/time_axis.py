"""A figure's time axis chosen from the span of its data, milliseconds to years.

Vega's own labels for a UTC time scale switch format tick by tick (``.800`` for a millisecond, ``:05`` for a
second, a date where the day changes), and over a span of a few milliseconds its ticks can fall inside one
millisecond and repeat the same label. Here the tick interval is picked from the span (the shortest of
:data:`STEPS` giving at most :data:`MAX_TICKS` intervals), the ticks are put at its UTC boundaries
(:func:`ticks`: whole seconds, midnights, first days of months...) and every label is written in one format
fine enough for that interval, so two ticks never read alike. When that format leaves the day out, the day
goes into the axis title if the whole span lies within it, else into every label.

The ticks are given to Vega as values rather than as a ``tickCount`` interval: Vega-Lite's schema names the
intervals in the singular, which Vega's UTC scale does not know below a day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd

MAX_TICKS = 8

_SECOND = 1000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR


_WEEK = 7 * _DAY
_MONDAY = 4 * _DAY  # 1970-01-01 was a Thursday: Mondays lie 4 days after a multiple of 7 days
_MEAN_MONTH = 30.436875 * _DAY
_MEAN_YEAR = 365.2425 * _DAY


@dataclass(frozen=True)
class Step:
    """A tick interval: ``step`` ``unit``s (``ms`` long, a month or a year as its mean), labelled with
    ``format`` (d3's UTC time format, as Vega writes it)."""

    unit: str
    step: int
    ms: float
    format: str


def _steps(unit: str, unit_ms: float, steps: tuple[int, ...], fmt: str) -> list[Step]:
    return [Step(unit, n, n * unit_ms, fmt) for n in steps]


#: Every interval the axis may tick at, shortest first.
STEPS: tuple[Step, ...] = (
    *_steps("millisecond", 1, (1, 2, 5, 10, 20, 50, 100, 200, 500), "%H:%M:%S.%L"),
    *_steps("second", _SECOND, (1, 2, 5, 10, 15, 30), "%H:%M:%S"),
    *_steps("minute", _MINUTE, (1, 2, 5, 10, 15, 30), "%H:%M"),
    *_steps("hour", _HOUR, (1, 2, 3, 6, 12), "%H:%M"),
    *_steps("day", _DAY, (1, 2), "%b %d"),
    Step("week", 1, _WEEK, "%b %d"),
    *_steps("month", _MEAN_MONTH, (1, 2, 3, 6), "%b %Y"),
    *_steps("year", _MEAN_YEAR, (1, 2, 5, 10, 20, 50, 100), "%Y"),
)

_FIXED = {"millisecond": 1, "second": _SECOND, "minute": _MINUTE, "hour": _HOUR, "day": _DAY}


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def step_for(span_ms: float) -> Step:
    """The shortest interval giving at most :data:`MAX_TICKS` ticks over ``span_ms``."""
    for step in STEPS:
        if span_ms / step.ms <= MAX_TICKS:
            return step
    return STEPS[-1]


def _datetime(ms: int) -> dict[str, Any]:
    """Vega-Lite's DateTime of an epoch millisecond in UTC. (A bare number in a temporal axis's ``values``
    compiles to Vega's ``datetime(n)``, which reads ``n`` as a year and the rest as defaults, not as a time.)"""
    at = datetime.fromtimestamp(ms / 1000, UTC)
    return {
        "utc": True,
        "year": at.year,
        "month": at.month,
        "date": at.day,
        "hours": at.hour,
        "minutes": at.minute,
        "seconds": at.second,
        "milliseconds": ms % 1000,
    }


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def ticks(lo_ms: int, hi_ms: int, step: Step) -> list[int]:
    """The UTC boundaries of ``step`` in ``[lo_ms, hi_ms]`` (epoch milliseconds): multiples of the step from
    the epoch up to days (a UTC day is a whole number of milliseconds), Mondays for weeks, and for months and
    years their first days whose month or year count from year 0 is a multiple of the step."""
    if step.unit in _FIXED or step.unit == "week":
        length = int(step.ms)
        origin = _MONDAY if step.unit == "week" else 0
        first = -((origin - lo_ms) // length) * length + origin  # the first boundary at or after lo
        return list(range(first, hi_ms + 1, length))
    out: list[int] = []
    at = datetime.fromtimestamp(lo_ms / 1000, UTC)
    if step.unit == "month":
        index = at.year * 12 + at.month - 1
        while True:
            start = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)
            if _ms(start) > hi_ms:
                return out
            if _ms(start) >= lo_ms and index % step.step == 0:
                out.append(_ms(start))
            index += 1
    year = at.year
    while True:
        start = datetime(year, 1, 1, tzinfo=UTC)
        if _ms(start) > hi_ms:
            return out
        if _ms(start) >= lo_ms and year % step.step == 0:
            out.append(_ms(start))
        year += 1


def time_axis(lo_ms: int | None, hi_ms: int | None, title: str = "time (UTC)") -> dict[str, Any]:
    """The ``alt.Axis`` keywords of a time axis over ``[lo_ms, hi_ms]`` (epoch milliseconds; None when the
    figure has no time, which leaves Vega's defaults)."""
    axis: dict[str, Any] = {"labelAngle": 0, "title": title, "labelOverlap": True}
    if lo_ms is None or hi_ms is None:
        return axis
    step = step_for(max(0, hi_ms - lo_ms))
    fmt = step.format
    if "%d" not in fmt and "%Y" not in fmt:
        if _day(lo_ms) == _day(hi_ms):
            axis["title"] = f"{title}, {_day(lo_ms)}"
        else:
            fmt = "%b %d " + fmt  # the day changes between two ticks: each says its day
    axis["format"] = fmt
    axis["values"] = [_datetime(ms) for ms in ticks(lo_ms, hi_ms, step)]
    return axis


def utc_text(ms: Any) -> str:
    """Epoch milliseconds as ``2026-11-22 07:00:00.123 UTC`` (the tooltips' and the report's form); empty for
    None/NA."""
    if ms is None or pd.isna(ms):
        return ""
    return datetime.fromtimestamp(int(ms) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
