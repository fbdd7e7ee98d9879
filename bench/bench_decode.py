"""Decode throughput: a 1M-record metadata segment written by our writer, decoded by us and by Kafka's tool.

The segment (a LeaderChange, then KRaft-shaped batches of 1 to 500 records of the common metadata types) is
written once and cached under the work directory, keyed by `SEGMENT_FORMAT`, the record count and the seed.

The command line, like for like: ``kraftlake decode SEGMENT > file`` against ``kafka-dump-log
--cluster-metadata-decoder --files SEGMENT > file`` (as ``kafka-run-class.sh`` runs it: 256 MiB heap, its JVM
options), each a fresh process (interpreter or JVM start-up included, as a user runs them), run in interleaved
pairs (the order alternating) so that a busy spell of a shared machine weighs on both; then the two files are
compared record by record (the JSON of each record's data must be the same text) before they are deleted.

- ``cli_seconds`` / ``cli_cpu_seconds``: median wall and CPU seconds of ``kraftlake decode``;
- ``kafka_dump_log_seconds`` / ``kafka_dump_log_cpu_seconds``: the same for dump-log (the JVM's threads);
- ``ratio_vs_kafka``: dump-log's median wall time / ours (>= 1: we are at least as fast); ``ratio_vs_kafka_cpu``
  the same in CPU time; ``pairs``: each pair's wall seconds (ours, dump-log), in run order;
- ``output_bytes`` / ``kafka_output_bytes``: what each printed.

In-process figures of the reader alone (medians of 5 runs, no JSON):

- ``records_per_s``: full decode, ``iter_records(iter_file_batches(path))`` (mmap, batch framing, CRC32C,
  record framing and the typed metadata record decode into record objects), per CPU second of this process
  (the goal: 300k per core); ``records_per_s_wall`` the same per wall second; ``records_per_s_best`` the
  fastest run's (CPU);
- ``framing_records_per_s``: batches and records only (values left as bytes), per CPU second.
"""

from __future__ import annotations

import itertools
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
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
from kraftlake.records.reader import iter_records
from kraftlake.records.serde import encode_metadata_record

RECORDS = 1_000_000
RUNS = 5
CLI_PAIRS = 3
GOAL = 300_000
"""Records per second per core (CPU time), issue 2."""
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
    # One population with per-value weights (a kind's share spread over its values): one `choices` call per
    # batch instead of two random draws per record.
    population: list[bytes] = []
    weights: list[float] = []
    for share, vals in _value_pool(rng):
        population += vals
        weights += [share / len(vals)] * len(vals)
    cum_weights = list(itertools.accumulate(weights))
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
            values = rng.choices(population, cum_weights=cum_weights, k=n)
            log.append(build_data_batch(offset, 1, _BASE_TS + offset, values))
            offset += n
    return path


SEGMENT_FORMAT = 2
"""Bump when `write_segment`'s output changes: cached segments are keyed by it."""


def cached_segment(work: Path, records: int = RECORDS, seed: int = 7) -> tuple[Path, bool]:
    """The bench segment under `work`, written once per (format, records, seed); returns it and whether it
    was already there. Written into a private directory and renamed, so a crash leaves no half segment."""
    final = work / f"segment-v{SEGMENT_FORMAT}-{records}-{seed}"
    path = final / segment_filename(0)
    if path.is_file():
        return path, True
    tmp = work / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    write_segment(tmp, records, seed)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return path, False


def _decode_full(path: Path) -> int:
    n = 0
    for _ in iter_records(iter_file_batches(path)):
        n += 1
    return n


def _decode_framing(path: Path) -> int:
    n = 0
    for batch in iter_file_batches(path):
        n += len(batch.records)
    return n


# As kafka-run-class.sh runs a tool (KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS defaults).
_TOOL_HEAP = ("-Xmx256M",)
_KAFKA_PERF_OPTS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)


def _dump_log_argv(path: Path) -> list[str]:
    return [
        kafka_tools.java_executable(),
        *_TOOL_HEAP,
        *_KAFKA_PERF_OPTS,
        f"-Dlog4j2.configurationFile={kafka_tools.tools_log4j2_config()}",
        "-cp",
        f"{kafka_tools.kafka_jars_dir()}/*",
        kafka_tools.DUMP_LOG_CLASS,
        "--cluster-metadata-decoder",
        "--files",
        str(path),
    ]


def _decode_argv(path: Path) -> list[str]:
    return [sys.executable, "-m", "kraftlake.cli", "decode", str(path)]


def _run_to_file(argv: list[str], out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one process writing its stdout to ``out``."""
    c0 = _children_cpu()
    w0 = time.perf_counter()
    with out.open("wb") as f:
        proc = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, timeout=1800, check=False)
    wall = time.perf_counter() - w0
    if proc.returncode != 0:
        raise RuntimeError(
            f"{argv[0]} ... exited with {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}"
        )
    return wall, _children_cpu() - c0


def _data_text(line: str) -> str:
    return line[line.index('"data":') + len('"data":') : -1]


def compare_outputs(ours: Path, kafka: Path) -> int:
    """The number of records whose data JSON is the same text in our output and dump-log's; raises
    RuntimeError at the first record that differs (or when one output has records the other lacks)."""
    n = 0
    with ours.open(encoding="utf-8", newline="\n") as a, kafka.open(encoding="utf-8", newline="\n") as b:
        theirs = (line for line in b if line.startswith("| offset: "))
        for line in a:
            kafka_line = next(theirs, None)
            if kafka_line is None:
                raise RuntimeError(f"dump-log printed {n} records, we printed more")
            line, kafka_line = line.rstrip("\n"), kafka_line.rstrip("\n")
            mine = _data_text(line)
            if " payload: " in kafka_line:
                text = _data_text(kafka_line[kafka_line.index(" payload: ") :])
            else:  # a control record: its label, then its JSON
                text = kafka_line.partition("headerKeys: [] ")[2].partition(" ")[2]
            if mine != text:
                raise RuntimeError(f"record {n}: we print {mine[:200]!r}, dump-log {text[:200]!r}")
            n += 1
        if next(theirs, None) is not None:
            raise RuntimeError(f"we printed {n} records, dump-log more")
    return n


def cli_pairs(path: Path, work: Path, pairs: int) -> dict[str, Any]:
    """``kraftlake decode`` and dump-log on ``path``, each writing a file, in ``pairs`` interleaved pairs."""
    ours_out, kafka_out = work / "decode-out.jsonl", work / "dump-log-out.txt"
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    try:
        for r in range(pairs):
            for name in ("ours", "kafka") if r % 2 == 0 else ("kafka", "ours"):
                if name == "ours":
                    ours.append(_run_to_file(_decode_argv(path), ours_out))
                else:
                    theirs.append(_run_to_file(_dump_log_argv(path), kafka_out))
        compared = compare_outputs(ours_out, kafka_out)
        sizes = ours_out.stat().st_size, kafka_out.stat().st_size
    finally:
        ours_out.unlink(missing_ok=True)
        kafka_out.unlink(missing_ok=True)
    wall, cpu = statistics.median(w for w, _ in ours), statistics.median(c for _, c in ours)
    kafka_wall, kafka_cpu = statistics.median(w for w, _ in theirs), statistics.median(c for _, c in theirs)
    return {
        "cli_pairs": pairs,
        "cli_seconds": round(wall, 2),
        "cli_cpu_seconds": round(cpu, 2),
        "kafka_dump_log_seconds": round(kafka_wall, 2),
        "kafka_dump_log_cpu_seconds": round(kafka_cpu, 2),
        "ratio_vs_kafka": round(kafka_wall / wall, 2),
        "ratio_vs_kafka_cpu": round(kafka_cpu / cpu, 2),
        "pairs": [[round(a[0], 2), round(b[0], 2)] for a, b in zip(ours, theirs, strict=True)],
        "records_compared": compared,
        "output_bytes": sizes[0],
        "kafka_output_bytes": sizes[1],
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(
    fn: Callable[[Path], Any],
    path: Path,
    runs: int,
    *,
    child: bool = False,
) -> tuple[float, float, Any, float]:
    """Median CPU seconds (this process's, or its children's for a subprocess), median wall seconds, the last
    result and the smallest CPU seconds (on a shared machine the spread between the two shows the noise)."""
    cpu: list[float] = []
    wall: list[float] = []
    result = None
    for _ in range(runs):
        c0 = _children_cpu() if child else time.process_time()
        w0 = time.perf_counter()
        result = fn(path)
        wall.append(time.perf_counter() - w0)
        cpu.append((_children_cpu() if child else time.process_time()) - c0)
    return statistics.median(cpu), statistics.median(wall), result, min(cpu)


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    """Write (or reuse) the segment, time our reader on it, then our decode command and Kafka's dump-log."""
    work = Path(ctx["work_dir"])
    records = int(ctx.get("records", RECORDS))
    runs = max(3, int(ctx.get("runs", RUNS)))
    pairs = max(3, int(ctx.get("pairs", CLI_PAIRS)))
    start = time.perf_counter()
    path, cached = cached_segment(work, records)
    write_s = time.perf_counter() - start
    batches = sum(1 for _ in iter_file_batches(path))
    full_cpu, full_wall, n, full_best = _timed(_decode_full, path, runs)
    if n != records:
        raise RuntimeError(f"decoded {n} records, wrote {records}")
    framing_cpu, _, _, _ = _timed(_decode_framing, path, runs)
    figures: dict[str, Any] = {
        "records": records,
        "batches": batches,
        "file_bytes": path.stat().st_size,
        "segment": str(path),
        "segment_cached": cached,
        "write_seconds": round(write_s, 2),
        "runs": runs,
        "decode_cpu_seconds": round(full_cpu, 3),
        "decode_wall_seconds": round(full_wall, 3),
        "records_per_s": round(records / full_cpu),
        "records_per_s_wall": round(records / full_wall),
        "records_per_s_best": round(records / full_best),
        "framing_records_per_s": round(records / framing_cpu),
        "goal_records_per_s": GOAL,
        "meets_goal": records / full_cpu >= GOAL,
        # CPU time still grows when other processes share the cores (caches, SMT siblings): say how busy.
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }
    try:
        figures.update(cli_pairs(path, work, pairs))
    except (OSError, subprocess.SubprocessError, kafka_tools.KafkaToolError) as exc:
        figures["kafka_dump_log_error"] = f"{type(exc).__name__}: {exc}"
    figures["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    return figures
