"""Kafka's text checkpoint files (``CheckpointFile``): a version line, a count line, one entry per line.

Used by ``leader-epoch-checkpoint`` (entries ``epoch startOffset``) and by the log dir's
``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint`` (entries ``topic partition offset``).
Written atomically through ``<file>.tmp``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from kraftlake.logformat.atomic import atomic_write
from kraftlake.logformat.errors import MalformedFileError
from kraftlake.logformat.text import INT64, java_int, read_text_lines, split_fields

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"


@dataclass(frozen=True, order=True)
class EpochEntry:
    """One line of a leader-epoch-checkpoint: the first offset written in `epoch`."""

    epoch: int
    start_offset: int


def read_checkpoint_lines(path: str | os.PathLike[str], version: int, fields: int) -> list[list[str]]:
    """The entries of a checkpoint file, each split on whitespace into `fields` parts (Kafka's
    ``CheckpointFile.CheckpointReadBuffer``: entry ``i`` is on line ``i + 3``).

    Raises
    ------
    FileAccessError
        The file cannot be read.
    MalformedFileError
        Not UTF-8, a wrong version, a malformed line (naming it), or a count that differs from the entries found.
    """
    source = str(path)
    lines = read_text_lines(path)
    if not lines:
        return []
    found = java_int(lines[0], source, 1, "version")
    if found != version:
        raise MalformedFileError(f"unrecognised version {found}, expected {version}", source=source, line=1)
    if len(lines) < 2:
        return []
    expected = java_int(lines[1], source, 2, "entry count")
    entries = []
    for lineno, line in enumerate(lines[2:], start=3):
        parts = split_fields(line)
        if len(parts) != fields:
            raise MalformedFileError(
                f"malformed line {line!r} (expected {fields} fields)", source=source, line=lineno
            )
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
    """The entries of a ``leader-epoch-checkpoint`` (version 0): an int32 epoch and an int64 start offset a line.

    Raises
    ------
    FileAccessError, MalformedFileError
    """
    source = str(path)
    return [
        EpochEntry(
            java_int(epoch, source, lineno, "epoch"), java_int(offset, source, lineno, "start offset", INT64)
        )
        for lineno, (epoch, offset) in enumerate(read_checkpoint_lines(path, 0, 2), start=3)
    ]


def write_leader_epoch_checkpoint(
    path: str | os.PathLike[str], entries: Sequence[EpochEntry], *, fsync: bool = True
) -> None:
    """Write a ``leader-epoch-checkpoint`` (version 0)."""
    write_checkpoint_lines(path, 0, [f"{e.epoch} {e.start_offset}" for e in entries], fsync=fsync)


def read_offset_checkpoint(path: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """A ``recovery-point-offset-checkpoint`` or ``log-start-offset-checkpoint``: (topic, partition) -> offset.

    Raises
    ------
    FileAccessError, MalformedFileError
    """
    source = str(path)
    out = {}
    for lineno, (topic, partition, offset) in enumerate(read_checkpoint_lines(path, 0, 3), start=3):
        out[(topic, java_int(partition, source, lineno, "partition"))] = java_int(
            offset, source, lineno, "offset", INT64
        )
    return out


def write_offset_checkpoint(
    path: str | os.PathLike[str], offsets: dict[tuple[str, int], int], *, fsync: bool = True
) -> None:
    """Write a ``recovery-point-offset-checkpoint`` or ``log-start-offset-checkpoint``."""
    write_checkpoint_lines(path, 0, [f"{t} {p} {o}" for (t, p), o in offsets.items()], fsync=fsync)
