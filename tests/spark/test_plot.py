"""``kraftlake plot``: the data behind each figure against the oracle, and the HTML files it writes.

One warehouse per module, ingested from a seeded synthetic log in two slices without folding the closes (so the
frames must read the history through the pending closes, as while a stream runs). The log holds ISR shrinks,
offline partitions (leader -1), leader changes, fencing, controlled shutdown, unregistration and config changes.
Every frame is checked at every offset of its range against ``kraftlake.image.image_at`` (the pure-Python
replay): a step line's count at N is the last point at or before N; the Gantt segments covering N are the
image's leader / ISR members / broker states / config values at N, and each segment starts where the image
changed (runs are merged as far as they go, no further).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kraftlake.image import MetadataImage, image_at
from kraftlake.image.render import CONFIG_RESOURCE_TYPES
from kraftlake.image.source import log_records
from kraftlake.plot.options import Bound
from kraftlake.sim.workloads.entities import write_synthetic_log

pytestmark = pytest.mark.spark

SEED, STEPS = 55, 120  # a log of ~200 records holding every change the figures draw (checked below)


@dataclass
class Built:
    log_dir: Path
    warehouse: Path
    images: dict[int, MetadataImage]
    stamps: dict[int, int]
    last: int


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Built:
    from kraftlake.spark.tables.fold import pending_closes
    from pipelines.ingest import ingest

    root = tmp_path_factory.mktemp("plot")
    log_dir = write_synthetic_log(root / "log", seed=SEED, steps=STEPS)
    warehouse = root / "warehouse"
    records = list(log_records(log_dir))
    ingest(spark, log_dir, warehouse, batch_records=len(records) // 2 + 1, fold=False)
    assert pending_closes(spark, warehouse) > 0  # the history is read through pending closes
    last = records[-1].offset
    return Built(
        log_dir,
        warehouse,
        {n: image_at(log_dir, n) for n in range(last + 1)},
        {r.offset: r.timestamp for r in records},
        last,
    )


def _partition(image: MetadataImage, topic: str, index: int) -> tuple[str, Any] | None:
    tid = image.topic_ids.get(topic)
    if tid is None:
        return None
    p = image.topics_by_id[tid].partitions.get(index)
    return None if p is None else (tid, p)


def _broker_states(image: MetadataImage) -> dict[int, str]:
    return {
        b.id: "fenced" if b.fenced else "in controlled shutdown" if b.in_controlled_shutdown else "registered"
        for b in image.brokers.values()
    }


def _covering(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    to = frame["to_offset"]
    return frame[(frame["from_offset"] <= n) & (to.isna() | (to > n))]


def _check_clipped(frame: pd.DataFrame, b: Built, lo: int, hi: int) -> None:
    """Each segment is drawn from the time of max(from, lo) to that of min(to, hi) (hi while still open)."""
    for row in frame.itertuples():
        end = hi if pd.isna(row.to_offset) or row.to_offset > hi else int(row.to_offset)
        assert row.start_ms == b.stamps[max(int(row.from_offset), lo)], row
        assert row.end_ms == b.stamps[end], row
        assert row.from_offset <= hi and (pd.isna(row.to_offset) or row.to_offset > lo), row


def _busiest_partition(b: Built) -> tuple[str, int]:
    """The partition whose leader changed most in the log, preferring one that went offline."""
    changes: dict[tuple[str, int], list[int]] = {}
    for n in range(1, b.last + 1):
        before, after = b.images[n - 1], b.images[n]
        for topic in after.topics_by_id.values():
            for index, p in topic.partitions.items():
                prev = _partition(before, topic.name, index)
                if prev is not None and prev[0] == topic.id and prev[1].leader != p.leader:
                    changes.setdefault((topic.name, index), []).append(p.leader)
    return max(changes, key=lambda k: (-1 in changes[k], len(changes[k]), k))


def test_the_log_holds_what_the_figures_draw(built: Built) -> None:
    images = built.images.values()
    assert any(
        len(p.isr) < len(p.replicas)
        for i in images
        for t in i.topics_by_id.values()
        for p in t.partitions.values()
    )
    assert any(p.leader == -1 for i in images for t in i.topics_by_id.values() for p in t.partitions.values())
    states = {s for i in images for s in _broker_states(i).values()}
    assert states == {"registered", "fenced", "in controlled shutdown"}
    assert len({len(i.brokers) for i in images}) > 2  # registrations and unregistrations
    assert (
        sum(1 for n in range(1, built.last + 1) if built.images[n].configs != built.images[n - 1].configs) > 5
    )


def test_under_replicated_counts_equal_the_image_at_every_offset(spark: Any, built: Built) -> None:
    from pipelines.plots import resolve_range, under_replicated

    whole = None
    for start, end in ((None, None), (Bound(offset=built.last // 3), Bound(offset=2 * built.last // 3))):
        rng = resolve_range(spark, built.warehouse, start, end)
        frame = under_replicated(spark, built.warehouse, rng)
        whole = frame if whole is None else whole
        assert frame["offset"].is_monotonic_increasing and frame["offset"].is_unique
        assert (frame["offset"].iloc[0], frame["offset"].iloc[-1]) == (rng.lo, rng.hi)
        assert list(frame["timestamp_ms"]) == [built.stamps[o] for o in frame["offset"]]
        for n in range(rng.lo, rng.hi + 1):
            row = frame[frame["offset"] <= n].iloc[-1]
            parts = [p for t in built.images[n].topics_by_id.values() for p in t.partitions.values()]
            expected = (
                sum(len(p.isr) < len(p.replicas) for p in parts),
                sum(p.leader == -1 for p in parts),
                len(parts),
            )
            assert (row.under_replicated, row.offline, row.partitions) == expected, n
        # a point only where something changed (the ends aside)
        inner = frame.iloc[1:-1]
        before = frame.shift(1).iloc[1:-1]
        cols = ["under_replicated", "offline", "partitions"]
        assert ((inner[cols].to_numpy() != before[cols].to_numpy()).any(axis=1)).all()
    assert whole is not None and whole["under_replicated"].max() > 0 and whole["offline"].max() > 0


def test_leader_and_isr_segments_equal_the_image(spark: Any, built: Built) -> None:
    from pipelines.plots import partition_segments, resolve_range

    topic, index = _busiest_partition(built)
    rng = resolve_range(spark, built.warehouse)
    frame = partition_segments(spark, built.warehouse, topic, index, rng)
    leaders, members = frame[frame["role"] == "leader"], frame[frame["role"] == "isr"]
    assert (leaders["broker"] == -1).any() and leaders["broker"].nunique() >= 3
    for n in range(rng.lo, rng.hi + 1):
        now = _partition(built.images[n], topic, index)
        lead, isr = _covering(leaders, n), _covering(members, n)
        if now is None:
            assert lead.empty and isr.empty, n
        else:
            assert list(lead["broker"]) == [now[1].leader], n
            assert sorted(isr["broker"]) == sorted(now[1].isr), n
    for row in frame.itertuples():  # each segment starts where the image changed
        if row.from_offset == 0:
            continue
        before = _partition(built.images[row.from_offset - 1], topic, index)
        after = _partition(built.images[row.from_offset], topic, index)
        assert after is not None
        held = (
            before is not None
            and before[0] == after[0]
            and (before[1].leader == row.broker if row.role == "leader" else row.broker in before[1].isr)
        )
        assert not held, row
    _check_clipped(frame, built, rng.lo, rng.hi)


def test_broker_states_equal_the_image(spark: Any, built: Built) -> None:
    from pipelines.plots import broker_segments, resolve_range

    rng = resolve_range(spark, built.warehouse, Bound(offset=5), None)
    frame = broker_segments(spark, built.warehouse, rng)
    assert set(frame["state"]) == {"registered", "fenced", "in controlled shutdown", "unregistered"}
    seen: set[int] = {b for n in range(rng.lo + 1) for b in built.images[n].brokers}
    for n in range(rng.lo, rng.hi + 1):
        now = _broker_states(built.images[n])
        seen |= set(now)
        cover = _covering(frame, n)
        assert not cover["broker"].duplicated().any(), n
        got = dict(zip(cover["broker"], cover["state"], strict=True))
        assert {b: s for b, s in got.items() if s != "unregistered"} == now, n
        # unregistered: a broker registered once, absent from the image now
        assert {b for b, s in got.items() if s == "unregistered"} == seen - set(now), n
    for row in frame.itertuples():
        if row.from_offset > 0:
            before = _broker_states(built.images[row.from_offset - 1]).get(row.broker, "unregistered")
            assert before != row.state, row
    _check_clipped(frame, built, rng.lo, rng.hi)
    one = broker_segments(spark, built.warehouse, rng, broker=int(frame["broker"].iloc[0]))
    assert set(one["broker"]) == {frame["broker"].iloc[0]}
    assert len(one) == (frame["broker"] == frame["broker"].iloc[0]).sum()


def test_config_segments_equal_the_image(spark: Any, built: Built) -> None:
    from pipelines.plots import busiest_config_resource, config_segments, resolve_range

    resource = busiest_config_resource(built.warehouse, "default")
    assert resource is not None
    rtype = next(k for k, v in CONFIG_RESOURCE_TYPES.items() if v == resource[0])
    rng = resolve_range(spark, built.warehouse)
    frame = config_segments(spark, built.warehouse, *resource, rng)
    assert len(frame) >= 5 and frame["to_offset"].notna().any()
    for n in range(rng.lo, rng.hi + 1):
        cover = _covering(frame, n)
        assert dict(zip(cover["key"], cover["value"], strict=True)) == dict(
            built.images[n].configs.get((rtype, resource[1]), {})
        ), n
    _check_clipped(frame, built, rng.lo, rng.hi)


def test_a_range_by_time_is_the_offsets_at_those_times(spark: Any, built: Built) -> None:
    from kraftlake.spark.tables.layout import WarehouseError
    from pipelines.plots import resolve_range

    a, b = built.last // 4, built.last // 2
    rng = resolve_range(
        spark, built.warehouse, Bound(time_ms=built.stamps[a] + 1), Bound(time_ms=built.stamps[b])
    )
    # the state at a time is the one at the last record at or before it
    assert rng.lo == max(o for o, t in built.stamps.items() if t <= built.stamps[a] + 1)
    assert rng.hi == max(o for o, t in built.stamps.items() if t <= built.stamps[b])
    assert (rng.lo_ms, rng.hi_ms) == (built.stamps[rng.lo], built.stamps[rng.hi])
    assert resolve_range(spark, built.warehouse, Bound(time_ms=0)).lo == 0
    with pytest.raises(WarehouseError, match="past the warehouse's last offset"):
        resolve_range(spark, built.warehouse, None, Bound(offset=built.last + 1, text=str(built.last + 1)))
    with pytest.raises(WarehouseError, match="before the warehouse's first record"):
        resolve_range(spark, built.warehouse, None, Bound(time_ms=0, text="1970-01-01"))


def _spec(path: Path) -> dict[str, Any]:
    """The Vega-Lite spec a figure's page holds (``kraftlake.plot.output.figure_html``'s JSON script)."""
    match = re.search(
        r'<script type="application/json" id="figure-spec">(.*?)</script>', path.read_text(), re.S
    )
    assert match is not None
    spec = json.loads(match.group(1))
    assert isinstance(spec, dict)
    return spec


def test_the_overview_writes_html_files_holding_each_chart_and_its_data(
    spark: Any, built: Built, tmp_path: Path
) -> None:
    """What ``make run`` writes: one figure per kind, each file holding its Vega-Lite spec and the frame."""
    from pipelines.plots import write_overview

    results = write_overview(built.warehouse, tmp_path / "plots")
    assert sorted(r.kind for r in results) == ["brokers", "configs", "partition", "under-replicated"]
    for result in results:
        assert result.path.parent == tmp_path / "plots"
        spec = _spec(result.path)
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v6")
        (values,) = spec["datasets"].values()
        layers = spec.get("layer", [spec])
        if result.kind == "under-replicated":
            assert spec["mark"]["interpolate"] == "step-after"
            assert len(values) == 2 * len(result.data)  # under-replicated and offline, per point
            assert sorted({v["offset"] for v in values}) == list(result.data["offset"])
        else:
            assert len(values) == len(result.data)
            assert sorted(v["from_offset"] for v in values) == sorted(result.data["from_offset"])
            assert {layer["mark"]["type"] for layer in layers} <= {"bar", "text"}
            assert layers[0]["encoding"]["x2"]["field"] == "end"
        tips = layers[0]["encoding"]["tooltip"]
        assert any("offset" in t["field"] for t in tips)  # offsets on hover
        assert layers[0]["encoding"]["x"]["scale"]["type"] == "utc"


@pytest.mark.slow
@pytest.mark.browser
def test_the_overview_figures_draw_in_a_browser_offline(spark: Any, built: Built, tmp_path: Path) -> None:
    """``make run``'s figures opened from their files in headless Chromium with no network: Vega drew marks
    (bars or the step lines' points) and the x axis's labels never repeat. Slow: the four figures built by
    Spark, then each page opened by a headless Chromium process of its own, which runs the page's scripts."""
    from browser import dump_dom

    from pipelines.plots import write_overview

    for result in write_overview(built.warehouse, tmp_path / "plots"):
        dom = dump_dom(result.path)
        assert ">figure not drawn" not in dom, result.kind
        shapes = re.findall(r'<g class="mark-(?:rect|symbol) role-mark[^"]*"[^>]*>(.*?)</g>', dom, re.S)
        assert sum(len(re.findall(r"<path\b", g)) for g in shapes) >= len(result.data) // 2, result.kind
        axis = re.search(r'<g class="mark-text role-axis-label"[^>]*>(.*?)</g>', dom, re.S)
        assert axis is not None, result.kind
        labels = re.findall(r"<text[^>]*>([^<]*)</text>", axis.group(1))
        assert len(labels) >= 2 and len(set(labels)) == len(labels), (result.kind, labels)


def test_the_command_writes_the_file_and_refuses_what_it_cannot(
    spark: Any, built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kraftlake.cli import main

    out = tmp_path / "b.html"
    assert (
        main(
            [
                "plot",
                "--warehouse",
                str(built.warehouse),
                "brokers",
                "--broker",
                "1",
                "--from",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert str(out) in capsys.readouterr().out and _spec(out)["datasets"]
    assert (
        main(
            [
                "plot",
                "--warehouse",
                str(built.warehouse),
                "partition",
                "--topic",
                "nope",
                "--partition",
                "0",
                "--out",
                str(tmp_path / "p.html"),
            ]
        )
        == 2
    )
    assert "partition nope-0 does not exist" in capsys.readouterr().err
    assert (
        main(
            [
                "plot",
                "--warehouse",
                str(built.warehouse),
                "under-replicated",
                "--to",
                str(built.last + 5),
                "--out",
                str(tmp_path / "u.html"),
            ]
        )
        == 2
    )
    assert f"past the warehouse's last offset {built.last}" in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists() and not (tmp_path / "u.html").exists()


@pytest.mark.slow
def test_the_frames_read_without_a_jvm_equal_sparks(spark: Any, built: Built, tmp_path: Path) -> None:
    """Each figure's frame from the Delta tables read without Spark (``kraftlake.warehouse.plot_frames``, the
    pending closes applied) equals Spark's, over the whole log and a range by time; the range and its refusals
    too; and the command draws without importing pyspark. Slow: six frames built by Spark (each from queries
    over the history tables and the pending closes) beside the same read without a JVM, then the command run
    in a Python subprocess that lists what it imported."""
    from test_cli_startup import _imports

    from kraftlake.plot.frames import figure_data
    from kraftlake.plot.options import PlotError, PlotRequest
    from kraftlake.spark.tables.layout import WarehouseError as SparkWarehouseError
    from kraftlake.warehouse import plot_frames
    from kraftlake.warehouse.tables import Warehouse, WarehouseError
    from pipelines.plots import SparkFrames, busiest_config_resource, resolve_range

    topic, index = _busiest_partition(built)
    resource = busiest_config_resource(built.warehouse, "default")
    assert resource is not None
    whole = [
        PlotRequest("under-replicated"),
        PlotRequest("partition", topic=topic, partition=index),
        PlotRequest("brokers"),
        PlotRequest("configs", resource=resource),
    ]
    third = built.last // 3
    # a range by time inside the log: every segment clipped at both ends, a broker alone
    middle = [PlotRequest("under-replicated"), PlotRequest("brokers", broker=1)]
    between = (Bound(time_ms=built.stamps[third] + 1), Bound(time_ms=built.stamps[2 * third]))
    spark_frames = SparkFrames(spark, built.warehouse)
    for (start, end), requests in (((None, None), whole), (between, middle)):
        theirs = resolve_range(spark, built.warehouse, start, end)
        wh = Warehouse(built.warehouse)
        mine = plot_frames.resolve_range(wh, start, end)
        assert mine == theirs, (start, end)
        for request in requests:
            expected, _, title = figure_data(spark_frames, request, theirs)
            got, _, same_title = figure_data(plot_frames.WarehouseFrames(wh), request, mine)
            assert not expected.empty and title == same_title
            pd.testing.assert_frame_equal(got, expected, obj=f"{request.kind} {start}..{end}")
    gone = PlotRequest("partition", topic="nope", partition=0)
    rng = plot_frames.resolve_range(Warehouse(built.warehouse))
    with pytest.raises(PlotError, match="partition nope-0 does not exist"):
        figure_data(plot_frames.WarehouseFrames(Warehouse(built.warehouse)), gone, rng)
    past = Bound(offset=built.last + 1, text=str(built.last + 1))
    with pytest.raises(SparkWarehouseError) as spark_refused:
        resolve_range(spark, built.warehouse, None, past)
    with pytest.raises(WarehouseError) as refused:
        plot_frames.resolve_range(Warehouse(built.warehouse), None, past)
    assert str(refused.value) == str(spark_refused.value)
    out = tmp_path / "u.html"
    seen = _imports(["plot", "--warehouse", str(built.warehouse), "under-replicated", "--out", str(out)])
    assert seen["code"] == 0 and seen["printed"] and out.exists()
    assert [m for m in seen["heavy"] if m.split(".")[0] in ("pyspark", "py4j", "delta")] == []
