"""``pipelines.arrow_output.write_table`` prints an Arrow table character for character as
``pipelines.output.write_rows`` prints the same rows (the answers without a JVM print through it), in both
formats, on the values its kernels build and on those it hands to ``write_rows``'s formatting."""

from __future__ import annotations

import io
import subprocess
import sys

import pyarrow as pa
import pytest

from pipelines.arrow_output import write_table
from pipelines.output import plain, write_rows

STRUCT = pa.struct([("host", pa.string()), ("port", pa.int32()), ("secure", pa.bool_())])

TABLE = pa.table(
    {
        "id": pa.array([1, None, -3, 2**40], pa.int64()),
        "small": pa.array([1, 2, None, -8], pa.int8()),
        "name": pa.array(['a"b\\c', None, "é\n\tz", ""]),
        "fenced": pa.array([True, None, False, True]),
        "isr": pa.array([[1, 2], None, [None, 3], []], pa.list_(pa.int32())),
        "dirs": pa.array([["x", 'q"'], [], None, ["ü"]], pa.list_(pa.string())),
        "endpoints": pa.array(
            [[{"host": "h", "port": 9092, "secure": False}], None, [None], []], pa.list_(STRUCT)
        ),
        "one": pa.array([{"host": None, "port": None, "secure": True}, None, None, None], STRUCT),
        "timestamp": pa.array([1_700_000_000_123, -1, None, 10**15], pa.int64()),
        "ratio": pa.array([1.5, None, 1e20, -0.0]),
        "raw": pa.array([b"\x00\x01", None, b"", b"z"]),
        "last": pa.array(["z  ", "", None, "w"]),
    }
)


def _rows_printed(table: pa.Table, fmt: str) -> str:
    out = io.StringIO()
    write_rows([{k: plain(v) for k, v in r.items()} for r in table.to_pylist()], table.column_names, fmt, out)
    return out.getvalue()


def _printed(table: pa.Table, fmt: str) -> str:
    out = io.StringIO()
    write_table(table, fmt, out)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["table", "jsonl"])
def test_every_kind_of_column_prints_as_write_rows_prints_it(fmt: str) -> None:
    for table in (TABLE, TABLE.slice(1, 2), TABLE.slice(0, 0), TABLE.select(["id"]), TABLE.select(["name"])):
        assert _printed(table, fmt) == _rows_printed(table, fmt), table.column_names
    chunked = pa.concat_tables([TABLE.slice(0, 2), TABLE.slice(2)])
    assert _printed(chunked, fmt) == _rows_printed(TABLE, fmt)


def test_a_trailing_space_that_rstrip_removes_is_printed_as_write_rows_prints_it() -> None:
    table = pa.table({"a": pa.array([1, 2]), "b": pa.array(["x\u00a0", "y\x1f"])})
    assert _printed(table, "table") == _rows_printed(table, "table")


def test_printing_builds_no_python_values_for_arrow() -> None:
    """A Python value converted by pyarrow imports pandas (a third of a second of a cold command)."""
    probe = (
        "import sys, io, numpy as np, pyarrow as pa\n"
        "from pipelines.arrow_output import write_table\n"
        "ints = pa.Array.from_buffers(pa.int64(), 3, [None, pa.py_buffer(np.arange(3).tobytes())])\n"
        "lists = pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), 4, [None, "
        "pa.py_buffer(np.array([0, 1, 3, 3], dtype=np.int32).tobytes())]), ints)\n"
        "texts = pa.compute.cast(ints, pa.string())\n"
        "t = pa.Table.from_arrays([ints, lists, texts], names=['id', 'isr', 'name'])\n"
        "for fmt in ('table', 'jsonl'):\n"
        "    write_table(t, fmt, io.StringIO())\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False", done.stderr
