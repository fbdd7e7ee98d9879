"""Kafka's own DumpLogSegments accepts segments and snapshots we write (every batch ``isvalid: true``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake import kafka_tools
from kraftlake.logformat import (
    Compression,
    ControlRecordType,
    Record,
    SegmentedLog,
    SnapshotId,
    build_control_batch,
    build_data_batch,
    encode_batch,
    read_file_batches,
    reencode,
    write_snapshot,
)

pytestmark = pytest.mark.kafka

FIXTURE_LOG = KAFKA_LOGS / "kafkademo-multi-epoch" / "__cluster_metadata-0" / "00000000000000000000.log"
_BATCH = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* compresscodec: (\w+) crc: (\d+) isvalid: (\w+)$"
)
_RECORD = re.compile(r"^\| offset: (\d+) ")


def _real_values() -> tuple[bytes, list[bytes]]:
    """A real LeaderChange body and real metadata record values, from a log Kafka wrote."""
    leader_change = b""
    values: list[bytes] = []
    for batch in read_file_batches(FIXTURE_LOG):
        for r in batch.records:
            if batch.is_control and not leader_change:
                leader_change = r.value or b""
            elif not batch.is_control and r.value:
                values.append(r.value)
    return leader_change, values[:400]


def _dump(path: Path) -> tuple[list[tuple[int, ...]], list[int], list[str]]:
    out = kafka_tools.run_class(kafka_tools.DUMP_LOG_CLASS, ["--deep-iteration", "--files", str(path)])
    batches, records, codecs = [], [], []
    for line in out.splitlines():
        m = _BATCH.match(line)
        if m:
            assert m.group(6) == "true", line
            batches.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(5))))
            codecs.append(m.group(4))
        m = _RECORD.match(line)
        if m:
            records.append(int(m.group(1)))
    return batches, records, codecs


def test_dump_log_accepts_our_segment(tmp_path: Path) -> None:
    leader_change, values = _real_values()
    with SegmentedLog(tmp_path) as log:
        log.append(
            build_control_batch(0, 1, 1_700_000_000_000, [(ControlRecordType.LEADER_CHANGE, leader_change)])
        )
        offset = 1
        for codec in Compression:
            chunk = values[:80]
            values = values[80:]
            log.append(build_data_batch(offset, 1, 1_700_000_000_001, chunk, compression=codec))
            offset += len(chunk)
        log.append(
            encode_batch(
                [
                    Record(offset, 5, b"key", b"value", (("h", b"x"), ("n", None))),
                    Record(offset + 1, 6, None, None),
                ],
                partition_leader_epoch=2,
                compression=Compression.LZ4,
            )
        )
    seg = tmp_path / "00000000000000000000.log"
    ours = read_file_batches(seg)
    batches, records, codecs = _dump(seg)
    assert batches == [(b.base_offset, b.last_offset, b.record_count, b.crc) for b in ours]
    assert codecs == ["none", "none", "gzip", "snappy", "lz4", "zstd", "lz4"]
    assert records == [r.offset for b in ours for r in b.records]


def test_dump_log_accepts_our_snapshot(tmp_path: Path) -> None:
    _, values = _real_values()
    header = b"\x00\x00" + (1_700_000_000_000).to_bytes(8, "big") + b"\x00"  # SnapshotHeaderRecord v0
    footer = b"\x00\x00\x00"  # SnapshotFooterRecord v0
    path = write_snapshot(
        tmp_path,
        SnapshotId(100, 3),
        [
            build_control_batch(0, 3, 1_700_000_000_000, [(ControlRecordType.SNAPSHOT_HEADER, header)]),
            build_data_batch(1, 3, 1_700_000_000_000, values[:98]),
            build_control_batch(99, 3, 1_700_000_000_000, [(ControlRecordType.SNAPSHOT_FOOTER, footer)]),
        ],
    )
    batches, records, _ = _dump(path)
    assert [b[:3] for b in batches] == [(0, 0, 1), (1, 98, 98), (99, 99, 1)]
    assert records == list(range(100))


def test_we_read_batches_kafka_compresses_with_every_codec(tmp_path: Path) -> None:
    """Kafka's MemoryRecords (kafka-clients) writes batches with each codec; we decode them all."""
    java = Path(kafka_tools.java_executable())
    javac = shutil.which("javac") or str(java.with_name("javac"))
    if not Path(javac).exists():
        pytest.skip("no javac")
    src = Path(__file__).with_name("java") / "KafkaBatches.java"
    cp = f"{kafka_tools.kafka_jars_dir()}/*"
    subprocess.run([javac, "-d", str(tmp_path), "-cp", cp, str(src)], check=True, capture_output=True)
    out = tmp_path / "kafka-codecs.log"
    subprocess.run(
        [str(java), "-cp", f"{cp}:{tmp_path}", "KafkaBatches", str(out)], check=True, capture_output=True
    )
    batches = read_file_batches(out)
    assert [b.compression for b in batches] == list(Compression)
    for n, batch in enumerate(batches):
        assert batch.base_offset == 200 * n
        expected = []
        for i in range(200):
            value = f"value-{i}-{'x' * (i % 97)}".encode()
            headers = ((f"h{i}", value),) if i % 3 == 0 else ()
            key = None if i % 2 == 0 else f"k{i}".encode()
            expected.append(Record(200 * n + i, 1_700_000_000_000 + i, key, value, headers))
        assert batch.records == expected
        if batch.compression is Compression.NONE:
            assert reencode(batch) == batch.raw
