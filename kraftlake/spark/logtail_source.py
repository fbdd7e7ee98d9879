"""The ``kraftlake-logdir`` streaming DataSource: tails the segments of a ``__cluster_metadata-0`` directory.

``spark.readStream.format("kraftlake-logdir").option("path", D).load()`` gives ``metadata_log`` rows as a live
Kafka controller appends batches to ``D``'s segment files. Offsets are ``{"offset": N}``, the next offset.

``latestOffset`` (driver-side worker, may keep state) scans only the batch framing appended since its last
look and answers the end of the last *whole* batch: a batch whose bytes are not all in the file yet (a torn or
still-being-written tail) is not counted until it is complete, so a micro-batch never ends inside it. Batches
are never split: with ``maxRecordsPerBatch`` (Spark 4.2 admission control, ``ReadMaxRows``) a micro-batch ends
at the last batch boundary within the limit (or after one batch if a single batch is larger). ``partitions``
and ``read`` reuse :mod:`kraftlake.spark.logsource` (executors decode byte ranges straight from the files), so
a replayed micro-batch reads the same bytes. Options: ``path``, ``startingOffset`` (a number, ``earliest``
(default) or ``latest``), ``maxRecordsPerBatch``, ``recordsPerPartition``.

Known limit: a Kafka follower that truncates a diverging uncommitted tail rewrites offsets this source may have
served; point it at the active controller's directory or at records known committed.
"""

from __future__ import annotations

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

from kraftlake.logformat.framing import scan_file_headers
from kraftlake.spark.logsource import LogPartition, plan_ranges, range_records, read_ranges
from kraftlake.spark.service_source import StreamSourceError
from kraftlake.spark.structs import metadata_log_struct_type

#: The default of option ``recordsPerPartition``.
RECORDS_PER_PARTITION = 50_000


def scan_from(path: str, pos: int) -> Iterator[tuple[int, int, int]]:
    """(end position, base offset, last offset) of each whole batch from byte ``pos``; stops at a torn tail."""
    for header in scan_file_headers(path, pos, stop_at="invalid"):
        yield header.end, header.base_offset, header.last_offset


class SegmentIndex:
    """Batch boundaries of a log directory, extended incrementally: per segment, scanned bytes and batch ends."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.scanned: dict[str, int] = {}
        self.ends: list[int] = []  # the next offset after each whole batch, ascending
        self.first = -1
        #: (first missing offset, next offset present) of each hole between batches: a follower that fell
        #: behind the quorum's log start installs a snapshot and goes on past it (kraftlake.follow.mirror)
        self.gaps: list[tuple[int, int]] = []

    def refresh(self) -> int:
        """Scan what was appended; returns the offset after the last whole batch (``first`` if none)."""
        from kraftlake.image.source import segments

        for base, seg in segments(self.path):
            name = str(seg)
            if self.first < 0:
                self.first = base
            pos = self.scanned.get(name, 0)
            for end, first, last in scan_from(name, pos):
                if self.ends and first > self.ends[-1]:
                    self.gaps.append((self.ends[-1], first))
                if not self.ends or last + 1 > self.ends[-1]:
                    self.ends.append(last + 1)
                pos = end
            self.scanned[name] = pos
        return self.ends[-1] if self.ends else max(self.first, 0)

    def boundary_at_most(self, start: int, limit_end: int) -> int:
        """The largest batch end in ``(start, limit_end]``, or the first batch end past ``start``."""
        import bisect

        i = bisect.bisect_right(self.ends, limit_end) - 1
        if i >= 0 and self.ends[i] > start:
            return self.ends[i]
        j = bisect.bisect_right(self.ends, start)
        return self.ends[j] if j < len(self.ends) else start


def read_records(path: str, first: int, last: int) -> list[Any]:
    """The ``MetadataRecord`` s with offsets ``first..last`` of the log directory ``path``, by offset, read in
    the calling process: the rows a micro-batch ``{"offset": first}`` to ``{"offset": last + 1}`` of this source
    holds (the same byte ranges, the same decoding)."""
    from kraftlake.image.source import partition_dir

    groups = plan_ranges(str(partition_dir(path)), RECORDS_PER_PARTITION, first, last)
    records = [r for group in groups for r in range_records(group, first, last)]
    records.sort(key=lambda r: r.offset)
    return records


class LogTailStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = {k.lower(): str(v) for k, v in options.items()}
        if not self.options.get("path"):
            raise StreamSourceError("kraftlake-logdir needs option path (a __cluster_metadata-0 directory)")
        from kraftlake.image.source import partition_dir

        self.path = str(partition_dir(self.options["path"]))
        self.max_records = int(self.options.get("maxrecordsperbatch", "0") or 0)
        self.per_partition = int(self.options.get("recordsperpartition", RECORDS_PER_PARTITION))
        self.index = SegmentIndex(self.path)
        self._target: int | None = None

    def initialOffset(self) -> dict[str, int]:
        start = self.options.get("startingoffset", "earliest").strip().lower()
        latest = self.index.refresh()
        if start == "earliest":
            return {"offset": max(self.index.first, 0)}
        if start == "latest":
            return {"offset": latest}
        return {"offset": int(start)}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.index.refresh()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        begin = int(start["offset"])
        end = self.index.refresh()
        if self._target is not None:
            end = min(end, self._target)
        if isinstance(limit, ReadMaxRows) and end > begin + limit.max_rows:
            end = self.index.boundary_at_most(begin, begin + max(1, limit.max_rows))
        return {"offset": max(begin, end)}

    def reportLatestOffset(self) -> dict[str, int] | None:
        return {"offset": self.index.ends[-1]} if self.index.ends else None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        first, stop = int(start["offset"]), int(end["offset"])
        if first >= stop:
            return []
        if self.index.first > first:
            raise StreamSourceError(
                f"{self.path}: offsets from {first} are gone (the log now starts at {self.index.first})"
            )
        groups = plan_ranges(self.path, self.per_partition, first, stop - 1)
        parts = [LogPartition(g, first, stop - 1) for g in groups]
        for i, p in enumerate(parts):
            p.value = i
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, LogPartition)
        yield from read_ranges(partition.ranges, partition.start_offset, partition.end_offset)


class KraftlakeLogTailSource(DataSource):
    """``format("kraftlake-logdir")``: a live metadata log directory, tailed (streaming only)."""

    @classmethod
    def name(cls) -> str:
        return "kraftlake-logdir"

    def schema(self) -> StructType:
        return metadata_log_struct_type()

    def streamReader(self, schema: StructType) -> LogTailStreamReader:
        return LogTailStreamReader(dict(self.options))


def register(spark: Any) -> None:
    """Register the ``kraftlake-logdir`` format with a session."""
    spark.dataSource.register(KraftlakeLogTailSource)
