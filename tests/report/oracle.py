"""What each report section must say, from the image replayed record by record (the oracle): states per offset,
runs as maximal spans of consecutive offsets, changes as differences between the image before and after a
record. Independent of the history builder's versions that the report is computed from."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from kraftlake.history.rows import keyed_rows
from kraftlake.image import EMPTY, MetadataImage, replay
from kraftlake.records.envelope import MetadataRecord

State = dict[Hashable, dict[str, Any]]


def states(
    records: Iterable[MetadataRecord], hi: int, tables: tuple[str, ...]
) -> list[tuple[int, dict[str, State]]]:
    """The entities of ``tables`` after each record up to ``hi`` (offset, {table: {key: row}}), from offset 0."""
    image: MetadataImage = EMPTY
    out = []
    for rec in records:
        if rec.offset > hi:
            break
        image = replay(image, rec)
        rows = keyed_rows(image)
        out.append((rec.offset, {t: {k: dict(r) for k, r in rows[t]} for t in tables}))
    return out


def run_spans(
    seq: list[tuple[int, dict[str, State]]],
    table: str,
    label: Callable[[dict[str, Any]], str | None],
    lo: int,
    hi: int,
) -> set[tuple[Hashable, str, int, int | None]]:
    """Maximal spans of consecutive offsets in which an entity's ``label`` stayed the same (not None), that hold
    at some offset of ``[lo, hi]``: (key, label, first offset (``lo`` if earlier), first offset after (None if
    past ``hi``))."""
    open_: dict[tuple[Hashable, str], int] = {}
    out: set[tuple[Hashable, str, int, int | None]] = set()
    for offset, tables in seq:
        now = {(k, lab) for k, row in tables[table].items() if (lab := label(row)) is not None}
        for key in list(open_):
            if key not in now:
                start = open_.pop(key)
                if offset > lo:
                    out.add((key[0], key[1], start, offset))
        for key in now:
            open_.setdefault(key, offset)
    for (k, lab), start in open_.items():
        out.add((k, lab, start, None))
    # seen through the window: a span that began before it starts at lo
    return {(k, lab, max(f, lo), t) for k, lab, f, t in out if f <= hi}


def value_changes(
    seq: list[tuple[int, dict[str, State]]],
    table: str,
    value: Callable[[dict[str, Any]], Any],
    lo: int,
    hi: int,
) -> list[tuple[int, Hashable, Any, Any]]:
    """(offset, key, before, after) for each record of ``[lo, hi]`` that created, removed or changed the value
    of an entity of ``table`` (None: absent)."""
    out = []
    prev: State = {}
    for offset, tables in seq:
        now = tables[table]
        if lo <= offset <= hi:
            for key in set(prev) | set(now):
                b = value(prev[key]) if key in prev else None
                a = value(now[key]) if key in now else None
                if (key in prev) != (key in now) or b != a:
                    out.append((offset, key, b, a))
        prev = now
    return sorted(out, key=lambda c: (c[0], str(c[1])))


def transitions(
    seq: list[tuple[int, dict[str, State]]], table: str, lo: int, hi: int
) -> list[tuple[int, Hashable, dict[str, Any], dict[str, Any]]]:
    """(offset, key, row before, row after) for each record of ``[lo, hi]`` that changed an entity that existed
    before and after it."""
    out = []
    prev: State = {}
    for offset, tables in seq:
        now = tables[table]
        if lo <= offset <= hi:
            for key in set(prev) & set(now):
                if prev[key] != now[key]:
                    out.append((offset, key, prev[key], now[key]))
        prev = now
    return out
