"""Arrow UDFs over ``metadata_log``'s record bytes: ``decode_record`` and ``kafka_json``.

Both take the columns that say what a value is and the value itself, as ``metadata_log`` holds them:
``(is_control, api_key, raw)``. A metadata record's ``raw`` is its whole value (frame version, apiKey and
version, then the body), so it carries its own version; a control record's ``raw`` is the body alone, which
Kafka reads at version 0, and ``api_key`` holds its control type (ABORT and COMMIT markers have no body: the
UDFs give null for them, as for a null ``raw``).

- ``decode_record(is_control, api_key, raw)``: the typed record as a struct with one field per record type,
  named and typed as ``metadata_log``'s record columns (the Spark types derived from ``schemas/``, a record
  type without fields as ``STRUCT<present BOOLEAN>``); only the record's own field is set.
- ``kafka_json(is_control, api_key, raw)``: the JSON text ``kafka-dump-log --cluster-metadata-decoder`` prints
  for the record: ``{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{...}}`` for a metadata record, the
  object after the label (``LeaderChange: {...}``) for a control record.

They run vectorised: Spark hands each call an Arrow batch, and the result is built as one Arrow array.
:func:`register_udfs` registers both for a session (local or Spark Connect); ``udfs.sql.register`` does it
beside the table functions. Python UDFs cannot be stored in a catalog, so each session registers them (``kraftlake
sql`` on a server: in its Connect session when the query names one, :func:`pipelines.serve.connect_session`);
JDBC clients of ``kraftlake serve`` and the permanent functions of ``kraftlake functions`` go without them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.functions import arrow_udf
from pyspark.sql.pandas.types import to_arrow_type

from kraftlake.logformat.batch import ControlRecordType
from kraftlake.protocol.codec import decode_body
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.control import CONTROL_BODY_VERSION, control_spec
from kraftlake.protocol.errors import ProtocolError
from kraftlake.protocol.spec import MessageSpec
from kraftlake.records.errors import RecordDecodeError
from kraftlake.records.kafka_json import data_writer
from kraftlake.records.layout import ENVELOPE_COLUMNS, record_column
from kraftlake.records.serde import decode_metadata_record, spec_by_name
from kraftlake.spark.tables.layout import PRESENT, log_table_schema

_NO_BODY = (ControlRecordType.ABORT, ControlRecordType.COMMIT)
_CONTROL_TYPES = frozenset(int(t) for t in ControlRecordType)
_ENVELOPE = {name for name, _, _ in ENVELOPE_COLUMNS}


@cache
def record_struct() -> T.StructType:
    """The return type of ``decode_record``: ``metadata_log``'s record columns as one struct."""
    return T.StructType([f for f in log_table_schema().fields if f.name not in _ENVELOPE])


@cache
def _arrow_struct() -> pa.StructType:
    arrow = to_arrow_type(record_struct())
    assert isinstance(arrow, pa.StructType)
    return arrow


@cache
def _columns() -> dict[str, tuple[int, bool]]:
    """Record column -> (its index in the struct, whether it is stored as PRESENT)."""
    return {f.name: (i, f.dataType == PRESENT) for i, f in enumerate(record_struct().fields)}


def decode(is_control: bool, api_key: int, raw: bytes) -> tuple[MessageSpec, Record, int] | None:
    """The spec, record and version of one value as ``metadata_log`` holds it; None for a marker (no body).

    Raises
    ------
    RecordDecodeError
        The value cannot be decoded (names the byte position within the value), or a metadata value's own
        apiKey is not ``api_key``.
    """
    where = f"{'control type' if is_control else 'apiKey'} {api_key}"
    try:
        if is_control:
            if api_key in _NO_BODY or api_key not in _CONTROL_TYPES:
                return None  # a marker, or a control type Kafka does not know (read as UNKNOWN, no body)
            spec = control_spec(api_key)
            return spec, decode_body(spec, CONTROL_BODY_VERSION, raw), CONTROL_BODY_VERSION
        record, version = decode_metadata_record(raw)
    except ProtocolError as exc:
        raise RecordDecodeError(
            str(exc), source=f"record value ({where})", position=exc.position, offset=None, cause=exc
        ) from exc
    spec = spec_by_name(type(record).__name__)
    if spec.api_key != api_key:
        raise RecordDecodeError(
            f"the value holds apiKey {spec.api_key} ({spec.name}), not {api_key}",
            source=f"record value ({where})",
            position=1,
            offset=None,
        )
    return spec, record, version


def _rows(is_control: pa.Array, api_key: pa.Array, raw: pa.Array) -> list[Any]:
    """Each row's decoded ``(spec, record, version)``, or None (null value, marker)."""
    out: list[Any] = []
    for c, k, v in zip(is_control.to_pylist(), api_key.to_pylist(), raw.to_pylist(), strict=True):
        out.append(None if v is None or c is None or k is None else decode(c, k, v))
    return out


def decode_records(is_control: pa.Array, api_key: pa.Array, raw: pa.Array) -> pa.Array:
    """``decode_record`` over Arrow arrays: a struct array of :func:`record_struct`'s type."""
    arrow = _arrow_struct()
    columns = _columns()
    rows = _rows(is_control, api_key, raw)
    n = len(rows)
    by_column: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row is not None:
            by_column.setdefault(record_column(row[0].name), []).append(i)
    arrays: list[pa.Array] = []
    for name, (index, present) in columns.items():
        field_type = arrow.field(index).type
        at = by_column.get(name)
        if not at:
            arrays.append(pa.nulls(n, field_type))
            continue
        values: list[Any] = [None] * n
        for i in at:
            # records are tuples in their struct's field order: Arrow reads them positionally
            values[i] = (True,) if present else rows[i][1]
        arrays.append(pa.array(values, type=field_type))
    mask = pa.array([row is None for row in rows], type=pa.bool_())
    return pa.StructArray.from_arrays(arrays, fields=list(arrow), mask=mask)


def _json(spec: MessageSpec, record: Record, version: int) -> str:
    data = data_writer(type(record), version)(record)
    if spec.kind == "control":
        return data
    return f'{{"type":"{spec.record_type_name}","version":{version},"data":{data}}}'


def kafka_json_texts(is_control: pa.Array, api_key: pa.Array, raw: pa.Array) -> pa.Array:
    """``kafka_json`` over Arrow arrays: a string array."""
    texts = [None if row is None else _json(*row) for row in _rows(is_control, api_key, raw)]
    return pa.array(texts, type=pa.string())


@arrow_udf(record_struct())  # type: ignore[call-overload]
def decode_record(is_control: pa.Array, api_key: pa.Array, raw: pa.Array) -> pa.Array:
    return decode_records(is_control, api_key, raw)


@arrow_udf(T.StringType())  # type: ignore[call-overload]
def kafka_json(is_control: pa.Array, api_key: pa.Array, raw: pa.Array) -> pa.Array:
    return kafka_json_texts(is_control, api_key, raw)


UDFS = {"decode_record": decode_record, "kafka_json": kafka_json}


def register_udfs(spark: Any) -> list[str]:
    """Register ``decode_record`` and ``kafka_json`` for ``spark`` (a session's temporary functions: Python
    UDFs cannot be stored in a catalog); returns their names."""
    for name, fn in UDFS.items():
        spark.udf.register(name, fn)
    return list(UDFS)
