from __future__ import annotations

import pytest

from kraftlake.raft.errors import LogTruncationError, RaftStorageError
from kraftlake.raft.memory_log import MemoryRaftLog
from kraftlake.raft.messages import Entry, OffsetAndEpoch, SnapshotId


def _log(epochs: list[int]) -> MemoryRaftLog:
    log = MemoryRaftLog()
    log.append([Entry(i, e, False, f"v{i}".encode()) for i, e in enumerate(epochs)])
    return log


def test_epoch_cache_answers_end_offset_for_epoch() -> None:
    log = _log([1, 1, 3, 3, 3, 4])
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(6, 4)
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(-1, -1)


def test_crash_loses_only_unflushed_entries() -> None:
    log = _log([1, 1, 1])
    log.flush()
    log.append([Entry(3, 2, False, b"x"), Entry(4, 2, False, b"y")])
    assert log.crash() == 2
    assert log.end_offset == 3 and log.last_epoch() == 1
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)


def test_append_must_be_contiguous_and_epochs_monotonic() -> None:
    log = _log([2])
    with pytest.raises(RaftStorageError):
        log.append([Entry(5, 2, False, b"")])
    with pytest.raises(RaftStorageError):
        log.append([Entry(1, 1, False, b"")])


def test_snapshot_advances_log_start_and_answers_epoch_below_it() -> None:
    log = _log([1, 1, 2, 2, 2])
    log.flush()
    log.create_snapshot(SnapshotId(3, 2), b"state")
    log.delete_before_snapshot()
    assert log.log_start_offset == 3 and log.latest_snapshot() == SnapshotId(3, 2)
    assert log.epoch_at(2) == 2
    assert [e.offset for e in log.read(3, 5)] == [3, 4]
    with pytest.raises(LogTruncationError):
        log.truncate_to(2)
    with pytest.raises(RaftStorageError):
        log.read(0, 5)


def test_install_snapshot_replaces_the_log() -> None:
    log = _log([1, 1])
    log.install_snapshot(SnapshotId(10, 3), b"s")
    assert (log.log_start_offset, log.end_offset, log.last_epoch()) == (10, 10, 3)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(10, 3)
    assert log.read_snapshot(SnapshotId(10, 3)) == b"s"


def test_read_respects_max_bytes_but_returns_one_entry() -> None:
    log = _log([1] * 10)
    assert len(log.read(0, 10, max_bytes=1)) == 1
    assert len(log.read(0, 10, max_bytes=50)) == 2


def test_whole_batch_reads_step_back_to_a_batch_or_return_an_oversized_first_batch_whole() -> None:
    log = MemoryRaftLog()
    # leader batches at 0 (3 entries), 3 (100 entries) and 103 (2 entries), 10-byte values
    bases = [0] * 3 + [3] * 100 + [103] * 2
    log.append([Entry(i, 1, False, b"x" * 10, 0, b, -1) for i, b in enumerate(bases)])
    per = 10 + 21  # value + record overhead
    # the cut falls inside batch 3: back to its start
    assert [e.offset for e in log.read(0, 105, max_bytes=5 * per, whole_batches=True)] == [0, 1, 2]
    # batch 3 alone is over the limit: all of it, from wherever the read starts in it (never a piece that
    # stops before the offset asked for)
    assert [e.offset for e in log.read(3, 105, max_bytes=5 * per, whole_batches=True)] == list(range(3, 103))
    assert [e.offset for e in log.read(90, 105, max_bytes=per, whole_batches=True)] == list(range(90, 103))
    assert len(log.read(3, 105, max_bytes=5 * per)) == 5  # without whole batches: the byte limit


def test_stored_entries_leave_the_garbage_collector() -> None:
    """A long log must not be scanned by every full collection: the stored tuples get untracked."""
    import gc

    log = MemoryRaftLog()
    log.append([Entry(i, 1, False, b"v", 7, 0, -1) for i in range(100)])
    gc.collect()
    assert not any(gc.is_tracked(e) for e in log._entries)
    read = log.read(10, 12)
    assert [type(e) for e in read] == [Entry, Entry] and read[0] == Entry(10, 1, False, b"v", 7, 0, -1)
    assert read[1].value == b"v" and log.epoch_at(50) == 1 and log.last_epoch() == 1
