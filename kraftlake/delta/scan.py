"""Reading a Delta table's live rows without Spark: a snapshot of the table (:func:`.rewrite.snapshot`: its
newest complete classic checkpoint, single file or in parts, then the JSON commits after it, ``remove``\\s
applied), the files a filter cannot match skipped by their ``add`` statistics, the others read with pyarrow,
the filter pushed down to their row groups' statistics, and each file's deletion vector applied.

The filter is a conjunction of :class:`Bound`\\s: one comparison of a column with a constant, optionally also true
where the column is NULL (``to_offset IS NULL OR to_offset > N``, the validity range of a history table). That is
what a file's ``minValues``/``maxValues``/``nullCount`` can answer, and a row group's Parquet statistics.

A table whose protocol asks a reader for more than this (column mapping, a reader feature other than deletion
vectors, partition columns, a v2 checkpoint) raises :class:`~.append.Unsupported` before any data file is
read; a log or a file that cannot be read (a commit cut short, a data file gone) raises
:class:`~.append.DeltaAppendError` naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kraftlake.delta.append import DeltaAppendError, Unsupported
from kraftlake.delta.deletion_vectors import deleted_rows
from kraftlake.delta.rewrite import Snapshot, snapshot, stats_of

#: Reader features whose tables read the same with this reader: deletion vectors are applied; a vacuum
#: protocol check and timestamps without a time zone change nothing for a reader of Parquet.
READER_FEATURES = frozenset({"deletionVectors", "vacuumProtocolCheck", "timestampNtz"})
_OPS = ("==", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Bound:
    """``column op value``, and also true where ``column`` is NULL when ``or_null``."""

    column: str
    op: str
    value: Any
    or_null: bool = False

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"comparison {self.op!r} is not one of {_OPS}")

    def may_match(self, stats: dict[str, Any]) -> bool:
        """Whether a file of these statistics may hold a matching row (True when they do not tell)."""
        records = stats.get("numRecords")
        nulls = (stats.get("nullCount") or {}).get(self.column)
        if self.or_null and (nulls is None or nulls > 0):
            return True
        if records is not None and nulls is not None and nulls >= records:
            return False  # every value NULL: no comparison holds
        low = (stats.get("minValues") or {}).get(self.column)
        high = (stats.get("maxValues") or {}).get(self.column)
        if low is None or high is None or isinstance(low, dict | list) or isinstance(high, dict | list):
            return True
        try:
            return bool(
                {
                    "==": low <= self.value <= high,
                    "<": low < self.value,
                    "<=": low <= self.value,
                    ">": high > self.value,
                    ">=": high >= self.value,
                }[self.op]
            )
        except TypeError:
            return True


def check_readable(snap: Snapshot) -> None:
    """Raise :class:`~.append.Unsupported` when reading ``snap``'s files as Parquet would not give its rows."""
    protocol, metadata = snap.protocol, snap.metadata
    reader = int(protocol.get("minReaderVersion", 1))
    if reader >= 3:
        extra = set(protocol.get("readerFeatures") or ()) - READER_FEATURES
        if extra:
            raise Unsupported(f"{snap.path}: reader features {sorted(extra)} are not read without Spark")
    config = metadata.get("configuration") or {}
    if config.get("delta.columnMapping.mode", "none") != "none":
        raise Unsupported(f"{snap.path}: column mapping is not read without Spark")
    if metadata.get("partitionColumns"):
        raise Unsupported(f"{snap.path}: partition columns are not read without Spark")


def table_snapshot(path: str | Path) -> Snapshot:
    """The live files of the Delta table at ``path``, checked readable (:func:`check_readable`)."""
    snap = snapshot(path)
    check_readable(snap)
    return snap


def _data_file(snap: Snapshot, add: dict[str, Any]) -> Path:
    rel = unquote(add["path"])
    if ":" in rel or rel.startswith("/"):
        raise Unsupported(f"{snap.path}: {add['path']} is not a path inside the table")
    return snap.path / rel


def matching_row_groups(meta: pq.FileMetaData, bounds: tuple[Bound, ...]) -> list[int]:
    """The row groups of a file whose statistics do not exclude ``bounds`` (all without statistics)."""
    leaf = {meta.schema.column(j).path: j for j in range(meta.num_columns)}
    keep = []
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        stats: dict[str, Any] = {
            "numRecords": group.num_rows,
            "minValues": {},
            "maxValues": {},
            "nullCount": {},
        }
        for b in bounds:
            j = leaf.get(b.column)
            s = None if j is None else group.column(j).statistics
            if s is None:
                continue
            if s.has_null_count:
                stats["nullCount"][b.column] = s.null_count
            if s.has_min_max:
                stats["minValues"][b.column], stats["maxValues"][b.column] = s.min, s.max
        if all(b.may_match(stats) for b in bounds):
            keep.append(i)
    return keep


# pyarrow converts a Python value (pa.scalar, pa.array, an expression) only after asking pandas about it, and
# that imports pandas: a third of a second of a cold command's two. The few values a filter compares with are
# built from their bytes instead.


def _buffer_scalar(data_type: pa.DataType, buffers: list[Any]) -> pa.Scalar:
    return pa.Array.from_buffers(data_type, 1, [None, *buffers])[0]


def _scalar(value: Any, data_type: pa.DataType) -> pa.Scalar:
    """``value`` as a pyarrow scalar of ``data_type`` (an integer or a string type)."""
    if pa.types.is_integer(data_type) and isinstance(value, int) and not isinstance(value, bool):
        kind = "int" if pa.types.is_signed_integer(data_type) else "uint"
        number = np.array([value], dtype=f"{kind}{data_type.bit_width}")
        return _buffer_scalar(data_type, [pa.py_buffer(number.tobytes())])
    if pa.types.is_string(data_type) and isinstance(value, str):
        text = value.encode("utf-8")
        offsets = np.array([0, len(text)], dtype=np.int32)
        return _buffer_scalar(data_type, [pa.py_buffer(offsets.tobytes()), pa.py_buffer(text)])
    raise Unsupported(f"a filter comparing {data_type} with {value!r} is not read without Spark")


def _bools(values: np.ndarray) -> pa.Array:
    """A numpy array of booleans as a pyarrow one."""
    bits = np.packbits(values.astype(bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits.tobytes())])


_FALSE = _bools(np.zeros(1, dtype=bool))[0]


def _mask(rows: pa.Table, bounds: tuple[Bound, ...]) -> pa.Array | None:
    """Where ``rows`` satisfy every one of ``bounds`` (None: no bound)."""
    compare = {
        "==": pc.equal,
        "<": pc.less,
        "<=": pc.less_equal,
        ">": pc.greater,
        ">=": pc.greater_equal,
    }
    mask = None
    for b in bounds:
        column = rows.column(b.column)
        this = pc.fill_null(compare[b.op](column, _scalar(b.value, column.type)), _FALSE)
        if b.or_null:
            this = pc.or_(this, pc.is_null(column))
        mask = this if mask is None else pc.and_(mask, this)
    return mask


def _read_one(
    snap: Snapshot, add: dict[str, Any], bounds: tuple[Bound, ...], columns: list[str] | None = None
) -> pa.Table:
    """A live file's rows that satisfy ``bounds``: the row groups their statistics exclude left unread, the
    rows its deletion vector marks dropped (row positions count the whole file), then the filter. With
    ``columns``, only those (of the file's) and the filter's are read, the strings the filter does not compare
    as dictionaries (each distinct value decoded once; :func:`_conform` casts the rows kept)."""
    path = _data_file(snap, add)
    try:
        file = pq.ParquetFile(path)
        groups = matching_row_groups(file.metadata, bounds)
        if columns is None:
            rows = file.read_row_groups(groups)
        else:
            held = file.schema_arrow
            wanted = [c for c in dict.fromkeys([*columns, *(b.column for b in bounds)]) if c in held.names]
            compared = {b.column for b in bounds}
            texts = [c for c in wanted if c not in compared and pa.types.is_string(held.field(c).type)]
            if texts:
                file = pq.ParquetFile(path, read_dictionary=texts)
            rows = file.read_row_groups(groups, columns=wanted)
    except FileNotFoundError:
        raise DeltaAppendError(f"{path}: a live data file of the table is missing") from None
    except (OSError, pa.ArrowException) as exc:
        raise DeltaAppendError(f"{path}: cannot read the data file: {exc}") from exc
    dv = add.get("deletionVector")
    if dv:
        deleted = deleted_rows(snap.path, dv)
        total = file.metadata.num_rows
        if len(deleted) and int(deleted.max()) >= total:
            raise DeltaAppendError(f"{path}: its deletion vector marks row {int(deleted.max())} of {total}")
        sizes = [file.metadata.row_group(i).num_rows for i in range(file.metadata.num_row_groups)]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        positions = (
            np.concatenate([np.arange(starts[i], starts[i] + sizes[i], dtype=np.int64) for i in groups])
            if groups
            else np.zeros(0, dtype=np.int64)
        )
        rows = rows.filter(_bools(~np.isin(positions, deleted.astype(np.int64))))
    mask = _mask(rows, bounds)
    return rows if mask is None else rows.filter(mask)


def read_rows(
    snap: Snapshot, schema: pa.Schema, bounds: tuple[Bound, ...] = (), columns: list[str] | None = None
) -> pa.Table:
    """The live rows of ``snap`` that satisfy every one of ``bounds``, as a table of ``schema`` (its fields, or
    those named in ``columns``, in that order; a file lacking a nullable column reads it as NULL)."""
    wanted = pa.schema([schema.field(c) for c in columns]) if columns is not None else schema
    parts = []
    for add in snap.files.values():
        stats = stats_of(add)
        if stats is not None and not all(b.may_match(stats) for b in bounds):
            continue
        rows = _read_one(snap, add, bounds, [f.name for f in wanted])
        parts.append(_conform(rows, wanted, _data_file(snap, add)))
    if not parts:
        return pa.Table.from_arrays([pa.nulls(0, f.type) for f in wanted], schema=wanted)
    return pa.concat_tables(parts)


def _conform(rows: pa.Table, schema: pa.Schema, path: Path) -> pa.Table:
    """``rows`` with ``schema``'s columns in its order (cast: Spark and pyarrow name list items differently)."""
    arrays = []
    for field in schema:
        if field.name in rows.column_names:
            column = rows.column(field.name)
            try:
                arrays.append(column if column.type == field.type else column.cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise DeltaAppendError(
                    f"{path}: column {field.name} is {column.type}, the table's schema says {field.type}"
                ) from exc
        elif field.nullable:
            arrays.append(pa.nulls(rows.num_rows, field.type))
        else:
            raise DeltaAppendError(f"{path}: the data file has no column {field.name}")
    return pa.Table.from_arrays(arrays, schema=schema)


_PRIMITIVES = {
    "boolean": pa.bool_(),
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


def _arrow_type(where: Path, spark_type: Any) -> pa.DataType:
    if isinstance(spark_type, str):
        if spark_type in _PRIMITIVES:
            return _PRIMITIVES[spark_type]
        if spark_type.startswith("decimal("):
            precision, scale = spark_type[len("decimal(") : -1].split(",")
            return pa.decimal128(int(precision), int(scale))
    elif isinstance(spark_type, dict):
        kind = spark_type.get("type")
        if kind == "array":
            return pa.list_(_arrow_type(where, spark_type["elementType"]))
        if kind == "map":
            return pa.map_(
                _arrow_type(where, spark_type["keyType"]), _arrow_type(where, spark_type["valueType"])
            )
        if kind == "struct":
            return pa.struct(_fields(where, spark_type))
    raise Unsupported(f"{where}: column type {spark_type!r} is not read without Spark")


def _fields(where: Path, struct: dict[str, Any]) -> list[pa.Field]:
    return [
        pa.field(f["name"], _arrow_type(where, f["type"]), bool(f.get("nullable", True)))
        for f in struct.get("fields", [])
    ]


def arrow_schema(snap: Snapshot) -> pa.Schema:
    """The table's schema (its ``metaData.schemaString``) as a ``pyarrow.Schema``."""
    try:
        struct = json.loads(snap.metadata["schemaString"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DeltaAppendError(f"{snap.path}: the table's metaData has no readable schema: {exc}") from exc
    return pa.schema(_fields(snap.path, struct))
