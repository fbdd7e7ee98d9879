"""`FileRaftLog`: the raft log in Kafka's on-disk layout (a `RaftLog` for the service).

A ``__cluster_metadata-0`` directory holds ``%020d.log`` segments of record batches v2 (one batch per leader
write, the partition leader epoch in the batch header, the append time as the batch timestamp; the raft
layer's control entries are LeaderChange control batches), ``%020d-%010d.checkpoint`` snapshots and a
``leader-epoch-checkpoint``. Kafka's dump-log and `kraftlake decode` read it.

The entries are also mirrored in memory (a `MemoryRaftLog`, which answers every query): a metadata log is
small, and the step machine reads it on every fetch. Opening the directory recovers a torn or corrupt tail of
the last segment (truncated to the last valid batch, reported in `recovery`).

The bytes of the latest batches (`RAW_BATCH_CACHE_BYTES`) are kept as written (`raw_batch`), so a Fetch response
carries them without encoding them again; a follower offers the batches it received (`offer_batches`) and
writes those very bytes when it appends their entries: every replica holds the leader's batches byte for byte.
"""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kraftlake.logformat import (
    EpochEntry,
    RecoveryReport,
    SegmentedLog,
    build_control_batch,
    list_snapshots,
    read_snapshot,
    write_leader_epoch_checkpoint,
    write_snapshot,
)
from kraftlake.logformat import SnapshotId as FileSnapshotId
from kraftlake.logformat.batch import control_record_type
from kraftlake.logformat.framing import HEADER_SIZE, MAGIC, batch_header
from kraftlake.logformat.snapshot import mark_snapshot_deleted
from kraftlake.raft.memory_log import MemoryRaftLog
from kraftlake.raft.messages import NO_CONTROL_TYPE, Entry, OffsetAndEpoch, SnapshotId
from kraftlake.service.batch_writer import kraft_data_batch

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
RAW_BATCH_CACHE_BYTES = 32 * 1024 * 1024
"""The bytes of the latest batches kept as written, to be sent in Fetch responses as they are (4x a fetch)."""
_TIMESTAMP = operator.itemgetter(4)
_BATCH_BASE = operator.itemgetter(5)


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class FlushTicket:
    """An fsync to run off the loop: once `sync` returns, the entries below `end_offset` are durable, unless
    the log was truncated meanwhile (`FileRaftLog.flush_still_valid`)."""

    end_offset: int
    generation: int
    fd: int

    def sync(self) -> None:
        """fsync the segment (any thread) and close the descriptor."""
        try:
            os.fsync(self.fd)
        finally:
            os.close(self.fd)


class FileRaftLog:
    """A `kraftlake.raft.log.RaftLog` over segment files.

    Parameters
    ----------
    directory
        The partition directory (``<log dir>/__cluster_metadata-0``); created if missing.
    fsync
        Whether `flush` fsyncs (Kafka always does for the metadata log; off only for tests and benchmarks).
    clock
        Wall-clock milliseconds for entries that come without a timestamp.
    segment_bytes
        Roll to a new segment at this size (default: Kafka's 1 GiB).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fsync: bool = True,
        clock: Callable[[], int] = _wall_ms,
        segment_bytes: int | None = None,
        raw_cache_bytes: int = RAW_BATCH_CACHE_BYTES,
    ) -> None:
        self.directory = Path(directory)
        self._raw: dict[int, bytes] = {}  # batch base offset -> the batch's bytes, in log order
        self._raw_bytes = 0
        self._raw_limit = raw_cache_bytes
        self._offered: dict[int, bytes] = {}
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.clock = clock
        self._mem = MemoryRaftLog()
        self._segments = (
            SegmentedLog(self.directory, fsync=fsync)
            if segment_bytes is None
            else SegmentedLog(self.directory, fsync=fsync, segment_bytes=segment_bytes)
        )
        self.recovery: RecoveryReport | None = self._segments.recovery
        # the log starts at the oldest snapshot the segments continue from (older ones are retained for
        # readers behind the latest); a latest snapshot past the segments was installed from the leader
        snapshots = [
            (SnapshotId(fid.end_offset, fid.epoch), path) for fid, path in list_snapshots(self.directory)
        ]
        seg_start, seg_end = self._segments.log_start_offset, self._segments.end_offset
        covered = [(sid, path) for sid, path in snapshots if seg_start <= sid.offset <= seg_end]
        if snapshots and (not covered or covered[-1][0] != snapshots[-1][0]):
            covered = snapshots[-1:]
        later = covered[1:]
        if covered:
            self._mem.install_snapshot(covered[0][0], covered[0][1].read_bytes())
        start = self._mem.log_start_offset
        if self._segments.end_offset < start or self._segments.log_start_offset > start:
            # the snapshot is past the segments (installed from the leader) or the segments skip a gap
            self._segments.reset(start)
        for batch in self._segments.read(start):
            epoch, control, ts, base = (
                batch.partition_leader_epoch,
                batch.is_control,
                batch.base_timestamp,
                batch.base_offset,
            )
            self._mem.append(
                [
                    Entry(
                        rec.offset,
                        epoch,
                        control,
                        rec.value or b"",
                        ts,
                        base,
                        control_record_type(rec.key) if control else NO_CONTROL_TYPE,
                    )
                    for rec in batch.records
                    if rec.offset >= start
                ]
            )
            if base >= start:
                self._remember(base, batch.raw)
        # a batch straddling the snapshot end leaves a segment tail before `start`: nothing to fix, reads
        # start at the snapshot end
        self._mem.flush()
        for sid, path in later:
            self._mem.create_snapshot(sid, path.read_bytes())
        self._forget_older_snapshot_data()
        self._epochs_written: list[tuple[int, int]] = []
        # bumped whenever entries may be replaced (truncation, snapshot install): an fsync begun before that
        # does not make the new entries at those offsets durable
        self._generation = 0
        self._prewritten: tuple[SnapshotId, int] | None = None
        self._write_epoch_checkpoint()

    # -- queries (answered from memory) --------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._mem.log_start_offset

    @property
    def end_offset(self) -> int:
        return self._mem.end_offset

    @property
    def flushed_end_offset(self) -> int:
        return self._mem.flushed_end_offset

    def last_epoch(self) -> int:
        return self._mem.last_epoch()

    def epoch_at(self, offset: int) -> int:
        return self._mem.epoch_at(offset)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        return self._mem.end_offset_for_epoch(epoch)

    def latest_snapshot(self) -> SnapshotId | None:
        return self._mem.latest_snapshot()

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes:
        data = self._mem.snapshot_data(snapshot_id)
        if data is None:  # an older retained snapshot: read from its file (see `_forget_older_snapshot_data`)
            return (
                self.directory / FileSnapshotId(snapshot_id.offset, snapshot_id.epoch).filename
            ).read_bytes()
        return data

    def _forget_older_snapshot_data(self) -> None:
        for sid in self._mem.snapshot_ids()[:-1]:
            self._mem.forget_snapshot_data(sid)

    def read(self, start: int, end: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries in [start, end); a byte limit is applied at batch boundaries so followers copy whole batches."""
        return self._mem.read(start, end, max_bytes, whole_batches=True)

    def value_bytes(self, start: int, end: int) -> int:
        return self._mem.value_bytes(start, end)

    def read_all(self, start: int, end: int) -> list[Entry]:
        """Entries in [start, end) without a byte limit (empty if `end <= start`)."""
        return self._mem.read(start, end, None) if end > start else []

    # -- writes --------------------------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries as batches: one per leader batch (same epoch, kind, timestamp and batch base)."""
        if not entries:
            return
        if min(map(_TIMESTAMP, entries)) < 0 or min(map(_BATCH_BASE, entries)) < 0:
            # entries from a driver that does not stamp them (tests): one batch stamped now
            now = self.clock()
            base = entries[0].offset
            entries = [
                e
                if e.timestamp >= 0 and e.batch_base >= 0
                else Entry(e.offset, e.epoch, e.is_control, e.value, now, base, e.control_type)
                for e in entries
            ]
        timed = entries
        self._mem.append(timed)  # validates offsets and epochs first
        first, last = timed[0], timed[-1]
        if (
            first.batch_base == last.batch_base
            and first.epoch == last.epoch
            and first.timestamp == last.timestamp
            and first.is_control == last.is_control
        ):
            # one leader write (batch bases only grow along the log, so the entries between agree too)
            self._write_batch(timed)
            if not self._epochs_written or self._epochs_written[-1][0] != last.epoch:
                self._write_epoch_checkpoint()
            return
        start = 0
        first = timed[0]
        for i, entry in enumerate(timed):
            if (
                entry.batch_base != first.batch_base
                or entry.epoch != first.epoch
                or entry.is_control != first.is_control
                or entry.timestamp != first.timestamp
            ):
                self._write_batch(timed[start:i])
                start, first = i, entry
        self._write_batch(timed[start:])
        if not self._epochs_written or self._epochs_written[-1][0] != timed[-1].epoch:
            self._write_epoch_checkpoint()

    def _write_batch(self, group: Sequence[Entry]) -> None:
        first = group[0]
        raw = self._offered.pop(first.offset, None) if self._offered else None
        if raw is None or not _holds(raw, first, len(group)):
            if first.is_control:
                raw = build_control_batch(
                    first.offset, first.epoch, first.timestamp, [(e.control_type, e.value) for e in group]
                )
            else:
                raw = kraft_data_batch(first.offset, first.epoch, first.timestamp, [e.value for e in group])
        self._segments.append(raw)
        self._remember(first.offset, raw)

    # -- the batches' bytes --------------------------------------------------------------------------------
    def raw_batch(self, base_offset: int) -> bytes | None:
        """The bytes of the batch written at `base_offset`, if it is among the latest kept."""
        return self._raw.get(base_offset)

    def offer_batches(self, batches: Sequence[bytes]) -> None:
        """Batches received from the leader, to be written as they are when the next `append` writes exactly
        their entries (any other batch is encoded as usual). Replaces the previous offer."""
        self._offered = {batch_header(raw).base_offset: raw for raw in batches}

    def _remember(self, base_offset: int, raw: bytes) -> None:
        if self._raw_limit <= 0:
            return
        old = self._raw.pop(base_offset, None)
        if old is not None:
            self._raw_bytes -= len(old)
        self._raw[base_offset] = raw
        self._raw_bytes += len(raw)
        while self._raw_bytes > self._raw_limit and self._raw:
            self._raw_bytes -= len(self._raw.pop(next(iter(self._raw))))

    def _forget_raw_from(self, offset: int) -> None:
        """Drop the kept batches that hold `offset` or later (a truncation replaced them)."""
        raw = self._raw
        while raw:
            base = next(reversed(raw))
            data = raw[base]
            if batch_header(data).last_offset < offset:
                break
            del raw[base]
            self._raw_bytes -= len(data)

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        self._generation += 1
        self._forget_raw_from(offset)
        kept = (
            self._mem.read(self._segments_batch_start(offset), offset)
            if offset > self.log_start_offset
            else []
        )
        self._mem.truncate_to(offset)
        self._segments.truncate_to(offset)
        # the segment log drops whole batches: write back the part of the cut batch below `offset`
        redo = [e for e in kept if e.offset >= self._segments.end_offset]
        if redo:
            group = [
                Entry(
                    e.offset,
                    e.epoch,
                    e.is_control,
                    e.value,
                    e.timestamp if e.timestamp >= 0 else self.clock(),
                    redo[0].offset,
                    e.control_type,
                )
                for e in redo
            ]
            self._write_batch(group)
            self._segments.flush()
        self._write_epoch_checkpoint()

    def _segments_batch_start(self, offset: int) -> int:
        found = self._segments.locate(offset)
        if found is None:
            return offset
        seg, index = found
        return max(seg.batches[index].base_offset, self.log_start_offset)

    def flush(self, end_offset: int | None = None) -> None:
        if end_offset is None:
            self._segments.flush()
        self._mem.flush(end_offset)

    def begin_flush(self) -> FlushTicket | None:
        """Write the appends out to the OS and return the fsync that makes them durable, for a worker thread
        (None if this log does not fsync: `flush()` is then cheap enough for the loop). The driver then calls
        `flush(ticket.end_offset)` if `flush_still_valid(ticket)`."""
        if not self.fsync:
            return None
        return FlushTicket(self.end_offset, self._generation, self._segments.sync_descriptor())

    def flush_still_valid(self, ticket: FlushTicket) -> bool:
        """Whether nothing below the ticket's end offset was replaced since it was taken."""
        return ticket.generation == self._generation

    def close(self) -> None:
        """Flush and close the segment file."""
        self._segments.close()

    # -- snapshots -----------------------------------------------------------------------------------------
    def write_snapshot_file(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Write a snapshot's file ahead of `create_snapshot` (safe from another thread: it touches only the
        new ``.checkpoint`` file); `create_snapshot` with the same bytes then does not write it again."""
        write_snapshot(
            self.directory, FileSnapshotId(snapshot_id.offset, snapshot_id.epoch), [data], fsync=self.fsync
        )
        self._prewritten = (snapshot_id, len(data))

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._mem.create_snapshot(snapshot_id, data)
        if self._prewritten != (snapshot_id, len(data)):
            write_snapshot(
                self.directory,
                FileSnapshotId(snapshot_id.offset, snapshot_id.epoch),
                [data],
                fsync=self.fsync,
            )
        self._prewritten = None

    def delete_before_snapshot(self, retention_bytes: int = 0) -> None:
        self._mem.delete_before_snapshot(retention_bytes)
        self._forget_older_snapshot_data()
        self._segments.delete_segments_below(self.log_start_offset)
        kept = set(self._mem.snapshot_ids())
        for fid, path in list_snapshots(self.directory):
            if SnapshotId(fid.end_offset, fid.epoch) not in kept:
                mark_snapshot_deleted(path).unlink(missing_ok=True)
        self._write_epoch_checkpoint()

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._generation += 1
        self._raw.clear()
        self._raw_bytes = 0
        write_snapshot(
            self.directory, FileSnapshotId(snapshot_id.offset, snapshot_id.epoch), [data], fsync=self.fsync
        )
        self._mem.install_snapshot(snapshot_id, data)
        self._segments.reset(snapshot_id.offset)
        for fid, path in list_snapshots(self.directory):
            if (fid.end_offset, fid.epoch) != (snapshot_id.offset, snapshot_id.epoch):
                mark_snapshot_deleted(path).unlink(missing_ok=True)
        self._write_epoch_checkpoint()

    def snapshot_batches(self, snapshot_id: SnapshotId) -> list[object]:
        """The record batches of a stored snapshot file (when its data is Kafka batches)."""
        return list(
            read_snapshot(self.directory / FileSnapshotId(snapshot_id.offset, snapshot_id.epoch).filename)
        )

    # -- leader-epoch cache file ---------------------------------------------------------------------------
    def _epoch_entries(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        offset = self.log_start_offset
        while offset < self.end_offset:
            epoch = self._mem.epoch_at(offset)
            end = self._mem.end_offset_for_epoch(epoch).offset
            out.append((epoch, offset))
            offset = max(end, offset + 1)
        return out

    def _write_epoch_checkpoint(self) -> None:
        entries = self._epoch_entries()
        if entries == self._epochs_written and (self.directory / LEADER_EPOCH_CHECKPOINT).exists():
            return
        write_leader_epoch_checkpoint(
            self.directory / LEADER_EPOCH_CHECKPOINT, [EpochEntry(e, o) for e, o in entries], fsync=False
        )
        self._epochs_written = entries


def _holds(raw: bytes, first: Entry, count: int) -> bool:
    """Whether the batch `raw` is the batch of `count` entries from `first` (offset, epoch, kind, timestamp)."""
    if len(raw) < HEADER_SIZE:
        return False
    h = batch_header(raw)
    return (
        h.base_offset == first.offset
        and h.partition_leader_epoch == first.epoch
        and h.magic == MAGIC
        and h.last_offset_delta == count - 1
        and h.is_control == first.is_control
        and h.base_timestamp == first.timestamp
    )
