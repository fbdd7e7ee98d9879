"""Holes in a metadata log directory: offsets no segment holds between two that do.

A follower that fell behind the quorum's log start installs the leader's snapshot and goes on after it, keeping
its older segments (`kraftlake.follow.mirror`): the directory then holds, say, offsets 99..801, the snapshot
``00000000000000001105-...checkpoint`` (the state at 1104) and the log from 1105. The records 802..1104 are not
there; the state at 1104 is (the snapshot), the states at 802..1103 are known nowhere. :func:`log_gaps` finds
each hole from the segments' batch headers (no record is decoded) and the snapshot that ends it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kraftlake.errors import KraftlakeError
from kraftlake.image.errors import ImageError
from kraftlake.image.image import MetadataImage
from kraftlake.image.source import SnapshotFile, load_snapshot, partition_dir, segments, snapshots
from kraftlake.logformat.framing import scan_file_headers


@dataclass(frozen=True)
class LogGap:
    """Offsets ``first_missing .. next_present - 1`` are in no segment; the log goes on at ``next_present``.

    ``snapshot`` is the snapshot that ends the hole (its end offset is ``next_present``: it holds the state at
    ``next_present - 1``), None when the directory has none.
    """

    first_missing: int
    next_present: int
    snapshot: SnapshotFile | None

    @property
    def unknown(self) -> tuple[int, int]:
        """The offsets (inclusive) at which no state is known: the snapshot, when held, gives the last one's."""
        last = self.next_present - 1
        return self.first_missing, last - 1 if self.snapshot is not None else last

    def describe(self) -> str:
        """One line: the missing offsets and what covers them."""
        a, b = self.first_missing, self.next_present - 1
        span = f"offset {a}" if a == b else f"offsets {a}..{b}"
        if self.snapshot is None:
            return f"{span} missing from the log (no snapshot covers them)"
        u0, u1 = self.unknown
        unknown = (
            "" if u0 > u1 else f": no state is known at {u0}..{u1}" if u0 < u1 else f": no state at {u0}"
        )
        return f"{span} missing from the log, the snapshot {self.snapshot.path.name} holds the state at {b}{unknown}"


def segment_end(path: str | os.PathLike[str]) -> int | None:
    """The offset after the last whole batch of a segment file (None if it holds none), from the headers."""
    end = None
    for header in scan_file_headers(path, stop_at="invalid"):
        end = header.next_offset
    return end


def log_gaps(log_dir: str | os.PathLike[str]) -> list[LogGap]:
    """The holes between the segments of a log directory, oldest first (a log starting past 0 is no hole: a
    snapshot at its start is where it begins)."""
    d = partition_dir(log_dir)
    segs = segments(d)
    snaps = {s.end_offset: s for s in snapshots(d)}
    out: list[LogGap] = []
    end: int | None = None
    for base, seg in segs:
        if end is not None and base > end:
            out.append(LogGap(end, base, snaps.get(base)))
        seg_end = segment_end(seg)
        if seg_end is not None:
            end = seg_end if end is None else max(end, seg_end)
        elif end is None:
            end = base
    return out


def gap_at(gaps: list[LogGap], offset: int) -> LogGap | None:
    """The gap in which the state at ``offset`` is unknown, if any."""
    for g in gaps:
        a, b = g.unknown
        if a <= offset <= b:
            return g
    return None


def snapshot_after(log_dir: str | os.PathLike[str], next_present: int) -> Path | None:
    """The snapshot file whose end offset is ``next_present`` (it holds the state at ``next_present - 1``)."""
    for s in snapshots(partition_dir(log_dir)):
        if s.end_offset == next_present:
            return s.path
    return None


def gap_resolver(log_dir: str | os.PathLike[str]) -> Callable[[int, int], MetadataImage]:
    """``HistoryBuilder.on_gap`` for a log directory: the image of the snapshot that ends a hole of the log (the
    one whose end offset is where the log goes on), as a follower that fell behind the quorum's log start
    leaves it.

    Raises
    ------
    ImageError
        No snapshot ends the hole, or it cannot be loaded (naming the directory, the offsets and the file).
    """
    d = partition_dir(log_dir)

    def resolve(first_missing: int, next_offset: int) -> MetadataImage:
        path = snapshot_after(d, next_offset)
        if path is None:
            raise ImageError(
                f"{d}: offsets {first_missing}..{next_offset - 1} are missing from the log and no snapshot ends "
                f"at {next_offset} to go on from"
            )
        try:
            return load_snapshot(path)
        except KraftlakeError as exc:
            raise ImageError(
                f"{d}: offsets {first_missing}..{next_offset - 1} are missing and the snapshot that covers them "
                f"cannot be loaded: {exc}"
            ) from exc

    return resolve
