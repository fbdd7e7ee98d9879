"""SegmentedLog.append_verified: already CRC-checked batches written as they are, framing checked, rolls kept."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from kraftlake.logformat import (
    SegmentedLog,
    SegmentError,
    build_data_batch,
    read_file_batches,
    segment_filename,
)


class Batch(NamedTuple):
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes


def _batch(base: int, count: int = 2, epoch: int = 1) -> Batch:
    raw = build_data_batch(base, epoch, 1_700_000_000_000, [b"v" * 100] * count)
    return Batch(base, base + count - 1, epoch, raw)


def test_same_files_as_append(tmp_path: Path) -> None:
    batches = [_batch(base, epoch=1 + base // 8) for base in range(0, 20, 2)]
    size = len(batches[0].data)
    with SegmentedLog(tmp_path / "a", segment_bytes=3 * size) as a:
        for b in batches:
            a.append(b.data)
    with SegmentedLog(tmp_path / "v", segment_bytes=3 * size) as v:
        assert v.append_verified(batches[:4]) == 4 * size
        assert v.append_verified(batches[4:]) == 6 * size
        assert v.end_offset == 20
        assert [(s.base_offset, s.size) for s in v.segments] == [(s.base_offset, s.size) for s in a.segments]
        assert [loc for s in v.segments for loc in s.batches] == [
            loc for s in a.segments for loc in s.batches
        ]
        assert [b.base_offset for b in v.read(7)] == [6, 8, 10, 12, 14, 16, 18]
    for name in (segment_filename(b) for b in (0, 6, 12, 18)):
        assert (tmp_path / "v" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
    assert v.append_verified([]) == 0


def test_a_gap_is_refused_and_nothing_written(tmp_path: Path) -> None:
    with SegmentedLog(tmp_path) as log:
        log.append_verified([_batch(0)])
        with pytest.raises(SegmentError, match="not the log end offset 2"):
            log.append_verified([_batch(4), _batch(6)])
        assert log.end_offset == 2
    assert [b.base_offset for b in read_file_batches(tmp_path / segment_filename(0))] == [0]


@pytest.mark.parametrize(
    "bad",
    [
        lambda b: b._replace(last_offset=b.last_offset + 1),  # the header says otherwise
        lambda b: b._replace(epoch=9),
        lambda b: b._replace(data=b.data[:-1]),  # not the length the header says
        lambda b: b._replace(data=b.data[:40]),  # not even a header
    ],
)
def test_a_batch_whose_header_disagrees_stops_after_the_ones_before(tmp_path: Path, bad: object) -> None:
    assert callable(bad)
    with SegmentedLog(tmp_path) as log:
        with pytest.raises(SegmentError):
            log.append_verified([_batch(0), _batch(2), bad(_batch(4)), _batch(6)])
        assert log.end_offset == 4
        log.append_verified([_batch(4)])
    reopened = SegmentedLog(tmp_path)
    assert reopened.recovery is not None and reopened.recovery.truncated_bytes == 0
    assert reopened.end_offset == 6
    reopened.close()
