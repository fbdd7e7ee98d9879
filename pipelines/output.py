"""Printing query results: an aligned text table or JSON lines.

In tables an epoch-milliseconds column (``timestamp``, ``*_timestamp``, ``*_ms``: Kafka's record and token
times, the retention table's) shows its ISO-8601 UTC time beside the number; JSON lines keep the number alone.
"""

from __future__ import annotations

import base64
import json
import sys
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def plain(value: Any) -> Any:
    """A value of a row as JSON holds it: structs as dicts, lists, bytes as base64, times as ISO-8601."""
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, Decimal):
        return decimal_json(value)
    return value


def decimal_json(value: Decimal) -> float | str:
    """A DECIMAL as a JSON number when a double holds it exactly as written (``1.50`` as ``1.5``), else as a
    string of its digits: a JSON reader parses numbers as doubles, which would change the value silently."""
    number = float(value)
    return number if value.is_finite() and Decimal(repr(number)) == value else str(value)


#: Epoch milliseconds from 1970 up to the year 5138: below, a -1 "never" or a count, above, not milliseconds.
_MS_RANGE = range(0, 10**14)


def is_epoch_ms_column(name: str) -> bool:
    """Whether a column by this name holds epoch milliseconds."""
    low = name.lower()
    return low == "timestamp" or low.endswith(("_timestamp", "_ms", "timestamp_ms"))


def with_time(value: Any) -> str:
    """An epoch-milliseconds value as ``1700000000123 (2023-11-14T22:13:20.123Z)``; anything else (NULL, -1,
    not an integer) as ``str`` would print it."""
    if isinstance(value, int) and not isinstance(value, bool) and value in _MS_RANGE:
        moment = datetime.fromtimestamp(value // 1000, UTC)
        return f"{value} ({moment:%Y-%m-%dT%H:%M:%S}.{value % 1000:03d}Z)"
    return "NULL" if value is None else str(value)


def rows_of(df: DataFrame) -> list[dict[str, Any]]:
    return [plain(r.asDict(recursive=False)) for r in df.collect()]


def cell_text(value: Any, timed: bool = False) -> str:
    """A value of a row (:func:`rows_of`) as a table's cell: lists and structs as JSON, epoch milliseconds of a
    ``timed`` column with their time, NULL."""
    if isinstance(value, list | dict):
        return json.dumps(value)
    if timed:
        return with_time(value)
    return "NULL" if value is None else str(value)


def write_rows(rows: list[dict[str, Any]], columns: list[str], fmt: str, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up at call time, so redirect_stdout works
    if fmt == "jsonl":
        for r in rows:
            out.write(json.dumps(r, separators=(",", ":")) + "\n")
        return
    timed = {c for c in columns if is_epoch_ms_column(c)}
    cells = [[cell_text(r[c], c in timed) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    out.write(" | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write(" | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def print_frame(df: DataFrame, fmt: str, out: TextIO | None = None) -> None:
    write_rows(rows_of(df), df.columns, fmt, out)
