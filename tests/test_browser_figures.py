"""Each kind of figure opened from a file in headless Chromium with no network: Vega drew its marks and axes,
and the screenshot is a picture, not a blank page. A page loading Vega from its CDN, opened the same way,
draws nothing (what the check tells apart)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from browser import dump_dom, png_pixels, screenshot

from kraftlake.plot import figures
from kraftlake.plot.output import save

pytestmark = pytest.mark.browser

T0 = 1_700_000_000_000


def _segments(**columns: list[Any]) -> pd.DataFrame:
    frame = pd.DataFrame(columns)
    frame["to_offset"] = frame["to_offset"].astype("Int64")
    return frame


def _charts() -> dict[str, Any]:
    counts = pd.DataFrame(
        {
            "offset": [10, 14, 20, 31],
            "timestamp_ms": [T0, T0 + 1500, T0 + 60_000, T0 + 90_000],
            "under_replicated": [0, 3, 1, 0],
            "offline": [0, 1, 0, 0],
            "partitions": [8, 8, 9, 9],
        }
    )
    partition = _segments(
        role=["leader", "leader", "isr", "isr", "isr"],
        broker=[2, -1, 2, 10, 3],
        from_offset=[5, 9, 5, 5, 7],
        to_offset=[9, None, None, 9, None],
        start_ms=[T0, T0 + 40, T0, T0, T0 + 20],
        end_ms=[T0 + 40, T0 + 90, T0 + 90, T0 + 40, T0 + 90],
    )
    brokers = _segments(
        broker=[1, 1, 1, 2],
        state=["registered", "in controlled shutdown", "fenced", "unregistered"],
        from_offset=[0, 4, 6, 3],
        to_offset=[4, 6, None, None],
        start_ms=[T0, T0 + 4 * 3_600_000, T0 + 6 * 3_600_000, T0 + 3 * 3_600_000],
        end_ms=[T0 + 4 * 3_600_000, T0 + 6 * 3_600_000, T0 + 9 * 3_600_000, T0 + 9 * 3_600_000],
    )
    configs = _segments(
        key=["retention.ms", "retention.ms", "cleanup.policy"],
        value=["1000", "2000", "compact"],
        from_offset=[3, 8, 5],
        to_offset=[8, None, None],
        start_ms=[T0, T0 + 8 * 86_400_000, T0 + 5 * 86_400_000],
        end_ms=[T0 + 8 * 86_400_000, T0 + 90 * 86_400_000, T0 + 90 * 86_400_000],
    )
    return {
        "under-replicated": figures.under_replicated_figure(counts),
        "partition": figures.partition_figure(partition, "orders", 3),
        "brokers": figures.broker_figure(brokers),
        "configs": figures.config_figure(configs, "TOPIC", "orders"),
    }


def _marks(dom: str, kind: str) -> int:
    """How many shapes Vega drew as ``kind`` marks (``rect``, ``line``, ``symbol``, ``text``)."""
    groups = re.findall(rf'<g class="mark-{kind} role-mark[^"]*"[^>]*>(.*?)</g>', dom, re.S)
    return sum(len(re.findall(r"<(path|text)\b", g)) for g in groups)


def _x_labels(dom: str) -> list[str]:
    group = re.search(r'<g class="mark-text role-axis-label"[^>]*>(.*?)</g>', dom, re.S)
    return [] if group is None else re.findall(r"<text[^>]*>([^<]*)</text>", group.group(1))


@pytest.mark.parametrize(
    ("kind", "marks"),
    [
        ("under-replicated", {"line": 2, "symbol": 8}),
        ("partition", {"rect": 5}),
        ("brokers", {"rect": 4}),
        ("configs", {"rect": 3, "text": 3}),
    ],
)
def test_each_figure_draws_offline(kind: str, marks: dict[str, int], tmp_path: Path) -> None:
    page = save(_charts()[kind], tmp_path / f"{kind}.html")
    dom = dump_dom(page)
    assert ">figure not drawn" not in dom  # the error vega-embed would write into the div
    assert re.search(r'<svg[^>]*class="marks"', dom)
    for mark, count in marks.items():
        assert _marks(dom, mark) >= count, (mark, dom[-3000:])
    labels = _x_labels(dom)
    assert len(labels) >= 2 and len(set(labels)) == len(labels), labels
    pixels = png_pixels(screenshot(page, tmp_path / f"{kind}.png", width=1000, height=500))
    assert (pixels.width, pixels.height) == (1000, 500)
    assert pixels.colours > 20 and pixels.variance > 100, pixels


def test_a_page_loading_vega_from_its_cdn_draws_nothing_here(tmp_path: Path) -> None:
    """The control: offline, the page altair writes by default (scripts from jsDelivr) stays blank."""
    page = tmp_path / "cdn.html"
    _charts()["brokers"].save(str(page))
    assert 'src="https://cdn.jsdelivr.net/npm/vega@' in page.read_text()
    dom = dump_dom(page)
    assert not re.search(r'<svg[^>]*class="marks"', dom) and "<canvas" not in dom
    pixels = png_pixels(screenshot(page, tmp_path / "cdn.png", width=400, height=200))
    assert pixels.variance < 1
