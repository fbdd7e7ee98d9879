"""Table output: epoch milliseconds get their ISO-8601 UTC time beside them; JSON lines keep the numbers."""

from __future__ import annotations

import io
import json

from pipelines.answers import Answer, format_answer
from pipelines.output import is_epoch_ms_column, with_time, write_rows

ROWS = [
    {"offset": 7, "timestamp": 1_700_000_000_123, "expiration_timestamp": -1, "epoch": 3},
    {"offset": 8, "timestamp": 0, "expiration_timestamp": None, "epoch": 4},
]
COLUMNS = ["offset", "timestamp", "expiration_timestamp", "epoch"]


def test_which_columns_and_values() -> None:
    assert [c for c in [*COLUMNS, "recorded_at_ms", "max_timestamp", "time"] if is_epoch_ms_column(c)] == [
        "timestamp",
        "expiration_timestamp",
        "recorded_at_ms",
        "max_timestamp",
    ]
    assert with_time(1_700_000_000_123) == "1700000000123 (2023-11-14T22:13:20.123Z)"
    assert with_time(0) == "0 (1970-01-01T00:00:00.000Z)"
    assert [with_time(v) for v in (-1, None, True, "x", 10**14)] == ["-1", "NULL", "True", "x", str(10**14)]


def test_table_shows_times_jsonl_does_not() -> None:
    table = io.StringIO()
    write_rows(ROWS, COLUMNS, "table", table)
    lines = [[cell.strip() for cell in line.split(" | ")] for line in table.getvalue().splitlines()]
    assert lines[0] == COLUMNS
    assert lines[2] == ["7", "1700000000123 (2023-11-14T22:13:20.123Z)", "-1", "3"]
    assert lines[3] == ["8", "0 (1970-01-01T00:00:00.000Z)", "NULL", "4"]
    assert lines[4] == ["(2 rows)"]
    jsonl = io.StringIO()
    write_rows(ROWS, COLUMNS, "jsonl", jsonl)
    assert [json.loads(line) for line in jsonl.getvalue().splitlines()] == ROWS


def test_demo_answers_show_times() -> None:
    text = format_answer(Answer("q", "SELECT 1", ["offset", "timestamp"], [(5, 1_700_000_000_000)]))
    assert text.splitlines()[-1] == "   5       1700000000000 (2023-11-14T22:13:20.000Z)"


def test_jsonl_writes_decimals_as_numbers_unless_a_double_would_change_them() -> None:
    from decimal import Decimal

    from pipelines.output import plain

    row = plain(
        {"d": Decimal("1.50"), "tenth": Decimal("0.1"), "big": Decimal("12345678901234567890.123"), "n": None}
    )
    out = io.StringIO()
    write_rows([row], list(row), "jsonl", out)
    assert out.getvalue() == '{"d":1.5,"tenth":0.1,"big":"12345678901234567890.123","n":null}\n'
    assert json.loads(out.getvalue())["tenth"] == 0.1
