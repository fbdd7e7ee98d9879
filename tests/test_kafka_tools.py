"""kraftlake.kafka_tools: the dump-log parser (on output captured from Kafka 4.3.1) and the tool wrappers."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake import kafka_tools
from kraftlake.kafka_tools import KafkaToolError, parse_dump_log

# Captured from `kafka-dump-log --cluster-metadata-decoder` (Kafka 4.3.1) on the peer's first segment and its
# empty offset-0 snapshot; the directory was shortened to /data.
REAL_OUTPUT = """\
Dumping /data/__cluster_metadata-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795332496542 size: 174 magic: 2 compresscodec: none crc: 3374716516 isvalid: true
| offset: 0 CreateTime: 1795332496542 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}
| offset: 1 CreateTime: 1795332496542 keySize: 4 valueSize: 5 sequence: -1 headerKeys: [] KRaftVersion {"version":0,"kRaftVersion":1}
| offset: 2 CreateTime: 1795332496542 keySize: 4 valueSize: 55 sequence: -1 headerKeys: [] KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"cHCWHQ4oSAaMBJ_9Ei02xg","endpoints":[{"name":"CONTROLLER","host":"127.0.0.1","port":53547}],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}
baseOffset: 3 lastOffset: 11 count: 9 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 174 CreateTime: 1795332496661 size: 330 magic: 2 compresscodec: none crc: 595290068 isvalid: true
| offset: 3 CreateTime: 1795332496661 keySize: -1 valueSize: 24 sequence: -1 headerKeys: [] payload: {"type":"BEGIN_TRANSACTION_RECORD","version":0,"data":{"name":"Bootstrap records"}}
Dumping /data/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint
Snapshot end offset: 0, epoch: 0
baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795332494784 size: 166 magic: 2 compresscodec: none crc: 647916707 isvalid: true
| offset: 0 CreateTime: 1795332494784 keySize: 4 valueSize: 11 sequence: -1 headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":1795332494779}
| offset: 1 CreateTime: 1795332494784 keySize: 4 valueSize: 5 sequence: -1 headerKeys: [] KRaftVersion {"version":0,"kRaftVersion":1}
| offset: 2 CreateTime: 1795332494784 keySize: 4 valueSize: 55 sequence: -1 headerKeys: [] KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"cHCWHQ4oSAaMBJ_9Ei02xg","endpoints":[{"name":"CONTROLLER","host":"127.0.0.1","port":53547}],"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}
baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 166 CreateTime: 1795332494790 size: 75 magic: 2 compresscodec: none crc: 1738219102 isvalid: true
| offset: 3 CreateTime: 1795332494790 keySize: 4 valueSize: 3 sequence: -1 headerKeys: [] SnapshotFooter {"version":0}
"""

FIXTURES = KAFKA_LOGS


def test_parses_segment_batches_and_records() -> None:
    segment, _ = parse_dump_log(REAL_OUTPUT)
    assert segment.path == "/data/__cluster_metadata-0/00000000000000000000.log"
    assert (segment.kind, segment.start_offset, segment.snapshot_end_offset) == ("segment", 0, None)
    assert [b.base_offset for b in segment.batches] == [0, 3]
    control = segment.batches[0]
    assert (control.last_offset, control.count, control.partition_leader_epoch) == (2, 3, 1)
    assert (control.is_control, control.position, control.size, control.crc) == (True, 0, 174, 3374716516)
    assert (control.magic, control.compression, control.is_valid) == (2, "none", True)
    assert segment.batches[1].position == 174
    assert [r.offset for r in segment.records] == [0, 1, 2, 3]


def test_control_records_keep_their_json_and_version() -> None:
    records = parse_dump_log(REAL_OUTPUT)[0].records
    leader = records[0]
    assert (leader.type, leader.version, leader.control, leader.batch_offset) == ("LeaderChange", 0, True, 0)
    assert leader.data == {
        "version": 0,
        "leaderId": 1,
        "voters": [{"voterId": 1}],
        "grantingVoters": [{"voterId": 1}],
    }
    assert (records[1].type, records[1].data) == ("KRaftVersion", {"version": 0, "kRaftVersion": 1})
    voters = records[2]
    assert voters.type == "KRaftVoters"
    assert voters.data is not None
    assert voters.data["voters"][0]["endpoints"] == [
        {"name": "CONTROLLER", "host": "127.0.0.1", "port": 53547}
    ]
    assert (voters.key_size, voters.value_size, voters.timestamp_type) == (4, 55, "CreateTime")


def test_metadata_record_payload() -> None:
    record = parse_dump_log(REAL_OUTPUT)[0].records[3]
    assert record.as_dict() == {
        "offset": 3,
        "type": "BEGIN_TRANSACTION_RECORD",
        "version": 0,
        "data": {"name": "Bootstrap records"},
        "control": False,
    }
    assert (record.timestamp, record.batch_offset, record.key_size) == (1795332496661, 3, -1)


def test_snapshot_file() -> None:
    snapshot = parse_dump_log(REAL_OUTPUT)[1]
    assert (snapshot.kind, snapshot.snapshot_end_offset, snapshot.snapshot_epoch) == ("snapshot", 0, 0)
    assert [r.type for r in snapshot.records] == [
        "SnapshotHeader",
        "KRaftVersion",
        "KRaftVoters",
        "SnapshotFooter",
    ]
    assert snapshot.records[0].data == {"version": 0, "lastContainedLogTimestamp": 1795332494779}
    assert snapshot.records[-1].batch_offset == 3


def test_bootstrap_error_null_value_and_trailing_bytes() -> None:
    batch = REAL_OUTPUT.splitlines()[6]
    text = "\n".join(
        [
            "Dumping /data/bootstrap.checkpoint",
            "KRaft bootstrap snapshot",
            batch,
            "| offset: 3 CreateTime: 5 keySize: -1 valueSize: 4 sequence: -1 headerKeys: [] payload: "
            "Error at 3, skipping. Unknown metadata id 99",
            "| offset: 4 CreateTime: 5 keySize: -1 valueSize: -1 sequence: -1 headerKeys: []",
            "Found 7 invalid bytes at the end of bootstrap.checkpoint",
        ]
    )
    (dumped,) = parse_dump_log(text)
    assert dumped.kind == "bootstrap"
    assert dumped.invalid_trailing_bytes == 7
    error, null = dumped.records
    assert (error.type, error.data, error.error) == (
        None,
        None,
        "Error at 3, skipping. Unknown metadata id 99",
    )
    assert (null.type, null.value_size, null.error) == (None, -1, None)


@pytest.mark.parametrize(
    "text",
    [
        "baseOffset: 0 lastOffset: 0",  # before any Dumping line
        "Dumping /x.log\nsomething Kafka never prints",
        "Dumping /x.log\n| offset: 0 CreateTime: 1 keySize: -1 valueSize: 4 sequence: -1 headerKeys: [] payload: {}",
        "Dumping /x.log\n"
        + REAL_OUTPUT.splitlines()[6]
        + "\n| offset: 3 CreateTime: 1 keySize: -1 valueSize: 4 "
        "sequence: -1 headerKeys: [] payload: {not json",
    ],
)
def test_unexpected_output_raises(text: str) -> None:
    with pytest.raises(KafkaToolError, match="dump-log output line"):
        parse_dump_log(text)


def test_jars_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(kafka_tools.JARS_ENV, str(tmp_path))
    assert kafka_tools.jars_root() == tmp_path
    with pytest.raises(KafkaToolError, match="no Kafka jars"):
        kafka_tools.kafka_jars_dir()


def test_dump_log_rejects_no_files_and_commas() -> None:
    with pytest.raises(KafkaToolError):
        kafka_tools.dump_log([])
    with pytest.raises(KafkaToolError, match="splits --files"):
        kafka_tools.dump_log(["a,b.log"])


@pytest.mark.kafka
def test_dump_log_on_the_shared_fixtures() -> None:
    files = sorted(FIXTURES.glob("*/*.log")) + sorted(FIXTURES.glob("*/*/*.log"))
    files += sorted(FIXTURES.glob("*/bootstrap.checkpoint"))
    assert files, "no fixtures"
    dumped = kafka_tools.dump_log_parsed(files)
    assert [d.path for d in dumped] == [str(f) for f in files]
    for d in dumped:
        assert d.records, d.path
        assert all(b.is_valid for b in d.batches), d.path
        assert d.invalid_trailing_bytes == 0
        assert all(r.error is None and r.type is not None for r in d.records), d.path
        assert sum(b.count or 0 for b in d.batches) == len(d.records)


@pytest.mark.kafka
def test_a_failing_tool_raises(tmp_path: Path) -> None:
    missing = tmp_path / "00000000000000000000-0000000000.checkpoint"
    with pytest.raises(KafkaToolError, match="exited with"):
        kafka_tools.metadata_shell(missing, "ls /")
