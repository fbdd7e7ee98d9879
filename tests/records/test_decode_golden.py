"""``kraftlake decode`` prints exactly the bytes it printed when these golden files were written.

``golden/every_type.log`` holds seeded random records of every metadata record type and version (strings Jackson
escapes, doubles Java prints its own way, nulls, empty arrays, tagged fields set and unset), every control record
type, an ABORT marker, an unknown control type and a batch not shaped as KRaft writes it;
``golden/every_type.jsonl`` is its output. ``golden/fixtures.sha256`` holds the digest and line count of the
output for each shared fixture file. The outputs were checked against ``kafka-dump-log`` (the ``kafka``-marked
tests) when written; these tests keep them from drifting while the writer is optimised.

``KRAFTLAKE_REWRITE_GOLDEN=1`` rewrites the golden files (only do so for an intended change of output).
"""

from __future__ import annotations

import hashlib
import io
import os
import random
from pathlib import Path

import pytest
from random_records import random_record
from shared_paths import KAFKA_LOGS

from kraftlake import kafka_tools
from kraftlake.cli import build_parser
from kraftlake.commands import decode
from kraftlake.logformat.batch import Record as LogRecord
from kraftlake.logformat.batch import build_control_batch, build_data_batch, encode_batch
from kraftlake.protocol.control import ControlRecordType, encode_control_body
from kraftlake.protocol.spec import load_all
from kraftlake.records.kafka_json import CONTROL_LABELS
from kraftlake.records.serde import encode_metadata_record

GOLDEN = Path(__file__).parent / "golden"
SEGMENT = GOLDEN / "every_type.log"
EXPECTED = GOLDEN / "every_type.jsonl"
DIGESTS = GOLDEN / "fixtures.sha256"
REWRITE = os.environ.get("KRAFTLAKE_REWRITE_GOLDEN") == "1"


def _kafka_tools_available() -> bool:
    try:
        kafka_tools.kafka_jars_dir()
        kafka_tools.java_executable()
    except kafka_tools.KafkaToolError:
        return False
    return True


def decode_text(path: Path) -> str:
    out = io.StringIO()
    assert decode.run(build_parser().parse_args(["decode", str(path)]), out=out) == 0
    return out.getvalue()


def _golden_segment(seed: int = 13) -> bytes:
    rnd = random.Random(seed)
    data = bytearray()
    offset = 0
    ts = 1_700_000_000_000
    for spec in load_all():
        if spec.kind != "metadata":
            continue
        for version in range(spec.valid_versions.lowest, spec.valid_versions.highest + 1):
            values = [
                encode_metadata_record(random_record(spec.struct, version, rnd), version)  # type: ignore[arg-type]
                for _ in range(3)
            ]
            data += build_data_batch(offset, rnd.randint(0, 2**31 - 1), ts + offset, values)
            offset += len(values)
    for spec in load_all():
        if spec.kind == "control":
            ctype = ControlRecordType(spec.control_type)
            bodies = [encode_control_body(random_record(spec.struct, 0, rnd)) for _ in range(2)]  # type: ignore[arg-type]
            data += build_control_batch(offset, 7, ts + offset, [(ctype, b) for b in bodies])
            offset += len(bodies)
    data += build_control_batch(offset, 7, ts, [(ControlRecordType.ABORT, b"\x00\x00\x00\x00\x00\x00")])
    data += build_control_batch(offset + 1, 7, ts, [(99, b"")])
    offset += 2
    # keys, headers and timestamp deltas: read through the general record parser, not the KRaft fast path
    value = encode_metadata_record(random_record(load_all()[1].struct, 0, rnd), 0)  # type: ignore[arg-type]
    data += encode_batch(
        [
            LogRecord(offset, ts + 5, b"k", value, (("h", b"v"),)),
            LogRecord(offset + 1, ts + 9, None, value, ()),
        ],
        base_offset=offset,
        partition_leader_epoch=3,
    )
    return bytes(data)


def _fixture_files() -> list[Path]:
    return sorted(
        p for p in KAFKA_LOGS.rglob("*") if p.is_file() and p.name.endswith((".log", ".checkpoint"))
    )


def _digest_lines() -> str:
    lines = []
    for path in _fixture_files():
        text = decode_text(path)
        digest = hashlib.sha256(text.encode()).hexdigest()
        lines.append(f"{digest} {text.count(chr(10))} {path.relative_to(KAFKA_LOGS)}\n")
    return "".join(lines)


@pytest.mark.skipif(not REWRITE, reason="KRAFTLAKE_REWRITE_GOLDEN=1 rewrites the golden files")
def test_rewrite_golden() -> None:
    GOLDEN.mkdir(exist_ok=True)
    SEGMENT.write_bytes(_golden_segment())
    EXPECTED.write_text(decode_text(SEGMENT), encoding="utf-8")
    DIGESTS.write_text(_digest_lines())


def test_every_type_prints_as_golden() -> None:
    # split at newlines only: the strings hold U+2028 and other characters str.splitlines breaks at
    expected = EXPECTED.read_text(encoding="utf-8").split("\n")
    got = decode_text(SEGMENT).split("\n")
    assert len(got) == len(expected)
    for line, want in zip(got, expected, strict=True):
        assert line == want


def test_golden_covers_every_type_and_version() -> None:
    lines = EXPECTED.read_text(encoding="utf-8").split("\n")[:-1]
    printed = {line.split('"type":', 1)[1].split(',"data"', 1)[0] for line in lines}
    names = {
        (s.record_type_name, v)
        for s in load_all()
        if s.kind == "metadata"
        for v in range(s.valid_versions.lowest, s.valid_versions.highest + 1)
    }
    assert {f'"{t}","version":{v}' for t, v in names} <= printed
    assert any(line.endswith('"data":null}') for line in lines)


def test_fixtures_print_as_golden() -> None:
    assert _digest_lines() == DIGESTS.read_text()


@pytest.mark.kafka
@pytest.mark.skipif(not _kafka_tools_available(), reason="needs java and the Kafka jars")
def test_golden_data_is_what_dump_log_prints(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(SEGMENT.read_bytes())
    theirs = [line for line in kafka_tools.dump_log([segment]).split("\n") if line.startswith("| offset:")]
    ours = EXPECTED.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(theirs) == len(ours)
    compared = 0
    for kafka_line, line in zip(theirs, ours, strict=True):
        data = line[line.index('"data":') + len('"data":') : -1]
        if " payload: " in kafka_line:
            payload = kafka_line[kafka_line.index(" payload: ") + len(" payload: ") :]
            assert data == payload[payload.index('"data":') + len('"data":') : -1]
            compared += 1
            continue
        label, _, text = kafka_line.partition("headerKeys: [] ")[2].partition(" ")
        if label == "LeaderChange:" and not text.startswith('{"version":0,'):
            # dump-log reads the body at version 0 but writes its JSON at the version the body names (its
            # `version` field): a LeaderChange naming 1 prints the v1 field voterDirectoryId, with its default
            continue
        if label in CONTROL_LABELS.values():
            assert data == text
            compared += 1
    # all but the ABORT marker, the unknown control type and the LeaderChanges naming version 1
    assert compared >= len(ours) - 4
