"""A section's rows held as columns: the large tables of a report (risk windows, under-replicated runs: hundreds
of thousands of rows in a day of a large cluster) built by column operations and written to JSON as columns,
never as one Python dict a row unless a reader asks for the rows one by one.

:class:`ColumnRows` is a read-only sequence of plain-value dicts (``int``, ``bool``, ``str``, ``None``, lists of
``int``), as the other sections' lists are; :func:`json_lines` writes each row as ``json.dumps`` would write
that dict, one row a line, the whole section's text made by Arrow's string kernels.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from itertools import islice
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Between two rows of a section in the JSON (``render.to_json``'s layout).
ROW_SEPARATOR = ",\n    "
_SEPARATOR = ROW_SEPARATOR.encode()
#: Rows written to JSON at a time (:func:`json_line_pieces`): a few MB of text, so each piece's buffers are
#: reused by the next instead of a section's whole text (hundreds of MB) being made in fresh memory at once.
PIECE_ROWS = 8192
#: Pieces made ahead of the one being written out, with a pool.
AHEAD = 3
#: Pieces :meth:`ColumnRows.encode_ahead` makes before the writer asks for any (tens of MB at most).
HELD_AHEAD = 16


class ColumnRows(Sequence[dict[str, Any]]):
    """Rows whose values are the cells of ``table`` (its column order is the rows' key order)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self._rows: list[dict[str, Any]] | None = None
        self._ahead: _Ahead | None = None

    def encode_ahead(self, columns: Sequence[str], pool: Executor, pieces: int = HELD_AHEAD) -> None:
        """Start writing the first ``pieces`` pieces of the rows' JSON (:func:`json_line_pieces` of ``columns``)
        on ``pool``, while the rest of the report is computed; the next :func:`json_line_pieces` of these
        columns goes on from them."""
        self._ahead = _Ahead(self.table, tuple(columns), pool, pieces)

    @staticmethod
    def of(columns: Mapping[str, pa.Array | np.ndarray | list[Any]]) -> ColumnRows:
        """Rows from named columns of equal length (numpy arrays, Arrow arrays or lists of plain values)."""
        return ColumnRows(pa.table({name: _array(values) for name, values in columns.items()}))

    def rows(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self._rows = self.table.to_pylist()
        return self._rows

    def __len__(self) -> int:
        return int(self.table.num_rows)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            if self._rows is None and (i.step in (None, 1)):
                start, stop, _ = i.indices(len(self))
                part: list[dict[str, Any]] = self.table.slice(start, max(0, stop - start)).to_pylist()
                return part
            return self.rows()[i]
        return self.rows()[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())

    def __add__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*self.rows(), *other]

    def __radd__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*other, *self.rows()]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ColumnRows):
            return self.rows() == other.rows()
        return isinstance(other, list) and self.rows() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ColumnRows({self.table.num_rows} rows: {', '.join(self.table.column_names)})"


def _array(values: pa.Array | pa.ChunkedArray | np.ndarray | list[Any]) -> pa.Array | pa.ChunkedArray:
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values
    if isinstance(values, np.ndarray):
        return pa.array(values)
    return pa.array(values)


def _text(value: str) -> pa.Scalar:
    return pa.scalar(value, pa.large_string())


def _json_values(column: pa.Array) -> pa.Array:
    """Each cell as the JSON ``json.dumps`` writes for it (``null`` for a missing one), as large strings (each
    kernel made to give that type at once: a cast of the result would copy every value again)."""
    t = column.type
    if pa.types.is_null(t):
        return pa.array(["null"] * len(column), pa.large_string())
    if pa.types.is_dictionary(t):
        # each distinct value written once (already, where the dictionary holds JSON texts: _json_ready)
        if pa.types.is_large_binary(t.value_type):
            words = column.dictionary.view(pa.large_string())
        else:
            words = _json_values(column.dictionary)
        text = pc.take(words, column.indices)
    elif pa.types.is_boolean(t):
        text = pc.if_else(column, _text("true"), _text("false"))
    elif pa.types.is_integer(t):
        text = pc.cast(column, pa.large_string())
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        # few distinct names: each encoded once by json itself (its escapes, ASCII only)
        coded = pc.dictionary_encode(column)
        words = pa.array([json.dumps(w) for w in coded.dictionary.to_pylist()], pa.large_string())
        text = pc.take(words, coded.indices)
    elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_integer(t.value_type):
        inner = pc.binary_join(pc.cast(column, pa.list_(pa.large_string())), _text(", "))
        text = pc.binary_join_element_wise(_text("["), inner, _text("]"), _text(""))
    else:
        raise TypeError(f"a {t} column is not written as JSON columns")
    return pc.fill_null(text, _text("null"))


def _separators(n: int) -> pa.Array:
    """:data:`ROW_SEPARATOR` after each of ``n`` rows but the last, made from its bytes."""
    sep = ROW_SEPARATOR.encode()
    offsets = np.minimum(np.arange(n + 1, dtype=np.int64), n - 1) * len(sep)
    data = sep * (n - 1)
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _json_ready(held: pa.Table) -> pa.Table:
    """``held`` with each dictionary column's values replaced by their JSON texts (as large binaries, which no
    other column holds), so that the pieces of its rows each take them instead of writing them again."""
    for i, field in enumerate(held.schema):
        if pa.types.is_dictionary(field.type) and not pa.types.is_large_binary(field.type.value_type):
            column = held.column(i).combine_chunks()
            words = _json_values(column.dictionary).view(pa.large_binary())
            held = held.set_column(i, field.name, pa.DictionaryArray.from_arrays(column.indices, words))
    return held


def json_lines(rows: ColumnRows, columns: Sequence[str]) -> bytes:
    """The rows as ``json.dumps`` writes each as a dict of ``columns`` (a missing column's values ``null``),
    joined by :data:`ROW_SEPARATOR`, as ASCII bytes; empty for no rows (:func:`json_line_pieces` joined)."""
    return b"".join(json_line_pieces(rows, columns))


class _Ahead:
    """Pieces of a table's JSON being written on a pool, in order, and the rows not yet handed to it."""

    def __init__(self, held: pa.Table, names: tuple[str, ...], pool: Executor, pieces: int) -> None:
        self.names, self.pool = names, pool
        self.ready = pool.submit(_json_ready, held)  # first in the pool's queue: before any piece needs it
        self.starts = iter(range(0, held.num_rows, PIECE_ROWS))
        self.made: deque[Future[memoryview]] = deque()
        for start in islice(self.starts, pieces):
            self.made.append(pool.submit(self._piece, start))

    def _piece(self, start: int) -> memoryview:
        return _json_lines(self.ready.result().slice(start, PIECE_ROWS), self.names)

    def pieces(self) -> Iterator[memoryview]:
        """The pieces in order, each one handed out starting the next of the rows left."""
        while self.made:
            text = self.made.popleft().result()
            following = next(self.starts, None)
            if following is not None:
                self.made.append(self.pool.submit(self._piece, following))
            yield text


def json_line_pieces(
    rows: ColumnRows, columns: Sequence[str], pool: Executor | None = None
) -> Iterator[memoryview | bytes]:
    """:func:`json_lines` in pieces to write one after the other: the text of :data:`PIECE_ROWS` rows at a time
    (views of Arrow's buffers) and the separators between them; nothing for no rows. With ``pool``, the next
    :data:`AHEAD` pieces are written on it (Arrow's kernels run without the GIL: a pool of two threads makes
    two at once) while the caller writes out the one before; no more than ``AHEAD + 1`` are held at once. Goes
    on from the pieces :meth:`ColumnRows.encode_ahead` started for these columns (once)."""
    names = tuple(columns)
    ahead, rows._ahead = rows._ahead, None
    if ahead is None or ahead.names != names:
        ahead = None if pool is None else _Ahead(rows.table, names, pool, AHEAD)
    if ahead is None:
        ready = _json_ready(rows.table)
        made: Iterator[memoryview] = (
            _json_lines(ready.slice(start, PIECE_ROWS), names)
            for start in range(0, ready.num_rows, PIECE_ROWS)
        )
    else:
        made = ahead.pieces()
    for k, text in enumerate(made):
        if k:
            yield _SEPARATOR
        yield text


def _json_lines(held: pa.Table, columns: tuple[str, ...]) -> memoryview:
    n = held.num_rows
    if not n:
        return memoryview(b"")
    parts: list[Any] = []
    for k, name in enumerate(columns):
        parts.append(_text(("{" if k == 0 else ", ") + json.dumps(name) + ": "))
        if name in held.column_names:
            parts.append(_json_values(held.column(name).combine_chunks()))
        else:
            parts.append(_text("null"))
    parts.append(_text("}"))
    text = pc.binary_join_element_wise(*parts, _separators(n), _text(""))
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64, count=n + 1, offset=text.offset * 8)
    data = text.buffers()[2]
    assert data is not None
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]
