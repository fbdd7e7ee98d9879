"""Random records of every type and version, written into a segment, print in dump-log exactly as we print them.

This checks the Kafka JSON form (tagged fields, nullability, bytes, doubles, nested structs) and that Kafka
parses every body we encode, against Kafka's own ``DumpLogSegments --cluster-metadata-decoder``.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kraftlake.logformat.batch import build_control_batch, build_data_batch
from kraftlake.protocol import runtime
from kraftlake.protocol.control import ControlRecordType, encode_control_body
from kraftlake.protocol.messages import class_for
from kraftlake.protocol.spec import INT_RANGES, FieldSpec, StructSpec, load_all
from kraftlake.records.kafka_json import CONTROL_LABELS, control_to_kafka_json, dumps, to_kafka_json
from kraftlake.records.serde import encode_metadata_record

REPO = Path(__file__).parents[2]
JARS = Path(os.environ.get("KRAFTLAKE_JARS", REPO / ".cache" / "jars")) / "kafka"
JAVA = shutil.which("java") if list(JARS.glob("kafka-tools-*.jar")) else None

pytestmark = [pytest.mark.kafka, pytest.mark.skipif(JAVA is None, reason="needs java and the Kafka jars")]


def _value(f: FieldSpec, version: int, rnd: random.Random) -> object:
    if version not in f.versions:
        return f.default if f.struct is None or f.is_array else class_for(f.struct.qualname)()
    if f.nullable_in(version) and rnd.random() < 0.3:
        return None
    if f.is_array:
        return tuple(_scalar(f, version, rnd) for _ in range(rnd.randrange(4)))
    if f.tagged_in(version) and rnd.random() < 0.3:
        return f.default
    return _scalar(f, version, rnd)


def _scalar(f: FieldSpec, version: int, rnd: random.Random) -> object:
    base = f.base_type
    if f.struct is not None:
        return _record(f.struct, version, rnd)
    if base in INT_RANGES:
        lo, hi = INT_RANGES[base]
        return rnd.choice([v for v in (lo, hi, 0, -1, rnd.randint(lo, hi)) if lo <= v <= hi])
    if base == "bool":
        return rnd.random() < 0.5
    if base == "float64":
        return rnd.choice(
            [0.0, 1.5, -2.0, 1e7, 1e-4, 123456.789, float(rnd.randint(-1000, 1000)), rnd.random()]
        )
    if base == "string":
        return "".join(rnd.choice('ab-_ .:/"\\é\n') for _ in range(rnd.randrange(8)))
    if base == "bytes":
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(8)))
    return runtime.uuid_str(bytes(rnd.randrange(256) for _ in range(16)))


def _record(s: StructSpec, version: int, rnd: random.Random) -> object:
    return class_for(s.qualname)(**{f.attr: _value(f, version, rnd) for f in s.fields})


def test_random_records_print_as_kafka_prints_them(tmp_path: Path) -> None:
    rnd = random.Random(20241025)
    values: list[bytes] = []
    expected: list[str] = []
    for spec in load_all():
        if spec.kind != "metadata":
            continue
        for version in range(spec.valid_versions.lowest, spec.valid_versions.highest + 1):
            for _ in range(4):
                rec = _record(spec.struct, version, rnd)
                values.append(encode_metadata_record(rec, version))  # type: ignore[arg-type]
                expected.append("payload: " + dumps(to_kafka_json(rec, version)))  # type: ignore[arg-type]
    data = build_data_batch(0, 1, 1000, values)
    offset = len(values)
    controls = []
    for spec in load_all():
        if spec.kind == "control":
            rec = _record(spec.struct, 0, rnd)
            ctype = ControlRecordType(spec.control_type)
            data += build_control_batch(offset, 1, 1000, [(ctype, encode_control_body(rec))])  # type: ignore[arg-type]
            offset += 1
            controls.append(f"{CONTROL_LABELS[ctype]} {dumps(control_to_kafka_json(rec))}")  # type: ignore[arg-type]
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(data)
    out = subprocess.run(
        [
            JAVA or "java",
            "-cp",
            str(JARS / "*"),
            "org.apache.kafka.tools.DumpLogSegments",
            "--cluster-metadata-decoder",
            "--files",
            str(seg),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    printed = [m.group(1) for m in re.finditer(r"\| offset: \d+ .*?headerKeys: \[\] (.*)", out)]
    assert printed == expected + controls
