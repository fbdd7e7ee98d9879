"""Issue 25: a small compressed batch of many tiny records costs its decompressed size, not a Python object per
record held at once (the probe's 5 KB file of 5.5M 11-byte records cost 910 MB in `decode`)."""

from __future__ import annotations

import tracemalloc

import pytest

from kraftlake.logformat.batch import decode_batch
from kraftlake.logformat.batch_encoding import assemble_batch
from kraftlake.logformat.compression import Compression
from kraftlake.logformat.errors import CorruptRecordError
from kraftlake.records.reader import iter_records

NOOP = bytes([1, 20, 0, 0])  # NoOpRecord v0
# a record not shaped as KRaft writes it (offset delta 0 for every record), so the general parser reads it
RECORD = bytes([20, 0, 0, 0, 1, 8]) + NOOP + b"\x00"


def _bomb(count: int, tail: bytes = b"") -> bytes:
    body = RECORD * count + tail
    return assemble_batch(
        body,
        count + (1 if tail else 0),
        base_offset=0,
        partition_leader_epoch=1,
        attributes=int(Compression.ZSTD),
        compression=Compression.ZSTD,
        compression_level=19,
        last_offset_delta=count,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
    )


@pytest.mark.slow
def test_records_of_a_small_compressed_batch_are_parsed_as_they_are_taken() -> None:
    """Slow (10-12 s): 60,000 records taken one by one under tracemalloc, which the bound is measured by (a
    smaller batch would not tell a bounded parse from one that decompresses the whole batch first)."""
    count = 60_000
    raw = _bomb(count)
    decompressed = len(RECORD) * count
    assert len(raw) < 2_000
    list(iter_records([decode_batch(_bomb(2), 0)]))  # the decoders are generated on first use: not measured
    tracemalloc.start()
    tracemalloc.reset_peak()  # pytest may trace already (its warnings plugin)
    try:
        seen = 0
        for record in iter_records([decode_batch(raw, 0)], source="bomb"):
            seen += 1
            assert record.type == "NoOpRecord"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == count
    # the decompressed area (660 kB; twice while it is assembled) plus a bounded amount: a record object each
    # held at once was ~9 MB
    assert peak < 3 * decompressed + 1_000_000, peak


def test_a_malformed_record_late_in_a_streamed_batch_raises_before_any_record() -> None:
    raw = _bomb(20_000, tail=bytes([20, 0, 0, 0, 1, 40]) + NOOP + b"\x00")  # value length past the record
    taken = []
    with pytest.raises(CorruptRecordError, match="record 20000 is malformed"):
        for record in decode_batch(raw, 0).iter_records():
            taken.append(record)
    assert taken == []
