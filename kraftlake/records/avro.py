"""fastavro export: the parsed schemas of ``schemas/`` and Avro container files of records."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from functools import cache
from typing import Any, BinaryIO, cast

import fastavro

from kraftlake.protocol.codegen import Record
from kraftlake.protocol.messages import spec_of
from kraftlake.protocol.spec import load_all
from kraftlake.records.layout import ENVELOPE_COLUMNS, record_column, record_specs, to_plain, to_row


@cache
def parsed_schema(name: str) -> dict[str, Any]:
    """The fastavro-parsed schema of one record type (Kafka's class name)."""
    for s in load_all():
        if s.name == name:
            parsed = cast(dict[str, Any], fastavro.parse_schema(copy.deepcopy(s.avro)))
            return parsed
    raise KeyError(name)


def metadata_log_avro() -> dict[str, Any]:
    """The Avro schema (unparsed) of a ``metadata_log`` row: the envelope and a nullable column per type."""
    fields: list[dict[str, Any]] = [{"name": n, "type": t} for n, t, _ in ENVELOPE_COLUMNS]
    for s in record_specs():
        fields.append({"name": record_column(s), "type": ["null", copy.deepcopy(s.avro)], "default": None})
    return {"type": "record", "name": "MetadataLogRow", "namespace": "kraftlake", "fields": fields}


@cache
def parsed_metadata_log_schema() -> dict[str, Any]:
    parsed = cast(dict[str, Any], fastavro.parse_schema(metadata_log_avro()))
    return parsed


def write_records(
    out: BinaryIO, records: Iterable[Record], name: str | None = None, codec: str = "null"
) -> int:
    """Write records of one type to an Avro container file; returns how many were written."""
    items = list(records)
    if name is None:
        if not items:
            raise ValueError("name is required for an empty file")
        name = spec_of(items[0]).name
    fastavro.writer(out, parsed_schema(name), (to_plain(r) for r in items), codec=codec)
    return len(items)


def write_metadata_log(out: BinaryIO, records: Iterable[Any], codec: str = "null") -> int:
    """Write ``MetadataRecord`` s as ``metadata_log`` rows to an Avro container file."""
    rows = [to_row(r) for r in records]
    fastavro.writer(out, parsed_metadata_log_schema(), rows, codec=codec)
    return len(rows)
