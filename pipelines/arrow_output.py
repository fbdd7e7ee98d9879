"""Printing an Arrow table exactly as :func:`pipelines.output.write_rows` prints its rows, with Arrow's string
kernels instead of a Python object per value: an answer of a hundred thousand rows read without a JVM is
printed in a fraction of the time.

Each column becomes the texts of its cells at once: integers and booleans cast, strings JSON-escaped once per
distinct value, lists and structs joined from their values' texts. What has no exact kernel here (floats,
maps, binary, dates, the epoch-millisecond columns of a table) goes through ``write_rows``'s own formatting,
one column at a time. The constants the kernels take are built from their bytes: a Python value handed to
pyarrow makes it import pandas, a third of a second of a cold command.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.output import cell_text, is_epoch_ms_column, plain, write_rows


def _text(value: str) -> pa.Scalar:
    """A string scalar made from its bytes (no Python-to-Arrow conversion)."""
    data = value.encode("utf-8")
    offsets = np.array([0, len(data)], dtype=np.int32)
    array = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])
    return array[0]


def _texts(values: list[str]) -> pa.Array:
    """A string array made from its bytes."""
    data = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(), len(data), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(data))]
    )


def _concat(*parts: pa.Array | pa.Scalar) -> pa.Array:
    """The element-wise concatenation of string arrays and scalars."""
    joined: pa.Array = pc.binary_join_element_wise(*parts, _text(""))
    return joined


class _Style:
    """How one output format writes what is not a plain scalar: the JSON of lists and structs (``jsonl``:
    compact, ``table``: ``json.dumps``'s default separators), and a NULL and a boolean at the top level."""

    def __init__(self, fmt: str) -> None:
        compact = fmt == "jsonl"
        self.item = _text("," if compact else ", ")
        self.key = ":" if compact else ": "
        self.null = _text("null" if compact else "NULL")
        self.true, self.false = ("true", "false") if compact else ("True", "False")


_JSON_NULL = "null"


def _fill(texts: pa.Array, valid: pa.Array | None, null: pa.Scalar) -> pa.Array:
    """``texts`` with ``null`` where ``valid`` is false (or the text itself is null)."""
    if valid is not None:
        texts = pc.if_else(valid, texts, null)
    filled: pa.Array = pc.fill_null(texts, null)
    return filled


def _escaped(values: pa.Array) -> pa.Array:
    """Each string as ``json.dumps`` writes it, each distinct value dumped once."""
    distinct = pc.unique(values)
    dumped = _texts([json.dumps(v) if v is not None else _JSON_NULL for v in distinct.to_pylist()])
    picked: pa.Array = dumped.take(pc.index_in(values, value_set=distinct))
    return picked


def _json(values: pa.Array, style: _Style) -> pa.Array | None:
    """Each value as JSON inside a list or a struct (``json.dumps`` of the Python value); None when a type
    has no exact kernel here."""
    kind = values.type
    null = _text(_JSON_NULL)
    if pa.types.is_integer(kind):
        return _fill(pc.cast(values, pa.string()), None, null)
    if pa.types.is_boolean(kind):
        return _fill(pc.cast(values, pa.string()), None, null)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _fill(_escaped(values), pc.is_valid(values), null)
    if pa.types.is_null(kind):
        return _fill(pc.cast(values, pa.string()), None, null)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _json_list(values, style)
    if pa.types.is_struct(kind):
        return _json_struct(values, style)
    return None


def _json_list(values: pa.Array, style: _Style) -> pa.Array | None:
    """``[a, b]``: the items' JSON joined; a NULL list is ``null``."""
    items = _json(values.values, style)
    if items is None:
        return None
    # the items of the list values alone (a sliced array's offsets start past 0)
    offsets = pc.subtract(values.offsets, values.offsets[0])
    start = values.offsets[0].as_py()
    lists = type(values).from_arrays(offsets, items.slice(start, len(values.values) - start))
    joined = pc.binary_join(lists, style.item)
    return _fill(_concat(_text("["), joined, _text("]")), pc.is_valid(values), _text(_JSON_NULL))


def _json_struct(values: pa.Array, style: _Style) -> pa.Array | None:
    """``{"a": 1}``: each field's name and JSON; a NULL struct is ``null``."""
    parts: list[pa.Array | pa.Scalar] = [_text("{")]
    for i in range(values.type.num_fields):
        field = values.type.field(i)
        texts = _json(values.field(i), style)
        if texts is None:
            return None
        lead = ("" if i == 0 else style.item.as_py()) + json.dumps(field.name) + style.key
        parts += [_text(lead), texts]
    parts.append(_text("}"))
    return _fill(_concat(*parts), pc.is_valid(values), _text(_JSON_NULL))


def _python_texts(values: pa.Array, cell: Callable[[Any], str]) -> pa.Array:
    return _texts([cell(v) for v in values.to_pylist()])


def _cells(values: pa.Array, name: str, fmt: str, style: _Style) -> pa.Array:
    """The cells of one column as ``write_rows`` writes them in ``fmt``."""
    kind = values.type
    if fmt == "jsonl":
        texts = _json(values, style)
        if texts is not None:
            return texts
        return _python_texts(values, lambda v: json.dumps(plain(v), separators=(",", ":")))
    if is_epoch_ms_column(name):
        return _python_texts(values, lambda v: cell_text(plain(v), timed=True))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_struct(kind):
        texts = _json(values, style)
        if texts is not None:
            return _fill(texts, pc.is_valid(values), style.null)
        return _python_texts(values, lambda v: cell_text(plain(v)))
    if pa.types.is_boolean(kind):
        flags = pc.if_else(values, _text(style.true), _text(style.false))
        return _fill(flags, pc.is_valid(values), style.null)
    if pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _fill(pc.cast(values, pa.string()), pc.is_valid(values), style.null)
    return _python_texts(values, lambda v: cell_text(plain(v)))


def _write_lines(lines: pa.Array, out: TextIO) -> None:
    """Write the lines, each ended by a newline: the bytes of the strings' data buffer as they lie, to the
    binary stream under ``out`` when it has one (a terminal, a pipe, a file), else decoded."""
    if len(lines) == 0:
        return
    ended = _concat(lines, _text("\n"))
    offsets = np.frombuffer(ended.buffers()[1], dtype=np.int32, count=len(ended) + 1, offset=ended.offset * 4)
    data = memoryview(ended.buffers()[2])[int(offsets[0]) : int(offsets[-1])]
    binary = getattr(out, "buffer", None)
    if binary is None:
        out.write(bytes(data).decode("utf-8"))
        return
    out.flush()  # what the text layer holds goes first
    binary.write(data)
    binary.flush()


#: Trailing characters ``str.rstrip`` removes that Arrow's ASCII-space trim would keep (a table's last column).
_OTHER_TRAILING_SPACE = r"[\s\x0b\x1c-\x1f\x85\p{Z}]$"


def write_table(table: pa.Table, fmt: str, out: TextIO | None = None) -> None:
    """Write ``table`` (its columns in order) as :func:`pipelines.output.write_rows` writes its rows in ``fmt``
    (``table`` or ``jsonl``)."""
    out = out or sys.stdout
    style = _Style(fmt)
    columns = table.column_names
    cells = [_cells(table.column(c).combine_chunks(), c, fmt, style) for c in columns]
    if fmt == "jsonl":
        if not columns:
            out.write("{}\n" * table.num_rows)
            return
        parts: list[pa.Array | pa.Scalar] = []
        for i, (name, texts) in enumerate(zip(columns, cells, strict=True)):
            parts += [_text(("{" if i == 0 else ",") + json.dumps(name) + ":"), texts]
        parts.append(_text("}"))
        _write_lines(_concat(*parts), out)
        return
    last = cells[-1] if cells else None
    if (
        last is not None
        and len(last)
        and pc.any(pc.match_substring_regex(last, _OTHER_TRAILING_SPACE)).as_py()
    ):
        write_rows(
            [{c: plain(v) for c, v in r.items()} for r in table.to_pylist()], columns, fmt, out
        )  # a trailing space rstrip sees and the trim would not
        return
    widths = [
        max(len(c), pc.max(pc.utf8_length(t)).as_py() or 0) for c, t in zip(columns, cells, strict=True)
    ]
    out.write(" | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    if table.num_rows:
        padded: list[pa.Array | pa.Scalar] = []
        for i, (t, w) in enumerate(zip(cells, widths, strict=True)):
            if i:
                padded.append(_text(" | "))
            padded.append(pc.utf8_rpad(t, width=w, padding=" "))
        _write_lines(pc.utf8_rtrim(_concat(*padded), characters=" "), out)
    n = table.num_rows
    out.write(f"({n} row{'s' if n != 1 else ''})\n")
