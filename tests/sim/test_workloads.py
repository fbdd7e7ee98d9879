"""The synthetic workloads of kraftlake.sim write logs that Kafka's readers and the image accept."""

from __future__ import annotations

from pathlib import Path

from kraftlake.image import image_at
from kraftlake.logformat.reader import read_file_batches
from kraftlake.records.reader import iter_records
from kraftlake.sim.workloads.entities import synthetic_records, write_synthetic_log


def test_entities_workload_replays_and_touches_every_entity(tmp_path: Path) -> None:
    log = write_synthetic_log(tmp_path / "a", seed=3, steps=300)
    segments = sorted(log.glob("*.log"))
    assert len(segments) == 2  # readers cross a segment boundary
    records = [r for s in segments for r in iter_records(read_file_batches(s), source=str(s))]
    assert [r.offset for r in records] == list(range(len(records)))
    assert len({r.epoch for r in records}) > 1
    types = {r.type for r in records}
    for kind in (
        "RegisterBrokerRecord",
        "RegisterControllerRecord",
        "TopicRecord",
        "PartitionRecord",
        "PartitionChangeRecord",
        "RemoveTopicRecord",
        "ConfigRecord",
        "ClientQuotaRecord",
        "ProducerIdsRecord",
        "AccessControlEntryRecord",
        "UserScramCredentialRecord",
        "DelegationTokenRecord",
        "BeginTransactionRecord",
        "AbortTransactionRecord",
        "EndTransactionRecord",
    ):
        assert kind in types, kind
    image = image_at(log.parent)  # every record applies
    assert image.brokers and image.topics_by_id and image.transaction is None


def test_entities_workload_is_seeded(tmp_path: Path) -> None:
    assert synthetic_records(5, 120) == synthetic_records(5, 120)
    assert synthetic_records(5, 120) != synthetic_records(6, 120)
    a = write_synthetic_log(tmp_path / "a", seed=5, steps=120)
    b = write_synthetic_log(tmp_path / "b", seed=5, steps=120)
    assert [p.read_bytes() for p in sorted(a.glob("*.log"))] == [
        p.read_bytes() for p in sorted(b.glob("*.log"))
    ]
