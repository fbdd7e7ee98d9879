"""`MetadataMirror`: the directory a follower writes, in Kafka's layout, committed batches only.

    D/meta.properties                  cluster.id, node.id (the observer id), directory.id
    D/__cluster_metadata-0/
        00000000000000000000.log ...   the leader's batches, byte for byte (Kafka's segment naming and roll)
        <end>-<epoch>.checkpoint       snapshots downloaded with FetchSnapshot, byte for byte
        leader-epoch-checkpoint        epoch -> start offset, as Kafka's LeaderEpochFileCache
        partition.metadata             the metadata topic id

so ``kafka-dump-log``, ``kafka-metadata-shell`` and ``kraftlake decode/image/ingest`` read it as they read a
controller's. Every batch here was committed when it was written, so the mirror is append-only: opening it
after a crash drops a torn tail (Kafka's log recovery) and the follower fetches from there. By default nothing
is ever deleted: the mirror keeps the history Kafka's retention removes. A `MirrorRetention` bounds it as
Kafka bounds its own log: whole segments go only below a snapshot the mirror holds (the state at every offset
kept stays computable), with the snapshots older than the one that then starts the log. A snapshot installed because the
follower fell behind the leader's log start leaves the older segments in place and starts a new segment at the
snapshot's end offset; readers start from the newest snapshot that covers what they need.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kraftlake.follow.errors import ClusterIdMismatchError, MirrorError
from kraftlake.follow.lock import WriterLock
from kraftlake.follow.observer import FetchedBatch
from kraftlake.logformat import (
    METADATA_PARTITION_DIR,
    EpochEntry,
    MetaProperties,
    read_meta_properties,
    write_meta_properties,
)
from kraftlake.logformat.checkpoint_file import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)
from kraftlake.logformat.errors import LogFormatError
from kraftlake.logformat.properties import write_partition_metadata
from kraftlake.logformat.reader import read_batches
from kraftlake.logformat.segment import SegmentedLog
from kraftlake.logformat.snapshot import (
    SnapshotId,
    list_snapshots,
    mark_snapshot_deleted,
    write_snapshot_file,
)

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
"""Kafka's ``metadata.log.segment.bytes`` default (1 GiB)."""
OBSERVER_ID_RANGE = (2_000_000_000, 2_100_000_000)
"""Where a new mirror draws its observer id: far above any broker or controller id a cluster assigns."""


@dataclass(frozen=True)
class MirrorRetention:
    """How much of the mirrored log to keep (None: all of it, the default).

    Parameters
    ----------
    max_bytes
        Delete the oldest segments while the log is larger than this.
    max_age_ms
        Delete segments last written longer ago than this.
    """

    max_bytes: int | None = None
    max_age_ms: int | None = None

    @property
    def keeps_everything(self) -> bool:
        return self.max_bytes is None and self.max_age_ms is None


KEEP_EVERYTHING = MirrorRetention()


def new_directory_id() -> str:
    """A random Uuid in Kafka's base64url form."""
    return urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class MirrorPosition:
    """Where the mirror ends: the next offset to fetch and the epoch of the last batch (or snapshot)."""

    log_end: int
    last_epoch: int


class MetadataMirror:
    """Opens (creating if needed) a mirror directory `data_dir`.

    Parameters
    ----------
    cluster_id
        The quorum's cluster id; refused if the directory belongs to another cluster. None adopts the
        directory's.
    observer_id
        The replica id to fetch as; None keeps the directory's, or draws one for a new directory.
    segment_bytes
        Roll to a new segment past this size.
    fsync
        Fsync every append and file write before reporting it done.
    retention
        What may be deleted (default: nothing).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        cluster_id: str | None = None,
        observer_id: int | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: bool = True,
        retention: MirrorRetention = KEEP_EVERYTHING,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.retention = retention
        self.partition_dir = self.data_dir / METADATA_PARTITION_DIR
        self.fsync = fsync
        try:
            self.partition_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MirrorError(f"cannot create {self.partition_dir}: {exc}") from exc
        # one writer per mirror, before anything is read or repaired (a torn tail cut is a write)
        self.writer_lock = WriterLock(self.data_dir / ".lock", f"the mirror {self.data_dir}")
        meta_path = self.data_dir / "meta.properties"
        if meta_path.exists():
            meta = read_meta_properties(meta_path)
            if cluster_id is not None and meta.cluster_id not in (None, cluster_id):
                raise ClusterIdMismatchError(
                    f"{meta_path} mirrors cluster {meta.cluster_id}, not {cluster_id}: use another --data-dir"
                )
            self.cluster_id = cluster_id or meta.cluster_id
            self.observer_id = (
                observer_id
                if observer_id is not None
                else (meta.node_id if meta.node_id is not None else random.randint(*OBSERVER_ID_RANGE))
            )
            self.directory_id = meta.directory_id or new_directory_id()
        else:
            self.cluster_id = cluster_id
            self.observer_id = observer_id if observer_id is not None else random.randint(*OBSERVER_ID_RANGE)
            self.directory_id = new_directory_id()
        self._meta_path = meta_path
        self._write_meta()
        partition_metadata = self.partition_dir / "partition.metadata"
        if not partition_metadata.exists():
            write_partition_metadata(partition_metadata, fsync=fsync)
        snapshots = list_snapshots(self.partition_dir)
        latest = snapshots[-1][0] if snapshots else None
        initial = latest.end_offset if latest is not None else 0
        try:
            self.log = SegmentedLog(
                self.partition_dir, segment_bytes=segment_bytes, fsync=fsync, initial_offset=initial
            )
        except LogFormatError as exc:
            raise MirrorError(f"cannot open the mirrored log in {self.partition_dir}: {exc}") from exc
        self.recovered_bytes = self.log.recovery.truncated_bytes if self.log.recovery is not None else 0
        self._epochs_path = self.partition_dir / LEADER_EPOCH_CHECKPOINT_FILE
        self.epochs = self._load_epochs()
        self._latest_snapshot = latest
        if latest is not None and latest.end_offset > self.log.end_offset:
            # a snapshot installed past the log: the next batch starts at its end
            self.log.roll(latest.end_offset)

    def _write_meta(self) -> None:
        write_meta_properties(
            self._meta_path,
            MetaProperties(self.cluster_id, self.observer_id, directory_id=self.directory_id),
            fsync=self.fsync,
        )

    def _load_epochs(self) -> list[EpochEntry]:
        # rebuilt from the batches: a crash may have left the file behind the segments
        entries: list[EpochEntry] = []
        if self._epochs_path.exists():
            try:
                entries = [e for e in read_leader_epoch_checkpoint(self._epochs_path)]
            except LogFormatError:
                entries = []
        entries = [e for e in entries if e.start_offset < self.log.end_offset]
        last = entries[-1].epoch if entries else -1
        for seg in self.log.segments:
            for b in seg.batches:
                if b.epoch > last:
                    entries.append(EpochEntry(b.epoch, b.base_offset))
                    last = b.epoch
        return entries

    @property
    def position(self) -> MirrorPosition:
        """The committed end of the mirror."""
        last = self.log.last_batch()
        snapshot = self._latest_snapshot
        if last is not None and (snapshot is None or last.last_offset + 1 >= snapshot.end_offset):
            return MirrorPosition(last.last_offset + 1, last.epoch)
        if snapshot is not None:
            return MirrorPosition(snapshot.end_offset, snapshot.epoch)
        return MirrorPosition(self.log.end_offset, 0)

    def set_cluster_id(self, cluster_id: str) -> None:
        """Record the cluster id learned from the quorum (a directory started without one)."""
        if self.cluster_id is None:
            self.cluster_id = cluster_id
            self._write_meta()

    def append(self, batches: Sequence[FetchedBatch]) -> int:
        """Append committed batches (each starting at the mirror's end) and make them durable.

        The batches are `split_batches`'s, whose CRCs it checked: their bytes are written as they are, with
        one write and one flush (fsync) per call (`SegmentedLog.append_verified` checks their framing).
        Returns the bytes written.
        """
        error: LogFormatError | None = None
        written = 0
        try:
            written = self.log.append_verified(batches)
        except LogFormatError as exc:
            error = exc  # the batches before the bad one are appended
        changed = False
        epochs = self.epochs
        last_epoch = epochs[-1].epoch if epochs else None
        end = self.log.end_offset
        for batch in batches:
            if batch.base_offset >= end:
                break
            if last_epoch is None or batch.epoch > last_epoch:
                epochs.append(EpochEntry(batch.epoch, batch.base_offset))
                last_epoch = batch.epoch
                changed = True
        if error is not None:
            raise MirrorError(
                f"cannot append the batch at offset {end} to {self.partition_dir}: {error}"
            ) from error
        self.log.flush()
        if changed:
            write_leader_epoch_checkpoint(self._epochs_path, self.epochs, fsync=self.fsync)
        if not self.retention.keeps_everything and len(self.log.segments) > 1:
            self.enforce_retention()
        return written

    def install_snapshot(self, end_offset: int, epoch: int, data: bytes) -> Path:
        """Write a downloaded snapshot as ``<end>-<epoch>.checkpoint``; the log goes on from `end_offset`.

        Raises
        ------
        MirrorError
            If the bytes are not whole record batches beginning with a SnapshotHeader (nothing is written).
        """
        sid = SnapshotId(end_offset, epoch)
        try:
            batches = read_batches(data, source=f"snapshot {sid.filename}")
        except LogFormatError as exc:
            raise MirrorError(f"downloaded snapshot {sid.filename} is not a snapshot: {exc}") from exc
        if not batches or not batches[0].is_control:
            raise MirrorError(f"downloaded snapshot {sid.filename} does not start with a SnapshotHeader")
        path = write_snapshot_file(self.partition_dir / sid.filename, [data], fsync=self.fsync)
        self._latest_snapshot = sid
        if end_offset > self.log.end_offset:
            if self.log.last_batch() is None:
                self.log.reset(end_offset)  # an empty log starts at the snapshot, as Kafka's would
            else:
                self.log.flush()
                self.log.roll(end_offset)
            if not self.epochs or epoch > self.epochs[-1].epoch:
                self.epochs.append(EpochEntry(epoch, end_offset))
            write_leader_epoch_checkpoint(self._epochs_path, self.epochs, fsync=self.fsync)
        self.enforce_retention()
        return path

    def enforce_retention(self, now_ms: int | None = None) -> list[Path]:
        """Delete what the retention allows (segments below the newest snapshot, then older snapshots); returns
        the deleted files."""
        r = self.retention
        if r.keeps_everything:
            return []
        snapshots = self.snapshots()
        if not snapshots:
            return []
        now = time.time() * 1000 if now_ms is None else now_ms
        newest = snapshots[-1].end_offset
        deleted: list[Path] = []
        while len(self.log.segments) > 1:
            seg = self.log.segments[0]
            nxt = self.log.segments[1]
            if nxt.base_offset > newest:
                break  # the state past this segment needs it: no snapshot covers what follows
            too_big = r.max_bytes is not None and self.log.size_bytes > r.max_bytes
            too_old = r.max_age_ms is not None and seg.path.stat().st_mtime * 1000 < now - r.max_age_ms
            if not (too_big or too_old):
                break
            deleted += self.log.delete_segments_below(nxt.base_offset)
        start = self.log.log_start_offset
        keep = max((sid for sid in snapshots if sid.end_offset <= start), default=None)
        for sid in snapshots:
            if keep is not None and sid < keep:
                deleted.append(mark_snapshot_deleted(self.partition_dir / sid.filename))
                deleted[-1].unlink()
        return deleted

    def snapshots(self) -> list[SnapshotId]:
        """The snapshots held, oldest first."""
        return [sid for sid, _ in list_snapshots(self.partition_dir)]

    def close(self) -> None:
        """Flush and close the active segment, and give the writer lock back."""
        self.log.close()
        self.writer_lock.release()

    def __enter__(self) -> MetadataMirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
