"""A history table's versions as readers see them, kept as Arrow tables: the pending closes of a running stream
(``closes``, not yet folded into the tables) applied to the versions still open, with Arrow's kernels, so that
an answer of a hundred thousand rows never becomes Python objects.

A close is matched to a version by its entity key as ``closes.key`` stores it (:func:`key_texts`); the
rows looked at in Python are only the open versions whose key has a pending close, none once they are folded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kraftlake.delta.scan import Bound
from kraftlake.history import ENTITIES
from kraftlake.warehouse.tables import CLOSES, KEY_SEP, Warehouse


def key_texts(rows: pa.Table, table: str) -> pa.Array:
    """Each row's entity key of ``table`` as ``closes.key`` holds it (:func:`.tables.close_key`)."""
    keys = ENTITIES[table].key
    if not keys:
        empty = np.zeros(rows.num_rows + 1, dtype=np.int32)
        return pa.Array.from_buffers(
            pa.string(), rows.num_rows, [None, pa.py_buffer(empty.tobytes()), pa.py_buffer(b"")]
        )
    texts = [pc.cast(rows.column(k), pa.string()).combine_chunks() for k in keys]
    if len(texts) == 1:
        return texts[0]
    joined: pa.Array = pc.binary_join_element_wise(*texts, _text(KEY_SEP))
    return joined


def _text(value: str) -> pa.Scalar:
    """A string scalar made from its bytes (a Python value handed to pyarrow makes it import pandas)."""
    data = value.encode("utf-8")
    offsets = np.array([0, len(data)], dtype=np.int32)
    array = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])
    return array[0]


def pending_closes(wh: Warehouse, table: str, at_most: int | None = None) -> dict[str, list[int]]:
    """Every pending close's ``to_offset`` per key of ``table`` (those up to ``at_most``)."""
    bounds = [Bound("entity", "==", table)]
    if at_most is not None:
        bounds.append(Bound("to_offset", "<=", at_most))
    rows = wh.read(CLOSES, tuple(bounds), columns=["key", "to_offset"])
    out: dict[str, list[int]] = {}
    for key, to in zip(rows.column("key").to_pylist(), rows.column("to_offset").to_pylist(), strict=True):
        out.setdefault(key, []).append(int(to))
    return out


def _closed_candidates(
    rows: pa.Table, table: str, closes: dict[str, list[int]]
) -> list[tuple[int, str, int]]:
    """(row index, key, from_offset) of the open rows whose key has a pending close."""
    if not closes or rows.num_rows == 0:
        return []
    # Python lists, not to_numpy: pyarrow's conversion to numpy imports pandas
    is_open = pc.is_null(rows.column("to_offset")).to_pylist()
    keys = key_texts(rows, table).to_pylist()
    starts = rows.column("from_offset").to_pylist()
    return [(i, keys[i], int(starts[i])) for i, unset in enumerate(is_open) if unset and keys[i] in closes]


def versions(
    wh: Warehouse, table: str, bounds: tuple[Bound, ...] = (), columns: list[str] | None = None
) -> pa.Table:
    """The versions of ``table`` satisfying ``bounds`` (``columns`` of them, and ``from_offset``,
    ``to_offset``), each still open one ending at the first pending close of its key after its ``from_offset``
    (:func:`kraftlake.spark.tables.queries.history_query`)."""
    keys = list(ENTITIES[table].key)
    wanted = None if columns is None else list(dict.fromkeys([*columns, *keys, "from_offset", "to_offset"]))
    rows = wh.read(table, bounds, columns=wanted)
    ends: dict[int, int] = {}
    closes = pending_closes(wh, table)
    for i, key, start in _closed_candidates(rows, table, closes):
        later = [x for x in closes[key] if x > start]
        if later:
            ends[i] = min(later)
    if not ends:
        return rows
    to = rows.column("to_offset").to_pylist()
    for i, end in ends.items():
        to[i] = end
    at = rows.schema.get_field_index("to_offset")
    return rows.set_column(at, rows.schema.field(at), pa.array(to, rows.schema.field(at).type))


def state_rows(wh: Warehouse, table: str, at: int, columns: list[str] | None = None) -> pa.Table:
    """The versions of ``table`` valid at offset ``at``: ``from_offset <= at < to_offset``, a still open one
    left out when a pending close of its key lies in ``(from_offset, at]``."""
    bounds = (Bound("from_offset", "<=", at), Bound("to_offset", ">", at, or_null=True))
    keys = list(ENTITIES[table].key)
    wanted = None if columns is None else list(dict.fromkeys([*columns, *keys, "from_offset", "to_offset"]))
    rows = wh.read(table, bounds, columns=wanted)
    closes = pending_closes(wh, table, at)
    dropped = [
        i for i, key, start in _closed_candidates(rows, table, closes) if _ended(closes[key], start, at)
    ]
    if not dropped:
        return rows
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[dropped] = False
    return rows.filter(_bools(keep))


def _ended(closes: list[int], start: int, at: int) -> bool:
    return any(start < x <= at for x in closes)


def _bools(values: np.ndarray[Any, Any]) -> pa.Array:
    bits = np.packbits(values.astype(bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits.tobytes())])
