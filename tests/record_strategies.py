"""Hypothesis strategies for random records of every type and version (shared by the protocol and records tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kraftlake.protocol import runtime
from kraftlake.protocol.messages import class_for
from kraftlake.protocol.spec import INT_RANGES, FieldSpec, StructSpec, load_all

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
    return st.fixed_dictionaries({f.attr: field_strategy(f, version) for f in s.fields}).map(
        lambda d: cls(**d)
    )
