"""The ``metadata_log`` row layout, shared by the Arrow, Avro and Spark schemas.

One row per committed record: the envelope columns of :class:`~kraftlake.records.reader.MetadataRecord`,
then one nullable struct column per record type (named by the snake_case of the class name), of which only
the record's own type is set.
"""

from __future__ import annotations

from typing import Any

from kraftlake.protocol.codegen import Record
from kraftlake.protocol.spec import MessageSpec, load_all, snake_case

#: (column, Avro type, nullable) of the envelope, in order.
ENVELOPE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("offset", "long", False),
    ("epoch", "int", False),
    ("timestamp", "long", False),
    ("batch_offset", "long", False),
    ("is_control", "boolean", False),
    ("type", "string", False),
    ("api_key", "int", False),
    ("version", "int", False),
    ("raw", "bytes", False),
)


def record_specs() -> tuple[MessageSpec, ...]:
    """The record types with a column, metadata first (by apiKey), then control (by type)."""
    return load_all()


def record_column(spec_or_name: MessageSpec | str) -> str:
    """The column of a record type: ``PartitionChangeRecord`` -> ``partition_change_record``."""
    return snake_case(spec_or_name if isinstance(spec_or_name, str) else spec_or_name.name)


def to_plain(value: Any) -> Any:
    """A record as plain Python values: nested records -> dicts, tuples -> lists (Avro/Arrow ready)."""
    if isinstance(value, Record):
        return {name: to_plain(v) for name, v in zip(value._fields, value, strict=True)}
    if isinstance(value, tuple):
        return [to_plain(v) for v in value]
    return value


def to_row(rec: Any) -> dict[str, Any]:
    """A :class:`~kraftlake.records.reader.MetadataRecord` as a ``metadata_log`` row dict."""
    row: dict[str, Any] = {name: getattr(rec, name) for name, _, _ in ENVELOPE_COLUMNS}
    for spec in record_specs():
        row[record_column(spec)] = None
    if rec.record is not None:
        row[record_column(rec.type)] = to_plain(rec.record)
    return row
