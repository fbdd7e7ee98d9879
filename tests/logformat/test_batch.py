"""Record batch v2: round trips with every codec, control batches, headers, CRC, KRaft builders, varints."""

from __future__ import annotations

import gzip
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sweeps import sweep

from kraftlake.logformat import (
    HEADER_SIZE,
    Compression,
    ControlRecordType,
    Record,
    TimestampType,
    build_control_batch,
    build_data_batch,
    compress,
    control_record_type,
    decode_batch,
    decompress,
    encode_batch,
    read_batches,
    reencode,
)
from kraftlake.logformat.varint import (
    VarintError,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    read_uvarint,
    read_varint,
    read_varlong,
)

VALUES = [bytes([i % 256]) * (i * 37 % 300) + b"metadata" for i in range(120)]


@pytest.mark.parametrize("codec", list(Compression))
def test_data_batch_round_trip_every_codec(codec: Compression) -> None:
    raw = build_data_batch(1000, 7, 1_700_000_000_123, VALUES, compression=codec)
    batch = decode_batch(raw, source="mem")
    assert batch.size == len(raw)
    assert batch.compression is codec
    assert batch.base_offset == 1000
    assert batch.last_offset == 1000 + len(VALUES) - 1
    assert batch.next_offset == 1000 + len(VALUES)
    assert batch.partition_leader_epoch == 7
    assert batch.magic == 2
    assert batch.record_count == len(VALUES)
    assert batch.base_timestamp == batch.max_timestamp == 1_700_000_000_123
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.is_control and not batch.is_transactional and batch.delete_horizon_ms is None
    assert batch.is_crc_valid()
    assert [r.value for r in batch.records] == VALUES
    assert [r.offset for r in batch.records] == list(range(1000, 1000 + len(VALUES)))
    assert all(r.key is None and r.headers == () and r.timestamp == 1_700_000_000_123 for r in batch.records)
    if codec is not Compression.NONE:
        assert len(raw) < HEADER_SIZE + sum(len(v) + 6 for v in VALUES)


def test_kraft_data_batch_equals_generic_encoder() -> None:
    recs = [Record(5 + i, 42, None, v) for i, v in enumerate(VALUES)]
    assert build_data_batch(5, 3, 42, VALUES) == encode_batch(recs, partition_leader_epoch=3)


@pytest.mark.parametrize("codec", list(Compression))
def test_headers_keys_and_attributes_round_trip(codec: Compression) -> None:
    recs = [
        Record(10, 1000, b"key", b"value", (("h1", b"a"), ("h\u00e9", None), ("", b""))),
        Record(12, 990, None, None),
        Record(13, 1_000_000_000_000, b"", b"x" * 20000, (("big", b"y" * 300),)),
    ]
    raw = encode_batch(
        recs,
        partition_leader_epoch=4,
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        is_transactional=True,
        producer_id=77,
        producer_epoch=3,
        base_sequence=9,
    )
    batch = decode_batch(raw)
    assert batch.records == recs
    assert batch.last_offset_delta == 3
    assert batch.max_timestamp == 1_000_000_000_000
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.is_transactional and (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        77,
        3,
        9,
    )
    if codec is Compression.NONE:
        assert reencode(batch) == raw


def test_delete_horizon_is_the_base_timestamp() -> None:
    raw = encode_batch([Record(0, 50, None, b"v")], delete_horizon_ms=12345)
    batch = decode_batch(raw)
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 12345 == batch.base_timestamp
    assert batch.records[0].timestamp == 50


def test_control_batch_carries_four_byte_keys() -> None:
    raw = build_control_batch(
        20,
        2,
        555,
        [
            (ControlRecordType.SNAPSHOT_HEADER, b"\x00\x00" + bytes(8)),
            (ControlRecordType.KRAFT_VERSION, b"\x00\x00\x00\x01"),
        ],
    )
    batch = decode_batch(raw)
    assert batch.is_control and batch.record_count == 2 and batch.partition_leader_epoch == 2
    assert [r.key for r in batch.records] == [b"\x00\x00\x00\x03", b"\x00\x00\x00\x05"]
    assert [control_record_type(r.key) for r in batch.records] == [3, 5]
    assert batch.records[1].offset == 21 and batch.records[1].timestamp == 555
    with pytest.raises(ValueError):
        control_record_type(None)


def test_crc_covers_attributes_to_end() -> None:
    raw = build_data_batch(0, 1, 1, [b"abc"])
    stored = struct.unpack_from(">I", raw, 17)[0]
    assert stored == crc32c.crc32c(raw[21:])
    assert decode_batch(raw).crc == stored


def test_reader_concatenated_batches_positions() -> None:
    a = build_data_batch(0, 1, 1, [b"a", b"b"])
    b = build_data_batch(2, 1, 1, [b"c"], compression=Compression.ZSTD)
    batches = read_batches(a + b, "two")
    assert [(x.position, x.base_offset, x.source) for x in batches] == [(0, 0, "two"), (len(a), 2, "two")]


def test_gzip_concatenated_members_are_read() -> None:
    data = gzip.compress(b"abc") + gzip.compress(b"def")
    assert decompress(Compression.GZIP, data) == b"abcdef"


def test_snappy_uses_xerial_framing_and_reads_raw_blocks() -> None:
    data = bytes(range(256)) * 300  # > 32 KiB: several xerial blocks
    framed = compress(Compression.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first,) = struct.unpack_from(">i", framed, 16)
    assert 0 < first < len(framed)
    assert decompress(Compression.SNAPPY, framed) == data
    import cramjam

    raw_block = bytes(cramjam.snappy.compress_raw(b"hello hello hello"))
    assert decompress(Compression.SNAPPY, raw_block) == b"hello hello hello"


def test_lz4_frame_as_kafka_writes_it() -> None:
    framed = compress(Compression.LZ4, b"z" * 100_000)
    assert framed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian
    assert framed[4] == 0x60  # version 01, independent blocks, no checksums, no content size
    assert framed[5] == 0x40  # 64 KiB max block
    assert framed[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum
    assert decompress(Compression.LZ4, framed) == b"z" * 100_000


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
    ],
)
def test_zigzag_varints(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert read_varint(encoded, 0) == (value, len(encoded))


def test_varint_extremes_and_errors() -> None:
    for v in (2**31 - 1, -(2**31)):
        assert read_varint(encode_varint(v), 0)[0] == v
    for v in (2**63 - 1, -(2**63), 1_700_000_000_000):
        assert read_varlong(encode_varlong(v), 0)[0] == v
    assert read_uvarint(encode_uvarint(2**32 - 1), 0)[0] == 2**32 - 1
    with pytest.raises(VarintError):
        read_uvarint(b"\x80\x80", 0)
    with pytest.raises(VarintError):
        read_uvarint(b"\xff" * 6, 0)


_records = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.integers(-5, 5),
        st.one_of(st.none(), st.binary(max_size=6)),
        st.one_of(st.none(), st.binary(max_size=200)),
        st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2),
    ),
    min_size=1,
    max_size=150,
)


@settings(max_examples=sweep(150, 40), deadline=None)
@given(_records, st.sampled_from(list(Compression)))
def test_random_records_round_trip(
    spec: list[tuple[int, int, bytes | None, bytes | None, list]], codec: Compression
) -> None:
    offset = 100
    recs = []
    for gap, ts, key, value, headers in spec:
        recs.append(Record(offset, 1000 + ts, key, value, tuple(headers)))
        offset += 1 + gap
    raw = encode_batch(recs, compression=codec)
    assert decode_batch(raw).records == recs


@settings(max_examples=sweep(100, 25), deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=300), st.integers(0, 2**40))
def test_kraft_shaped_batches_round_trip(values: list[bytes], base: int) -> None:
    batch = decode_batch(build_data_batch(base, 1, 5, values))
    assert [r.value for r in batch.records] == values
    assert [r.offset for r in batch.records] == list(range(base, base + len(values)))
