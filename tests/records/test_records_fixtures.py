"""The fixture logs written by Kafka 3.x decode completely, re-encode byte for byte, and print as dump-log does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.logformat.batch import build_data_batch
from kraftlake.logformat.reader import read_batches, read_file_batches
from kraftlake.protocol.control import encode_control_body
from kraftlake.records.errors import RecordDecodeError
from kraftlake.records.kafka_json import CONTROL_LABELS, control_to_kafka_json, dumps, to_kafka_json
from kraftlake.records.reader import MetadataRecord, iter_records
from kraftlake.records.serde import encode_metadata_record

FIXTURES = KAFKA_LOGS
REPO = Path(__file__).parents[2]
JARS = Path(os.environ.get("KRAFTLAKE_JARS", REPO / ".cache" / "jars")) / "kafka"


def _fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".checkpoint"))


FILES = _fixture_files()


def _records(path: Path) -> list[MetadataRecord]:
    return list(iter_records(read_file_batches(path), source=str(path)))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture_decodes_and_reencodes_exactly(path: Path) -> None:
    records = _records(path)
    assert records
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets)
    for r in records:
        assert r.record is not None and r.type == type(r.record).__name__
        if r.is_control:
            assert encode_control_body(r.record, r.version) == r.raw
        else:
            assert encode_metadata_record(r.record, r.version) == r.raw


def test_known_records_of_the_minimal_log() -> None:
    recs = {r.offset: r for r in _records(FIXTURES / "minimal" / "00000000000000000000.log")}
    assert dumps(to_kafka_json(recs[35].record, recs[35].version)) == (
        '{"type":"PARTITION_RECORD","version":1,"data":{"partitionId":0,"topicId":"v9meXjI1RVKB-NSvF0GXDA",'
        '"replicas":[1],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":0,'
        '"partitionEpoch":0,"directories":["AiSXPLrdRM-HREWplhnaNA"]}}'
    )
    assert recs[35].epoch == 1 and recs[35].batch_offset == 34 and recs[35].timestamp == 1726045957397
    assert recs[35].api_key == 3 and not recs[35].is_control
    assert (
        dumps(to_kafka_json(recs[3].record, 0))
        == '{"type":"ZK_MIGRATION_STATE_RECORD","version":0,"data":{"zkMigrationState":0}}'
    )
    boot = _records(FIXTURES / "minimal" / "bootstrap.checkpoint")
    assert boot[0].is_control and boot[0].type == "SnapshotHeaderRecord" and boot[0].api_key == 3
    assert dumps(control_to_kafka_json(boot[0].record)) == '{"version":0,"lastContainedLogTimestamp":0}'


def test_decode_error_names_file_position_and_offset() -> None:
    good = encode_metadata_record(_records(FIXTURES / "minimal" / "00000000000000000000.log")[0].record, 0)
    bad = bytes([1, 6, 0, 0])  # apiKey 6 was deleted from Kafka
    raw = build_data_batch(100, 3, 5, [good, bad])
    batches = read_batches(raw, source="seg.log")
    with pytest.raises(RecordDecodeError) as info:
        list(iter_records(batches))
    err = info.value
    assert err.source == "seg.log" and err.offset == 101 and err.position == 0
    assert "seg.log at byte 0 (offset 101)" in str(err) and "apiKey 6" in str(err)


def _java() -> str | None:
    return shutil.which("java") if list(JARS.glob("kafka-tools-*.jar")) else None


def _dump_log(path: Path) -> dict[int, str]:
    out = subprocess.run(
        [
            _java() or "java",
            "-cp",
            str(JARS / "*"),
            "org.apache.kafka.tools.DumpLogSegments",
            "--cluster-metadata-decoder",
            "--files",
            str(path),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    lines = {}
    for line in out.splitlines():
        m = re.match(r"\| offset: (\d+) .*?headerKeys: \[\] (.*)$", line)
        if m:
            lines[int(m.group(1))] = m.group(2)
    return lines


@pytest.mark.kafka
@pytest.mark.skipif(_java() is None, reason="needs java and the Kafka jars (make setup)")
@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_json_equals_kafka_dump_log(path: Path, tmp_path: Path) -> None:
    # dump-log may take the log dir's lock: give it a private copy
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    expected = _dump_log(copy)
    ours = {}
    for r in _records(path):
        if r.is_control:
            ours[r.offset] = (
                f"{CONTROL_LABELS[r.api_key]} {dumps(control_to_kafka_json(r.record, r.version))}"
            )
        else:
            ours[r.offset] = "payload: " + dumps(to_kafka_json(r.record, r.version))
    assert ours == expected


def test_checked_path_reports_garbage_and_null_values() -> None:
    noop = encode_metadata_record(_records(FIXTURES / "minimal" / "00000000000000000000.log")[3].record, 0)
    batches = read_batches(build_data_batch(7, 2, 9, [noop, noop, noop + b"\x00"]), source="g.log")
    with pytest.raises(RecordDecodeError, match=r"g.log at byte 0 \(offset 9\).*1 bytes of garbage") as info:
        list(iter_records(batches))
    assert info.value.cause is not None and info.value.cause.position == len(noop)


def test_equal_values_give_equal_records() -> None:
    from kraftlake.protocol.messages import MESSAGE_CLASSES

    values = [encode_metadata_record(MESSAGE_CLASSES["NoOpRecord"](), 0)] * 3
    values.append(encode_metadata_record(MESSAGE_CLASSES["FenceBrokerRecord"](id=1, epoch=2), 0))
    recs = list(iter_records(read_batches(build_data_batch(0, 4, 1000, values))))
    assert [r.type for r in recs] == ["NoOpRecord"] * 3 + ["FenceBrokerRecord"]
    assert [r.offset for r in recs] == [0, 1, 2, 3] and {r.epoch for r in recs} == {4}
    assert recs[3].record == MESSAGE_CLASSES["FenceBrokerRecord"](id=1, epoch=2) and recs[3].api_key == 7
    assert all(r.version == 0 and r.timestamp == 1000 and r.batch_offset == 0 for r in recs)
