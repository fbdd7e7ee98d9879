"""Decode throughput: a 1M-record metadata segment written by our writer, decoded by us and by Kafka's tool.

Figures (medians of 3 runs, single process):

- ``records_per_s``: full decode, ``iter_records(iter_file_batches(path))`` (batch framing, CRC32C, record
  framing and the typed metadata record decode);
- ``framing_records_per_s``: batches and records only (values left as bytes);
- ``kafka_dump_log_records_per_s``: ``kafka-dump-log --cluster-metadata-decoder`` on the same file, output to
  /dev/null (JVM start-up included, as a user runs it);
- ``ratio_vs_kafka``: ours / Kafka's.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from kraftlake import kafka_tools
from kraftlake.logformat import (
    ControlRecordType,
    SegmentedLog,
    build_control_batch,
    build_data_batch,
    iter_file_batches,
    segment_filename,
)
from kraftlake.protocol import messages as m
from kraftlake.records.serde import encode_metadata_record

RECORDS = 1_000_000
RUNS = 3
_BASE_TS = 1_700_000_000_000


def _uuid(rng: random.Random) -> str:
    import base64

    return base64.urlsafe_b64encode(rng.randbytes(16)).rstrip(b"=").decode()


def _value_pool(rng: random.Random) -> list[tuple[float, list[bytes]]]:
    """Encoded values per record kind, with the share of the log each kind takes."""
    topics = [(f"topic-{i}", _uuid(rng)) for i in range(200)]
    brokers = list(range(1, 10))
    dirs = [_uuid(rng) for _ in brokers]

    def replicas() -> list[int]:
        return rng.sample(brokers, 3)

    partition = [
        encode_metadata_record(
            m.PartitionRecord(
                partition_id=p,
                topic_id=tid,
                replicas=tuple(r),
                isr=tuple(r),
                leader=r[0],
                leader_epoch=0,
                partition_epoch=0,
                directories=tuple(dirs[b - 1] for b in r),
            ),
            1,
        )
        for _, tid in topics
        for p, r in ((p, replicas()) for p in range(5))
    ]
    change = [
        encode_metadata_record(
            m.PartitionChangeRecord(partition_id=rng.randrange(50), topic_id=tid, isr=tuple(replicas()[:2])),
            0,
        )
        for _, tid in topics
    ] + [
        encode_metadata_record(
            m.PartitionChangeRecord(partition_id=rng.randrange(50), topic_id=tid, leader=rng.choice(brokers)),
            1,
        )
        for _, tid in topics
    ]
    topic = [encode_metadata_record(m.TopicRecord(name=n, topic_id=tid), 0) for n, tid in topics]
    config = [
        encode_metadata_record(
            m.ConfigRecord(
                resource_type=2, resource_name=n, name="retention.ms", value=str(rng.randrange(10**9))
            ),
            0,
        )
        for n, _ in topics
    ]
    endpoint = m.RegisterBrokerRecord.BrokerEndpoint
    feature = m.RegisterBrokerRecord.BrokerFeature
    register = [
        encode_metadata_record(
            m.RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=_uuid(rng),
                broker_epoch=rng.randrange(10**6),
                rack=None,
                end_points=(
                    endpoint(name="PLAINTEXT", host=f"broker-{b}.local", port=9092, security_protocol=0),
                ),
                features=(
                    feature(name="metadata.version", min_supported_version=1, max_supported_version=27),
                ),
                log_dirs=(dirs[b - 1],),
            ),
            3,
        )
        for b in brokers
    ]
    heartbeat = [
        encode_metadata_record(m.BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=7, fenced=-1), 0)
        for b in brokers
    ]
    noop = [encode_metadata_record(m.NoOpRecord(), 0)]
    return [
        (0.35, change),
        (0.25, partition),
        (0.05, topic),
        (0.10, config),
        (0.05, register),
        (0.10, heartbeat),
        (0.10, noop),
    ]


def write_segment(directory: Path, records: int = RECORDS, seed: int = 7) -> Path:
    """A segment of `records` records as KRaft writes them: a LeaderChange, then batches of 1 to 500."""
    rng = random.Random(seed)
    pool = _value_pool(rng)
    weights = [w for w, _ in pool]
    kinds = [vals for _, vals in pool]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / segment_filename(0)
    path.unlink(missing_ok=True)
    leader_change = b"\x00\x00\x00\x00\x00\x01\x02\x00\x00\x00\x01\x00\x02\x00\x00\x00\x01\x00\x00"
    with SegmentedLog(directory) as log:
        log.append(build_control_batch(0, 1, _BASE_TS, [(ControlRecordType.LEADER_CHANGE, leader_change)]))
        offset = 1
        while offset < records:
            n = 1 if rng.random() < 0.2 else rng.randint(2, 500)
            n = min(n, records - offset)
            chosen = rng.choices(kinds, weights, k=n)
            values = [rng.choice(vals) for vals in chosen]
            log.append(build_data_batch(offset, 1, _BASE_TS + offset, values))
            offset += n
    return path


def _decode_full(path: Path) -> int:
    from kraftlake.records.reader import iter_records

    n = 0
    for _ in iter_records(iter_file_batches(path)):
        n += 1
    return n


def _decode_framing(path: Path) -> int:
    n = 0
    for batch in iter_file_batches(path):
        n += len(batch.records)
    return n


def _kafka_dump(path: Path) -> None:
    argv = [
        kafka_tools.java_executable(),
        "-Xmx1g",
        f"-Dlog4j2.configurationFile={kafka_tools.tools_log4j2_config()}",
        "-cp",
        f"{kafka_tools.kafka_jars_dir()}/*",
        kafka_tools.DUMP_LOG_CLASS,
        "--cluster-metadata-decoder",
        "--files",
        str(path),
    ]
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=1800)


def _median_seconds(fn: Any, path: Path, runs: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    """Write the segment, then time our decode and Kafka's dump-log on it."""
    work = Path(ctx["work_dir"])
    records = int(ctx.get("records", RECORDS))
    runs = int(ctx.get("runs", RUNS))
    start = time.perf_counter()
    path = write_segment(work, records)
    write_s = time.perf_counter() - start
    batches = sum(1 for _ in iter_file_batches(path))
    full_s, n = _median_seconds(_decode_full, path, runs)
    if n != records:
        raise RuntimeError(f"decoded {n} records, wrote {records}")
    framing_s, _ = _median_seconds(_decode_framing, path, runs)
    figures: dict[str, Any] = {
        "records": records,
        "batches": batches,
        "file_bytes": path.stat().st_size,
        "write_seconds": round(write_s, 2),
        "records_per_s": round(records / full_s),
        "framing_records_per_s": round(records / framing_s),
    }
    try:
        kafka_s, _ = _median_seconds(_kafka_dump, path, runs)
    except (OSError, subprocess.SubprocessError, kafka_tools.KafkaToolError) as exc:
        figures["kafka_dump_log_error"] = f"{type(exc).__name__}: {exc}"
        return figures
    figures["kafka_dump_log_seconds"] = round(kafka_s, 2)
    figures["kafka_dump_log_records_per_s"] = round(records / kafka_s)
    figures["ratio_vs_kafka"] = round(kafka_s / full_s, 2)
    return figures
