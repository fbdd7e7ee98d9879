"""Reading a Delta table's live rows without Spark: a snapshot of the table (:func:`.rewrite.snapshot`: its
newest complete classic checkpoint, single file or in parts, then the JSON commits after it, ``remove``\\s
applied), the files a filter cannot match skipped by their ``add`` statistics, the others read with pyarrow,
the filter pushed down to their row groups' statistics, and each file's deletion vector applied.

The filter is a conjunction of :class:`Bound`\\s: one comparison of a column with a constant, optionally also true
where the column is NULL (``to_offset IS NULL OR to_offset > N``, the validity range of a history table). That is
what a file's ``minValues``/``maxValues``/``nullCount`` can answer, and what a pyarrow expression can.

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

    def expression(self) -> pc.Expression:
        field = pc.field(self.column)
        value = pc.scalar(self.value)
        compared = {
            "==": field == value,
            "<": field < value,
            "<=": field <= value,
            ">": field > value,
            ">=": field >= value,
        }[self.op]
        return compared | field.is_null() if self.or_null else compared

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


def _read_one(
    snap: Snapshot, add: dict[str, Any], columns: list[str] | None, where: pc.Expression | None
) -> pa.Table:
    path = _data_file(snap, add)
    dv = add.get("deletionVector")
    try:
        if not dv:
            # the filter goes to pyarrow's dataset reader: row groups whose statistics exclude it are not read
            return pq.read_table(path, columns=columns, filters=where)
        rows = pq.read_table(path, columns=columns)
    except FileNotFoundError:
        raise DeltaAppendError(f"{path}: a live data file of the table is missing") from None
    except (OSError, pa.ArrowException) as exc:
        raise DeltaAppendError(f"{path}: cannot read the data file: {exc}") from exc
    # row positions count the whole file: the vector is applied before the filter
    deleted = deleted_rows(snap.path, dv)
    if len(deleted) and int(deleted.max()) >= rows.num_rows:
        raise DeltaAppendError(
            f"{path}: its deletion vector marks row {int(deleted.max())} of {rows.num_rows}"
        )
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[deleted.astype(np.int64)] = False
    rows = rows.filter(pa.array(keep))
    return rows if where is None else rows.filter(where)


def read_rows(
    snap: Snapshot, schema: pa.Schema, bounds: tuple[Bound, ...] = (), columns: list[str] | None = None
) -> pa.Table:
    """The live rows of ``snap`` that satisfy every one of ``bounds``, as a table of ``schema`` (its fields, or
    those named in ``columns``, in that order; a file lacking a nullable column reads it as NULL)."""
    wanted = pa.schema([schema.field(c) for c in columns]) if columns is not None else schema
    where = None
    for b in bounds:
        where = b.expression() if where is None else where & b.expression()
    parts = []
    for add in snap.files.values():
        stats = stats_of(add)
        if stats is not None and not all(b.may_match(stats) for b in bounds):
            continue
        parts.append(_conform(_read_one(snap, add, None, where), wanted, _data_file(snap, add)))
    if not parts:
        return wanted.empty_table()
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
