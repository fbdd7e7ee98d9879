"""The real Kafka 3.x logs in ../shared/fixtures/kafka-logs are read completely at the batch level."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_paths import KAFKA_LOGS

from kraftlake.logformat import (
    METADATA_TOPIC_ID,
    EpochEntry,
    MetadataLogDir,
    QuorumStateFile,
    read_file_batches,
    reencode,
)

FIXTURES = KAFKA_LOGS
BATCH_FILES = sorted(
    [*FIXTURES.glob("*/*.log"), *FIXTURES.glob("*/*/*.log"), *FIXTURES.glob("**/*.checkpoint")]
)


@pytest.mark.parametrize("path", BATCH_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_batch_is_valid_and_reencodes_byte_for_byte(path: Path) -> None:
    batches = read_file_batches(path)
    assert batches
    position = 0
    for batch in batches:
        assert batch.position == position
        position += batch.size
        assert batch.magic == 2 and batch.is_crc_valid()
        records = batch.records
        assert len(records) == batch.record_count
        assert [r.offset for r in records] == list(range(batch.base_offset, batch.last_offset + 1))
        if batch.is_control:
            assert all(r.key is not None and len(r.key) == 4 for r in records)
        else:
            assert all(r.key is None and r.value for r in records)
        assert reencode(batch) == batch.raw
    assert position == path.stat().st_size


def test_multi_epoch_log_dir() -> None:
    d = MetadataLogDir(FIXTURES / "kafkademo-multi-epoch")
    assert d.path.name == "__cluster_metadata-0"
    assert [base for base, _ in d.segments()] == [0]
    batches = list(d.iter_batches())
    # offsets contiguous from 0, epochs never decrease
    expected = 0
    for b in batches:
        assert b.base_offset == expected
        expected = b.next_offset
    assert expected == 3072
    epochs = [b.partition_leader_epoch for b in batches]
    assert epochs == sorted(epochs)
    # the leader-epoch-checkpoint names the first offset of each epoch, as the batches show
    first = {}
    for b in batches:
        first.setdefault(b.partition_leader_epoch, b.base_offset)
    entries = d.leader_epochs()
    assert entries == [
        EpochEntry(1, 0),
        EpochEntry(2, 298),
        EpochEntry(3, 354),
        EpochEntry(5, 711),
        EpochEntry(6, 712),
    ]
    assert {e.epoch: e.start_offset for e in entries} == first
    assert d.quorum_state() == QuorumStateFile(
        leader_id=1,
        leader_epoch=6,
        voted_id=-1,
        data_version=0,
        cluster_id="",
        applied_offset=0,
        current_voters=(1,),
    )
    assert d.partition_metadata() == (0, METADATA_TOPIC_ID)
    meta = d.meta_properties()
    assert meta is not None and (meta.node_id, meta.version, meta.cluster_id) == (
        1,
        1,
        "hSCzevIQRUa-ojqTd_8C5w",
    )
    assert d.bootstrap_checkpoint() == FIXTURES / "kafkademo-multi-epoch" / "bootstrap.checkpoint"
    assert d.snapshots() == []  # the .snapshot file there is a producer-state snapshot, not a KRaft one
    assert next(d.iter_batches(from_offset=3000)).base_offset == 3000
