"""The churn workload (``kraftlake.sim.workloads.churn``): seeded, replayable, the size asked for."""

from __future__ import annotations

import hashlib
from itertools import pairwise
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


def test_on_a_cluster_clock_the_same_records_spread_over_the_days_asked(tmp_path: Path) -> None:
    from kraftlake.logformat import scan_batch_headers
    from kraftlake.sim.workloads.churn import BASE_TIMESTAMP

    plain, clocked = tmp_path / "plain", tmp_path / "clocked"
    generate_log(plain, 30_000, 20, brokers=7, per_topic=10, seed=4)
    assert generate_log(clocked, 30_000, 20, brokers=7, per_topic=10, seed=4, days=3) == 30_000
    a, b = list(log_records(plain)), list(log_records(clocked))
    assert [(r.offset, r.batch_offset, r.raw) for r in a] == [(r.offset, r.batch_offset, r.raw) for r in b]
    data = b"".join(p.read_bytes() for p in sorted(clocked.glob("*.log")))
    stamps = [h.max_timestamp for h in scan_batch_headers(data, verify_crc=True)]
    assert all(x < y for x, y in pairwise(stamps)) and stamps[0] > BASE_TIMESTAMP
    # about three days, the topics' creation a burst of seconds
    days = (stamps[-1] - stamps[0]) / 86_400_000
    assert 2.4 < days < 3.6, days
    creation = next(r.offset for r in b if r.type == "PartitionChangeRecord")
    created_by = next(r.timestamp for r in b if r.offset == creation - 1)
    assert created_by - stamps[0] < 60_000
