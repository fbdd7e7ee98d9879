"""kraftlake against Kafka 4.4.0 on the real peer's files, both ways.

Reading: ``kraftlake decode`` of the peer's segments, snapshots and whole directory equals
``kafka-dump-log --cluster-metadata-decoder`` record for record. Writing: a segment and a snapshot written with
``kraftlake.logformat`` + ``kraftlake.records`` (every record of the peer's, re-encoded from the typed records)
are read back by ``kafka-dump-log`` as the originals are, and by ``kafka-metadata-shell`` (Kafka 4.3.1's: 4.4.0
published none) where it can load the log: the peer formatted at ``SHELL_RELEASE_VERSION``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake import kafka_tools
from kraftlake.cli import main
from kraftlake.commands import decode
from kraftlake.logformat.batch import build_control_batch, build_data_batch
from kraftlake.logformat.reader import read_file_batches
from kraftlake.logformat.segment import SegmentedLog
from kraftlake.logformat.snapshot import SnapshotId, write_snapshot
from kraftlake.protocol.control import encode_control_body
from kraftlake.records.reader import MetadataRecord, iter_records
from kraftlake.records.serde import encode_metadata_record
from peers.kafka import LIVE_TOPICS, KafkaMetadataLog

pytestmark = pytest.mark.kafka

KEYS = ("offset", "timestamp", "batch_offset", "control", "type", "version", "data")


def decode_lines(*argv: str) -> list[dict[str, Any]]:
    """``kraftlake decode ARGV`` through the CLI entry point, parsed."""
    out = io.StringIO()
    args = decode_parser().parse_args(list(argv))
    assert decode.run(args, out=out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def decode_parser() -> Any:
    import argparse

    parser = argparse.ArgumentParser()
    decode.add_arguments(parser)
    return parser


def kafka_rows(dumped: kafka_tools.DumpedFile) -> list[dict[str, Any]]:
    return [
        {
            "offset": r.offset,
            "timestamp": r.timestamp,
            "batch_offset": r.batch_offset,
            "control": r.control,
            "type": r.type,
            "version": r.version,
            "data": r.data,
        }
        for r in dumped.records
    ]


def our_rows(path: Path) -> list[dict[str, Any]]:
    return [{k: row[k] for k in KEYS} for row in decode_lines(str(path))]


@pytest.fixture(scope="module")
def peer_files(kafka_metadata_log: KafkaMetadataLog) -> list[Path]:
    log = kafka_metadata_log
    return [*log.segments, *log.snapshots]


@pytest.fixture(scope="module")
def kafka_dump(peer_files: list[Path]) -> dict[Path, kafka_tools.DumpedFile]:
    dumped = kafka_tools.dump_log_parsed(peer_files)
    return {Path(d.path): d for d in dumped}


def test_every_peer_file_decodes_as_kafka_decodes_it(
    peer_files: list[Path], kafka_dump: dict[Path, kafka_tools.DumpedFile]
) -> None:
    kinds = set()
    for path in peer_files:
        theirs = kafka_rows(kafka_dump[path])
        ours = our_rows(path)
        assert len(ours) == len(theirs) > 0, path
        for mine, kafka in zip(ours, theirs, strict=True):
            assert mine == kafka, (path, mine["offset"])
        kinds.add(kafka_dump[path].kind)
    # Kafka 4.4 writes no bootstrap.checkpoint (its bootstrap records are in the snapshot at offset 0);
    # the fixture logs of older releases cover that kind (tests/records, tests/test_kafka_tools.py)
    assert kinds == {"segment", "snapshot"}


def test_epochs_match_the_batches(
    kafka_metadata_log: KafkaMetadataLog, kafka_dump: dict[Path, kafka_tools.DumpedFile]
) -> None:
    for segment in kafka_metadata_log.segments:
        epoch_of = {}
        for batch in kafka_dump[segment].batches:
            for offset in range(batch.base_offset, batch.last_offset + 1):
                epoch_of[offset] = batch.partition_leader_epoch
        assert {r["offset"]: r["epoch"] for r in decode_lines(str(segment))} == epoch_of


def test_log_dir_and_partition_dir_decode_to_all_segments(
    kafka_metadata_log: KafkaMetadataLog, kafka_dump: dict[Path, kafka_tools.DumpedFile]
) -> None:
    expected = [row for s in kafka_metadata_log.segments for row in kafka_rows(kafka_dump[s])]
    assert our_rows(kafka_metadata_log.log_dir) == expected
    assert our_rows(kafka_metadata_log.metadata_dir) == expected


def test_summary_of_the_peer_log(
    kafka_metadata_log: KafkaMetadataLog, kafka_dump: dict[Path, kafka_tools.DumpedFile]
) -> None:
    out = io.StringIO()
    assert (
        decode.run(decode_parser().parse_args([str(kafka_metadata_log.log_dir), "--summary"]), out=out) == 0
    )
    summary = json.loads(out.getvalue())
    dumped = [kafka_dump[s] for s in kafka_metadata_log.segments]
    records = [r for d in dumped for r in d.records]
    assert summary["records"] == len(records)
    assert summary["offsets"] == {"first": records[0].offset, "last": records[-1].offset}
    assert summary["batches"]["total"] == sum(len(d.batches) for d in dumped)
    assert summary["crc"] == {"verified": True, "status": "ok", "dropped": []}
    counts: dict[tuple[str | None, int | None], int] = {}
    for r in records:
        counts[(r.type, r.version)] = counts.get((r.type, r.version), 0) + 1
    assert {(t["type"], t["version"]): t["count"] for t in summary["types"]} == counts
    assert [f["file"] for f in summary["files"]] == [str(s) for s in kafka_metadata_log.segments]


# --- what we write, Kafka reads ---------------------------------------------------------------------------


def _reencoded_batches(path: Path) -> Iterator[bytes]:
    """The batches of ``path`` rebuilt from the typed records by kraftlake's writers (not copied bytes)."""
    records = list(iter_records(read_file_batches(path), source=str(path)))
    for _, group in groupby(records, key=lambda r: r.batch_offset):
        batch: list[MetadataRecord] = list(group)
        first = batch[0]
        assert first.record is not None
        if first.is_control:
            bodies = [
                (r.api_key, encode_control_body(r.record, r.version)) for r in batch if r.record is not None
            ]
            yield build_control_batch(first.batch_offset, first.epoch, first.timestamp, bodies)
        else:
            values = [encode_metadata_record(r.record, r.version) for r in batch if r.record is not None]
            yield build_data_batch(first.batch_offset, first.epoch, first.timestamp, values)


def _records_only(dumped: kafka_tools.DumpedFile) -> list[tuple[Any, ...]]:
    return [
        (r.offset, r.control, r.type, r.version, json.dumps(r.data, sort_keys=True)) for r in dumped.records
    ]


PEERS = pytest.mark.parametrize("peer", ["kafka_metadata_log", "kafka_shell_metadata_log"])
"""Kafka 4.4.0 at its default metadata.version (4.4-IV2), which only its dump-log reads, and at
``SHELL_RELEASE_VERSION``, which the 4.3.1 metadata shell reads too."""


@PEERS
def test_segment_we_write_is_read_by_kafka(peer: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    originals = request.getfixturevalue(peer).segments
    written_dir = tmp_path / "__cluster_metadata-0"
    with SegmentedLog(written_dir) as log:
        for original in originals:
            for raw in _reencoded_batches(original):
                log.append(raw)
        log.flush()
    (written,) = sorted(written_dir.glob("*.log"))

    theirs = kafka_tools.dump_log_parsed([*originals, written])
    ours = theirs.pop()
    assert all(b.is_valid for b in ours.batches) and ours.invalid_trailing_bytes == 0
    assert _records_only(ours) == [rec for d in theirs for rec in _records_only(d)]
    # our decode agrees with Kafka's on our own file too
    assert our_rows(written) == kafka_rows(ours)

    if peer == "kafka_shell_metadata_log":
        shell = kafka_tools.metadata_shell(written, "ls /image/topics/byName")
        assert sorted(shell.split()) == sorted(LIVE_TOPICS)


@PEERS
def test_snapshot_we_write_is_read_by_kafka(
    peer: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    original = request.getfixturevalue(peer).snapshots[-1]
    sid = SnapshotId.parse(original.name)
    written = write_snapshot(tmp_path, sid, list(_reencoded_batches(original)))
    assert written.name == original.name

    theirs, ours = kafka_tools.dump_log_parsed([original, written])
    assert (ours.kind, ours.snapshot_end_offset, ours.snapshot_epoch) == (
        "snapshot",
        sid.end_offset,
        sid.epoch,
    )
    assert all(b.is_valid for b in ours.batches)
    assert _records_only(ours) == _records_only(theirs)
    if peer != "kafka_shell_metadata_log":
        return

    shell = kafka_tools.metadata_shell(written, "ls /image/topics/byName")
    assert sorted(shell.split()) == sorted(LIVE_TOPICS)
    # cleanup.policy was set, then deleted: only retention.ms is left
    configs = kafka_tools.metadata_shell(written, "ls /image/configs/TOPIC:orders")
    assert configs.split() == ["retention.ms"]
    partitions = kafka_tools.metadata_shell(written, "ls /image/topics/byName/orders")
    assert sorted(partitions.split()) == ["0", "1", "2", "3", "4", "id", "name"]


def test_cli_main_decodes_the_peer_log(
    kafka_metadata_log: KafkaMetadataLog, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["decode", str(kafka_metadata_log.log_dir), "--types", "TopicRecord,RemoveTopicRecord"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["type"] for r in rows] == ["TOPIC_RECORD"] * 3 + ["REMOVE_TOPIC_RECORD"]


FIXTURES = KAFKA_LOGS


def test_shared_fixtures_decode_as_kafka_decodes_them() -> None:
    files = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.name.endswith((".log", ".checkpoint")))
    assert files
    for dumped in kafka_tools.dump_log_parsed(files):
        assert our_rows(Path(dumped.path)) == kafka_rows(dumped), dumped.path


def _data_text(line: str) -> str:
    """The text of the ``data`` value, the last key of both dump-log's payload and our line."""
    return line[line.index('"data":') + len('"data":') : -1]


def _kafka_data_texts(files: list[Path]) -> list[str]:
    texts = []
    for line in kafka_tools.dump_log(files).splitlines():
        if line.startswith("| offset:") and " payload: {" in line:
            texts.append(_data_text(line[line.index(" payload: ") + len(" payload: ") :]))
    return texts


def _our_data_texts(files: list[Path]) -> list[str]:
    texts = []
    for path in files:
        out = io.StringIO()
        decode.run(decode_parser().parse_args([str(path)]), out=out)
        texts += [_data_text(line) for line in out.getvalue().splitlines() if '"control":false' in line]
    return texts


def test_data_is_printed_exactly_as_dump_log_prints_it(
    kafka_metadata_log: KafkaMetadataLog, tmp_path: Path
) -> None:
    from kraftlake.protocol.messages import MESSAGE_CLASSES

    config, quota = MESSAGE_CLASSES["ConfigRecord"], MESSAGE_CLASSES["ClientQuotaRecord"]
    special = [
        encode_metadata_record(
            config(resource_type=2, resource_name="t\u00e9", name="x", value='a\x01b"\\\n'), 0
        ),
        *(
            encode_metadata_record(quota(key="producer_byte_rate", value=v), 0)
            for v in (1e7, 1234567.5, 0.001, 0.0001, 2048.0, 1e-10, 123456789012.0)
        ),
    ]
    odd = tmp_path / "00000000000000000000.log"
    odd.write_bytes(build_data_batch(0, 1, 0, special))
    files = [*kafka_metadata_log.segments, kafka_metadata_log.snapshots[-1], odd]
    theirs, ours = _kafka_data_texts(files), _our_data_texts(files)
    assert len(theirs) == len(ours) > len(special)
    for mine, kafka in zip(ours, theirs, strict=True):
        assert mine == kafka
