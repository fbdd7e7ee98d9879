"""Fuzzing the batch reader: random and mutated bytes raise only typed errors, with bounded memory."""

from __future__ import annotations

import struct
import tracemalloc

import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sweeps import sweep

from kraftlake.logformat import (
    Compression,
    LogFormatError,
    Record,
    build_control_batch,
    build_data_batch,
    encode_batch,
    read_batches,
    recover_batches,
)

_SEEDS = [
    encode_batch(
        [Record(0, 10, b"k", b"value" * 20, (("h", b"x"),)), Record(1, 11, None, b"v2")],
        compression=codec,
        partition_leader_epoch=3,
    )
    for codec in Compression
] + [build_control_batch(2, 3, 12, [(2, b"\x00\x00\x00\x00\x00\x01\x01\x01")])]
_SEEDS += [
    build_data_batch(0, 3, 12, [b"a" * 70, b"", b"bc" * 40], compression=codec) for codec in Compression
]

MAX_DECOMPRESSED = 1 << 20
MEMORY_BOUND = 16 << 20


def _read_all(data: bytes, verify_crc: bool) -> None:
    try:
        for batch in read_batches(
            data, "fuzz", verify_crc=verify_crc, max_decompressed_bytes=MAX_DECOMPRESSED
        ):
            for r in batch.records:
                assert r.offset is not None
    except LogFormatError as exc:
        assert exc.source == "fuzz" and exc.position is not None
    _, report = recover_batches(data, "fuzz", verify_crc=verify_crc, max_decompressed_bytes=MAX_DECOMPRESSED)
    assert report.valid_bytes + report.truncated_bytes == len(data)


def _fix_crc(data: bytearray) -> bytes:
    if len(data) >= 61:
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


@settings(max_examples=sweep(300, 75), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    _read_all(data, verify_crc=True)
    _read_all(data, verify_crc=False)


@settings(max_examples=sweep(500, 125), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(range(len(_SEEDS))),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(0, 40),
    st.booleans(),
)
def test_mutated_batches(seed: int, flips: list[tuple[int, int]], cut: int, fix_crc: bool) -> None:
    data = bytearray(_SEEDS[seed] + _SEEDS[(seed + 1) % len(_SEEDS)])
    for pos, value in flips:
        data[pos % len(data)] = value
    if cut:
        del data[-cut:]
    raw = _fix_crc(data) if fix_crc else bytes(data)
    tracemalloc.start()
    try:
        _read_all(raw, verify_crc=not fix_crc)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND


@settings(max_examples=sweep(200, 50), deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.sampled_from(range(len(_SEEDS)))
)
def test_huge_length_and_count_fields(length: int, count: int, seed: int) -> None:
    data = bytearray(_SEEDS[seed])
    struct.pack_into(">i", data, 8, length)
    struct.pack_into(">i", data, 57, count)
    tracemalloc.start()
    try:
        _read_all(_fix_crc(data), verify_crc=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND
