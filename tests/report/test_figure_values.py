"""The pictures' records made by column are the ones altair's data transformer makes of the same frame, and the
report's figures' specs are the ones altair writes from their frames."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from kraftlake.plot import figures
from kraftlake.plot.output import spec
from kraftlake.report.figure_values import plain_values, with_plain_values
from kraftlake.report.from_log import input_from_records
from kraftlake.report.pictures import availability_counts, broker_segments
from kraftlake.sim.cluster import ClusterSimConfig, ClusterSimulator


def _altair_values(frame: pd.DataFrame) -> list[dict[str, Any]]:
    with alt.data_transformers.disable_max_rows():
        values: list[dict[str, Any]] = alt.data_transformers.get()(frame)["values"]
    return values


def test_every_column_type_written_as_altair_writes_it() -> None:
    ms = pd.Series([1_702_425_606_530, 1_702_425_606_000, None, 0, 1_702_425_606_001], dtype="Int64")
    frame = pd.DataFrame(
        {
            "n": pd.Series([1, -2, 3, 2**40, 0], dtype="int64"),
            "maybe": ms,
            "small": pd.Series([1, None, 3, 4, None], dtype="Int32"),
            "text": ["a", None, 'quote "', "\u00e9", ""],
            "at": pd.to_datetime(ms, unit="ms", utc=True),
            "at_ns": pd.to_datetime(ms, unit="ms", utc=True).astype("datetime64[ns, UTC]"),
        }
    )
    made = plain_values(frame)
    assert made == _altair_values(frame)
    assert made is not None and [type(v) for v in made[0].values()] == [
        type(v) for v in _altair_values(frame)[0].values()
    ]
    assert (
        made[0]["at"] == "2023-12-13T00:00:06.530000+00:00" and made[1]["at"] == "2023-12-13T00:00:06+00:00"
    )
    assert made[2]["at"] == "" and made[2]["maybe"] is None


def test_a_column_of_another_type_is_left_to_altair() -> None:
    for frame in (
        pd.DataFrame({"x": [1.5, 2.0]}),
        pd.DataFrame({"x": ["a", 1]}),
        pd.DataFrame({"x": pd.to_datetime([1_000, 2_000], unit="ms")}),  # naive: local time to altair
        pd.DataFrame({"x": pd.to_datetime([1, 2_000], unit="ns", utc=True)}),  # below a microsecond
    ):
        assert plain_values(frame) is None
        chart = alt.Chart(frame).mark_point().encode(x="x:Q")
        assert with_plain_values(chart).data is frame


def test_the_report_figures_specs_are_altairs() -> None:
    sim = ClusterSimulator(
        ClusterSimConfig(brokers=5, topics=6, partitions_per_topic=3, events=800, seed=3, check_every=0)
    )
    sim.run()
    records = list(sim.log.records)
    data = input_from_records(records, records[-1].offset // 4, records[-1].offset)
    charts = [
        lambda: figures.broker_figure(broker_segments(data), subtitle="s"),
        lambda: figures.under_replicated_figure(availability_counts(data), subtitle="s"),
    ]
    for make in charts:
        plain = with_plain_values(make())
        assert isinstance(plain.data, dict) and len(plain.data["values"]) > 5
        assert spec(plain) == spec(make())


def test_counts_picture_holds_the_partitions_in_force_at_each_offset() -> None:
    sim = ClusterSimulator(
        ClusterSimConfig(brokers=5, topics=6, partitions_per_topic=3, events=800, seed=5, check_every=0)
    )
    sim.run()
    records = list(sim.log.records)
    data = input_from_records(records, records[-1].offset // 3, records[-1].offset)
    lo, hi = data.window.lo, data.window.hi
    versions = data.versions["partitions"]
    start = versions["from_offset"].to_numpy(dtype="int64")
    end = versions["to_offset"].astype("Int64").fillna(hi + 1).to_numpy(dtype="int64")
    under = [len(i or ()) < len(r or ()) for i, r in zip(versions["isr"], versions["replicas"], strict=True)]
    offline = (versions["leader"] == -1).to_numpy()

    def at(offset: int) -> tuple[int, int, int]:
        held = (start <= offset) & (offset < end)
        return int((held & under).sum()), int((held & offline).sum()), int(held.sum())

    counts = availability_counts(data)
    shown = dict(zip(counts["offset"], counts.itertuples(index=False), strict=True))
    assert {lo, hi} <= set(shown) and len(shown) > 10
    last = None
    for offset in range(lo, hi + 1):
        now = at(offset)
        if offset in shown:
            row = shown[offset]
            assert (row.under_replicated, row.offline, row.partitions) == now
            assert row.timestamp_ms == data.time_of(offset)
        else:
            assert now == last, offset  # a count changes only at an offset the picture shows
        last = now
