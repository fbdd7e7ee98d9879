"""A single local writer of a real KRaft metadata log, for the cluster simulator.

Writes what a one-voter quorum's leader would: ``<data dir>/meta.properties`` and
``<data dir>/__cluster_metadata-0/`` with segments (``%020d.log``) of record batches as KRaft's BatchBuilder
writes them, a LeaderChangeMessage control batch at the start of each epoch, a ``leader-epoch-checkpoint``,
and snapshots (``%020d-%010d.checkpoint``) of the committed image written through ``kraftlake.image``.

It drives the cluster simulator without a quorum (``QuorumClusterSimulator`` runs it on
``kraftlake.service``'s voters instead): with one voter an append is committed once written, so records are
handed to the commit listeners at once. The records the
listeners get are full envelopes (with their value bytes).
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from kraftlake.controller.memory_log import CommitListener
from kraftlake.controller.result import RecordAndVersion
from kraftlake.image import MetadataImage, write_snapshot
from kraftlake.image.snapshot import SnapshotValues
from kraftlake.logformat import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    METADATA_PARTITION_DIR,
    EpochEntry,
    MetaProperties,
    SegmentedLog,
    build_control_batch,
    build_data_batch,
    write_leader_epoch_checkpoint,
    write_meta_properties,
)
from kraftlake.logformat.batch import ControlRecordType
from kraftlake.protocol import messages as m
from kraftlake.protocol.control import encode_control_body
from kraftlake.records.envelope import data_envelope, typed_control_envelope
from kraftlake.records.serde import encode_metadata_record

DEFAULT_SNAPSHOT_BYTES = 20 * 1024 * 1024
"""``metadata.log.max.record.bytes.between.snapshots``: Kafka's default, 20 MiB."""


class LocalMetadataLog:
    """Appends metadata record batches to a real log directory; every append is committed at once.

    Parameters
    ----------
    data_dir : path
        The log dir (``meta.properties`` goes here, the partition in ``__cluster_metadata-0``).
    cluster_id : str
    node_id : int
        The (only) voter, named in LeaderChange records.
    clock : callable
        Milliseconds for batch timestamps (the simulation's clock).
    segment_bytes : int
        Roll segments at this size (Kafka's minimum for the metadata log is 8 MiB).
    snapshot_bytes : int
        Write a snapshot when this many bytes were appended since the last one (``maybe_snapshot``).
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        cluster_id: str,
        node_id: int = 1,
        clock: Callable[[], int] | None = None,
        segment_bytes: int = 64 * 1024 * 1024,
        snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        directory_id = base64.urlsafe_b64encode(cluster_id.encode()[:16].ljust(16, b"_")).decode().rstrip("=")
        write_meta_properties(
            self.data_dir / "meta.properties",
            MetaProperties(cluster_id=cluster_id, node_id=node_id, directory_id=directory_id),
        )
        self.partition_dir = self.data_dir / METADATA_PARTITION_DIR
        self.log = SegmentedLog(self.partition_dir, segment_bytes=segment_bytes)
        self.node_id = node_id
        self.clock = clock or (lambda: 0)
        self.snapshot_bytes = snapshot_bytes
        self.listeners: list[CommitListener] = []
        self.committed_offset = self.log.end_offset - 1
        self.epochs: list[EpochEntry] = []
        self.records_by_type: Counter[str] = Counter()
        self.batches = 0
        self.bytes_since_snapshot = 0
        self.snapshots: list[Path] = []
        self._encoder = SnapshotValues()  # later snapshots re-encode only the partitions that changed
        self.epoch = -1

    def end_offset(self) -> int:
        return self.log.end_offset

    def begin_epoch(self, epoch: int) -> None:
        """Start a leader epoch: a LeaderChangeMessage control batch, as a new KRaft leader writes."""
        self.epoch = epoch
        offset = self.log.end_offset
        voter = m.LeaderChangeMessage.Voter(voter_id=self.node_id)
        msg = m.LeaderChangeMessage(
            version=0, leader_id=self.node_id, voters=(voter,), granting_voters=(voter,)
        )
        batch = build_control_batch(
            offset, epoch, self.clock(), [(ControlRecordType.LEADER_CHANGE, encode_control_body(msg))]
        )
        self.log.append(batch)
        self.records_by_type["LeaderChangeMessage"] += 1
        self.batches += 1
        self.epochs.append(EpochEntry(epoch, offset))
        write_leader_epoch_checkpoint(
            self.partition_dir / LEADER_EPOCH_CHECKPOINT_FILE, self.epochs, fsync=False
        )
        self.committed_offset = offset
        control = typed_control_envelope(offset, epoch, self.clock(), offset, msg)
        for listener in self.listeners:
            listener([control])

    def append(self, epoch: int, records: Sequence[RecordAndVersion]) -> int:
        """Encode and append one batch; committed at once (one voter). Returns its base offset."""
        base = self.log.end_offset
        ts = self.clock()
        values = [encode_metadata_record(rec, version) for rec, version in records]
        batch = build_data_batch(base, epoch, ts, values)
        self.log.append(batch)
        self.batches += 1
        self.bytes_since_snapshot += len(batch)
        envelopes = []
        for i, ((rec, version), raw) in enumerate(zip(records, values, strict=True)):
            name = type(rec).__name__
            self.records_by_type[name] += 1
            envelopes.append(data_envelope(base + i, epoch, ts, base, rec, version, raw))
        self.committed_offset = base + len(records) - 1
        for listener in self.listeners:
            listener(envelopes)
        return base

    def maybe_snapshot(self, image: MetadataImage, *, force: bool = False) -> Path | None:
        """Write a snapshot of the committed ``image`` if enough bytes were appended since the last one."""
        if not force and self.bytes_since_snapshot < self.snapshot_bytes:
            return None
        if image.transaction is not None or image.offset < 0:
            return None
        self.log.flush()
        path = write_snapshot(image, self.partition_dir, self._encoder)
        self.snapshots.append(path)
        self.bytes_since_snapshot = 0
        return path

    def segments(self) -> list[Path]:
        return [seg.path for seg in self.log.segments]

    def close(self) -> None:
        self.log.flush()
        self.log.close()
