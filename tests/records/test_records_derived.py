"""The Arrow schema and the fastavro export agree with ``schemas/`` (and so with the record classes)."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_paths import KAFKA_LOGS

from kraftlake.logformat.reader import read_file_batches
from kraftlake.protocol.messages import class_for
from kraftlake.protocol.spec import StructSpec, load_all
from kraftlake.records.arrow import metadata_log_schema, record_struct, to_table
from kraftlake.records.avro import parsed_schema, write_metadata_log, write_records
from kraftlake.records.layout import ENVELOPE_COLUMNS, record_column, to_plain
from kraftlake.records.reader import MetadataRecord, iter_records

SPECS = load_all()
_ARROW = {
    "int8": pa.int32(),
    "int16": pa.int32(),
    "uint16": pa.int32(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "uuid": pa.string(),
}


def _expected_arrow(s: StructSpec) -> pa.StructType:
    """Built from the Kafka annotations alone, independently of the Avro types the module walks."""
    fields = []
    for f in s.fields:
        t = _expected_arrow(f.struct) if f.struct is not None else _ARROW[f.base_type]
        if f.is_array:
            t = pa.list_(pa.field("element", t, nullable=False))
        fields.append(pa.field(f.attr, t, nullable=not f.nullable_versions.empty))
    return pa.struct(fields)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_arrow_struct_matches_annotations_and_classes(spec: Any) -> None:
    st = record_struct(spec.name)
    assert st == _expected_arrow(spec.struct)
    assert [st.field(i).name for i in range(st.num_fields)] == list(class_for(spec.name)._fields)


def test_metadata_log_schema() -> None:
    schema = metadata_log_schema()
    names = [n for n, _, _ in ENVELOPE_COLUMNS] + [record_column(s) for s in SPECS]
    assert schema.names == names
    assert "partition_change_record" in names and "kraft_version_record" in names


def test_fastavro_round_trip_and_arrow_table() -> None:
    fixture = KAFKA_LOGS / "minimal" / "00000000000000000000.log"
    records: list[MetadataRecord] = list(iter_records(read_file_batches(fixture)))
    buf = io.BytesIO()
    assert write_metadata_log(buf, records) == len(records)
    buf.seek(0)
    rows = list(fastavro.reader(buf))
    for row, rec in zip(rows, records, strict=True):
        assert row["offset"] == rec.offset and row["type"] == rec.type and row["raw"] == rec.raw
        assert row[record_column(rec.type)] == to_plain(rec.record)
    table = to_table(records)
    assert table.schema == metadata_log_schema()
    assert table.column("partition_record").to_pylist()[-1] == to_plain(records[-1].record)


def test_write_records_of_one_type_with_nested_structs() -> None:
    voters = class_for("VotersRecord")
    rec = voters(
        voters=[
            voters.Voter(
                voter_id=1,
                endpoints=[voters.Endpoint(name="C", host="h", port=9093)],
                kraft_version_feature=voters.KRaftVersionFeature(max_supported_version=1),
            )
        ]
    )
    buf = io.BytesIO()
    write_records(buf, [rec])
    buf.seek(0)
    (row,) = list(fastavro.reader(buf, reader_schema=parsed_schema("VotersRecord")))
    assert row == to_plain(rec)
    rebuilt = voters(
        voters=[
            voters.Voter(
                voter_id=v["voter_id"],
                voter_directory_id=v["voter_directory_id"],
                endpoints=[voters.Endpoint(**e) for e in v["endpoints"]],
                kraft_version_feature=voters.KRaftVersionFeature(**v["kraft_version_feature"]),
            )
            for v in row["voters"]
        ]
    )
    assert rebuilt == rec


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_record_batch_equals_the_row_dicts(data: st.DataObject) -> None:
    """The columnar builder (records read positionally by Arrow) gives what per-row dicts give."""
    from record_strategies import CASES, struct_strategy

    from kraftlake.records.arrow import record_batch
    from kraftlake.records.layout import to_row

    cases = data.draw(st.lists(st.sampled_from(CASES), min_size=1, max_size=12))
    records = []
    for i, (spec, version) in enumerate(cases):
        rec = data.draw(struct_strategy(spec.struct, version))
        kind = spec.kind == "control"
        records.append(
            MetadataRecord(
                offset=i,
                epoch=1,
                timestamp=7,
                batch_offset=0,
                is_control=kind,
                type=spec.name,
                api_key=spec.control_type if kind else spec.api_key,
                version=version,
                record=rec,
                raw=b"x",
            )
        )
    want = pa.RecordBatch.from_pylist([to_row(r) for r in records], schema=metadata_log_schema())
    got = record_batch(records)
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()
