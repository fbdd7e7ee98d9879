"""A picture's frame as the plain records altair's data transformer makes of it, made by column.

Altair turns a chart's DataFrame into records by sanitizing a copy (every integer boxed, every time formatted by
``Timestamp.isoformat`` one at a time) and ``DataFrame.to_dict``: for the report's counts picture, tens of
thousands of rows, that is most of the time the page takes beyond the Markdown. :func:`plain_values` makes the
same records from the frame's columns, for the column types the report's pictures hold (int64, nullable
integers, strings, times in UTC); :func:`with_plain_values` hands them to the chart as its inline values, so the
spec altair writes is the one it wrote from the frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

_NULLABLE_INTS = {"Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64"}


def _utc_texts(column: pd.Series) -> list[str] | None:
    """``Timestamp.isoformat`` of each time (``""`` for a missing one), or None where a time is not on a whole
    microsecond or before 1970 (written otherwise, left to altair)."""
    naive = column.dt.tz_localize(None).to_numpy()
    missing = np.isnat(naive)
    micros = naive.astype("datetime64[us]")
    if (micros != naive)[~missing].any():
        return None
    count = micros.astype(np.int64)
    if (count[~missing] < 0).any():
        return None
    seconds = np.datetime_as_string(micros.astype("datetime64[s]"), unit="s").tolist()
    fraction = (count % 1_000_000).tolist()
    return [
        "" if gone else (f"{s}.{f:06d}+00:00" if f else f"{s}+00:00")
        for s, f, gone in zip(seconds, fraction, missing.tolist(), strict=True)
    ]


def _column_values(column: pd.Series) -> list[Any] | None:
    """The cells altair writes for ``column``, or None for a column type not made here."""
    dtype = column.dtype
    name = str(dtype)
    if name in _NULLABLE_INTS:
        held = column.notna().to_numpy()
        ints = column.fillna(0).to_numpy(dtype=np.int64).tolist()
        return [v if ok else None for v, ok in zip(ints, held.tolist(), strict=True)]
    if name == "datetime64[ns, UTC]" or (name.startswith("datetime64[") and name.endswith(", UTC]")):
        return _utc_texts(column)
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        values: list[Any] = column.to_numpy().tolist()
        return values
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        cells: list[Any] = column.tolist()
        if all(type(c) is str or c is None for c in cells):
            return cells
    return None


def plain_values(frame: pd.DataFrame) -> list[dict[str, Any]] | None:
    """``frame``'s rows as the records altair's default data transformer makes of them (keys in column order),
    or None where a column is of a type not made here."""
    if not all(type(c) is str for c in frame.columns) or isinstance(frame.index, pd.MultiIndex):
        return None
    columns = []
    for name in frame.columns:
        values = _column_values(frame[name])
        if values is None:
            return None
        columns.append(values)
    names = list(frame.columns)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


def with_plain_values(chart: Any) -> Any:
    """``chart`` (an altair chart over a DataFrame) over the inline records :func:`plain_values` makes of its
    frame instead; as it is when the frame holds a column of another type."""
    frame = getattr(chart, "data", None)
    if isinstance(frame, pd.DataFrame):
        values = plain_values(frame)
        if values is not None:
            chart.data = {"values": values}
    return chart
