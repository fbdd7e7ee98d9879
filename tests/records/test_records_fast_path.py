"""``iter_records``' fused decode of KRaft-shaped batches gives what the checked path gives, errors included."""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sweeps import sweep

from kraftlake.logformat.batch import Record as LogRecord
from kraftlake.logformat.batch import build_data_batch, encode_batch
from kraftlake.logformat.compression import Compression
from kraftlake.logformat.errors import LogFormatError, RecordCountMismatchError
from kraftlake.logformat.reader import read_batches
from kraftlake.protocol import messages as m
from kraftlake.protocol.spec import load_all
from kraftlake.records.errors import RecordDecodeError
from kraftlake.records.reader import MetadataRecord, iter_records
from kraftlake.records.serde import decode_metadata_record, encode_metadata_record

METADATA = [s for s in load_all() if s.kind == "metadata"]


def _uuid(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).rstrip(b"=").decode()


def _values(rng: random.Random, n: int) -> list[bytes]:
    """Values of the common types, with arrays and strings long enough for multi-byte lengths now and then."""
    out = []
    for _ in range(n):
        k = rng.randrange(6)
        big = rng.random() < 0.2
        reps = tuple(rng.randrange(1 << 31) for _ in range(rng.choice((0, 1, 3, 70 if big else 5))))
        name = "t" * rng.choice((1, 10, 200 if big else 30))
        if k == 0:
            rec: Any = m.PartitionRecord(
                partition_id=rng.randrange(1000),
                topic_id=_uuid(rng),
                replicas=reps,
                isr=reps,
                leader=1,
                directories=tuple(_uuid(rng) for _ in reps),
            )
            out.append(encode_metadata_record(rec, rng.choice((1, 2))))
        elif k == 1:
            rec = m.PartitionChangeRecord(partition_id=1, topic_id=_uuid(rng), isr=reps or None, leader=-1)
            out.append(encode_metadata_record(rec, rng.choice((0, 1, 2))))
        elif k == 2:
            out.append(encode_metadata_record(m.TopicRecord(name=name, topic_id=_uuid(rng)), 0))
        elif k == 3:
            rec = m.ConfigRecord(resource_type=2, resource_name=name, name="x", value=None if big else name)
            out.append(encode_metadata_record(rec, 0))
        elif k == 4:
            out.append(encode_metadata_record(m.NoOpRecord(), 0))
        else:
            ep = m.RegisterBrokerRecord.BrokerEndpoint(
                name="PLAINTEXT", host=name, port=9092, security_protocol=0
            )
            rec = m.RegisterBrokerRecord(
                broker_id=rng.randrange(10),
                incarnation_id=_uuid(rng),
                broker_epoch=5,
                end_points=(ep,) * (1 if not big else 3),
                rack=None if big else "r",
            )
            out.append(encode_metadata_record(rec, rng.choice((0, 1, 2, 3))))
    return out


def _reference(raw: bytes, source: str = "<bytes>") -> list[MetadataRecord]:
    """The records as the checked path reads them: logformat records, then decode_metadata_record."""
    out = []
    for batch in read_batches(raw, source):
        for r in batch.records:
            rec, version = decode_metadata_record(r.value)
            out.append(
                MetadataRecord(
                    r.offset,
                    batch.partition_leader_epoch,
                    r.timestamp,
                    batch.base_offset,
                    False,
                    type(rec).__name__,
                    rec._api_key,
                    version,
                    rec,
                    r.value,
                )
            )
    return out


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD, Compression.LZ4])
@pytest.mark.parametrize("seed", range(4))
def test_fused_decode_equals_checked_path(seed: int, compression: Compression) -> None:
    rng = random.Random(seed)
    raw = b""
    offset = 0
    for _ in range(6):
        n = rng.choice((1, 2, 63, 64, 65, 300))
        raw += build_data_batch(offset, 3, 1000 + offset, _values(rng, n), compression=compression)
        offset += n
    got = list(iter_records(read_batches(raw)))
    assert got == _reference(raw)
    assert [r.offset for r in got] == list(range(offset))


def test_records_of_another_shape_mid_batch() -> None:
    # Headers, a key and a timestamp delta are not KRaft's shape: the fused loop hands over at that record.
    values = _values(random.Random(1), 6)
    recs = [LogRecord(10 + i, 500, None, v) for i, v in enumerate(values)]
    recs[3] = LogRecord(13, 501, b"k", values[3], (("h", b"v"),))
    raw = encode_batch(recs, partition_leader_epoch=2)
    got = list(iter_records(read_batches(raw)))
    assert got == _reference(raw)
    assert got[3].timestamp == 501 and got[4].timestamp == 500


@pytest.mark.parametrize("bad_at", [0, 1, 5])
def test_a_bad_value_yields_the_records_before_it_then_raises(bad_at: int) -> None:
    values = _values(random.Random(2), 6)
    values[bad_at] = values[bad_at][:-1] + b"\x07"  # tagged-field count past the end
    raw = build_data_batch(0, 1, 0, _values(random.Random(3), 2)) + build_data_batch(2, 1, 0, values)
    seen: list[MetadataRecord] = []
    with pytest.raises(RecordDecodeError) as info:
        for r in iter_records(read_batches(raw, source="x.log")):
            seen.append(r)
    assert len(seen) == 2 + bad_at
    assert info.value.offset == 2 + bad_at and info.value.source == "x.log"
    assert info.value.position == len(build_data_batch(0, 1, 0, _values(random.Random(3), 2)))


def test_malformed_batch_raises_before_any_of_its_records() -> None:
    first = build_data_batch(0, 1, 0, _values(random.Random(4), 3))
    second = bytearray(build_data_batch(3, 1, 0, _values(random.Random(5), 3)))
    second[60] = 2  # record count 2 of 3: bytes remain after the records the header declares
    raw = first + bytes(second)
    seen = []
    with pytest.raises(RecordCountMismatchError):
        for r in iter_records(read_batches(raw, verify_crc=False)):
            seen.append(r)
    assert [r.offset for r in seen] == [0, 1, 2]


def test_cut_record_in_a_batch_is_a_typed_error() -> None:
    values = _values(random.Random(6), 4)
    raw = bytearray(build_data_batch(0, 1, 0, values))
    raw[61] += 40  # first record's length now runs into the next ones
    with pytest.raises(LogFormatError):
        list(iter_records(read_batches(bytes(raw), verify_crc=False)))


def test_header_count_without_headers_is_a_typed_error() -> None:
    raw = bytearray(build_data_batch(0, 1, 0, [encode_metadata_record(m.NoOpRecord(), 0)]))
    assert raw[-1] == 0
    raw[-1] = 2  # one header announced, none present
    with pytest.raises(LogFormatError):
        list(iter_records(read_batches(bytes(raw), verify_crc=False)))


@settings(max_examples=sweep(200, 50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=5), st.integers(0, 4))
def test_arbitrary_values_fail_or_succeed_as_on_the_checked_path(tails: list[bytes], which: int) -> None:
    # Values with a valid header and random bodies: each either decodes to what the checked path gives or
    # raises the checked path's error.
    spec = METADATA[which * 5 % len(METADATA)]
    values = [bytes([1, spec.api_key or 0, spec.valid_versions.highest]) + t for t in tails]
    raw = build_data_batch(0, 1, 0, values)
    try:
        expected: Any = _reference(raw)
    except Exception as exc:  # compared below
        expected = exc
    try:
        got: Any = list(iter_records(read_batches(raw)))
    except RecordDecodeError as exc:
        assert isinstance(expected, Exception)
        assert exc.cause is not None and type(exc.cause) is type(expected)
        assert str(exc.cause) == str(expected)
        return
    assert got == expected


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_batches_over_any_buffer_give_bytes_values(wrap: Any) -> None:
    from kraftlake.logformat.batch import RecordBatch

    values = _values(random.Random(7), 5) + [encode_metadata_record(m.NoOpRecord(), 0)] * 2
    raw = build_data_batch(0, 1, 0, values)
    got = list(iter_records([RecordBatch(wrap(raw))]))
    assert got == _reference(raw)
    assert all(type(r.raw) is bytes for r in got)
