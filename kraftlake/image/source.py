"""Images from files: a snapshot, a log, a snapshot plus the tail of a log; ``image_at(log_dir, offset)``."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kraftlake.image.errors import ImageError
from kraftlake.image.image import EMPTY, MetadataImage
from kraftlake.image.loader import ImageLoader
from kraftlake.image.model import Provenance
from kraftlake.logformat.reader import iter_file_batches
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
    """The ``.log`` segments of a metadata partition directory, by base offset."""
    d = partition_dir(path)
    found = [(int(m.group(1)), d / n) for n in os.listdir(d) if (m := _SEGMENT.match(n))]
    return sorted(found)


def snapshots(path: str | os.PathLike[str]) -> list[SnapshotFile]:
    """The ``.checkpoint`` snapshots of a metadata partition directory, by end offset."""
    d = partition_dir(path)
    found = [
        SnapshotFile(d / n, int(m.group(1)), int(m.group(2))) for n in os.listdir(d) if (m := _CHECKPOINT.match(n))
    ]
    return sorted(found, key=lambda s: (s.end_offset, s.epoch))


def file_records(path: str | os.PathLike[str]) -> Iterator[MetadataRecord]:
    """The committed records of one segment or ``.checkpoint`` file."""
    return iter_records(iter_file_batches(path), source=str(path))


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
    """
    p = Path(path)
    loader = ImageLoader(EMPTY)
    feed = loader.feed
    ts = -1
    header = False
    for mr in file_records(p):  # streamed: a 2M-partition snapshot is never held as a record list
        if not mr.is_control:
            feed(mr)
        elif not header and mr.type == "SnapshotHeaderRecord":
            ts = mr.record.last_contained_log_timestamp  # type: ignore[union-attr]
            header = True
    if loader.in_transaction:
        raise ImageError(f"{p}: snapshot ends inside a metadata transaction")
    return loader.image().with_provenance(_snapshot_provenance(p, ts))


def load_log(path: str | os.PathLike[str], offset: int | None = None, image: MetadataImage = EMPTY) -> MetadataImage:
    """The image of a log (a directory, or one segment file) at ``offset`` (None = its end), on ``image``."""
    p = Path(path)
    start = image.provenance.offset + 1
    recs = file_records(p) if p.is_file() else log_records(p, start)
    loader = ImageLoader(image)
    for mr in recs:
        if mr.offset < start:
            continue
        if offset is not None and mr.offset > offset:
            break
        loader.feed(mr)
    return loader.image()


def image_at(log_dir: str | os.PathLike[str], offset: int | None = None) -> MetadataImage:
    """The state at ``offset`` (including the record at it; None = the log end) of a metadata log directory.

    Starts from the newest snapshot that does not pass ``offset`` and replays the log's tail; without one,
    replays the log from its start, which must then be offset 0.
    """
    d = partition_dir(log_dir)
    usable = [s for s in snapshots(d) if offset is None or s.end_offset - 1 <= offset]
    segs = segments(d)
    image = EMPTY
    if usable:
        image = load_snapshot(usable[-1].path)
    elif segs and segs[0][0] > 0:
        raise ImageError(f"{d}: the log starts at offset {segs[0][0]} and no snapshot covers offset {offset}")
    if not segs:
        return image
    result = load_log(d, offset, image)
    if offset is not None and result.provenance.offset < offset and not usable:
        pass  # an offset past the log end gives the image at the end
    return result


def load_path(path: str | os.PathLike[str], offset: int | None = None) -> MetadataImage:
    """The image of a log directory, a segment or a ``.checkpoint`` file (``kraftlake image PATH``)."""
    p = Path(path)
    if p.is_dir():
        return image_at(p, offset)
    if p.suffix == ".checkpoint":
        img = load_snapshot(p)
        if offset is not None and offset != img.provenance.offset:
            raise ImageError(f"{p}: a snapshot holds only the state at offset {img.provenance.offset}")
        return img
    return load_log(p, offset)
