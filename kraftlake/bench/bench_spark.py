"""Spark layer: ingest throughput, ``partitions_at(N)`` latency against replay from offset 0, compaction time.

The log: brokers, ``partitions`` partitions in topics of 100, then ISR/leader changes up to ``records`` records,
in batches of 500 written as one segment (env ``KRAFTLAKE_BENCH_SPARK_RECORDS`` / ``..._PARTITIONS``; the
issue's target is 10M records over 2M partitions, the default is a size that finishes in minutes on 2 cores).

Figures: ``ingest_records_per_s`` (wall, JVM start excluded), ``partitions_at_p50_s`` / ``_max_s`` over random N
(one Spark action each, counting the rows), ``replay_from_zero_p50_s`` (``kraftlake.image.image_at`` at the same
N), their ratio, and ``compact_s`` (snapshot at the end, retention, OPTIMIZE, VACUUM).
"""

from __future__ import annotations

import base64
import os
import random
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

RECORDS = int(os.environ.get("KRAFTLAKE_BENCH_SPARK_RECORDS", "300000"))
PARTITIONS = int(os.environ.get("KRAFTLAKE_BENCH_SPARK_PARTITIONS", "30000"))


def write_log(directory: Path, records: int, partitions: int, seed: int = 5) -> Path:
    from kraftlake.logformat.batch import build_data_batch
    from kraftlake.protocol import messages as m
    from kraftlake.records import encode_metadata_record, spec_by_name

    rng = random.Random(seed)

    def enc(rec: Any) -> bytes:
        return encode_metadata_record(rec, spec_by_name(type(rec).__name__).valid_versions.highest)

    def uuid() -> str:
        return base64.urlsafe_b64encode(rng.randbytes(16)).decode("ascii").rstrip("=")

    values = [enc(m.FeatureLevelRecord(name="metadata.version", feature_level=21))]
    brokers = list(range(1, 7))
    for b in brokers:
        ep = m.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host=f"b{b}", port=9092, security_protocol=0)
        values.append(enc(m.RegisterBrokerRecord(broker_id=b, broker_epoch=b, incarnation_id=uuid(),
                                                 end_points=(ep,), fenced=False)))
    topics: list[str] = []
    for t in range((partitions + 99) // 100):
        tid = uuid()
        topics.append(tid)
        values.append(enc(m.TopicRecord(name=f"topic-{t}", topic_id=tid)))
        for p in range(min(100, partitions - t * 100)):
            reps = tuple(rng.sample(brokers, 3))
            values.append(enc(m.PartitionRecord(partition_id=p, topic_id=tid, replicas=reps, isr=reps,
                                                leader=reps[0], directories=(uuid(),) * 3)))
    while len(values) < records:
        tid = rng.choice(topics)
        p = rng.randrange(100 if tid != topics[-1] else max(1, partitions % 100 or 100))
        if rng.random() < 0.5:
            isr = tuple(sorted(rng.sample(brokers, rng.randint(1, 3))))
            values.append(enc(m.PartitionChangeRecord(partition_id=p, topic_id=tid, isr=isr)))
        else:
            values.append(enc(m.PartitionChangeRecord(partition_id=p, topic_id=tid, leader=rng.choice(brokers))))
    d = directory / "__cluster_metadata-0"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "00000000000000000000.log", "wb") as f:
        for i in range(0, len(values), 500):
            f.write(build_data_batch(i, 1, 1_700_000_000_000 + i, values[i:i + 500]))
    return d


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    from kraftlake.image import image_at
    from kraftlake.spark.session import build_session
    from kraftlake.spark.sql import register
    from pipelines.compact import compact
    from pipelines.ingest import ingest

    work = Path(ctx["work_dir"])
    shutil.rmtree(work, ignore_errors=True)
    log_dir = write_log(work / "log", RECORDS, PARTITIONS)
    warehouse = work / "warehouse"
    spark = build_session("kraftlake-bench")
    t0 = time.monotonic()
    result = ingest(spark, log_dir, warehouse, batch_records=max(RECORDS // 4, 1000))
    ingest_s = time.monotonic() - t0
    register(spark, warehouse)
    rng = random.Random(1)
    offsets = [rng.randrange(result.last_offset + 1) for _ in range(5)]
    lat, replay = [], []
    for n in offsets:
        t = time.monotonic()
        spark.sql(f"SELECT count(*) FROM partitions_at({n})").collect()
        lat.append(time.monotonic() - t)
    for n in offsets[:3]:
        t = time.monotonic()
        image_at(log_dir, n)
        replay.append(time.monotonic() - t)
    t = time.monotonic()
    compact(spark, warehouse, retain_offsets=RECORDS // 10)
    compact_s = time.monotonic() - t
    return {
        "records": result.records, "partitions": PARTITIONS, "slices": result.slices,
        "ingest_s": round(ingest_s, 2), "ingest_records_per_s": round(result.records / ingest_s),
        "partitions_at_p50_s": round(statistics.median(lat), 3), "partitions_at_max_s": round(max(lat), 3),
        "replay_from_zero_p50_s": round(statistics.median(replay), 3),
        "speedup_vs_replay": round(statistics.median(replay) / statistics.median(lat), 2),
        "compact_s": round(compact_s, 2),
    }
