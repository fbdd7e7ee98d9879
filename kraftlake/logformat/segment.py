"""Segment files (``<baseOffset %020d>.log``) and a segmented log writer for Raft storage.

`SegmentedLog` keeps a directory of segments the way Kafka's ``UnifiedLog`` does for ``__cluster_metadata``:
appends whole batches at the end, rolls to a new segment at a size, flushes (fsync optional), truncates to an
offset (at batch granularity, like ``LogSegment.truncateTo``), and deletes whole segments below a log start
offset. On open it recovers the last segment like Kafka's log recovery (a torn tail is truncated and
reported). It writes no ``.index`` / ``.timeindex`` files: Kafka's tools read segments without them, and a
broker rebuilds missing indexes on load.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from kraftlake.logformat.atomic import fsync_dir
from kraftlake.logformat.batch import LOG_OVERHEAD, RecordBatch, decode_batch
from kraftlake.logformat.errors import SegmentError
from kraftlake.logformat.framing import scan_batch_headers
from kraftlake.logformat.reader import BatchReader, RecoveryReport, _open_buffer

LOG_SUFFIX = ".log"
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
"""Kafka's ``metadata.log.segment.bytes`` default (1 GiB)."""
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
# base offset, batch length, partition leader epoch, magic, (crc, attributes), last offset delta
_VERIFIED_HEAD = struct.Struct(">qiib6xi")
_VERIFIED_MIN = 61  # a v2 batch header


class VerifiedBatch(Protocol):
    """A batch whose CRC its holder checked: its bytes and the offsets and epoch its header says."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def data(self) -> bytes: ...


def segment_filename(base_offset: int) -> str:
    """``%020d.log``."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def parse_segment_filename(name: str | os.PathLike[str]) -> int | None:
    """The base offset in a segment file name, or None if the name is not a segment's."""
    m = _SEGMENT_NAME.match(Path(name).name)
    return int(m.group(1)) if m else None


def list_segments(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(base_offset, path)`` of the segments of a log directory, in offset order."""
    found = []
    for p in Path(directory).iterdir():
        base = parse_segment_filename(p)
        if base is not None and p.is_file():
            found.append((base, p))
    found.sort()
    return found


@dataclass
class BatchLocation:
    """Where a batch lives in its segment."""

    base_offset: int
    last_offset: int
    position: int
    size: int
    epoch: int


@dataclass
class Segment:
    """One segment file and the locations of its batches (kept in memory; the metadata log is small)."""

    base_offset: int
    path: Path
    size: int = 0
    batches: list[BatchLocation] = field(default_factory=list)

    @property
    def next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when empty)."""
        return self.batches[-1].last_offset + 1 if self.batches else self.base_offset


def scan_locations(buf: Any, source: str) -> list[BatchLocation]:
    """The batch locations of a segment buffer from the headers alone (no CRC), for segments already recovered.

    Raises
    ------
    LogFormatError
        If a header is truncated or malformed (`TruncatedBatchError`, `CorruptBatchError`, `BadMagicError`).
    """
    return [
        BatchLocation(
            h.base_offset, h.base_offset + h.last_offset_delta, h.position, h.size, h.partition_leader_epoch
        )
        for h in scan_batch_headers(buf, source=source)
    ]


class SegmentedLog:
    """A directory of segment files with append, roll, flush, truncate and delete-below.

    Parameters
    ----------
    directory : path
        Created if missing.
    segment_bytes : int
        Roll to a new segment when an append would make the active one larger than this.
    fsync : bool
        Whether `flush` fsyncs (files and, on create/delete, the directory).
    initial_offset : int
        The base offset of the first segment of an empty directory.

    Attributes
    ----------
    recovery : RecoveryReport or None
        What opening the log dropped from the tail of the last segment (None if it was empty).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: bool = False,
        initial_offset: int = 0,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.segments: list[Segment] = []
        self.recovery: RecoveryReport | None = None
        self._active: BinaryIO | None = None
        found = list_segments(self.directory)
        for i, (base, path) in enumerate(found):
            seg = Segment(base, path, path.stat().st_size)
            if i == len(found) - 1:
                seg.batches, self.recovery = self._recover(path)
                seg.size = self.recovery.valid_bytes
            else:
                with _open_buffer(path) as buf:
                    seg.batches = scan_locations(buf, str(path))
            self.segments.append(seg)
        if not self.segments:
            self._new_segment(initial_offset)
        self._open_active()

    # ------------------------------------------------------------------------------------------ state
    @property
    def active(self) -> Segment:
        """The segment appends go to."""
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        """The base offset of the first segment."""
        return self.segments[0].base_offset

    @property
    def end_offset(self) -> int:
        """The log end offset: the offset the next appended batch must start at.

        An empty active segment says it (its base offset): a log rolled past its end, to go on after a snapshot
        beyond it, has a gap there.
        """
        if not self.active.batches:
            return self.active.base_offset
        for seg in reversed(self.segments):
            if seg.batches:
                return seg.next_offset
        return self.active.base_offset

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments."""
        return sum(s.size for s in self.segments)

    def last_batch(self) -> BatchLocation | None:
        """The location of the last batch, if any."""
        for seg in reversed(self.segments):
            if seg.batches:
                return seg.batches[-1]
        return None

    # ------------------------------------------------------------------------------------------ writes
    def append(self, batch: bytes | RecordBatch) -> BatchLocation:
        """Append one encoded batch (CRC-checked) whose base offset is `end_offset`; return its location.

        Raises
        ------
        SegmentError
            If the batch does not start at the log end offset.
        LogFormatError
            If the bytes are not one whole, valid batch.
        """
        raw = batch.raw if isinstance(batch, RecordBatch) else bytes(batch)
        decoded = decode_batch(raw, 0, source="<append>")
        if decoded.size != len(raw):
            raise SegmentError(
                f"append takes exactly one batch; got {len(raw)} bytes for a batch of {decoded.size}",
                source=str(self.directory),
                offset=decoded.base_offset,
            )
        if decoded.base_offset != self.end_offset:
            raise SegmentError(
                f"batch base offset {decoded.base_offset} is not the log end offset {self.end_offset}",
                source=str(self.directory),
                offset=decoded.base_offset,
            )
        if self.active.size > 0 and self.active.size + len(raw) > self.segment_bytes:
            self.roll(decoded.base_offset)
        seg = self.active
        assert self._active is not None
        self._active.write(raw)
        loc = BatchLocation(
            decoded.base_offset, decoded.last_offset, seg.size, len(raw), decoded.partition_leader_epoch
        )
        seg.batches.append(loc)
        seg.size += len(raw)
        return loc

    def append_verified(self, batches: Sequence[VerifiedBatch]) -> int:
        """Append batches the caller has already CRC-checked, in offset order from `end_offset`; return the
        bytes written.

        `append` decodes every batch again; a replica that checked each batch's CRC as it split a fetched
        buffer (``kraftlake.follow.observer.split_batches``) writes the same bytes without that second pass,
        with one write per segment. Only what is cheap is checked here: each batch starts where the previous
        one ended, and its header agrees with its `base_offset`, `last_offset`, `epoch` and length. Rolls as
        `append` does.

        Raises
        ------
        SegmentError
            If a batch does not start at the log end offset or its header disagrees with it (the batches
            before it are appended).
        """
        written = 0
        i = 0
        n = len(batches)
        check = _VERIFIED_HEAD.unpack_from
        while i < n:
            seg = self.segments[-1]
            end = seg.batches[-1].last_offset + 1 if seg.batches else seg.base_offset  # = end_offset
            pos = seg.size
            add = seg.batches.append
            first = i
            try:
                while i < n:
                    b = batches[i]
                    raw = b.data
                    size = len(raw)
                    if b.base_offset != end:
                        raise SegmentError(
                            f"batch base offset {b.base_offset} is not the log end offset {end}",
                            source=str(self.directory),
                            offset=b.base_offset,
                        )
                    if size < _VERIFIED_MIN or check(raw) != (
                        end,
                        size - LOG_OVERHEAD,
                        b.epoch,
                        2,
                        b.last_offset - end,
                    ):
                        raise SegmentError(
                            f"a batch of {size} bytes whose header is not (base offset {end}, "
                            f"last offset {b.last_offset}, epoch {b.epoch}, magic 2)",
                            source=str(self.directory),
                            offset=end,
                        )
                    if pos > 0 and pos + size > self.segment_bytes:
                        break  # roll
                    add(BatchLocation(end, b.last_offset, pos, size, b.epoch))
                    pos += size
                    end = b.last_offset + 1
                    i += 1
            finally:
                if i > first:
                    assert self._active is not None
                    self._active.write(b"".join([b.data for b in batches[first:i]]))
                    written += pos - seg.size
                    seg.size = pos
            if i < n:
                self.roll(end)
        return written

    def flush(self) -> None:
        """Write buffered appends to the file (and fsync it if the log was opened with ``fsync=True``)."""
        if self._active is not None:
            self._active.flush()
            if self.fsync:
                os.fsync(self._active.fileno())

    def sync_descriptor(self) -> int:
        """Write buffered appends to the file and return a new descriptor of the active segment, for an fsync
        on another thread (the caller closes it). Everything appended so far is then durable once it is
        fsynced: rolling fsyncs the segment it leaves."""
        assert self._active is not None
        self._active.flush()
        return os.dup(self._active.fileno())

    def roll(self, base_offset: int | None = None) -> Segment:
        """Start a new active segment at `base_offset` (default: the log end offset)."""
        base = self.end_offset if base_offset is None else base_offset
        if self.active.size == 0 and self.active.base_offset == base:
            return self.active
        self.flush()
        self._close_active()
        self._new_segment(base)
        self._open_active()
        return self.active

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset` (whole batches); return the new end offset.

        As ``LogSegment.truncateTo``, a batch containing `offset` is removed entirely. Truncating below the
        first segment empties the log and restarts it at `offset`.
        """
        if offset >= self.end_offset:
            return self.end_offset
        self.flush()
        self._close_active()
        if offset <= self.log_start_offset:
            return self.reset(offset)
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            self._delete(self.segments.pop())
        seg = self.segments[-1]
        keep = [b for b in seg.batches if b.last_offset < offset]
        new_size = keep[-1].position + keep[-1].size if keep else 0
        with open(seg.path, "r+b") as f:
            f.truncate(new_size)
            if self.fsync:
                os.fsync(f.fileno())
        seg.batches = keep
        seg.size = new_size
        self._open_active()
        return self.end_offset

    def reset(self, offset: int) -> int:
        """Delete every segment and start an empty log at `offset` (``truncateFullyAndStartAt``)."""
        self._close_active()
        for seg in self.segments:
            self._delete(seg)
        self.segments = []
        self._new_segment(offset)
        self._open_active()
        return offset

    def delete_segments_below(self, log_start_offset: int) -> list[Path]:
        """Delete whole segments all of whose records are below `log_start_offset`; the active one stays."""
        deleted = []
        while len(self.segments) > 1 and self.segments[1].base_offset <= log_start_offset:
            seg = self.segments.pop(0)
            self._delete(seg)
            deleted.append(seg.path)
        return deleted

    def close(self) -> None:
        """Flush and close the active segment."""
        self.flush()
        self._close_active()

    def __enter__(self) -> SegmentedLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ reads
    def locate(self, offset: int) -> tuple[Segment, int] | None:
        """The segment and index of the first batch whose last offset is >= `offset`, or None past the end."""
        for seg in self.segments:
            if seg.batches and seg.batches[-1].last_offset >= offset:
                lo, hi = 0, len(seg.batches)
                while lo < hi:
                    mid = (lo + hi) // 2
                    if seg.batches[mid].last_offset < offset:
                        lo = mid + 1
                    else:
                        hi = mid
                return seg, lo
        return None

    def read(self, from_offset: int, max_bytes: int | None = None) -> Iterator[RecordBatch]:
        """Batches from the one containing `from_offset` on (at least one, then up to `max_bytes` in total)."""
        self.flush()
        found = self.locate(from_offset)
        if found is None:
            return
        seg_index = self.segments.index(found[0])
        start = found[1]
        total = 0
        for seg in self.segments[seg_index:]:
            if not seg.batches[start:]:
                start = 0
                continue
            with open(seg.path, "rb") as f:
                for loc in seg.batches[start:]:
                    if max_bytes is not None and total > 0 and total + loc.size > max_bytes:
                        return
                    f.seek(loc.position)
                    raw = f.read(loc.size)
                    yield decode_batch(raw, 0, source=str(seg.path), base_position=loc.position)
                    total += loc.size
            start = 0

    def read_bytes(self, from_offset: int, max_bytes: int) -> bytes:
        """The raw bytes of whole batches from `from_offset` (at least one batch), for Fetch responses."""
        return b"".join(b.raw for b in self.read(from_offset, max_bytes))

    # ------------------------------------------------------------------------------------------ internals
    def _recover(self, path: Path) -> tuple[list[BatchLocation], RecoveryReport]:
        with _open_buffer(path) as buf:
            reader = BatchReader(buf, str(path), recover=True)
            locs = [
                BatchLocation(b.base_offset, b.last_offset, b.position, b.size, b.partition_leader_epoch)
                for b in reader
            ]
        assert reader.report is not None
        if reader.report.truncated_bytes:
            with open(path, "r+b") as f:
                f.truncate(reader.report.valid_bytes)
                if self.fsync:
                    os.fsync(f.fileno())
        return locs, reader.report

    def _new_segment(self, base_offset: int) -> None:
        path = self.directory / segment_filename(base_offset)
        path.touch()
        self.segments.append(Segment(base_offset, path, path.stat().st_size))
        if self.fsync:
            fsync_dir(self.directory)

    def _open_active(self) -> None:
        self._active = open(self.active.path, "ab")  # noqa: SIM115 - closed in close()/_close_active

    def _close_active(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None

    def _delete(self, seg: Segment) -> None:
        for suffix in (".index", ".timeindex"):
            seg.path.with_suffix(suffix).unlink(missing_ok=True)
        seg.path.unlink(missing_ok=True)
        if self.fsync:
            fsync_dir(self.directory)
