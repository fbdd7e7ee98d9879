"""The report written out: JSON with every row, Markdown tables, and one page that draws its pictures in headless
Chromium with no network."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser import dump_dom, png_pixels, screenshot

from kraftlake.report.from_log import input_from_records
from kraftlake.report.render import MAX_TABLE_ROWS, render
from kraftlake.report.sections import build_report
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator


def _data():  # type: ignore[no-untyped-def]
    sim = ClusterSimulator(
        ClusterSimConfig(brokers=5, topics=6, partitions_per_topic=3, events=800, seed=3, check_every=0)
    )
    sim.run()
    records = list(sim.log.records)
    last = records[-1].offset
    return input_from_records(records, last // 4, last, cluster="east-1")


def test_json_holds_every_row_and_its_sql() -> None:
    data = _data()
    report = build_report(data, warehouse="/w")
    doc = json.loads(render(report, "json"))
    assert doc["cluster"] == "east-1" and doc["window"]["from_offset"] == data.window.lo
    assert [s["key"] for s in doc["sections"]] == [s.key for s in report.sections]
    for s, section in zip(doc["sections"], report.sections, strict=True):
        assert len(s["rows"]) == len(section.rows)
        assert s["sql"].startswith(("WITH", "SELECT")) and "{lo}" not in s["sql"], s["sql"]
        assert f"{data.window.lo}" in s["sql"] and "'east-1'" in s["sql"]
    avail = next(s for s in doc["sections"] if s["key"] == "availability")
    assert avail["rows"] and set(avail["rows"][0]) == set(avail["columns"])


def test_markdown_tables_and_times() -> None:
    report = build_report(_data())
    text = render(report, "md")
    assert text.startswith("# What happened to cluster east-1")
    for s in report.sections:
        assert f"## {s.title}" in text
    # a row of the broker table: times in UTC, durations in operator units
    assert re.search(r"\| \d+ \| fenced \| \d+ \| .*UTC \|", text), text[:2000]
    assert re.search(r"\d+(\.\d)? s|\d+ min \d\d s|\d+ ms", text)
    assert text.count("```sql") == len(report.sections)
    assert all(len(s.rows) <= MAX_TABLE_ROWS for s in report.sections) or "more rows" in text


@pytest.mark.browser
def test_page_draws_offline(tmp_path: Path) -> None:
    data = _data()
    page = tmp_path / "report.html"
    page.write_text(render(build_report(data), "html", data), encoding="utf-8")
    text = page.read_text()
    assert "https://" not in text.split("<body>", 1)[1][:2000]  # nothing fetched: scripts are inline
    dom = dump_dom(page)
    assert ">figure not drawn" not in dom  # what vega-embed writes into a div it could not draw
    assert len(re.findall(r'<svg[^>]*class="marks"', dom)) == 2  # broker states and availability counts
    assert dom.count("<table>") >= 4
    pixels = png_pixels(screenshot(page, tmp_path / "report.png", width=1200, height=1400))
    assert pixels.colours > 20 and pixels.variance > 100, pixels
