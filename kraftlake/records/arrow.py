"""Arrow schemas derived from ``schemas/``: one struct per record type and the ``metadata_log`` row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import pyarrow as pa

from kraftlake.protocol.spec import MessageSpec, load_all
from kraftlake.records.layout import ENVELOPE_COLUMNS, record_column, record_specs

_PRIMITIVES: dict[str, pa.DataType] = {
    "int": pa.int32(),
    "long": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}


def _arrow_type(avro_type: Any, named: dict[str, pa.DataType], namespace: str) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of an Avro type."""
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        t, _ = _arrow_type(branches[0], named, namespace)
        return t, "null" in avro_type
    if isinstance(avro_type, str):
        if avro_type in _PRIMITIVES:
            return _PRIMITIVES[avro_type], False
        return named[avro_type if "." in avro_type else f"{namespace}.{avro_type}"], False
    kind = avro_type["type"]
    if kind == "array":
        item, item_nullable = _arrow_type(avro_type["items"], named, namespace)
        return pa.list_(pa.field("element", item, nullable=item_nullable)), False
    if kind == "record":
        ns = avro_type.get("namespace", namespace)
        t = pa.struct([_arrow_field(f, named, ns) for f in avro_type["fields"]])
        named[f"{ns}.{avro_type['name']}"] = t
        return t, False
    raise TypeError(f"unsupported Avro type {avro_type!r}")


def _arrow_field(avro_field: dict[str, Any], named: dict[str, pa.DataType], namespace: str) -> pa.Field:
    t, nullable = _arrow_type(avro_field["type"], named, namespace)
    return pa.field(avro_field["name"], t, nullable=nullable)


@cache
def record_struct(name: str) -> pa.StructType:
    """The Arrow struct of one record type (by Kafka's class name)."""
    spec = _spec(name)
    t, _ = _arrow_type(spec.avro, {}, "")
    return t


def _spec(name: str) -> MessageSpec:
    for s in load_all():
        if s.name == name:
            return s
    raise KeyError(name)


@cache
def metadata_log_schema() -> pa.Schema:
    """The Arrow schema of a ``metadata_log`` row."""
    fields = [pa.field(n, _PRIMITIVES[t], nullable=nullable) for n, t, nullable in ENVELOPE_COLUMNS]
    fields += [pa.field(record_column(s), record_struct(s.name), nullable=True) for s in record_specs()]
    return pa.schema(fields)


@cache
def _record_columns() -> tuple[tuple[str, pa.StructType], ...]:
    """(class name, Arrow struct) of every record column, in schema order."""
    return tuple((s.name, record_struct(s.name)) for s in record_specs())


def record_batch(records: Sequence[Any]) -> pa.RecordBatch:
    """``MetadataRecord`` s as one Arrow record batch with :func:`metadata_log_schema`.

    Built column by column: each record column is one ``pa.array`` over the typed records themselves, which
    are tuples in the struct's field order (nested structs and arrays too, a test keeps it so), so Arrow reads
    them positionally in C. Per-row dicts (:func:`~kraftlake.records.layout.to_row`) cost ~60x more.
    """
    schema = metadata_log_schema()
    n = len(records)
    arrays: list[pa.Array] = [
        pa.array([getattr(r, name) for r in records], type=schema.field(name).type)
        for name, _, _ in ENVELOPE_COLUMNS
    ]
    by_type: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        if r.record is not None:
            by_type.setdefault(r.type, []).append(i)
    for name, struct in _record_columns():
        at = by_type.get(name)
        if not at:
            arrays.append(pa.nulls(n, struct))
            continue
        values: list[Any] = [None] * n
        for i in at:
            values[i] = records[i].record
        arrays.append(pa.array(values, type=struct))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def to_table(records: Iterable[Any]) -> pa.Table:
    """``MetadataRecord`` s as an Arrow table with :func:`metadata_log_schema`."""
    return pa.Table.from_batches([record_batch(list(records))], schema=metadata_log_schema())
