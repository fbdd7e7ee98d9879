"""Images from files: a snapshot, a log, a snapshot plus the tail of a log; ``image_at(log_dir, offset)``."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kraftlake.errors import KraftlakeError
from kraftlake.image.errors import ImageError, SkippedSnapshotWarning, located
from kraftlake.image.image import EMPTY, MetadataImage
from kraftlake.image.loader import ImageLoader
from kraftlake.image.model import Provenance
from kraftlake.logformat.batch import RecordBatch
from kraftlake.logformat.reader import iter_file_batches
from kraftlake.logformat.snapshot import iter_valid_snapshot
from kraftlake.records.reader import MetadataRecord, iter_records

METADATA_PARTITION = "__cluster_metadata-0"
_CHECKPOINT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_SEGMENT = re.compile(r"^(\d{20})\.log$")


@dataclass(frozen=True)
class SnapshotFile:
    """A ``<endOffset>-<epoch>.checkpoint`` file: it holds the state at offset ``end_offset - 1``."""

    path: Path
    end_offset: int
    epoch: int


def partition_dir(path: str | os.PathLike[str]) -> Path:
    """The ``__cluster_metadata-0`` directory of ``path`` (itself, or its child of that name)."""
    p = Path(path)
    if (p / METADATA_PARTITION).is_dir():
        return p / METADATA_PARTITION
    if p.is_dir():
        return p
    raise ImageError(f"{p}: not a metadata log directory")


def segments(path: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The ``.log`` segments of a metadata partition directory, by base offset.

    Raises
    ------
    ImageError
        If an entry named like a segment is not a file (a directory named ``*.log``).
    """
    d = partition_dir(path)
    found = [(int(m.group(1)), d / n) for n in os.listdir(d) if (m := _SEGMENT.match(n))]
    for _, p in found:
        if not p.is_file():
            raise ImageError(f"{p}: named like a segment but not a file")
    return sorted(found)


def snapshots(path: str | os.PathLike[str]) -> list[SnapshotFile]:
    """The ``.checkpoint`` snapshots of a metadata partition directory, by end offset (valid or not: loading
    one checks it)."""
    d = partition_dir(path)
    found = [
        SnapshotFile(d / n, int(m.group(1)), int(m.group(2)))
        for n in os.listdir(d)
        if (m := _CHECKPOINT.match(n))
    ]
    return sorted(found, key=lambda s: (s.end_offset, s.epoch))


def file_records(path: str | os.PathLike[str]) -> Iterator[MetadataRecord]:
    """The committed records of one segment or ``.checkpoint`` file (its batches as they are, unchecked)."""
    return iter_records(iter_file_batches(path), source=str(path))


def snapshot_file_records(path: str | os.PathLike[str]) -> Iterator[MetadataRecord]:
    """The records of a ``.checkpoint`` file, refusing one that is not a whole snapshot (no SnapshotHeader
    first, no SnapshotFooter last: `kraftlake.logformat.SnapshotFormatError`, raised after its last record)."""
    return iter_records(iter_valid_snapshot(path), source=str(path))


def log_records(path: str | os.PathLike[str], start_offset: int = 0) -> Iterator[MetadataRecord]:
    """The records of all segments of a metadata log directory from ``start_offset`` on."""
    segs = segments(path)
    for i, (_base, seg) in enumerate(segs):
        if i + 1 < len(segs) and segs[i + 1][0] <= start_offset:
            continue
        for mr in file_records(seg):
            if mr.offset >= start_offset:
                yield mr


def _snapshot_provenance(path: Path, ts: int) -> Provenance:
    m = _CHECKPOINT.match(path.name)
    if m:
        return Provenance(int(m.group(1)) - 1, int(m.group(2)), ts)
    return Provenance(-1, -1, ts)


def load_snapshot(path: str | os.PathLike[str]) -> MetadataImage:
    """The image held by a ``.checkpoint`` file (also ``bootstrap.checkpoint``).

    Its provenance is the snapshot id: offset ``end_offset - 1``, the epoch of its name and the header's
    LastContainedLogTimestamp.

    Raises
    ------
    kraftlake.logformat.SnapshotFormatError
        The file is not a whole snapshot (empty, no SnapshotHeader first, no SnapshotFooter last).
    kraftlake.logformat.LogFormatError, kraftlake.records.RecordDecodeError
        Its batches or records cannot be read (naming the file, byte position and offset).
    ImageError
        A record cannot be applied (`ReplayError`, naming the file and the record's offset), or the snapshot
        ends inside a metadata transaction.
    """
    p = Path(path)
    loader = ImageLoader(EMPTY)
    feed = loader.feed
    ts = -1
    header = False
    mr = None
    try:
        for mr in snapshot_file_records(
            p
        ):  # streamed: a 2M-partition snapshot is never held as a record list
            if not mr.is_control:
                feed(mr)
            elif not header and mr.type == "SnapshotHeaderRecord":
                ts = mr.record.last_contained_log_timestamp  # type: ignore[union-attr]
                header = True
        if loader.in_transaction:
            raise ImageError(f"{p}: snapshot ends inside a metadata transaction")
        image = loader.image()
    except ImageError as exc:
        raise located(exc, str(p), None if mr is None else mr.offset) from exc
    return image.with_provenance(_snapshot_provenance(p, ts))


def load_log(
    path: str | os.PathLike[str], offset: int | None = None, image: MetadataImage = EMPTY
) -> MetadataImage:
    """The image of a log (a directory, or one segment file) at ``offset`` (None = its end), on ``image``.

    The segments must continue ``image`` without a hole: the one holding the offset after ``image``'s (0 on
    the empty image) must start at or before it, and each next one where the one before ends. ``offset`` past
    the log's last record gives the image at that record (`image_at` and `load_path` refuse it).

    Raises
    ------
    ImageError
        Records missing (the log starts after ``image``'s offset + 1, or a hole between segments), or a record
        that cannot be applied (`ReplayError`); both name the file and offset.
    kraftlake.logformat.LogFormatError, kraftlake.records.RecordDecodeError
        Unreadable batches or records.
    """
    p = Path(path)
    start = image.provenance.offset + 1
    tail = _Tail(p, start, offset)
    loader = ImageLoader(image)
    feed = loader.feed
    mr = None
    try:
        for mr in tail.records():
            at = mr.offset
            if at < start:
                continue
            if offset is not None and at > offset:
                break
            feed(mr)
        return loader.image()
    except ImageError as exc:
        raise located(exc, str(tail.current), None if mr is None else mr.offset) from exc


class _Tail:
    """The records of a log from ``start`` on (to the segment holding ``stop``, None = all), segment by segment,
    refusing a hole before or between them."""

    def __init__(self, path: Path, start: int, stop: int | None) -> None:
        self.start = start
        self.stop = stop
        if path.is_file():
            m = _SEGMENT.match(path.name)
            self.segments = [(int(m.group(1)) if m else 0, path)]
        else:
            segs = segments(path)
            first = 0
            for i in range(len(segs) - 1):
                if segs[i + 1][0] <= start:
                    first = i + 1
            self.segments = segs[first:]
        self.current: Path = self.segments[0][1] if self.segments else path
        self.last_offset = -1  # of the last batch read

    def _batches(self, seg: Path) -> Iterator[RecordBatch]:
        for batch in iter_file_batches(seg):
            self.last_offset = batch.last_offset
            yield batch

    def records(self) -> Iterator[MetadataRecord]:
        expected = self.start
        for base, seg in self.segments:
            if self.stop is not None and base > self.stop:
                return
            self.current = seg
            if base > expected:
                before = (
                    f"the state replayed ends at offset {self.start - 1}"
                    if expected == self.start
                    else f"the segment before ends at offset {expected - 1}"
                )
                raise located(
                    ImageError(
                        f"the segment starts at offset {base}: records {expected}..{base - 1} "
                        f"are missing ({before})"
                    ),
                    str(seg),
                    None,
                )
            yield from iter_records(self._batches(seg), source=str(seg))
            expected = max(expected, self.last_offset + 1)


def image_at(
    log_dir: str | os.PathLike[str],
    offset: int | None = None,
    on_skip: Callable[[Path, KraftlakeError], None] | None = None,
) -> MetadataImage:
    """The state at ``offset`` (including the record at it; None = the log end) of a metadata log directory.

    Starts from the newest snapshot that does not pass ``offset`` and replays the log's tail; a snapshot at
    offset 0 is not used when the log starts at 0. Kafka 4.4's ``StorageTool format`` writes a controller's
    bootstrap metadata (features, SCRAM credentials) into that snapshot and the active controller writes the
    same records into the log (its bootstrap transaction); brokers, observers (a ``kraftlake follow`` mirror)
    and the warehouse have only the log, so the state at an offset is the log's. A snapshot that
    cannot be loaded (not a whole snapshot, unreadable, a record that does not apply) is skipped, as Kafka
    refuses it: ``on_skip(path, error)`` is called (default: a `SkippedSnapshotWarning`) and the next older
    snapshot is tried; without one the log is replayed from its start, which must then be offset 0.

    Raises
    ------
    ImageError
        ``offset`` is negative or past the log's last offset; no snapshot (or only unusable ones) covers an
        offset below the log's start; records are missing; the directory holds neither segments nor snapshots.
    kraftlake.logformat.LogFormatError, kraftlake.records.RecordDecodeError
        The log's batches or records cannot be read.
    """
    d = partition_dir(log_dir)
    if offset is not None and offset < 0:
        raise ImageError(f"{d}: offset {offset} is negative")
    segs = segments(d)
    snaps = snapshots(d)
    if not segs and not snaps:
        raise ImageError(f"{d}: no segments (.log) and no snapshots (.checkpoint)")
    report = on_skip if on_skip is not None else _warn_skipped
    skipped: list[str] = []
    image = None
    from_zero = bool(segs) and segs[0][0] == 0
    usable = [
        s
        for s in snaps
        if (offset is None or s.end_offset - 1 <= offset) and not (from_zero and s.end_offset == 0)
    ]
    for snap in reversed(usable):
        try:
            image = load_snapshot(snap.path)
            break
        except KraftlakeError as exc:
            skipped.append(snap.path.name)
            report(snap.path, exc)
    if image is None:
        if not segs or segs[0][0] > 0:
            start = segs[0][0] if segs else None
            unusable = f" (unusable: {', '.join(skipped)})" if skipped else ""
            raise ImageError(
                f"{d}: "
                + ("no segments" if start is None else f"the log starts at offset {start}")
                + f" and no usable snapshot covers offset {0 if offset is None else offset}"
                + unusable
            )
        image = EMPTY
    result = load_log(d, offset, image) if segs else image
    if offset is not None and result.provenance.offset != offset and offset > _log_end(segs):
        raise ImageError(
            f"{d}: offset {offset} is past the end of the log (its last offset is {result.provenance.offset})"
        )
    return result


def _warn_skipped(path: Path, exc: KraftlakeError) -> None:
    warnings.warn(f"skipped snapshot {path}: {exc}", SkippedSnapshotWarning, stacklevel=3)


def load_path(
    path: str | os.PathLike[str],
    offset: int | None = None,
    on_skip: Callable[[Path, KraftlakeError], None] | None = None,
) -> MetadataImage:
    """The image of a log directory, a segment or a ``.checkpoint`` file (``kraftlake image PATH``).

    Raises
    ------
    ImageError
        ``path`` does not exist or is none of those; ``offset`` is negative, past the end, or (for a snapshot)
        not the snapshot's offset; and as `image_at`, `load_log`, `load_snapshot`.
    """
    p = Path(path)
    if offset is not None and offset < 0:
        raise ImageError(f"{p}: offset {offset} is negative")
    if p.is_dir():
        return image_at(p, offset, on_skip)
    if not p.exists():
        raise ImageError(f"{p}: no such file or directory")
    if p.name.endswith(".checkpoint"):
        img = load_snapshot(p)
        if offset is not None and offset != img.provenance.offset:
            raise ImageError(f"{p}: a snapshot holds only the state at offset {img.provenance.offset}")
        return img
    if not p.name.endswith(".log"):
        raise ImageError(f"{p}: not a segment (.log), a snapshot (.checkpoint) or a log directory")
    img = load_log(p, offset)
    if offset is not None and img.provenance.offset != offset:
        raise ImageError(
            f"{p}: offset {offset} is past the end of the segment (its last offset is "
            f"{img.provenance.offset})"
        )
    return img


def _log_end(segs: list[tuple[int, Path]]) -> int:
    """The last offset of the last segment's whole batches (-1 if none): records that do not move the image's
    offset (control records) still belong to the log."""
    if not segs:
        return -1
    last = -1
    for batch in iter_file_batches(segs[-1][1], recover=True):
        last = batch.last_offset
    return last


def log_start(path: str | os.PathLike[str]) -> tuple[MetadataImage, int]:
    """The image a log directory's records follow and its first offset: the empty image and 0 for a log from
    the start, else the oldest snapshot that covers the log's start (a controller deletes the segments a
    snapshot covers), skipping with a ``SkippedSnapshotWarning`` one Kafka would not load.

    Raises
    ------
    ImageError
        The log starts past 0 and no usable snapshot covers its start.
    """
    d = partition_dir(path)
    # empty segments hold no offset: a fresh mirror's empty segment 0 is still there (or already gone, its next
    # one not yet made) when the follower reports a snapshot installed; the log then starts at the snapshot
    segs = [(base, p) for base, p in segments(d) if _size(p) > 0]
    base = segs[0][0] if segs else max((s.end_offset for s in snapshots(d)), default=0)
    if base == 0:
        return EMPTY, 0
    skipped = []
    for snap in (s for s in snapshots(d) if s.end_offset >= base):
        try:
            return load_snapshot(snap.path), snap.end_offset
        except KraftlakeError as exc:
            skipped.append(snap.path.name)
            _warn_skipped(snap.path, exc)
    unusable = f" (unusable: {', '.join(skipped)})" if skipped else ""
    raise ImageError(f"{d}: the log starts at offset {base} and no usable snapshot covers it{unusable}")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # deleted meanwhile (a mirror resetting its log to a snapshot)
        return 0
