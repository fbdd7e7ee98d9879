"""FileRaftLog's off-loop fsync: a ticket covers what was appended before it, and truncation voids it."""

from __future__ import annotations

import os
from pathlib import Path

from kraftlake.raft.messages import Entry
from kraftlake.service.file_log import FileRaftLog


def _entries(start: int, n: int, epoch: int = 1) -> list[Entry]:
    return [Entry(start + i, epoch, False, b"v%d" % (start + i), 1000, start, -1) for i in range(n)]


def test_a_ticket_makes_durable_what_was_appended_before_it(tmp_path: Path) -> None:
    log = FileRaftLog(tmp_path / "p", fsync=True)
    log.append(_entries(0, 3))
    ticket = log.begin_flush()
    assert ticket is not None and ticket.end_offset == 3
    log.append(_entries(3, 2))  # while the fsync would run on another thread
    ticket.sync()
    assert log.flush_still_valid(ticket)
    log.flush(ticket.end_offset)
    assert (log.flushed_end_offset, log.end_offset) == (3, 5)
    # the bytes were written out to the file before the ticket was handed over
    assert os.path.getsize(next((tmp_path / "p").glob("*.log"))) > 0
    log.flush()
    assert log.flushed_end_offset == 5
    log.close()


def test_truncation_voids_a_ticket(tmp_path: Path) -> None:
    log = FileRaftLog(tmp_path / "p", fsync=True)
    log.append(_entries(0, 4))
    ticket = log.begin_flush()
    assert ticket is not None
    log.truncate_to(2)
    log.append(_entries(2, 2, epoch=2))  # other entries at the same offsets, not covered by the fsync
    ticket.sync()
    assert not log.flush_still_valid(ticket)
    log.close()


def test_without_fsync_there_is_no_ticket(tmp_path: Path) -> None:
    log = FileRaftLog(tmp_path / "p", fsync=False)
    log.append(_entries(0, 1))
    assert log.begin_flush() is None
    log.close()
