"""Bad input: every typed error names its source, position and offset; recovery keeps the valid prefix."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from kraftlake.errors import KraftlakeError
from kraftlake.logformat import (
    BadMagicError,
    Compression,
    CompressionError,
    CorruptBatchError,
    CorruptRecordError,
    CrcMismatchError,
    DecompressionLimitError,
    LogFormatError,
    Record,
    RecordCountMismatchError,
    TruncatedBatchError,
    build_data_batch,
    decode_batch,
    encode_batch,
    read_batches,
    read_file_batches,
    recover_batches,
    recover_file_batches,
    truncate_to_valid,
)
from kraftlake.logformat.batch import HEADER_SIZE


def _batches(n: int = 3) -> list[bytes]:
    return [build_data_batch(i * 2, 1, 100, [b"v%d" % i, b"w%d" % i]) for i in range(n)]


def _fix_crc(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return bytes(raw)


def _check(err: LogFormatError, source: str, position: int, offset: int | None) -> None:
    assert isinstance(err, KraftlakeError)
    assert (err.source, err.position, err.offset) == (source, position, offset)
    assert source in str(err) and f"byte position {position}" in str(err)
    if offset is not None:
        assert f"base offset {offset}" in str(err)


def test_bad_crc() -> None:
    a, b, c = _batches()
    bad = bytearray(b)
    bad[-1] ^= 0xFF
    with pytest.raises(CrcMismatchError) as info:
        read_batches(a + bytes(bad) + c, "seg.log")
    _check(info.value, "seg.log", len(a), 2)
    assert isinstance(info.value, CorruptBatchError)
    # verification can be turned off
    assert len(read_batches(a + bytes(bad) + c, "seg.log", verify_crc=False)) == 3


def test_length_past_the_end() -> None:
    a, b, _ = _batches()
    bad = bytearray(b)
    struct.pack_into(">i", bad, 8, 2**31 - 1)  # huge: must be refused before any allocation
    with pytest.raises(TruncatedBatchError) as info:
        read_batches(a + bytes(bad), "seg.log")
    _check(info.value, "seg.log", len(a), 2)
    assert "2147483647" in str(info.value)


def test_truncated_last_batch_and_short_tail() -> None:
    a, b, _ = _batches()
    with pytest.raises(TruncatedBatchError) as info:
        read_batches(a + b[:-5], "x")
    _check(info.value, "x", len(a), 2)
    with pytest.raises(TruncatedBatchError) as info:
        read_batches(a + b[:7], "x")
    _check(info.value, "x", len(a), None)


def test_length_smaller_than_header() -> None:
    a = _batches(1)[0]
    bad = bytearray(a)
    struct.pack_into(">i", bad, 8, 10)
    with pytest.raises(CorruptBatchError) as info:
        decode_batch(bytes(bad), source="y")
    _check(info.value, "y", 0, 0)


def test_bad_magic() -> None:
    bad = bytearray(_batches(1)[0])
    bad[16] = 1
    with pytest.raises(BadMagicError) as info:
        decode_batch(bytes(bad), source="m", base_position=4096)
    _check(info.value, "m", 4096, 0)


def test_malformed_record_varint() -> None:
    raw = bytearray(build_data_batch(40, 1, 1, [b"abc", b"def"]))
    raw[HEADER_SIZE + 2] = 0xFF  # timestamp delta varint of record 0 never ends within the record
    raw[HEADER_SIZE + 3 : HEADER_SIZE + 9] = b"\xff" * 6
    batch = decode_batch(_fix_crc(raw), source="v")
    with pytest.raises(CorruptRecordError) as info:
        batch.records  # noqa: B018
    _check(info.value, "v", 0, 40)
    assert "record 0" in str(info.value)


def test_record_length_past_its_batch() -> None:
    raw = bytearray(build_data_batch(0, 1, 1, [b"abc"]))
    raw[HEADER_SIZE] = 0x7E  # length 63 > bytes left
    with pytest.raises(CorruptRecordError):
        decode_batch(_fix_crc(raw)).records  # noqa: B018


@pytest.mark.parametrize("delta", [1, -1])
def test_record_count_mismatch(delta: int) -> None:
    raw = bytearray(build_data_batch(8, 1, 1, [b"abc", b"def"]))
    struct.pack_into(">i", raw, 57, 2 + delta)
    batch = decode_batch(_fix_crc(raw), source="c")
    with pytest.raises(RecordCountMismatchError) as info:
        batch.records  # noqa: B018
    _check(info.value, "c", 0, 8)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_a_count_the_bytes_cannot_hold_is_refused_before_parsing(codec: Compression) -> None:
    # 100k minimal records compress to a few hundred bytes; the header then claims 2**31-1 of them.
    records = [Record(i, 0, None, None) for i in range(100_000)]
    raw = bytearray(encode_batch(records, compression=codec))
    struct.pack_into(">i", raw, 57, 2**31 - 1)
    batch = decode_batch(_fix_crc(raw), source="liar")
    with pytest.raises(
        RecordCountMismatchError, match=r"2147483647 records but its \d+ bytes of records hold at most"
    ) as info:
        batch.records  # noqa: B018
    _check(info.value, "liar", 0, 0)
    assert len(decode_batch(encode_batch(records, compression=codec)).records) == 100_000


def test_negative_record_count() -> None:
    raw = bytearray(build_data_batch(8, 1, 1, [b"abc"]))
    struct.pack_into(">i", raw, 57, -5)
    with pytest.raises(RecordCountMismatchError):
        decode_batch(_fix_crc(raw))


def test_unknown_codec_and_corrupt_compressed_data() -> None:
    raw = bytearray(build_data_batch(0, 1, 1, [b"abc"]))
    struct.pack_into(">h", raw, 21, 6)
    with pytest.raises(CompressionError, match="unknown compression codec id 6"):
        decode_batch(_fix_crc(raw)).records  # noqa: B018
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        raw = bytearray(build_data_batch(0, 1, 1, [b"abc" * 50], compression=codec))
        raw[HEADER_SIZE + 4 :] = b"\x13" * (len(raw) - HEADER_SIZE - 4)
        with pytest.raises(CompressionError):
            decode_batch(_fix_crc(raw), source="z").records  # noqa: B018


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_decompression_bomb_is_bounded(codec: Compression) -> None:
    raw = encode_batch([Record(0, 0, None, bytes(5_000_000))], compression=codec)
    assert len(raw) < 300_000
    batch = decode_batch(raw, source="bomb", max_decompressed_bytes=1_000_000)
    with pytest.raises(DecompressionLimitError) as info:
        batch.records  # noqa: B018
    _check(info.value, "bomb", 0, 0)
    assert len(decode_batch(raw).records[0].value or b"") == 5_000_000


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_is_typed_in_the_header_too(codec_id: int) -> None:
    # the CRC is valid: only the codec id is wrong; `compression` (what decode counts) is as typed as `records`
    raw = bytearray(build_data_batch(4, 1, 1, [b"abc"]))
    struct.pack_into(">h", raw, 21, codec_id)
    batch = decode_batch(_fix_crc(raw), source="c.log", base_position=7)
    with pytest.raises(CompressionError) as info:
        batch.compression  # noqa: B018
    _check(info.value, "c.log", 7, 4)
    assert f"UNKNOWN({codec_id})" in repr(batch)


def test_snappy_bomb_names_the_real_limit() -> None:
    # the limit is reached in the second 32 KiB xerial block: the message names the limit, not what was left
    raw = encode_batch([Record(0, 0, None, bytes(200_000))], compression=Compression.SNAPPY)
    with pytest.raises(DecompressionLimitError, match="limit of 50000 bytes"):
        decode_batch(raw, max_decompressed_bytes=50_000).records  # noqa: B018


def test_truncated_zstd_frames_are_refused() -> None:
    # zstd-jni's ZstdInputStream (Kafka's reader) refuses a frame cut short ("Truncated source");
    # python-zstandard's stream reader returns what it decoded so far, often nothing
    import zstandard

    values = [b"x" * 300, b"y" * 5]
    raw = build_data_batch(0, 1, 1, values, compression=Compression.ZSTD)
    assert [r.value for r in decode_batch(raw).records] == values
    frame = raw[HEADER_SIZE:]
    for cut in range(1, len(frame)):
        cut_raw = bytearray(raw[: len(raw) - cut])
        struct.pack_into(">i", cut_raw, 8, len(cut_raw) - 12)
        with pytest.raises(CompressionError):
            decode_batch(_fix_crc(cut_raw)).records  # noqa: B018
    # whole frames, with a checksum or after a skippable frame, are read
    body = zstandard.ZstdDecompressor().decompress(frame)
    skip = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    for data in (
        zstandard.ZstdCompressor(write_checksum=True).compress(body),
        skip + zstandard.ZstdCompressor().compress(body),
    ):
        framed = bytearray(raw[:HEADER_SIZE]) + data
        struct.pack_into(">i", framed, 8, len(framed) - 12)
        assert [r.value for r in decode_batch(_fix_crc(framed)).records] == values


def test_recovery_stops_at_last_valid_batch() -> None:
    a, b, c = _batches()
    batches, report = recover_batches(a + b + c[:-3], "r")
    assert [x.base_offset for x in batches] == [0, 2]
    assert report.valid_bytes == len(a) + len(b)
    assert report.truncated_bytes == len(c) - 3
    assert report.first_bad_position == len(a) + len(b)
    assert report.valid_batches == 2 and not report.clean
    assert "runs past the end" in (report.reason or "")
    assert isinstance(report.error, TruncatedBatchError)

    bad = bytearray(b)
    bad[-1] ^= 1
    batches, report = recover_batches(a + bytes(bad) + c, "r")
    assert len(batches) == 1 and report.first_bad_position == len(a)
    assert report.truncated_bytes == len(b) + len(c) and "CRC" in (report.reason or "")

    batches, report = recover_batches(a + b + c, "r")
    assert len(batches) == 3 and report.clean and report.first_bad_position is None


def test_recovery_also_drops_batches_with_bad_records() -> None:
    a, b, _ = _batches()
    raw = bytearray(b)
    struct.pack_into(">i", raw, 57, 7)
    batches, report = recover_batches(a + _fix_crc(raw), "r")
    assert len(batches) == 1 and isinstance(report.error, RecordCountMismatchError)


def test_truncate_file_to_last_valid_batch(tmp_path: Path) -> None:
    a, b, c = _batches()
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(a + b + c[:30])
    with pytest.raises(TruncatedBatchError) as info:
        read_file_batches(seg)
    assert info.value.source == str(seg)
    report = truncate_to_valid(seg)
    assert report.truncated_bytes == 30 and report.source == str(seg)
    assert seg.read_bytes() == a + b
    assert [x.base_offset for x in read_file_batches(seg)] == [0, 2]
    assert truncate_to_valid(seg).clean
    _, report = recover_file_batches(seg)
    assert report.clean and report.valid_bytes == len(a + b)


def test_empty_file_has_no_batches(tmp_path: Path) -> None:
    seg = tmp_path / "e.log"
    seg.write_bytes(b"")
    assert read_file_batches(seg) == []


def test_kraft_shaped_record_with_value_length_cut_at_record_end() -> None:
    # record 0: length 4 | attrs 0 | ts 0 | offset delta 0 | key null | value-length byte 0x80 (continues past
    # the record, onto a trailing byte that keeps the area at the 7 bytes a record needs): the KRaft fast path
    # must hand over to the general loop, which reports it
    body = b"\x00\x00\x00\x01\x80"
    raw = bytearray(build_data_batch(0, 1, 1, [b"x"]))
    raw[HEADER_SIZE:] = bytes([len(body) * 2]) + body + b"\x00"
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    with pytest.raises(CorruptRecordError):
        decode_batch(_fix_crc(raw)).records  # noqa: B018
