"""The Spark StructTypes agree with ``schemas/`` (through the Arrow schema derived from the same files)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type

from kraftlake.protocol.spec import load_all
from kraftlake.records.arrow import metadata_log_schema, record_struct
from kraftlake.spark.structs import metadata_log_struct_type, record_struct_type


def _strip_nullability(dt: object) -> str:
    return dt.simpleString()  # type: ignore[attr-defined]


@pytest.mark.parametrize("spec", load_all(), ids=lambda s: s.name)
def test_record_struct_type_matches_arrow(spec: object) -> None:
    name = spec.name  # type: ignore[attr-defined]
    ours = record_struct_type(name)
    from_arrow = from_arrow_type(record_struct(name))
    assert ours.simpleString() == from_arrow.simpleString()
    # nullability too: a field is nullable exactly when Kafka lets it be null in some version
    for ours_f, spec_f in zip(ours.fields, spec.struct.fields, strict=True):  # type: ignore[attr-defined]
        assert ours_f.nullable == (not spec_f.nullable_versions.empty)


def test_metadata_log_struct_type_matches_arrow() -> None:
    ours = metadata_log_struct_type()
    assert ours.simpleString() == from_arrow_schema(metadata_log_schema()).simpleString()
    assert [f.nullable for f in ours.fields] == [f.nullable for f in metadata_log_schema()]
