"""The real Kafka peer: its log holds what the workload did, and Kafka's own tools read all of it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kraftlake import kafka_tools
from kraftlake.kafka_tools import DumpedFile, DumpedRecord
from peers.kafka import (
    ADDED_PARTITIONS,
    CREATED_TOPICS,
    DELETED_TOPICS,
    LIVE_TOPICS,
    NODE_ID,
    TOPIC_COMMAND,
    AdminStep,
    KafkaMetadataLog,
    KafkaPeer,
    KafkaPeerError,
)

pytestmark = pytest.mark.kafka

CLEAN_SHUTDOWN = f"[BrokerServer id={NODE_ID}] shut down completed"


@pytest.fixture(scope="module")
def dumped(kafka_metadata_log: KafkaMetadataLog) -> dict[str, DumpedFile]:
    """dump-log of every segment and snapshot (the bootstrap one at offset 0 among them), by file name."""
    log = kafka_metadata_log
    files = [*log.segments, *log.snapshots]
    return {Path(d.path).name: d for d in kafka_tools.dump_log_parsed(files)}


def _segment_records(log: KafkaMetadataLog, dumped: dict[str, DumpedFile]) -> list[DumpedRecord]:
    return [r for s in log.segments for r in dumped[s.name].records]


def test_peer_run_is_timed(
    kafka_metadata_log: KafkaMetadataLog, record_property: pytest.RecordProperty
) -> None:
    timings = kafka_metadata_log.timings
    for name, seconds in timings.items():
        record_property(f"kafka_peer_{name}_s", round(seconds, 2))
    assert set(timings) == {"format", "start", "workload", "snapshot", "stop", "total"}
    assert timings["total"] >= sum(v for k, v in timings.items() if k != "total")


def test_log_dir_layout(kafka_metadata_log: KafkaMetadataLog) -> None:
    log = kafka_metadata_log
    props = dict(
        line.split("=", 1)
        for line in (log.log_dir / "meta.properties").read_text().splitlines()
        if "=" in line
    )
    assert props["cluster.id"] == log.cluster_id
    assert props["node.id"] == str(NODE_ID)
    # Kafka 4.4 writes the bootstrap metadata into the snapshot at offset 0, no bootstrap.checkpoint
    assert not (log.log_dir / "bootstrap.checkpoint").exists()
    assert log.bootstrap_snapshot in log.snapshots
    assert (log.metadata_dir / "quorum-state").exists()
    assert (log.metadata_dir / "leader-epoch-checkpoint").exists()
    assert CLEAN_SHUTDOWN in log.server_log.read_text()
    assert len(log.segments) >= 2, "expected the peer to roll at least one segment"
    assert len([s for s in log.snapshots if not s.name.startswith("0" * 20)]) >= 1


def test_dump_log_decodes_every_file(
    kafka_metadata_log: KafkaMetadataLog, dumped: dict[str, DumpedFile]
) -> None:
    log = kafka_metadata_log
    assert set(dumped) == {p.name for p in [*log.segments, *log.snapshots]}
    for name, d in dumped.items():
        assert d.batches and d.records, name
        assert all(b.is_valid and b.magic == 2 for b in d.batches), name
        assert d.invalid_trailing_bytes == 0, name
        assert sum(b.count or 0 for b in d.batches) == len(d.records), name
        assert all(r.error is None and r.type is not None and r.data is not None for r in d.records), name


def test_segments_are_contiguous(kafka_metadata_log: KafkaMetadataLog, dumped: dict[str, DumpedFile]) -> None:
    offsets = [r.offset for r in _segment_records(kafka_metadata_log, dumped)]
    assert offsets == list(range(len(offsets)))
    for segment in kafka_metadata_log.segments:
        d = dumped[segment.name]
        assert d.start_offset == int(segment.name.split(".")[0]) == d.batches[0].base_offset
    first = _segment_records(kafka_metadata_log, dumped)[:3]
    assert [r.type for r in first] == ["LeaderChange", "KRaftVersion", "KRaftVoters"]


def test_segments_record_the_workload(
    kafka_metadata_log: KafkaMetadataLog, dumped: dict[str, DumpedFile]
) -> None:
    records = [r for r in _segment_records(kafka_metadata_log, dumped) if not r.control]
    by_type: dict[str, list[dict]] = {}
    for r in records:
        assert r.type is not None and r.data is not None
        by_type.setdefault(r.type, []).append(r.data)

    topic_ids = {t["name"]: t["topicId"] for t in by_type["TOPIC_RECORD"]}
    assert set(topic_ids) == set(CREATED_TOPICS)
    partitions = Counter(p["topicId"] for p in by_type["PARTITION_RECORD"])
    for name, count in CREATED_TOPICS.items():
        assert partitions[topic_ids[name]] == ADDED_PARTITIONS.get(name, count), name
    assert [r["topicId"] for r in by_type["REMOVE_TOPIC_RECORD"]] == [topic_ids[t] for t in DELETED_TOPICS]

    configs = {
        (c["resourceType"], c["resourceName"], c["name"]): c["value"] for c in by_type["CONFIG_RECORD"]
    }
    assert configs[(2, "orders", "retention.ms")] == "3600000"
    assert configs[(2, "orders", "cleanup.policy")] is None  # --delete-config writes a null value
    assert configs[(2, "payments", "min.insync.replicas")] == "1"
    assert configs[(4, str(NODE_ID), "log.cleaner.threads")] == "2"
    assert configs[(4, "", "log.retention.ms")] == "7200000"

    (quota,) = by_type["CLIENT_QUOTA_RECORD"]
    assert quota["entity"] == [{"entityType": "client-id", "entityName": "app1"}]
    assert (quota["key"], quota["value"]) == ("consumer_byte_rate", 2048.0)
    (scram,) = by_type["USER_SCRAM_CREDENTIAL_RECORD"]
    assert (scram["name"], scram["iterations"]) == ("alice", 4096)
    assert {
        "REGISTER_BROKER_RECORD",
        "REGISTER_CONTROLLER_RECORD",
        "FEATURE_LEVEL_RECORD",
        "NO_OP_RECORD",
    } <= set(by_type)


def test_snapshots_are_framed_and_cover_the_workload(
    kafka_metadata_log: KafkaMetadataLog, dumped: dict[str, DumpedFile]
) -> None:
    for path in kafka_metadata_log.snapshots:
        d = dumped[path.name]
        assert d.kind == "snapshot"
        assert d.snapshot_end_offset == int(path.name[:20])
        assert d.records[0].type == "SnapshotHeader" and d.records[-1].type == "SnapshotFooter"
    last = dumped[kafka_metadata_log.snapshots[-1].name]
    topics = {r.data["name"] for r in last.records if r.type == "TOPIC_RECORD" and r.data is not None}
    assert topics == set(LIVE_TOPICS)
    assert not any(
        r.type == "REMOVE_TOPIC_RECORD" for r in last.records
    )  # a snapshot holds state, not history
    boot = dumped[kafka_metadata_log.bootstrap_snapshot.name]
    assert boot.kind == "snapshot" and boot.snapshot_end_offset == 0
    assert {r.data["name"] for r in boot.records if r.type == "FEATURE_LEVEL_RECORD" and r.data} >= {
        "metadata.version"
    }


def test_metadata_shell_lists_the_topics(kafka_shell_metadata_log: KafkaMetadataLog) -> None:
    # the shell is 4.3.1's: it loads the peer formatted at SHELL_RELEASE_VERSION, not 4.4.0's default
    out = kafka_tools.metadata_shell(kafka_shell_metadata_log.snapshots[-1], "ls /image/topics/byName")
    assert sorted(out.split()) == sorted(LIVE_TOPICS)


def test_the_server_stops_when_a_step_fails(tmp_path: Path) -> None:
    bad = AdminStep(
        TOPIC_COMMAND, ("--bootstrap-server", "{bootstrap}", "--describe", "--topic", "no-such-topic")
    )
    peer = KafkaPeer(tmp_path)
    with pytest.raises(KafkaPeerError, match="no-such-topic"), peer:
        peer.format()
        peer.start()
        process = peer.process
        assert process is not None and process.poll() is None
        peer.admin(bad)
    assert peer.process is None
    assert process.poll() is not None  # the JVM is gone, not just forgotten
    assert CLEAN_SHUTDOWN in peer.server_log.read_text()  # SIGTERM, not SIGKILL
