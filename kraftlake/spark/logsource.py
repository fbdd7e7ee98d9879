"""The ``kraftlake-log`` Python DataSource: a Kafka ``__cluster_metadata-0`` directory as ``metadata_log`` rows.

``spark.read.format("kraftlake-log").option("path", D).load()`` reads every segment of ``D`` (the snapshots
are the ``snapshots`` table's business, see :mod:`pipelines.ingest`). Planning scans only the 12-byte batch
framing of each segment (base offset, length) and cuts the segments into byte ranges of about
``recordsPerPartition`` records; each range is decoded in an executor's Python worker, straight from the file,
and yielded as ``pyarrow.RecordBatch`` es of :func:`kraftlake.records.arrow.metadata_log_schema`. Options
``startOffset`` / ``endOffset`` (inclusive) restrict the offsets read.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kraftlake.logformat.framing import scan_file_headers
from kraftlake.spark.structs import metadata_log_struct_type

ROWS_PER_ARROW_BATCH = 8192


@dataclass(frozen=True)
class SegmentRange:
    """Bytes ``[start, end)`` of a segment file holding the batches with offsets ``first..last``."""

    path: str
    start: int
    end: int
    first: int
    last: int


class LogPartition(InputPartition):
    """One input partition: a few consecutive batch ranges of one segment."""

    def __init__(self, ranges: list[SegmentRange], start_offset: int, end_offset: int) -> None:
        super().__init__(0)
        self.ranges = ranges
        self.start_offset = start_offset
        self.end_offset = end_offset


def scan_segment(path: str) -> Iterator[tuple[int, int, int, int]]:
    """(position, end position, base offset, last offset) of each batch, from the framing alone."""
    for h in scan_file_headers(path, stop_at="invalid"):  # a torn tail: the reader reports or skips it
        yield h.position, h.end, h.base_offset, h.last_offset


def plan_ranges(
    log_dir: str, records_per_partition: int, start_offset: int = 0, end_offset: int | None = None
) -> list[list[SegmentRange]]:
    """Cut the segments of ``log_dir`` into groups of batch ranges of about ``records_per_partition`` records."""
    from kraftlake.image.source import segments

    groups: list[list[SegmentRange]] = []
    for _base, seg in segments(log_dir):
        cur: list[int] | None = None  # [start, end, first, last]
        for pos, end, first, last in scan_segment(str(seg)):
            if last < start_offset or (end_offset is not None and first > end_offset):
                continue
            if cur is not None and cur[1] == pos and cur[3] - cur[2] + 1 < records_per_partition:
                cur[1], cur[3] = end, last
                continue
            if cur is not None:
                groups.append([SegmentRange(str(seg), *cur)])
            cur = [pos, end, first, last]
        if cur is not None:
            groups.append([SegmentRange(str(seg), *cur)])
    return groups


def range_records(ranges: list[SegmentRange], start_offset: int, end_offset: int | None) -> Iterator[Any]:
    """The ``MetadataRecord`` s of the ranges with offsets in ``[start_offset, end_offset]``, decoded straight
    from the files."""
    from kraftlake.logformat.reader import BatchReader
    from kraftlake.records.reader import iter_records

    for r in ranges:
        with open(r.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            window = memoryview(buf)[r.start : r.end]
            try:
                for mr in iter_records(BatchReader(window, r.path, base_position=r.start), source=r.path):
                    if mr.offset < start_offset or (end_offset is not None and mr.offset > end_offset):
                        continue
                    yield mr
            finally:
                window.release()


def read_ranges(ranges: list[SegmentRange], start_offset: int, end_offset: int | None) -> Iterator[Any]:
    """Decode the ranges into Arrow record batches of ``metadata_log`` rows (runs in executors)."""
    from kraftlake.records.arrow import record_batch

    rows: list[Any] = []
    for mr in range_records(ranges, start_offset, end_offset):
        rows.append(mr)
        if len(rows) >= ROWS_PER_ARROW_BATCH:
            yield record_batch(rows)
            rows = []
    if rows:
        yield record_batch(rows)


class LogReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        # Spark hands options over case-insensitively (lower-cased keys)
        options = {k.lower(): v for k, v in options.items()}
        self.path = options["path"]
        self.per_partition = int(options.get("recordsperpartition", "500000"))
        self.start = int(options.get("startoffset", "0"))
        end = options.get("endoffset")
        self.end = None if end is None or end == "" else int(end)

    def partitions(self) -> list[LogPartition]:
        groups = plan_ranges(self.path, self.per_partition, self.start, self.end)
        parts = [LogPartition(g, self.start, self.end if self.end is not None else -1) for g in groups]
        for i, p in enumerate(parts):
            p.value = i
        return parts or [LogPartition([], self.start, -1)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, LogPartition)
        end = None if partition.end_offset < 0 else partition.end_offset
        yield from read_ranges(partition.ranges, partition.start_offset, end)


class KraftlakeLogSource(DataSource):
    """``format("kraftlake-log")``: the records of a metadata log directory (option ``path``)."""

    @classmethod
    def name(cls) -> str:
        return "kraftlake-log"

    def schema(self) -> StructType:
        return metadata_log_struct_type()

    def reader(self, schema: StructType) -> LogReader:
        return LogReader(dict(self.options))


def register(spark: Any) -> None:
    """Register the ``kraftlake-log`` format with a session."""
    spark.dataSource.register(KraftlakeLogSource)
