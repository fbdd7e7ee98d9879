"""KRaft snapshot files: ``<endOffset %020d>-<epoch %010d>.checkpoint`` holding record batches.

A snapshot's batches are a SnapshotHeader control batch, data batches and a SnapshotFooter control batch;
callers build those (see `kraftlake.logformat.batch.build_control_batch`), this module names, writes and
reads the files. Writes go to ``<id>-<random>.checkpoint.part`` and are renamed into place, as Kafka's
``Snapshots.createTempFile`` / ``FileRawSnapshotWriter.freeze`` do. ``bootstrap.checkpoint`` has the same
format under a fixed name.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlake.logformat.atomic import fsync_dir
from kraftlake.logformat.batch import ControlRecordType, RecordBatch, control_record_type
from kraftlake.logformat.errors import MalformedFileError, SnapshotFormatError
from kraftlake.logformat.reader import iter_file_batches, read_file_batches

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETE_SUFFIX = ".checkpoint.deleted"
BOOTSTRAP_FILE = "bootstrap.checkpoint"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True, order=True)
class SnapshotId:
    """A snapshot's id: the end offset (exclusive: the offset after the last contained record) and its epoch."""

    end_offset: int
    epoch: int

    @property
    def filename(self) -> str:
        """The snapshot's file name, ``%020d-%010d.checkpoint``."""
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"

    @classmethod
    def parse(cls, name: str | os.PathLike[str]) -> SnapshotId:
        """Parse a snapshot file name (a path's last component).

        Raises
        ------
        MalformedFileError
            If the name is not ``%020d-%010d.checkpoint``.
        """
        base = Path(name).name
        m = _NAME.match(base)
        if m is None:
            raise MalformedFileError(
                "not a snapshot file name (expected <20-digit end offset>-<10-digit epoch>.checkpoint)",
                source=str(name),
            )
        return cls(int(m.group(1)), int(m.group(2)))

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> SnapshotId | None:
        """The id of a snapshot file name, or None for any other name (partial, deleted, other files)."""
        m = _NAME.match(Path(path).name)
        return cls(int(m.group(1)), int(m.group(2))) if m else None


def snapshot_path(directory: str | os.PathLike[str], snapshot_id: SnapshotId) -> Path:
    """Where the snapshot `snapshot_id` lives in a log directory."""
    return Path(directory) / snapshot_id.filename


def list_snapshots(directory: str | os.PathLike[str]) -> list[tuple[SnapshotId, Path]]:
    """The complete snapshots of a log directory, in id order (partial and deleted files are skipped)."""
    found = []
    for p in Path(directory).iterdir():
        sid = SnapshotId.from_path(p)
        if sid is not None and p.is_file():
            found.append((sid, p))
    found.sort()
    return found


def read_snapshot(path: str | os.PathLike[str], **options: Any) -> list[RecordBatch]:
    """All batches of a ``.checkpoint`` (or ``bootstrap.checkpoint``) file, strictly."""
    return read_file_batches(path, **options)


def iter_snapshot(path: str | os.PathLike[str], **options: Any) -> Iterator[RecordBatch]:
    """Iterate the batches of a ``.checkpoint`` file (any batches: `iter_valid_snapshot` checks the frame)."""
    return iter_file_batches(path, **options)


def _control_type(batch: RecordBatch, index: int) -> str:
    """The name of the control type of record ``index`` of a control batch (``UNKNOWN(n)`` if Kafka has none)."""
    try:
        ctype = control_record_type(batch.records[index].key)
    except ValueError:
        return "a record without a control key"
    try:
        return ControlRecordType(ctype).name
    except ValueError:
        return f"UNKNOWN({ctype})"


def check_snapshot_batches(batches: Iterable[RecordBatch], source: str) -> Iterator[RecordBatch]:
    """Pass the batches of a snapshot through, checking its frame as they go.

    The first batch must be a control batch whose first record is a SnapshotHeader: Kafka's
    ``RecordsSnapshotReader`` refuses anything else ("First batch is not a control batch with at least one
    record", "First control record is not a snapshot header"). The last batch must end with a SnapshotFooter:
    Kafka writes it before it renames ``.checkpoint.part`` into place, so a ``.checkpoint`` without one (empty,
    only its header, cut short) was not written by Kafka's snapshot writer. The footer is known to be missing
    only at the end: a streaming consumer gets every batch before the error.

    Raises
    ------
    SnapshotFormatError
        Naming ``source`` and the byte position of the batch at fault (0 for an empty file).
    """
    last: RecordBatch | None = None
    for batch in batches:
        if last is None:
            if not batch.is_control or not batch.records:
                raise SnapshotFormatError(
                    "not a snapshot: the first batch is not a control batch with at least one record",
                    source=source,
                    position=batch.position,
                    offset=batch.base_offset,
                )
            first = _control_type(batch, 0)
            if first != ControlRecordType.SNAPSHOT_HEADER.name:
                raise SnapshotFormatError(
                    f"not a snapshot: the first control record is not a SnapshotHeader ({first})",
                    source=source,
                    position=batch.position,
                    offset=batch.base_offset,
                )
        last = batch
        yield batch
    if last is None:
        raise SnapshotFormatError(
            "not a snapshot: the file holds no batch (no SnapshotHeader)", source=source, position=0
        )
    if (
        not last.is_control
        or not last.records
        or _control_type(last, -1) != ControlRecordType.SNAPSHOT_FOOTER.name
    ):
        raise SnapshotFormatError(
            "the snapshot is cut short: its last batch does not end with a SnapshotFooter",
            source=source,
            position=last.position,
            offset=last.base_offset,
        )


def iter_valid_snapshot(path: str | os.PathLike[str], **options: Any) -> Iterator[RecordBatch]:
    """The batches of a ``.checkpoint`` file, its frame checked (`check_snapshot_batches`) as they are read.

    Raises
    ------
    SnapshotFormatError
        No SnapshotHeader first or no SnapshotFooter last.
    LogFormatError
        Any other fault of the file's batches.
    """
    return check_snapshot_batches(iter_file_batches(path, **options), str(path))


def write_snapshot_file(
    path: str | os.PathLike[str], batches: Iterable[bytes], *, fsync: bool = True
) -> Path:
    """Write encoded `batches` to `path` atomically through a ``.checkpoint.part`` temp file; return `path`."""
    target = Path(path)
    sid = SnapshotId.from_path(target)
    prefix = (sid.filename[: -len(SUFFIX)] if sid else target.name) + "-"
    fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=PARTIAL_SUFFIX, dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            for batch in batches:
                f.write(batch)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, target)
        if fsync:
            fsync_dir(target.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def write_snapshot(
    directory: str | os.PathLike[str],
    snapshot_id: SnapshotId,
    batches: Iterable[bytes],
    *,
    fsync: bool = True,
) -> Path:
    """Write the snapshot `snapshot_id` into a log directory atomically; return its path."""
    return write_snapshot_file(snapshot_path(directory, snapshot_id), batches, fsync=fsync)


def mark_snapshot_deleted(path: str | os.PathLike[str]) -> Path:
    """Rename a snapshot to ``.checkpoint.deleted`` as Kafka does before removing it; return the new path."""
    p = Path(path)
    dest = p.with_name(p.name[: -len(SUFFIX)] + DELETE_SUFFIX)
    os.replace(p, dest)
    return dest
