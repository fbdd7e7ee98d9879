"""The churn workload (``kraftlake.sim.workloads.churn``): seeded, replayable, the size asked for."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kraftlake.image.source import load_log, log_records
from kraftlake.sim.workloads.churn import generate_log


def _digest(d: Path) -> list[tuple[str, str]]:
    return sorted((p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in d.iterdir())


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert generate_log(a, 5_000, 12, brokers=5, per_topic=4, seed=1) == 5_000
    generate_log(b, 5_000, 12, brokers=5, per_topic=4, seed=1)
    generate_log(c, 5_000, 12, brokers=5, per_topic=4, seed=2)
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)


def test_the_log_replays_to_every_topic_and_partition(tmp_path: Path) -> None:
    d = tmp_path / "log"
    written = generate_log(d, 20_000, 30, brokers=7, per_topic=10, seed=3)
    records = list(log_records(d))
    assert len(records) == written == 20_000
    assert [r.offset for r in records] == list(range(written))
    kinds = {r.type for r in records}
    assert {"PartitionChangeRecord", "NoOpRecord", "ConfigRecord", "BrokerRegistrationChangeRecord"} <= kinds
    image = load_log(d)
    assert len(image.topics_by_id) == 30
    assert image.partition_count() == 300
    assert sorted(image.brokers) == list(range(7))
    # every partition's leader is in its ISR, which is within its replicas (the generator's model held)
    for t in image.topics_by_id.values():
        for p in t.partitions.values():
            assert p.leader in p.isr and set(p.isr) <= set(p.replicas)
