"""decode_record and kafka_json (udfs.records) against the pure decoder on the real fixture logs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.commands.decode import record_json
from kraftlake.logformat.reader import read_file_batches
from kraftlake.records.errors import RecordDecodeError
from kraftlake.records.kafka_json import control_to_kafka_json, dumps, to_kafka_json
from kraftlake.records.layout import record_column, to_plain
from kraftlake.records.reader import MetadataRecord, iter_records
from udfs.records import decode, record_struct, register_udfs

FILES = sorted(p for p in KAFKA_LOGS.rglob("*") if p.suffix in (".log", ".checkpoint"))


def _records() -> list[MetadataRecord]:
    out: list[MetadataRecord] = []
    for path in FILES:
        out += iter_records(read_file_batches(path), source=str(path))
    return out


@pytest.fixture(scope="module")
def rows(spark: Any) -> tuple[list[MetadataRecord], list[Any]]:
    records = _records()
    # both kinds, and more than one Arrow batch's worth of rows
    assert {r.is_control for r in records} == {False, True} and len(records) > 100
    register_udfs(spark)
    df = spark.createDataFrame(
        [(i, r.is_control, r.api_key, r.raw) for i, r in enumerate(records)],
        "i INT, is_control BOOLEAN, api_key INT, raw BINARY",
    )
    df.createOrReplaceTempView("udf_fixture_log")
    got = spark.sql(
        "SELECT i, decode_record(is_control, api_key, raw) AS rec, kafka_json(is_control, api_key, raw) AS js "
        "FROM udf_fixture_log ORDER BY i"
    ).collect()
    assert [g.i for g in got] == list(range(len(records)))
    return records, got


def _expected_json(r: MetadataRecord) -> str | None:
    if r.record is None:
        return None
    if r.is_control:
        return dumps(control_to_kafka_json(r.record, r.version))
    return dumps(to_kafka_json(r.record, r.version))


def test_decode_record_is_the_pure_decoders_record(rows: tuple[list[MetadataRecord], list[Any]]) -> None:
    records, got = rows
    names = record_struct().names
    for r, g in zip(records, got, strict=True):
        rec = g.rec.asDict(recursive=True) if g.rec is not None else None
        if r.record is None:
            assert rec is None, r
            continue
        own = record_column(r.type)
        assert [n for n in names if rec[n] is not None] == [own]
        plain = to_plain(r.record)
        assert rec[own] == (plain if plain else {"present": True}), (r.offset, r.type)


def test_kafka_json_is_dump_logs_text(rows: tuple[list[MetadataRecord], list[Any]]) -> None:
    records, got = rows
    for r, g in zip(records, got, strict=True):
        assert g.js == _expected_json(r), (r.offset, r.type)
        if r.record is not None:
            # kraftlake decode prints the same data object in its line
            line = record_json(r, r.type)
            data = g.js if r.is_control else g.js[g.js.index(',"data":') + 8 : -1]
            assert line.endswith(f',"data":{data}}}')
            assert json.loads(g.js)


def test_bad_values_are_refused_with_their_position() -> None:
    good = next(r for r in _records() if not r.is_control and len(r.raw) > 4)
    with pytest.raises(RecordDecodeError, match="at byte"):
        decode(False, good.api_key, good.raw[:3])
    with pytest.raises(RecordDecodeError, match=f"holds apiKey {good.api_key}"):
        decode(False, good.api_key + 1, good.raw)
    assert decode(True, 0, b"") is None  # an ABORT marker has no body


@pytest.mark.kafka
def test_kafka_json_is_byte_identical_to_kafka_dump_log(rows: tuple[list[MetadataRecord], list[Any]]) -> None:
    from kraftlake import kafka_tools

    _, got = rows
    printed = []
    for line in kafka_tools.dump_log(FILES).splitlines():
        if line.startswith("| offset: "):
            # the record's JSON follows its header keys: "payload: {...}", or a control label "LeaderChange: {...}"
            tail = line[line.index("headerKeys: [") :]
            printed.append(tail[tail.index("{") :])
    assert printed == [g.js for g in got if g.js is not None]
