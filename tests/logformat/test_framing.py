"""The framing scanner: batch headers with their positions, no record decoded; typed errors naming source,
byte position and base offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlake.logformat import (
    BadMagicError,
    BatchHeader,
    CorruptBatchError,
    CrcMismatchError,
    FileAccessError,
    TruncatedBatchError,
    batch_header,
    build_control_batch,
    build_data_batch,
    decode_batch,
    scan_batch_headers,
    scan_file_headers,
)
from kraftlake.logformat.record import ControlRecordType


def _log() -> tuple[bytes, list[int]]:
    batches = [
        build_control_batch(0, 1, 100, [(int(ControlRecordType.LEADER_CHANGE), b"\x00\x00")]),
        build_data_batch(1, 1, 200, [b"a", b"bb", b"ccc"]),
        build_data_batch(4, 2, 300, [b"d" * 300]),
    ]
    positions = []
    pos = 0
    for b in batches:
        positions.append(pos)
        pos += len(b)
    return b"".join(batches), positions


def test_headers_are_the_decoded_batches_headers() -> None:
    data, positions = _log()
    headers = list(scan_batch_headers(data, source="log", verify_crc=True))
    assert [h.position for h in headers] == positions
    for h in headers:
        batch = decode_batch(data, h.position)
        assert (h.base_offset, h.last_offset, h.partition_leader_epoch, h.size, h.is_control) == (
            batch.base_offset,
            batch.last_offset,
            batch.partition_leader_epoch,
            batch.size,
            batch.is_control,
        )
        assert (h.base_timestamp, h.max_timestamp, h.record_count, h.crc) == (
            batch.base_timestamp,
            batch.max_timestamp,
            batch.record_count,
            batch.crc,
        )
        assert h.end == h.position + batch.size
        assert batch_header(data, h.position) == h
    assert [h.next_offset for h in headers] == [1, 4, 5]


def test_positions_start_at_pos_plus_base_position() -> None:
    data, positions = _log()
    headers = list(scan_batch_headers(data, positions[1], base_position=1000))
    assert [h.position for h in headers] == [1000 + p for p in positions[1:]]


def test_a_torn_tail_raises_or_ends_the_scan() -> None:
    data, positions = _log()
    torn = data[: positions[2] + 30]
    with pytest.raises(TruncatedBatchError) as info:
        list(scan_batch_headers(torn, source="seg.log"))
    assert (info.value.source, info.value.position, info.value.offset) == ("seg.log", positions[2], 4)
    for stop_at in ("partial", "invalid"):
        got = [h.base_offset for h in scan_batch_headers(torn, stop_at=stop_at)]  # type: ignore[arg-type]
        assert got == [0, 1]
    # fewer than 12 bytes: no offset to name
    with pytest.raises(TruncatedBatchError) as info:
        list(scan_batch_headers(data[: positions[2] + 5], source="seg.log"))
    assert (info.value.position, info.value.offset) == (positions[2], None)


def test_an_invalid_batch_raises_unless_the_scan_stops_at_it() -> None:
    data, positions = _log()
    bad_magic = bytearray(data)
    bad_magic[positions[1] + 16] = 1
    for stop_at in ("nothing", "partial"):
        with pytest.raises(BadMagicError) as info:
            list(scan_batch_headers(bytes(bad_magic), source="s", stop_at=stop_at))  # type: ignore[arg-type]
        assert (info.value.position, info.value.offset) == (positions[1], 1)
    assert [h.base_offset for h in scan_batch_headers(bytes(bad_magic), stop_at="invalid")] == [0]
    short = bytearray(data)
    short[positions[1] + 8 : positions[1] + 12] = (10).to_bytes(4, "big")
    with pytest.raises(CorruptBatchError, match="batch length 10") as info:
        list(scan_batch_headers(bytes(short), source="s", stop_at="partial"))
    assert (info.value.position, info.value.offset) == (positions[1], 1)


def test_crc_is_checked_when_asked() -> None:
    data, positions = _log()
    bad = bytearray(data)
    bad[positions[2] + 70] ^= 0xFF
    assert len(list(scan_batch_headers(bytes(bad)))) == 3  # not asked
    with pytest.raises(CrcMismatchError) as info:
        list(scan_batch_headers(bytes(bad), source="f", verify_crc=True, stop_at="partial"))
    assert (info.value.source, info.value.position, info.value.offset) == ("f", positions[2], 4)
    got = list(scan_batch_headers(bytes(bad), verify_crc=True, stop_at="invalid"))
    assert [h.base_offset for h in got] == [0, 1]


def test_a_file_is_scanned_from_its_headers(tmp_path: Path) -> None:
    data, positions = _log()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data[: positions[2] + 70])
    assert [h.position for h in scan_file_headers(path, stop_at="partial")] == positions[:2]
    assert [h.base_offset for h in scan_file_headers(path, positions[1], stop_at="partial")] == [1]
    with pytest.raises(TruncatedBatchError) as info:
        list(scan_file_headers(path))
    assert (info.value.source, info.value.position, info.value.offset) == (str(path), positions[2], 4)
    path.write_bytes(data)
    assert list(scan_file_headers(path)) == list(scan_batch_headers(data))
    assert all(isinstance(h, BatchHeader) for h in scan_file_headers(path))
    with pytest.raises(FileAccessError):
        list(scan_file_headers(tmp_path / "missing.log"))
