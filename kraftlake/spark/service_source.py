"""The ``kraftlake-service`` streaming DataSource: committed records of a running Raft service, as an observer.

``spark.readStream.format("kraftlake-service").option("bootstrap", "h:p,h:p").option("clusterId", C).load()``
gives ``metadata_log`` rows (:func:`kraftlake.records.arrow.metadata_log_schema`). Offsets are metadata offsets,
``{"offset": N}`` meaning "the next offset to read". Who does what:

- ``latestOffset`` runs in Spark's long-lived driver-side Python worker: it asks a voter for its high watermark
  (:meth:`kraftlake.service.client.ObserverClient.log_range`) and, on Spark 4.2, caps the batch at
  ``ReadMaxRows(maxRecordsPerBatch)`` (admission control); ``Trigger.AvailableNow`` pins the target once.
- ``partitions(start, end)`` cuts ``[start, end)`` into ranges of ``recordsPerPartition`` offsets.
- ``read`` runs in executor workers: a fresh observer client fetches exactly its range (entries below the high
  watermark are committed, so any voter gives the same bytes: a batch replayed after a restart is identical),
  decodes it with :mod:`kraftlake.records` and yields Arrow record batches.

Options: ``bootstrap`` (comma-separated ``host:port``), ``clusterId``, ``startingOffset`` (a number,
``earliest`` (default) or ``latest``), ``maxRecordsPerBatch``, ``recordsPerPartition``, ``fetchTimeoutSeconds``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kraftlake.spark.structs import metadata_log_struct_type
from kraftlake.spark.tables.layout import WarehouseError

ROWS_PER_ARROW_BATCH = 8192


class StreamSourceError(WarehouseError):
    """Raised when a streaming source cannot serve a range (below the log start, service unreachable, bad option)."""


def entry_record(entry: Any, source: str = "<service entries>") -> Any:
    """A raft ``Entry`` of the metadata log as a :class:`kraftlake.records.MetadataRecord` (as the files give it).

    Raises
    ------
    RecordDecodeError
        On a value that cannot be decoded, naming `source` and the entry's offset.
    """
    from kraftlake.records.envelope import control_envelope, decode_data_envelope

    offset, epoch, is_control, value, ts, base, ctype = entry
    value = bytes(value)
    if is_control:
        return control_envelope(int(ctype), value, offset, epoch, ts, base, source=source, position=None)
    return decode_data_envelope(value, offset, epoch, ts, base, source=source, position=None)


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    from kraftlake.service.client import parse_endpoint

    endpoints = [parse_endpoint(p.strip()) for p in text.split(",") if p.strip()]
    if not endpoints:
        raise StreamSourceError("kraftlake-service needs option bootstrap=host:port[,host:port...]")
    return endpoints


class OffsetRange(InputPartition):
    """Offsets ``[start, end)`` of the metadata log."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__(start)
        self.start = start
        self.end = end


def fetch_range(client: Any, start: int, end: int, timeout_s: float) -> Iterator[Any]:
    """The committed entries ``[start, end)``, exactly; waits for a lagging voter up to ``timeout_s``."""
    from kraftlake.service.errors import RemoteError, SnapshotRequiredError

    pos, deadline = start, time.monotonic() + timeout_s
    while pos < end:
        try:
            # every entry of the answer up to the range's end is used: a voter answers with up to the Fetch's
            # max bytes (8 MiB, ~80k records) whatever count is wanted, so asking for fewer wastes its work
            entries = client.fetch_entries(pos, end - pos, max_wait_ms=500)
        except SnapshotRequiredError as exc:
            raise StreamSourceError(
                f"offsets {pos}..{end - 1} are below the service's log start {client.log_start_offset} "
                f"(taken into snapshot {exc.snapshot_id}); restart the stream from a warehouse at or after "
                "that snapshot"
            ) from exc
        except RemoteError as exc:
            raise StreamSourceError(f"fetch of offsets {pos}..{end - 1}: {exc}") from exc
        if not entries:
            if time.monotonic() > deadline:
                raise StreamSourceError(f"offsets {pos}..{end - 1} not served within {timeout_s} s")
            continue
        for e in entries:
            if e.offset != pos:
                raise StreamSourceError(f"expected offset {pos}, the service sent {e.offset}")
            if pos >= end:
                return
            yield e
            pos += 1
        deadline = time.monotonic() + timeout_s


def read_range(options: dict[str, str], start: int, end: int) -> Iterator[Any]:
    """Arrow record batches of the ``metadata_log`` rows ``[start, end)`` (runs in executors)."""
    from kraftlake.records.arrow import record_batch
    from kraftlake.service.client import ObserverClient

    client = ObserverClient(parse_bootstrap(options["bootstrap"]), options["clusterid"])
    source = f"kraftlake-service {options['bootstrap']}"
    rows: list[Any] = []
    try:
        for e in fetch_range(client, start, end, float(options.get("fetchtimeoutseconds", "60"))):
            rows.append(entry_record(e, source))
            if len(rows) >= ROWS_PER_ARROW_BATCH:
                yield record_batch(rows)
                rows = []
    finally:
        client.close()
    if rows:
        yield record_batch(rows)


def limited_end(start: int, available: int, limit: ReadLimit, target: int | None) -> int:
    """The end offset of the next batch: all that is available, capped by ``limit`` and an AvailableNow target."""
    end = max(start, available)
    if target is not None:
        end = min(end, max(start, target))
    if isinstance(limit, ReadMaxRows):
        end = min(end, start + max(1, limit.max_rows))
    return end


def split_range(start: int, end: int, per_partition: int) -> list[OffsetRange]:
    """``[start, end)`` in ranges of at most ``per_partition`` offsets (none when empty)."""
    return [OffsetRange(s, min(s + per_partition, end)) for s in range(start, end, max(1, per_partition))]


class ServiceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        # Spark hands options over case-insensitively: lower-case the keys once
        self.options = {k.lower(): str(v) for k, v in options.items()}
        if "clusterid" not in self.options:
            raise StreamSourceError("kraftlake-service needs option clusterId")
        parse_bootstrap(self.options.get("bootstrap", ""))
        self.max_records = int(self.options.get("maxrecordsperbatch", "0") or 0)
        self.per_partition = int(self.options.get("recordsperpartition", "50000"))
        self._client: Any = None
        self._latest = 0
        self._target: int | None = None

    def client(self) -> Any:
        if self._client is None:
            from kraftlake.service.client import ObserverClient

            self._client = ObserverClient(
                parse_bootstrap(self.options["bootstrap"]), self.options["clusterid"]
            )
        return self._client

    def available(self) -> int:
        """The high watermark, never going back (a lagging follower may answer a lower one)."""
        _, hw = self.client().log_range()
        self._latest = max(self._latest, hw)
        return self._latest

    def initialOffset(self) -> dict[str, int]:
        start = self.options.get("startingoffset", "earliest").strip().lower()
        if start == "earliest":
            log_start, _ = self.client().log_range()
            return {"offset": log_start}
        if start == "latest":
            return {"offset": self.available()}
        return {"offset": int(start)}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.available()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"offset": limited_end(int(start["offset"]), self.available(), limit, self._target)}

    def reportLatestOffset(self) -> dict[str, int] | None:
        return {"offset": self._latest}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return split_range(int(start["offset"]), int(end["offset"]), self.per_partition)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        yield from read_range(self.options, partition.start, partition.end)

    def commit(self, end: dict[str, int]) -> None:
        pass

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()


class KraftlakeServiceSource(DataSource):
    """``format("kraftlake-service")``: the committed metadata log of a running service (streaming only)."""

    @classmethod
    def name(cls) -> str:
        return "kraftlake-service"

    def schema(self) -> StructType:
        return metadata_log_struct_type()

    def streamReader(self, schema: StructType) -> ServiceStreamReader:
        return ServiceStreamReader(dict(self.options))


def register(spark: Any) -> None:
    """Register the ``kraftlake-service`` format with a session."""
    spark.dataSource.register(KraftlakeServiceSource)
