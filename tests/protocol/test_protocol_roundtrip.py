"""Property tests: random records of every type and version survive encode -> decode unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlake.protocol import runtime
from kraftlake.protocol.codec import decode_body, encode_body
from kraftlake.protocol.control import ControlRecordType, decode_control_body, encode_control_body
from kraftlake.protocol.messages import MESSAGE_CLASSES, class_for
from kraftlake.protocol.spec import INT_RANGES, FieldSpec, MessageSpec, StructSpec, load_all
from kraftlake.records.serde import decode_metadata_record, encode_metadata_record

SPECS = load_all()
CASES = [(s, v) for s in SPECS for v in range(s.valid_versions.lowest, s.valid_versions.highest + 1)]

uuids = st.binary(min_size=16, max_size=16).map(runtime.uuid_str)
strings = st.text(max_size=20)


def _scalar(f: FieldSpec, version: int) -> st.SearchStrategy[Any]:
    base = f.base_type
    if base in INT_RANGES:
        lo, hi = INT_RANGES[base]
        return st.integers(lo, hi)
    if base == "bool":
        return st.booleans()
    if base == "float64":
        return st.floats(allow_nan=False)
    if base == "string":
        return strings
    if base == "bytes":
        return st.binary(max_size=20)
    if base == "uuid":
        return uuids
    assert f.struct is not None
    return struct_strategy(f.struct, version)


def field_strategy(f: FieldSpec, version: int) -> st.SearchStrategy[Any]:
    if version not in f.versions:
        return st.just(f.default if f.struct is None or f.is_array else class_for(f.struct.qualname)())
    value = st.lists(_scalar(f, version), max_size=4).map(tuple) if f.is_array else _scalar(f, version)
    if f.nullable_in(version):
        value = st.none() | value
    return value


def struct_strategy(s: StructSpec, version: int) -> st.SearchStrategy[Any]:
    cls = class_for(s.qualname)
    return st.fixed_dictionaries({f.attr: field_strategy(f, version) for f in s.fields}).map(lambda d: cls(**d))


@pytest.mark.parametrize(("spec", "version"), CASES, ids=[f"{s.name}-v{v}" for s, v in CASES])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_body_round_trip(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    record = data.draw(struct_strategy(spec.struct, version))
    body = encode_body(record, version)
    assert decode_body(spec, version, body) == record
    if spec.kind == "metadata":
        value = encode_metadata_record(record, version)
        assert decode_metadata_record(value) == (record, version)
    elif version == 0:
        ctype = ControlRecordType(spec.control_type)
        assert decode_control_body(ctype, encode_control_body(record)) == record


def test_every_message_has_a_class() -> None:
    assert set(MESSAGE_CLASSES) == {s.name for s in SPECS}
    metadata = [s for s in SPECS if s.kind == "metadata"]
    control = [s for s in SPECS if s.kind == "control"]
    assert len(metadata) == 26 and len(control) == 5
