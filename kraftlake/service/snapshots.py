"""Snapshots as the service writes them: Kafka ``.checkpoint`` files and the policy that decides when.

A snapshot's bytes are a whole ``.checkpoint`` file: a SnapshotHeader control batch, the state's record values
in data batches, a SnapshotFooter control batch (Kafka's `RecordsSnapshotWriter` layout, read by
`kafka-dump-log --cluster-metadata-decoder` and `kraftlake decode`). The values come from a snapshot provider
that the state machine above the service supplies (the controller's image as metadata records); without one,
the raft-level snapshot holds every committed data value up to its end, so that loading the latest snapshot
and replaying the tail still gives the whole committed history.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from kraftlake.logformat import SnapshotFormatError, build_control_batch, read_batches, scan_batch_headers
from kraftlake.protocol.control import ControlRecordType, encode_control_body
from kraftlake.protocol.messages import SnapshotFooterRecord, SnapshotHeaderRecord
from kraftlake.raft.messages import SnapshotId
from kraftlake.service.batch_writer import kraft_data_batch
from kraftlake.service.file_log import FileRaftLog

SnapshotProvider = Callable[[SnapshotId], Iterable[bytes] | None]
"""Called with the id of the snapshot to write (the state up to `id.offset`, exclusive); returns the record
values that rebuild that state, or None if it cannot give that state now (no snapshot is written then; the
policy tries again at the next commit). It runs on the service loop right after the listeners were handed
every committed batch below `id.offset`; the iterable it returns is consumed by a worker thread (encoding a
large state must not stall the loop), so it must read only immutable state (an image)."""

DEFAULT_SNAPSHOT_MAX_BYTES = 20 * 1024 * 1024
"""Kafka's `metadata.log.max.record.bytes.between.snapshots`."""
DEFAULT_SNAPSHOT_INTERVAL_MS = 60 * 60 * 1000
"""Kafka's `metadata.log.max.snapshot.interval.ms`."""
_BATCH_BYTES = 1024 * 1024
_BATCH_RECORDS = 2000


def build_checkpoint(
    snapshot_id: SnapshotId,
    values: Iterable[bytes],
    last_timestamp_ms: int,
    append_timestamp_ms: int,
    previous: bytes = b"",
) -> bytes:
    """The bytes of a ``.checkpoint`` file: header, `values` in data batches from offset 0, footer.

    Parameters
    ----------
    snapshot_id
        End offset and epoch; the epoch is written as every batch's partition leader epoch.
    values
        The record values of the state.
    last_timestamp_ms
        The append time of the last entry the snapshot contains (SnapshotHeader.LastContainedLogTimestamp).
    append_timestamp_ms
        The batches' timestamp (when the snapshot is written).
    previous
        A checkpoint whose data batches come first, copied as they are (its values precede `values`).
    """
    epoch = snapshot_id.epoch
    header = encode_control_body(
        SnapshotHeaderRecord(version=0, last_contained_log_timestamp=last_timestamp_ms)
    )
    out = [
        build_control_batch(0, epoch, append_timestamp_ms, [(int(ControlRecordType.SNAPSHOT_HEADER), header)])
    ]
    offset = 1
    if previous:
        data_batches, count = checkpoint_data_batches(previous)
        out.append(data_batches)
        offset += count
    for chunk in _chunks(values):
        out.append(kraft_data_batch(offset, epoch, append_timestamp_ms, chunk))
        offset += len(chunk)
    footer = encode_control_body(SnapshotFooterRecord(version=0))
    out.append(
        build_control_batch(
            offset, epoch, append_timestamp_ms, [(int(ControlRecordType.SNAPSHOT_FOOTER), footer)]
        )
    )
    return b"".join(out)


def _chunks(values: Iterable[bytes]) -> Iterator[list[bytes]]:
    chunk: list[bytes] = []
    size = 0
    for value in values:
        chunk.append(value)
        size += len(value)
        if size >= _BATCH_BYTES or len(chunk) >= _BATCH_RECORDS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def checkpoint_data_batches(data: bytes, source: str = "<snapshot>") -> tuple[bytes, int]:
    """The raw bytes of a checkpoint's data batches (between its header and footer batches) and their record
    count, from the batch headers alone; the batches keep their offsets (header at 0, data from 1).

    Raises
    ------
    LogFormatError
        When `data` is not whole batches (naming `source`, the byte position and offset), or
        `SnapshotFormatError` when it holds fewer than two batches.
    """
    headers = list(scan_batch_headers(data, source=source))
    if len(headers) < 2:
        raise SnapshotFormatError(f"not a checkpoint: {len(headers)} batches", source=source)
    count = sum(h.last_offset_delta + 1 for h in headers[1:-1])
    return data[headers[1].position : headers[-1].position], count


def checkpoint_values(data: bytes, source: str = "<snapshot>") -> list[bytes]:
    """The data record values of a ``.checkpoint`` file's bytes (control batches skipped)."""
    return [
        rec.value or b""
        for batch in read_batches(data, source)
        if not batch.is_control
        for rec in batch.records
    ]


@dataclass(slots=True)
class SnapshotJob:
    """A snapshot being written: its values are taken on the loop (a provider's may be a lazy iterable over
    immutable state), `build_and_write` runs in a worker thread."""

    log: FileRaftLog
    snapshot_id: SnapshotId
    values: Iterable[bytes]
    last_timestamp_ms: int
    previous: bytes = b""
    data: bytes | None = None
    error: BaseException | None = None

    def build_and_write(self) -> None:
        """Encode the checkpoint and write its file (the log installs it later, on the loop)."""
        try:
            self.data = build_checkpoint(
                self.snapshot_id, self.values, self.last_timestamp_ms, int(time.time() * 1000), self.previous
            )
            self.log.write_snapshot_file(self.snapshot_id, self.data)
        except Exception as exc:  # reported by the runner on the loop
            self.error = exc


@dataclass(slots=True)
class SnapshotPolicy:
    """Kafka's snapshot trigger: enough committed record bytes since the last snapshot, or enough time.

    Parameters
    ----------
    max_bytes
        `metadata.log.max.record.bytes.between.snapshots`.
    interval_ms
        `metadata.log.max.snapshot.interval.ms` (0: no time trigger).
    """

    max_bytes: int = DEFAULT_SNAPSHOT_MAX_BYTES
    interval_ms: int = DEFAULT_SNAPSHOT_INTERVAL_MS
    bytes_since: int = 0
    last_ms: int | None = None

    def committed(self, nbytes: int, now_ms: int) -> None:
        """Count committed record bytes (and start the interval at the first commit)."""
        self.bytes_since += nbytes
        if self.last_ms is None:
            self.last_ms = now_ms

    def due(self, now_ms: int) -> bool:
        """Whether a snapshot should be written now."""
        if self.bytes_since <= 0:
            return False
        if self.bytes_since >= self.max_bytes:
            return True
        return self.interval_ms > 0 and self.last_ms is not None and now_ms - self.last_ms >= self.interval_ms

    def written(self, now_ms: int) -> None:
        """A snapshot was written: start counting again."""
        self.bytes_since = 0
        self.last_ms = now_ms
