"""``schemas/`` are valid Avro and say what Kafka's own JSON specs say (those in the Kafka jars)."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sweeps import sweep

from kraftlake.protocol.control import decode_control_body
from kraftlake.protocol.errors import ProtocolError, SchemaError
from kraftlake.protocol.kafka_specs import CONTROL_TYPES, convert, render
from kraftlake.protocol.messages import MESSAGE_CLASSES, class_for
from kraftlake.protocol.spec import load_all, schemas_dir, snake_case
from kraftlake.records.serde import decode_metadata_record

SPECS = load_all()
JARS = Path(os.environ.get("KRAFTLAKE_JARS", Path(__file__).parents[2] / ".cache" / "jars")) / "kafka"


def test_every_schema_parses_with_fastavro() -> None:
    files = sorted(schemas_dir().glob("*.avsc"))
    assert len(files) == 32
    for f in files:
        fastavro.parse_schema(json.loads(f.read_text()))


def test_versions_kafka_4_writes() -> None:
    # ApiKey 29 (UnregisterControllerRecord) is Kafka 4.4's, written from metadata.version 4.4-IV2
    by_name = {s.name: s for s in SPECS}
    assert str(by_name["RegisterBrokerRecord"].valid_versions) == "0-4"
    assert str(by_name["BrokerRegistrationChangeRecord"].valid_versions) == "0-3"
    assert str(by_name["PartitionRecord"].valid_versions) == "0-2"
    assert str(by_name["PartitionChangeRecord"].valid_versions) == "0-2"
    assert str(by_name["LeaderChangeMessage"].valid_versions) == "0-1"
    keys = sorted(s.api_key for s in SPECS if s.kind == "metadata")
    assert keys == [
        0,
        1,
        2,
        3,
        4,
        5,
        7,
        8,
        9,
        10,
        11,
        12,
        14,
        15,
        17,
        18,
        19,
        20,
        21,
        22,
        23,
        24,
        25,
        26,
        27,
        28,
        29,
    ]
    assert sorted(s.control_type for s in SPECS if s.kind == "control") == [2, 3, 4, 5, 6]


def test_classes_have_the_schema_fields() -> None:
    for spec in SPECS:
        for s in spec.structs():
            cls = class_for(s.qualname)
            assert cls._fields == tuple(f["name"] for f in _avro_record(spec.avro, s.name)["fields"])
            defaults = cls()
            for f, value in zip(s.fields, defaults, strict=True):
                if f.struct is None or f.is_array:
                    assert value == f.default, (s.qualname, f.name)
    assert set(MESSAGE_CLASSES) == {s.name for s in SPECS}


def _avro_record(avro: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def walk(t: Any) -> None:
        if isinstance(t, list):
            for b in t:
                walk(b)
        elif isinstance(t, dict):
            if t.get("type") == "record":
                if t["name"] == name:
                    found.append(t)
                for f in t["fields"]:
                    walk(f["type"])
            elif t.get("type") == "array":
                walk(t["items"])

    walk(avro)
    return found[0]


def _kafka_specs() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for jar, folder in (("kafka-metadata", "common/metadata/"), ("kafka-clients", "common/message/")):
        paths = sorted(JARS.glob(f"{jar}-*.jar"))
        if not paths:
            pytest.skip(f"{jar} jar not in {JARS} (run make setup)")
        with zipfile.ZipFile(paths[0]) as z:
            for name in z.namelist():
                if name.startswith(folder) and name.endswith(".json"):
                    text = "\n".join(
                        line
                        for line in z.read(name).decode().splitlines()
                        if not line.strip().startswith("//")
                    )
                    spec = json.loads(text)
                    out[spec["name"]] = spec
    return out


def _compare_fields(
    ours: list[dict[str, Any]],
    theirs: list[dict[str, Any]],
    common: dict[str, Any],
    where: str,
    avro: dict[str, Any],
) -> None:
    assert [f["kafka"]["name"] for f in ours] == [f["name"] for f in theirs], where
    for o, t in zip(ours, theirs, strict=True):
        ann = o["kafka"]
        assert o["name"] == snake_case(t["name"])
        for key in (
            "type",
            "versions",
            "nullableVersions",
            "taggedVersions",
            "tag",
            "default",
            "mapKey",
            "about",
        ):
            assert ann.get(key) == t.get(key), f"{where}.{t['name']}.{key}"
        sub = t.get("fields")
        inner = t["type"].removeprefix("[]")
        if sub is None and inner in common:
            sub = common[inner]
        if sub is not None:
            _compare_fields(_avro_record(avro, inner)["fields"], sub, common, f"{where}.{inner}", avro)


@pytest.mark.kafka
def test_schemas_match_kafkas_json_specs() -> None:
    kafka = _kafka_specs()
    for spec in SPECS:
        theirs = kafka[spec.name]
        ann = spec.avro["kafka"]
        assert ann["validVersions"] == theirs["validVersions"], spec.name
        assert ann["flexibleVersions"] == theirs["flexibleVersions"], spec.name
        if spec.kind == "metadata":
            assert ann["apiKey"] == theirs["apiKey"]
        common = {c["name"]: c["fields"] for c in theirs.get("commonStructs", [])}
        _compare_fields(spec.avro["fields"], theirs["fields"], common, spec.name, copy.deepcopy(spec.avro))
    metadata = {n for n, s in kafka.items() if s.get("type") == "metadata"}
    assert metadata <= {s.name for s in SPECS}, "a metadata record of this Kafka has no schema"


@settings(max_examples=sweep(3000, 500), deadline=None)
@given(
    st.binary(max_size=64)
    | st.builds(
        lambda k, v, b: bytes([1, k, v]) + b, st.integers(0, 30), st.integers(0, 4), st.binary(max_size=80)
    )
)
def test_fuzz_decoder_raises_only_typed_errors(value: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_metadata_record(value)


@settings(max_examples=sweep(1000, 200), deadline=None)
@given(st.sampled_from([2, 3, 4, 5, 6]), st.binary(max_size=80))
def test_fuzz_control_bodies_raise_only_typed_errors(control_type: int, value: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_control_body(control_type, value)


def test_the_converter_knows_each_control_record_as_the_schemas_do() -> None:
    assert {s.name: s.control_type for s in SPECS if s.kind == "control"} == CONTROL_TYPES


def test_the_converter_writes_a_metadata_spec_as_the_committed_schema() -> None:
    # the committed UnregisterControllerRecord.avsc is what `make schemas` wrote from Kafka 4.4.0's spec
    spec = """// a comment line, as in Kafka's files
    {"apiKey": 29, "type": "metadata", "name": "UnregisterControllerRecord", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
       {"name": "ControllerId", "type": "int32", "versions": "0+", "about": "The controller id."}]}"""
    written = render(convert(spec, "UnregisterControllerRecord.json"))
    assert written == (schemas_dir() / "UnregisterControllerRecord.avsc").read_text()
    with pytest.raises(SchemaError, match="not an RPC, header, metadata or control record spec"):
        convert('{"type": "data", "name": "Other", "validVersions": "0", "fields": []}', "Other.json")
