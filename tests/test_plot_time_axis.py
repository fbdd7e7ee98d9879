"""The figures' time axes at spans from milliseconds to months: ticks at UTC boundaries, labels that never
repeat, as Vega draws them (the SVG vl-convert renders, no browser)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from kraftlake.plot import figures
from kraftlake.plot.output import save
from kraftlake.plot.time_axis import MAX_TICKS, STEPS, step_for, ticks

T0 = 1_700_000_000_123  # 2023-11-14 22:13:20.123 UTC
SECOND, HOUR, DAY = 1000, 3_600_000, 86_400_000


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def _x_labels(svg: str) -> list[str]:
    """The x axis's tick labels, in order (the first axis-label group Vega writes is the x axis's)."""
    group = re.search(r'<g class="mark-text role-axis-label"[^>]*>(.*?)</g>', svg, re.S)
    assert group is not None
    return re.findall(r"<text[^>]*>([^<]*)</text>", group.group(1))


def _axis_title(svg: str) -> str:
    group = re.search(r'<g class="mark-text role-axis-title"[^>]*>\s*<text[^>]*>([^<]*)</text>', svg)
    assert group is not None
    return group.group(1)


@pytest.mark.parametrize(
    ("span_ms", "expected_labels", "title"),
    [
        (
            50,
            ["22:13:20.130", "22:13:20.140", "22:13:20.150", "22:13:20.160", "22:13:20.170"],
            "time (UTC), 2023-11-14",
        ),
        (5 * SECOND, ["22:13:21", "22:13:22", "22:13:23", "22:13:24", "22:13:25"], "time (UTC), 2023-11-14"),
        (
            3 * HOUR,
            ["Nov 14 22:30", "Nov 14 23:00", "Nov 14 23:30", "Nov 15 00:00", "Nov 15 00:30", "Nov 15 01:00"],
            "time (UTC)",
        ),
        (4 * DAY, [f"Nov {d} {h}" for d in (15, 16, 17, 18) for h in ("00:00", "12:00")], "time (UTC)"),
        (150 * DAY, ["Dec 2023", "Jan 2024", "Feb 2024", "Mar 2024", "Apr 2024"], "time (UTC)"),
    ],
)
def test_a_timeline_labels_its_span_without_repeating(
    span_ms: int, expected_labels: list[str], title: str, tmp_path: Path
) -> None:
    frame = pd.DataFrame(
        {
            "role": ["leader", "isr", "isr"],
            "broker": [1, 1, 2],
            "from_offset": [3, 3, 3],
            "to_offset": pd.array([None, None, 9], dtype="Int64"),
            "start_ms": [T0, T0, T0],
            "end_ms": [T0 + span_ms, T0 + span_ms, T0 + span_ms // 2],
        }
    )
    svg = save(figures.partition_figure(frame, "orders", 0), tmp_path / "p.svg").read_text()
    labels = _x_labels(svg)
    assert labels == expected_labels
    assert len(set(labels)) == len(labels)
    assert _axis_title(svg) == title


def test_the_step_gives_at_most_max_ticks_and_the_finest_that_does() -> None:
    for span in (0, 1, 7, 50, 999, 61 * SECOND, 5 * HOUR, 3 * DAY, 40 * DAY, 400 * DAY, 80 * 365 * DAY):
        step = step_for(span)
        assert span / step.ms <= MAX_TICKS, span
        finer = [s for s in STEPS if s.ms < step.ms]
        assert all(span / s.ms > MAX_TICKS for s in finer), span


def test_ticks_lie_on_utc_boundaries() -> None:
    by = {(s.unit, s.step): s for s in STEPS}
    assert ticks(T0, T0 + 50, by["millisecond", 10]) == [T0 + 7 + 10 * i for i in range(5)]
    assert ticks(_ms("2023-11-14T23:50:00"), _ms("2023-11-15T01:10:00"), by["minute", 30]) == [
        _ms("2023-11-15T00:00:00"),
        _ms("2023-11-15T00:30:00"),
        _ms("2023-11-15T01:00:00"),
    ]
    mondays = ticks(_ms("2023-11-01T00:00:00"), _ms("2023-12-01T00:00:00"), by["week", 1])
    assert [datetime.fromtimestamp(t / 1000, UTC).strftime("%a %d") for t in mondays] == [
        "Mon 06",
        "Mon 13",
        "Mon 20",
        "Mon 27",
    ]
    quarters = ticks(_ms("2023-02-10T00:00:00"), _ms("2024-02-01T00:00:00"), by["month", 3])
    assert quarters == [
        _ms(f"{d}T00:00:00") for d in ("2023-04-01", "2023-07-01", "2023-10-01", "2024-01-01")
    ]
    assert ticks(_ms("1999-06-01T00:00:00"), _ms("2031-01-01T00:00:00"), by["year", 10]) == [
        _ms("2000-01-01T00:00:00"),
        _ms("2010-01-01T00:00:00"),
        _ms("2020-01-01T00:00:00"),
        _ms("2030-01-01T00:00:00"),
    ]
