"""A whole ``__cluster_metadata-0`` directory, read-only: segments in offset order, snapshots, state files.

The directory's parent is the Kafka log dir holding ``meta.properties`` and ``bootstrap.checkpoint``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kraftlake.logformat.batch import RecordBatch
from kraftlake.logformat.checkpoint_file import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    read_leader_epoch_checkpoint,
)
from kraftlake.logformat.properties import (
    META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE,
    MetaProperties,
    read_meta_properties,
    read_partition_metadata,
)
from kraftlake.logformat.quorum_state import QUORUM_STATE_FILE, QuorumStateFile, read_quorum_state
from kraftlake.logformat.reader import iter_file_batches
from kraftlake.logformat.segment import list_segments
from kraftlake.logformat.snapshot import BOOTSTRAP_FILE, SnapshotId, list_snapshots

METADATA_PARTITION_DIR = "__cluster_metadata-0"


class MetadataLogDir:
    """Read access to a ``__cluster_metadata-0`` directory (or any Kafka partition directory).

    Parameters
    ----------
    path : path
        The partition directory; a Kafka log dir containing ``__cluster_metadata-0`` is accepted too.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        p = Path(path)
        if (p / METADATA_PARTITION_DIR).is_dir():
            p = p / METADATA_PARTITION_DIR
        if not p.is_dir():
            raise FileNotFoundError(f"not a directory: {p}")
        self.path = p

    @property
    def log_dir(self) -> Path:
        """The Kafka log dir above the partition directory."""
        return self.path.parent

    def segments(self) -> list[tuple[int, Path]]:
        """``(base_offset, path)`` of each ``.log`` segment, in offset order."""
        return list_segments(self.path)

    def snapshots(self) -> list[tuple[SnapshotId, Path]]:
        """``(SnapshotId, path)`` of each complete ``.checkpoint`` snapshot, in id order."""
        return list_snapshots(self.path)

    def latest_snapshot(self) -> tuple[SnapshotId, Path] | None:
        """The snapshot with the greatest id, or None."""
        snaps = self.snapshots()
        return snaps[-1] if snaps else None

    def bootstrap_checkpoint(self) -> Path | None:
        """The log dir's ``bootstrap.checkpoint``, if present."""
        p = self.log_dir / BOOTSTRAP_FILE
        return p if p.is_file() else None

    def iter_batches(self, from_offset: int = 0, **options: Any) -> Iterator[RecordBatch]:
        """The batches of every segment in offset order, skipping batches that end before `from_offset`.

        Options are those of `kraftlake.logformat.reader.BatchReader` (``recover``, ``verify_crc``, ...).
        """
        segs = self.segments()
        for i, (_base, path) in enumerate(segs):
            if i + 1 < len(segs) and segs[i + 1][0] <= from_offset:
                continue
            for batch in iter_file_batches(path, **options):
                if batch.last_offset >= from_offset:
                    yield batch

    def quorum_state(self) -> QuorumStateFile | None:
        """The ``quorum-state`` file, if present."""
        return read_quorum_state(self.path / QUORUM_STATE_FILE)

    def leader_epochs(self) -> list[EpochEntry]:
        """The ``leader-epoch-checkpoint`` entries (empty if absent)."""
        p = self.path / LEADER_EPOCH_CHECKPOINT_FILE
        return read_leader_epoch_checkpoint(p) if p.is_file() else []

    def partition_metadata(self) -> tuple[int, str] | None:
        """``(version, topic_id)`` of ``partition.metadata``, if present."""
        p = self.path / PARTITION_METADATA_FILE
        return read_partition_metadata(p) if p.is_file() else None

    def meta_properties(self) -> MetaProperties | None:
        """The log dir's ``meta.properties``, if present."""
        p = self.log_dir / META_PROPERTIES_FILE
        return read_meta_properties(p) if p.is_file() else None
