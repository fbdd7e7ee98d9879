"""``kraftlake report --warehouse`` (read without Spark) says what ``--log-dir`` says of the same log: every
section's rows, for the whole log and windows inside it, by offset and by time; and refuses in one line what
the warehouse does not hold."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kraftlake.cli import main
from kraftlake.image.source import log_records


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", *args, "--format", "json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def test_warehouse_report_equals_the_log_dirs(
    risk_warehouse: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    log_dir, wh = risk_warehouse
    records = list(log_records(log_dir))
    last = records[-1].offset
    windows = [
        ["--from", "0"],
        ["--from", str(last // 3), "--to", str(2 * last // 3)],
        ["--from", _iso(records[last // 2].timestamp), "--to", _iso(records[-1].timestamp)],
    ]
    found = set()
    for window in windows:
        mine = _report(capsys, "--warehouse", str(wh), *window)
        theirs = _report(capsys, "--log-dir", str(log_dir), *window)
        assert mine["window"] == theirs["window"]
        for a, b in zip(mine["sections"], theirs["sections"], strict=True):
            assert a["rows"] == b["rows"], (window, a["key"])
            found |= {a["key"]} if a["rows"] else set()
    assert {"risk", "brokers", "availability", "elections", "isr", "topics", "configs"} <= found, found


@pytest.mark.slow
def test_each_sections_sql_gives_its_rows(spark: Any, risk_warehouse: tuple[Path, Path]) -> None:
    """The SQL a section shows, run through Spark over the warehouse's functions, gives that section's rows
    (the columns the SQL has: offsets, keys, values; times and durations come from the offsets table). Slow:
    the SQL of each of the 14 sections run through Spark for two windows: 28 Spark queries."""
    from warehouse_states import plain

    from kraftlake.report.sections import build_report
    from kraftlake.report.warehouse import report_input
    from udfs.sql import register

    log_dir, wh = risk_warehouse
    register(spark, wh)
    last = max(r.offset for r in log_records(log_dir))
    compared = set()
    for lo, hi in ((0, last), (last // 3, 2 * last // 3)):
        report = build_report(report_input(wh, str(lo), str(hi)))
        for section in report.sections:
            rows = [{k: plain(v) for k, v in r.asDict().items()} for r in spark.sql(section.sql).collect()]
            columns = list(rows[0]) if rows else []
            assert set(columns) <= set(section.columns), (section.key, columns)
            mine = [{c: plain(r[c]) for c in columns} for r in section.rows]
            key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
            assert sorted(rows, key=key) == sorted(mine, key=key), section.key
            if rows:
                compared.add(section.key)
    assert {"risk", "brokers", "availability", "elections", "isr", "topics", "configs"} <= compared, compared


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--from", "-1"], "an offset cannot be negative"),
        (["--to", "999999"], "holds offsets"),
        (["--from", "2099-01-01T00:00:00Z"], "the window holds no record"),
        (["--cluster", "nope"], "no cluster 'nope' in the warehouse"),
    ],
)
def test_refusals(
    risk_warehouse: tuple[Path, Path], capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    _, wh = risk_warehouse
    capsys.readouterr()
    assert main(["report", "--warehouse", str(wh), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kraftlake report: error:") and says in err and "\n" not in err, err
