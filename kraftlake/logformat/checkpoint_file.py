"""Kafka's text checkpoint files (``CheckpointFile``): a version line, a count line, one entry per line.

Used by ``leader-epoch-checkpoint`` (entries ``epoch startOffset``) and by the log dir's
``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint`` (entries ``topic partition offset``).
Written atomically through ``<file>.tmp``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kraftlake.logformat.atomic import atomic_write
from kraftlake.logformat.errors import MalformedFileError

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"


@dataclass(frozen=True, order=True)
class EpochEntry:
    """One line of a leader-epoch-checkpoint: the first offset written in `epoch`."""

    epoch: int
    start_offset: int


def read_checkpoint_lines(path: str | os.PathLike[str], version: int, fields: int) -> list[list[str]]:
    """The entries of a checkpoint file, each split on whitespace into `fields` parts.

    Raises
    ------
    MalformedFileError
        Wrong version, a malformed line, or a count that differs from the entries found.
    """
    source = str(path)
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines:
        return []

    def to_int(line: str, lineno: int) -> int:
        try:
            return int(line)
        except ValueError:
            raise MalformedFileError(
                f"malformed line {lineno}: {line!r}", source=source, position=lineno
            ) from None

    found = to_int(lines[0], 1)
    if found != version:
        raise MalformedFileError(f"unrecognised version {found}, expected {version}", source=source)
    if len(lines) < 2:
        return []
    expected = to_int(lines[1], 2)
    entries = []
    for lineno, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if len(parts) != fields:
            raise MalformedFileError(f"malformed line {lineno}: {line!r}", source=source, position=lineno)
        entries.append(parts)
    if len(entries) != expected:
        raise MalformedFileError(f"expected {expected} entries but found {len(entries)}", source=source)
    return entries


def write_checkpoint_lines(
    path: str | os.PathLike[str], version: int, entries: Sequence[str], *, fsync: bool = True
) -> None:
    """Write a checkpoint file atomically (``<file>.tmp``, flush, fsync, move)."""
    text = f"{version}\n{len(entries)}\n" + "".join(f"{e}\n" for e in entries)
    atomic_write(path, text.encode("utf-8"), tmp_suffix=".tmp", fsync=fsync)


def read_leader_epoch_checkpoint(path: str | os.PathLike[str]) -> list[EpochEntry]:
    """The entries of a ``leader-epoch-checkpoint`` (version 0)."""
    out = []
    for lineno, (epoch, offset) in enumerate(read_checkpoint_lines(path, 0, 2), start=3):
        try:
            out.append(EpochEntry(int(epoch), int(offset)))
        except ValueError:
            raise MalformedFileError(
                f"malformed line {lineno}: {epoch} {offset}", source=str(path), position=lineno
            ) from None
    return out


def write_leader_epoch_checkpoint(
    path: str | os.PathLike[str], entries: Sequence[EpochEntry], *, fsync: bool = True
) -> None:
    """Write a ``leader-epoch-checkpoint`` (version 0)."""
    write_checkpoint_lines(path, 0, [f"{e.epoch} {e.start_offset}" for e in entries], fsync=fsync)


def read_offset_checkpoint(path: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """A ``recovery-point-offset-checkpoint`` or ``log-start-offset-checkpoint``: (topic, partition) -> offset."""
    out = {}
    for lineno, (topic, partition, offset) in enumerate(read_checkpoint_lines(path, 0, 3), start=3):
        try:
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            raise MalformedFileError(f"malformed line {lineno}", source=str(path), position=lineno) from None
    return out


def write_offset_checkpoint(
    path: str | os.PathLike[str], offsets: dict[tuple[str, int], int], *, fsync: bool = True
) -> None:
    """Write a ``recovery-point-offset-checkpoint`` or ``log-start-offset-checkpoint``."""
    write_checkpoint_lines(path, 0, [f"{t} {p} {o}" for (t, p), o in offsets.items()], fsync=fsync)
