"""The figures of ``kraftlake plot`` from frames written by hand (no Spark), what they write, and the
refusals the command makes before it starts Spark."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pandas as pd
import pytest

from kraftlake.plot import figures
from kraftlake.plot.options import Bound, PlotError, PlotRequest, parse_bound, parse_resource
from kraftlake.plot.output import check_output, save

T0 = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC


def _spec(path: Path) -> dict[str, Any]:
    """The Vega-Lite spec a page holds (``output.figure_html``'s JSON script)."""
    match = re.search(
        r'<script type="application/json" id="figure-spec">(.*?)</script>', path.read_text(), re.S
    )
    assert match is not None
    spec = json.loads(match.group(1))
    assert isinstance(spec, dict)
    return spec


def _values(spec: dict[str, Any]) -> list[dict[str, Any]]:
    (values,) = spec["datasets"].values()
    return list(values)


def _segments(**columns: list[Any]) -> pd.DataFrame:
    frame = pd.DataFrame(columns)
    frame["to_offset"] = frame["to_offset"].astype("Int64")
    return frame


def test_under_replicated_figure_is_two_step_lines_with_offsets_on_hover(tmp_path: Path) -> None:
    counts = pd.DataFrame(
        {
            "offset": [10, 14, 20],
            "timestamp_ms": [T0, T0 + 1500, T0 + 60_000],
            "under_replicated": [0, 3, 1],
            "offline": [0, 1, 0],
            "partitions": [8, 8, 9],
        }
    )
    spec = _spec(
        save(figures.under_replicated_figure(counts, subtitle="offsets 10..20"), tmp_path / "u.html")
    )
    assert spec["mark"] == {"type": "line", "interpolate": "step-after", "point": True}
    x = spec["encoding"]["x"]
    assert x["scale"]["type"] == "utc" and x["axis"]["title"] == "time (UTC), 2023-11-14"  # a minute's span
    rows = {(v["series"], v["offset"]): v for v in _values(spec)}
    assert len(rows) == 6
    assert rows[("under-replicated", 14)]["count"] == 3 and rows[("offline", 14)]["count"] == 1
    assert rows[("offline", 14)]["time"] == "2023-11-14 22:13:21.500 UTC"
    assert (
        rows[("offline", 14)]["start"] == "2023-11-14T22:13:21.500000+00:00"
    )  # UTC for Vega, not local time
    assert rows[("offline", 20)]["partitions"] == 9
    assert {t["field"] for t in spec["encoding"]["tooltip"]} >= {"offset", "time", "count", "series"}
    assert spec["title"]["subtitle"] == "offsets 10..20"


def test_partition_figure_has_a_lane_per_broker_and_one_for_no_leader(tmp_path: Path) -> None:
    frame = _segments(
        role=["leader", "leader", "isr", "isr", "isr"],
        broker=[2, -1, 2, 10, 3],
        from_offset=[5, 9, 5, 5, 7],
        to_offset=[9, None, None, 9, None],
        start_ms=[T0, T0 + 4, T0, T0, T0 + 2],
        end_ms=[T0 + 4, T0 + 9, T0 + 9, T0 + 4, T0 + 9],
    )
    spec = _spec(save(figures.partition_figure(frame, "orders", 3), tmp_path / "p.html"))
    assert spec["title"]["text"] == "Leader and ISR of orders-3"
    isr, lead = spec["layer"]
    assert isr["encoding"]["y"]["sort"] == ["broker 2", "broker 3", "broker 10", "no leader"]
    assert isr["mark"]["size"] > lead["mark"]["size"]  # the leader bar drawn inside its ISR bar
    values = {(v["role"], v["broker"]): v for v in _values(spec)}
    assert values[("leader", -1)]["lane"] == "no leader"
    assert values[("leader", -1)]["role_name"] == "no leader (offline)"
    assert values[("leader", -1)]["until"] == "still current" and values[("leader", 2)]["until"] == "9"
    assert values[("isr", 10)]["role_name"] == "in ISR" and values[("isr", 10)]["lane"] == "broker 10"
    assert {t["field"] for t in isr["encoding"]["tooltip"]} >= {
        "from_offset",
        "until",
        "from_time",
        "to_time",
    }


def test_broker_figure_colours_each_state_the_same_way(tmp_path: Path) -> None:
    frame = _segments(
        broker=[1, 1, 1, 2],
        state=["registered", "in controlled shutdown", "fenced", "unregistered"],
        from_offset=[0, 4, 6, 3],
        to_offset=[4, 6, None, None],
        start_ms=[T0, T0 + 4, T0 + 6, T0 + 3],
        end_ms=[T0 + 4, T0 + 6, T0 + 9, T0 + 9],
    )
    spec = _spec(save(figures.broker_figure(frame), tmp_path / "b.html"))
    assert spec["encoding"]["color"]["scale"]["domain"] == list(figures.BROKER_STATES)
    assert spec["encoding"]["y"]["sort"] == ["broker 1", "broker 2"]
    assert [v["state"] for v in _values(spec)] == list(frame["state"])


def test_config_figure_writes_each_value_on_its_bar(tmp_path: Path) -> None:
    frame = _segments(
        key=["retention.ms", "retention.ms", "cleanup.policy"],
        value=["1000", "2000", "compact"],
        from_offset=[3, 8, 5],
        to_offset=[8, None, None],
        start_ms=[T0, T0 + 8, T0 + 5],
        end_ms=[T0 + 8, T0 + 9, T0 + 9],
    )
    spec = _spec(save(figures.config_figure(frame, "BROKER", ""), tmp_path / "c.html"))
    assert spec["title"]["text"] == "Configs of broker <default>"
    bars, labels = spec["layer"]
    assert labels["mark"]["type"] == "text" and labels["encoding"]["text"]["field"] == "value"
    assert bars["encoding"]["y"]["sort"] == ["cleanup.policy", "retention.ms"]
    assert [(v["key"], v["value"], v["until"]) for v in _values(spec)] == [
        ("retention.ms", "1000", "8"),
        ("retention.ms", "2000", "still current"),
        ("cleanup.policy", "compact", "still current"),
    ]


def test_a_long_history_is_written_whole(tmp_path: Path) -> None:
    # altair refuses frames over 5,000 rows by default; a file is where a long history belongs
    n = 6000
    counts = pd.DataFrame(
        {
            "offset": range(n),
            "timestamp_ms": [T0 + i for i in range(n)],
            "under_replicated": [i % 3 for i in range(n)],
            "offline": [0] * n,
            "partitions": [9] * n,
        }
    )
    assert len(_values(_spec(save(figures.under_replicated_figure(counts), tmp_path / "long.html")))) == 2 * n


def test_the_page_carries_vega_and_loads_nothing(tmp_path: Path) -> None:
    counts = pd.DataFrame(
        {"offset": [0], "timestamp_ms": [T0], "under_replicated": [0], "offline": [0], "partitions": [0]}
    )
    html = save(figures.under_replicated_figure(counts), tmp_path / "page.html").read_text()
    tags = re.sub(r"(<script[^>]*>).*?</script>", r"\1", html, flags=re.S)  # the markup, scripts emptied
    assert not re.search(r"<(script|link|img)[^>]*(src|href)=", tags)  # nothing fetched when opened
    assert "vegaEmbed('#figure'" in html and len(html) > 500_000  # the libraries are in the page


def test_png_and_svg_are_written_and_other_formats_refused(tmp_path: Path) -> None:
    from browser import png_pixels

    counts = pd.DataFrame(
        {
            "offset": [0, 1],
            "timestamp_ms": [T0, T0 + 1],
            "under_replicated": [0, 1],
            "offline": [0, 0],
            "partitions": [1, 1],
        }
    )
    chart = figures.under_replicated_figure(counts)
    pixels = png_pixels(save(chart, tmp_path / "u.png").read_bytes())
    assert pixels.width > 2 * figures.WIDTH  # drawn at twice the chart's size
    assert pixels.colours > 10 and pixels.variance > 50  # lines, labels and a legend, not an empty frame
    svg = ElementTree.parse(save(chart, tmp_path / "u.svg")).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    texts = {t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")}
    assert {"under-replicated", "offline", "partitions"} <= texts
    assert len(list(svg.iter("{http://www.w3.org/2000/svg}path"))) >= 4  # two lines and their points
    with pytest.raises(PlotError, match=r"write \.html, \.png or \.svg"):
        check_output(tmp_path / "u.pdf")


def test_bounds_resources_and_requests_are_parsed_or_refused() -> None:
    assert parse_bound("120") == Bound(offset=120, text="120")
    assert parse_bound("2023-11-14T22:13:20Z").time_ms == T0
    assert parse_bound("2023-11-14T22:13:20").time_ms == T0  # no zone: UTC, the axes' zone
    assert parse_bound("2023-11-14T23:13:20.5+01:00").time_ms == T0 + 500
    for bad, text in (("-3", "cannot be negative"), ("yesterday", "neither an offset nor an ISO-8601 time")):
        with pytest.raises(PlotError, match=text):
            parse_bound(bad)
    assert parse_resource("topic:orders") == ("TOPIC", "orders")
    assert parse_resource("Broker:") == ("BROKER", "")
    assert parse_resource("broker:1") == ("BROKER", "1")
    for bad in ("orders", "table:x", ":x"):
        with pytest.raises(PlotError, match="expected TYPE:NAME"):
            parse_resource(bad)
    PlotRequest("partition", topic="t", partition=0).check()
    for request, text in (
        (PlotRequest("partition", topic="t"), "needs --topic and --partition"),
        (PlotRequest("configs"), "needs --resource"),
        (PlotRequest("pie"), "unknown plot kind"),
        (PlotRequest("brokers", start=Bound(offset=9), end=Bound(offset=3)), "above --to"),
        (
            PlotRequest("brokers", start=Bound(time_ms=9, text="b"), end=Bound(time_ms=3, text="a")),
            "--from b is after --to a",
        ),
    ):
        with pytest.raises(PlotError, match=text):
            request.check()


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["partition", "--topic", "t"], "plot partition needs --topic and --partition"),
        (["configs", "--resource", "table:x"], "expected TYPE:NAME"),
        (["brokers", "--from", "yesterday"], "neither an offset nor an ISO-8601 time"),
        (["brokers", "--from", "9", "--to", "3"], "--from 9 is above --to 3"),
        (["brokers", "--out", "b.pdf"], "write .html, .png or .svg"),
        (["brokers"], "is not a kraftlake warehouse"),
    ],
)
def test_the_command_refuses_before_spark_starts(
    args: list[str],
    text: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jobs.plot
    from kraftlake.cli import main

    def no_spark(*_: object) -> None:
        raise AssertionError("a session was started for a request refused by its arguments")

    monkeypatch.setattr(jobs.plot, "session", no_spark)
    try:
        code = main(["plot", "--warehouse", str(tmp_path / "nowhere"), *args])
    except SystemExit as exc:  # argparse's refusal
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and text in errors[0], err
    assert not (tmp_path / "nowhere").exists()


def test_the_figure_modules_never_import_pyspark() -> None:
    code = (
        "import sys, kraftlake.plot, kraftlake.plot.figures, kraftlake.plot.output, kraftlake.plot.options\n"
        "print(','.join(sorted(k for k in sys.modules if k.split('.')[0] in ('pyspark', 'delta', 'py4j'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
