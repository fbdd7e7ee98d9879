"""The generated JSON writers print what the reference writer (``dumps(record_data(...))``) prints.

For every message (metadata and control) and every version in ``schemas/``: seeded random records (strings
Jackson escapes, a literal backslash-u, astral characters, doubles Java prints its own way, nulls, empty arrays,
tagged fields set and at their default), and hypothesis' records; then whole lines of ``kraftlake decode``
(``write_lines`` against ``record_json``), reused small values and control records included.
"""

from __future__ import annotations

import io
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_records import random_record
from record_strategies import CASES, struct_strategy
from sweeps import sweep

from kraftlake.commands.decode import printed_type, record_json, write_lines
from kraftlake.protocol.codegen import Record
from kraftlake.protocol.control import ControlRecordType, encode_control_body
from kraftlake.protocol.messages import MESSAGE_CLASSES
from kraftlake.protocol.spec import MessageSpec, StructSpec, load_all
from kraftlake.records.errors import RecordDecodeError
from kraftlake.records.kafka_json import data_writer, dumps, generated_writer_source, java_double, record_data
from kraftlake.records.reader import MetadataRecord
from kraftlake.records.serde import encode_metadata_record

SPECS = load_all()
PER_VERSION = 150


def _versions(spec: MessageSpec) -> range:
    return range(spec.valid_versions.lowest, spec.valid_versions.highest + 1)


def _tagged_fields(s: StructSpec, version: int) -> list[tuple[StructSpec, str]]:
    found = [(s, f.name) for f in s.fields if version in f.versions and f.tagged_in(version)]
    for f in s.fields:
        if f.struct is not None and version in f.versions:
            found += _tagged_fields(f.struct, version)
    return found


def test_every_message_and_version_writes_as_the_reference() -> None:
    rnd = random.Random(20250213)
    written = 0
    for spec in SPECS:
        cls = MESSAGE_CLASSES[spec.name]
        for version in _versions(spec):
            write = data_writer(cls, version)
            for _ in range(PER_VERSION):
                rec = random_record(spec.struct, version, rnd)
                assert write(rec) == dumps(record_data(rec, version)), (spec.name, version, rec)  # type: ignore[arg-type]
                written += 1
    assert written == PER_VERSION * sum(len(_versions(s)) for s in SPECS)


def test_the_random_records_reach_the_corners() -> None:
    """The cases above do hold what the writers special-case (else the test above could pass vacuously)."""
    rnd = random.Random(20250213)
    texts = []
    tagged_set: set[tuple[str, int, str]] = set()
    tagged_unset: set[tuple[str, int, str]] = set()
    for spec in SPECS:
        for version in _versions(spec):
            for _ in range(PER_VERSION):
                rec: Any = random_record(spec.struct, version, rnd)
                text = dumps(record_data(rec, version))
                texts.append(text)
                for struct, name in _tagged_fields(spec.struct, version):
                    if struct is spec.struct:
                        key = (spec.name, version, name)
                        (tagged_set if f'"{name[0].lower()}{name[1:]}":' in text else tagged_unset).add(key)
    every = "".join(texts)
    assert re.search(r"\[(-?\d+,){39}-?\d+\]", every)  # an integer array longer than the %-formats go
    for needle in (
        "E-",
        "E2",
        "-0.0",
        "Infinity",
        "NaN",
        "\\u001F",
        "\\\\u",
        '\\"',
        "😀",
        ":null",
        ":[]",
        ':""',
    ):
        assert needle in every, needle
    top_tagged = {
        (s.name, v, f.name)
        for s in SPECS
        for v in _versions(s)
        for f in s.struct.fields
        if v in f.versions and f.tagged_in(v)
    }
    assert top_tagged and top_tagged <= tagged_set
    # a tagged single struct is always written; every other tagged field is also seen left out
    assert {k for k in top_tagged if not _is_struct_field(k)} <= tagged_unset


def _is_struct_field(key: tuple[str, int, str]) -> bool:
    spec = next(s for s in SPECS if s.name == key[0])
    f = next(f for f in spec.struct.fields if f.name == key[2])
    return f.struct is not None and not f.is_array


@settings(
    max_examples=sweep(400, 100),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.sampled_from(CASES).flatmap(
        lambda case: st.tuples(st.just(case), struct_strategy(case[0].struct, case[1]))
    )
)
def test_hypothesis_records_write_as_the_reference(drawn: tuple[tuple[MessageSpec, int], Record]) -> None:
    (_, version), rec = drawn
    assert data_writer(type(rec), version)(rec) == dumps(record_data(rec, version))


def _envelopes(rnd: random.Random) -> list[MetadataRecord]:
    out: list[MetadataRecord] = []
    offset = 0
    for spec in SPECS:
        for version in _versions(spec) if spec.kind == "metadata" else range(1):
            for _ in range(20):
                rec: Any = random_record(spec.struct, version, rnd)
                control = spec.kind == "control"
                raw = encode_control_body(rec) if control else encode_metadata_record(rec, version)
                out.append(
                    MetadataRecord(
                        offset,
                        rnd.randrange(2**31),
                        rnd.randrange(2**41),
                        offset - offset % 7,
                        control,
                        spec.name,
                        spec.api_key or spec.control_type or 0,
                        version,
                        rec,
                        raw,
                    )
                )
                offset += 1
    # the same value twice (its text is reused), NoOp records, equal control values of different types
    noop = MESSAGE_CLASSES["NoOpRecord"]()
    out += [
        MetadataRecord(offset + i, 1, 5, offset, False, "NoOpRecord", 0, 0, noop, b"\x01\x14\x00\x00")
        for i in range(3)
    ]
    out += [out[3]._replace(offset=offset + 3)]
    version_rec = MESSAGE_CLASSES["KRaftVersionRecord"](version=0, kraft_version=1)
    footer = MESSAGE_CLASSES["SnapshotFooterRecord"](version=0)
    out += [
        MetadataRecord(
            offset + 4, 1, 5, offset, True, "KRaftVersionRecord", 5, 0, version_rec, b"\x00\x00\x00\x01"
        ),
        MetadataRecord(
            offset + 5, 1, 5, offset, True, "SnapshotFooterRecord", 2, 0, footer, b"\x00\x00\x00\x01"
        ),
    ]
    # control markers without a body, and an unknown control type
    out += [
        MetadataRecord(offset + 6, 1, 5, offset, True, "ABORT", int(ControlRecordType.ABORT), 0, None, b""),
        MetadataRecord(offset + 7, 1, 5, offset, True, "UNKNOWN(99)", 99, 0, None, b""),
    ]
    rnd.shuffle(out)
    return out


def _type_name(m: MetadataRecord) -> str:
    return m.type if m.record is None else printed_type(m)


def test_lines_are_the_reference_lines() -> None:
    records = _envelopes(random.Random(7))
    out = io.StringIO()
    write_lines(records, out.write)
    expected = "".join(record_json(m, _type_name(m)) + "\n" for m in records)
    got = out.getvalue()
    assert got.split("\n") == expected.split("\n")
    assert got.count("\n") == len(records) > 800


def test_lines_are_written_in_chunks_as_they_come() -> None:
    records = _envelopes(random.Random(8)) * 3
    chunks: list[str] = []
    write_lines(iter(records), chunks.append)
    assert len(chunks) > 1 and "".join(chunks).count("\n") == len(records)
    assert all(chunk.endswith("\n") for chunk in chunks)


def test_writer_source_is_generated_per_version() -> None:
    source = generated_writer_source(MESSAGE_CLASSES["PartitionRecord"])
    assert "def _w0_v0(r):" in source and "def _w0_v2(r):" in source
    assert '"partitionId":{f0}' in source


def test_lines_before_a_read_error_are_written() -> None:
    records = _envelopes(random.Random(9)) * 4

    def failing() -> Iterator[MetadataRecord]:
        yield from records
        raise RecordDecodeError("bad batch", source="x.log", position=0, offset=len(records))

    out = io.StringIO()
    with pytest.raises(RecordDecodeError):
        write_lines(failing(), out.write)
    assert out.getvalue() == "".join(record_json(m, _type_name(m)) + "\n" for m in records)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # printed by Java's Double.toString (JDK 17 here; JDK 19+'s rule gives the same for these)
        (5e-324, "4.9E-324"),
        (-5e-324, "-4.9E-324"),
        (1.5e-323, "1.5E-323"),
        (3.5e-323, "3.5E-323"),
        (4.94e-322, "4.94E-322"),
        (1e-310, "1.0E-310"),
        (2.2250738585072014e-308, "2.2250738585072014E-308"),
        (0.1, "0.1"),
        (0.002, "0.002"),
        (1e7, "1.0E7"),
        (1e22, "1.0E22"),
    ],
)
def test_java_double_prints_as_java(value: float, text: str) -> None:
    assert java_double(value) == text
