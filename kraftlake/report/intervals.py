"""Versions as plain rows, grouped per entity, and the two shapes every section is made of: *runs* (consecutive
versions of an entity for which a condition holds, merged) and *changes* (an entity's value before and after
each record of the window that changed it)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

Row = dict[str, Any]


def plain(value: Any) -> Any:
    """A cell as a plain Python value: arrays as tuples (of plain values), NA as None, numpy scalars unwrapped."""
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.dtype.kind in "iub":
        return tuple(value.tolist())
    if isinstance(value, list | tuple | np.ndarray):
        return tuple(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def _plain_column(column: pd.Series) -> list[Any]:
    """A column's cells as plain values (:func:`plain`), the common dtypes converted as a whole."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iub":
        values: list[Any] = column.tolist()
        return values
    if isinstance(column.dtype, pd.api.extensions.ExtensionDtype) and column.dtype.kind in "iub":
        return [None if v is pd.NA else v for v in column.tolist()]
    return [plain(v) for v in column.tolist()]


def rows_of(frame: pd.DataFrame) -> list[Row]:
    """A frame's rows as dicts of plain values."""
    cols = list(frame.columns)
    columns = [_plain_column(frame[c]) for c in cols]
    return [dict(zip(cols, values, strict=True)) for values in zip(*columns, strict=True)]


def by_entity(rows: Sequence[Row], key: Sequence[str]) -> dict[Hashable, list[Row]]:
    """``rows`` grouped by the values of ``key``, each group ordered by ``from_offset``."""
    groups: dict[Hashable, list[Row]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in key), []).append(row)
    for group in groups.values():
        group.sort(key=lambda r: r["from_offset"])
    return groups


def successive(versions: list[Row]) -> Iterator[tuple[Row | None, Row]]:
    """Each version with the one it replaced (None when the entity did not exist just before it)."""
    prev: Row | None = None
    for v in versions:
        yield (prev if prev is not None and prev["to_offset"] == v["from_offset"] else None), v
        prev = v


@dataclass(frozen=True)
class Run:
    """Consecutive versions of one entity for which a condition held: ``[from_offset, to_offset)``
    (``to_offset`` None: still holding), its first and last version."""

    key: Hashable
    from_offset: int
    to_offset: int | None
    first: Row
    last: Row


def runs(groups: dict[Hashable, list[Row]], holds: Callable[[Row], bool]) -> list[Run]:
    """Per entity, the maximal runs of consecutive versions (each starting where the previous ended) for which
    ``holds`` is true."""
    out: list[Run] = []
    for key, versions in groups.items():
        start: Row | None = None
        last: Row | None = None
        for v in versions:
            if holds(v):
                if start is not None and last is not None and last["to_offset"] == v["from_offset"]:
                    last = v
                    continue
                if start is not None and last is not None:
                    out.append(Run(key, start["from_offset"], last["to_offset"], start, last))
                start = last = v
            elif start is not None and last is not None:
                out.append(Run(key, start["from_offset"], last["to_offset"], start, last))
                start = last = None
        if start is not None and last is not None:
            out.append(Run(key, start["from_offset"], last["to_offset"], start, last))
    return out


def in_window(run: Run, lo: int, hi: int) -> bool:
    """Whether a run holds at some offset of ``[lo, hi]``."""
    return run.from_offset <= hi and (run.to_offset is None or run.to_offset > lo)


@dataclass(frozen=True)
class Change:
    """An entity's value before and after the record at ``offset`` (None: it did not exist)."""

    key: Hashable
    offset: int
    before: Row | None
    after: Row | None


def changes(
    groups: dict[Hashable, list[Row]], lo: int, hi: int, value: Callable[[Row], Any] | None = None
) -> list[Change]:
    """The records of ``[lo, hi]`` that created, changed or removed each entity: a version starting there
    (with the one it replaced, if any) or a version ending there with none after it. With ``value``, a new
    version whose value equals the one it replaced is no change."""
    out: list[Change] = []
    for key, versions in groups.items():
        starts = {v["from_offset"] for v in versions}
        for prev, v in successive(versions):
            at = v["from_offset"]
            if lo <= at <= hi and (prev is None or value is None or value(prev) != value(v)):
                out.append(Change(key, at, prev, v))
        for v in versions:
            end = v["to_offset"]
            if end is not None and lo <= end <= hi and end not in starts:
                out.append(Change(key, end, v, None))
    out.sort(key=lambda c: (c.offset, str(c.key)))
    return out
