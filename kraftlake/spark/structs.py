"""Spark StructTypes derived from ``schemas/``: one per record type and the ``metadata_log`` row."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from kraftlake.records.layout import ENVELOPE_COLUMNS, record_column, record_specs

_PRIMITIVES: dict[str, T.DataType] = {
    "int": T.IntegerType(),
    "long": T.LongType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
    "string": T.StringType(),
    "bytes": T.BinaryType(),
}


def _spark_type(avro_type: Any, named: dict[str, T.DataType], ns: str) -> tuple[T.DataType, bool]:
    if isinstance(avro_type, list):
        t, _ = _spark_type(next(b for b in avro_type if b != "null"), named, ns)
        return t, "null" in avro_type
    if isinstance(avro_type, str):
        if avro_type in _PRIMITIVES:
            return _PRIMITIVES[avro_type], False
        return named[avro_type if "." in avro_type else f"{ns}.{avro_type}"], False
    if avro_type["type"] == "array":
        item, item_nullable = _spark_type(avro_type["items"], named, ns)
        return T.ArrayType(item, containsNull=item_nullable), False
    inner_ns = avro_type.get("namespace", ns)
    fields = []
    for f in avro_type["fields"]:
        t, nullable = _spark_type(f["type"], named, inner_ns)
        fields.append(T.StructField(f["name"], t, nullable=nullable))
    st = T.StructType(fields)
    named[f"{inner_ns}.{avro_type['name']}"] = st
    return st, False


def record_struct_type(name: str) -> T.StructType:
    """The StructType of one record type (Kafka's class name)."""
    for s in record_specs():
        if s.name == name:
            return _spark_type(s.avro, {}, "")[0]  # type: ignore[return-value]
    raise KeyError(name)


def metadata_log_struct_type() -> T.StructType:
    """The StructType of a ``metadata_log`` row."""
    fields = [T.StructField(n, _PRIMITIVES[t], nullable=nullable) for n, t, nullable in ENVELOPE_COLUMNS]
    fields += [
        T.StructField(record_column(s), record_struct_type(s.name), nullable=True) for s in record_specs()
    ]
    return T.StructType(fields)
