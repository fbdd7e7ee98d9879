"""Image benchmarks: replay throughput of ``kraftlake.image`` and loading a 2M-partition snapshot.

Figures (medians of ``RUNS`` runs; CPU time of this process, ``time.process_time``, because the machine is
shared, wall time beside it):

- ``replay_records_per_s``: ``ImageLoader`` over the typed records of a synthetic cluster log
  (:mod:`kraftlake.sim.workloads.churn`; decoded once, outside the timing): a 100-broker cluster whose topics
  of 100 partitions (RF 3) are created first, then churn as a controller writes it (ISR shrink/expand,
  leader moves, broker fence/unfence, topic configs, topic deletion and re-creation, NoOps), batches of 1-20
  records. The log is generated once (seeded) and cached under the bench work dir;
- ``replay_one_by_one_records_per_s``: ``replay(image, record)`` record by record (every record yields an
  image) over the churn part of the same log;
- ``load_log_records_per_s``: ``load_log`` of the log directory, decode included;
- ``snapshot_*``: a snapshot (``write_snapshot``) of the image at the log end (2M partitions): its bytes on
  disk per partition, the time and peak memory (``VmHWM`` of a fresh subprocess; its value before
  loading beside it) to load it with ``load_snapshot``, and the image's size in memory per partition
  (``tracemalloc``, in another subprocess);
- ``metadata_shell_*``: ``kafka-metadata-shell --snapshot S`` on the same snapshot (see ``_shell``: wall time
  until the whole image is loaded; CPU of the process, children's ``rusage``), minus the same on a tiny
  snapshot (JVM start); the ratios are Kafka's load time over ours.

Run alone: ``python -m bench --only image`` (or ``python -m bench.bench_image``).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kraftlake import kafka_tools
from kraftlake.image import ImageLoader, MetadataImage, replay, write_snapshot
from kraftlake.image.snapshot import snapshot_records
from kraftlake.image.source import log_records
from kraftlake.records.reader import MetadataRecord
from kraftlake.sim.workloads.churn import BASE_TIMESTAMP, generate_log

RUNS = 3
LOG_TOPICS = 20_000  # 2M partitions
LOG_RECORDS = 10_000_000
SNAPSHOT_TOPICS = 20_000
_FORMAT = 1  # bump when the generated log changes, so a cached one is regenerated


def cached_log(work: Path, records: int, topics: int, days: float | None = None) -> Path:
    """The synthetic log for these sizes under ``work``, generated on first use; with ``days``, the same records
    at a real cluster's pace over about that many days (another directory: the others' log keeps its clock)."""
    clocked = "" if days is None else f"-{days:g}d"
    d = work / f"log-v{_FORMAT}-{records}-{topics}{clocked}" / "__cluster_metadata-0"
    done = d.parent / "complete.json"
    if not done.exists():
        if d.parent.exists():
            import shutil

            shutil.rmtree(d.parent)
        t0 = time.perf_counter()
        n = generate_log(d, records, topics, days=days)
        done.write_text(json.dumps({"records": n, "generate_seconds": round(time.perf_counter() - t0, 1)}))
    return d


# -- replay throughput -------------------------------------------------------------------------------------

CHUNK = 500_000


def replay_pass(log_dir: Path, records: int, one_by_one: int = 200_000) -> dict[str, Any]:
    """One streamed pass over the log: decode a chunk (untimed), feed it to an ``ImageLoader`` (timed).

    Also replays ``one_by_one`` records after the setup part (the first chunk holding a PartitionChange)
    record by record with ``replay`` and checks that it reaches the loader's image.
    """
    loader = ImageLoader()
    rates: list[float] = []
    replay_cpu = 0.0
    total = 0
    single: dict[str, Any] = {}
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    chunk: list[Any] = []
    size = max(10_000, min(CHUNK, records // 20))
    one_by_one = min(one_by_one, records // 10)

    def flush() -> None:
        nonlocal replay_cpu, total
        feed = loader.feed
        t = time.process_time()
        for mr in chunk:
            feed(mr)
        img = loader.image()
        dt = time.process_time() - t
        replay_cpu += dt
        total += len(chunk)
        rates.append(len(chunk) / max(dt, 1e-9))
        if not single and one_by_one and any(mr.type == "PartitionChangeRecord" for mr in chunk):
            single.update(_one_by_one(img, log_dir, img.provenance.offset + 1, one_by_one))
        chunk.clear()

    for mr in log_records(log_dir):
        chunk.append(mr)
        if len(chunk) == size:
            flush()
    if chunk:
        flush()
    image = loader.image()
    return {
        "records": total,
        "partitions": image.partition_count(),
        "replay_records_per_s": round(total / replay_cpu),
        "replay_chunk_records_per_s_median": round(statistics.median(rates)),
        "decode_and_replay_records_per_s": round(total / (time.process_time() - start_cpu)),
        "pass_wall_seconds": round(time.perf_counter() - start_wall, 1),
        **single,
        "_image": image,
    }


def _one_by_one(base: Any, log_dir: Path, start: int, n: int) -> dict[str, Any]:
    records = []
    for mr in log_records(log_dir, start):
        if mr.offset >= start:
            records.append(mr)
            if len(records) == n:
                break
    if not records:
        return {}
    rates = []
    img = base
    for i in range(0, len(records), n // 4):
        part = records[i : i + n // 4]
        t = time.process_time()
        for mr in part:
            img = replay(img, mr)
        rates.append(len(part) / max(time.process_time() - t, 1e-9))
    check = ImageLoader(base)
    check.feed_all(records)
    if check.image() != img:
        raise AssertionError("record-by-record replay differs from the batch loader")
    return {
        "replay_one_by_one_records_per_s_median": round(statistics.median(rates)),
        "replay_one_by_one_records": len(records),
    }


# -- snapshot load -----------------------------------------------------------------------------------------

_LOAD_SCRIPT = """
import json, sys, time, tracemalloc
from kraftlake.image import load_snapshot
trace = sys.argv[2] == "trace"

def hwm():
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forked copy of the parent
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0

before = hwm()
if trace:
    tracemalloc.start()
t, w = time.process_time(), time.perf_counter()
img = load_snapshot(sys.argv[1])
cpu, wall = time.process_time() - t, time.perf_counter() - w
out = {"cpu": cpu, "wall": wall, "partitions": img.partition_count(),
       "maxrss_kib": hwm(), "import_maxrss_kib": before}
if trace:
    cur, peak = tracemalloc.get_traced_memory()
    out.update(traced_current=cur, traced_peak=peak)
print(json.dumps(out))
"""


def _load_in_subprocess(path: Path, trace: bool) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_SCRIPT, str(path), "trace" if trace else "plain"],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _shell(path: Path, heap: str, offset: int) -> tuple[float, float, int]:
    """Wall seconds until ``kafka-metadata-shell`` holds the whole snapshot, its CPU seconds, and its topics.

    The shell's non-interactive mode runs its command once the loader applied *anything* (``lastAppliedOffset
    > 0``), racing the publication of a large image; so the interactive shell is driven through a pipe,
    polling ``cat /image/provenance`` until it shows the snapshot's offset, then listing
    ``/image/topics/byName`` once to check that every topic is there.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    shell = kafka_tools.MetadataShellSession(path, heap=heap, jvm_options=["-XX:TieredStopAtLevel=4"])
    wanted = f"offset {offset},"
    try:
        loaded = None
        while loaded is None:
            if time.perf_counter() - t > 1800:
                raise RuntimeError("kafka-metadata-shell hung before loading the snapshot")
            if any(wanted in line for line in shell.provenance(0.05)):
                loaded = time.perf_counter() - t
        listing = shell.finish("ls /image/topics/byName", timeout=600)
    finally:
        shell.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    names = [w for w in listing.split() if w.startswith("topic-")]
    return loaded, cpu, len(names)


def snapshot_figures(image: Any, work: Path, runs: int, shell: bool = True) -> dict[str, Any]:
    """Write ``image`` as a snapshot (cached by offset) and measure loading it, ours and Kafka's."""
    snap_dir = work / f"snapshot-{image.provenance.offset}"
    snap_dir.mkdir(parents=True, exist_ok=True)
    found = sorted(snap_dir.glob("*.checkpoint"))
    write_s = None
    if found:
        path = found[-1]
    else:
        t = time.process_time()
        path = write_snapshot(image, snap_dir)
        write_s = round(time.process_time() - t, 1)
    partitions = image.partition_count()
    size = path.stat().st_size
    loads = [_load_in_subprocess(path, trace=False) for _ in range(runs)]
    if any(r["partitions"] != partitions for r in loads):
        raise AssertionError("the snapshot did not load to the image it was written from")
    traced = _load_in_subprocess(path, trace=True)
    cpu = statistics.median(r["cpu"] for r in loads)
    rss = statistics.median(r["maxrss_kib"] for r in loads) * 1024
    base_rss = statistics.median(r["import_maxrss_kib"] for r in loads) * 1024
    out: dict[str, Any] = {
        "snapshot_partitions": partitions,
        "snapshot_bytes": size,
        "snapshot_bytes_per_partition": round(size / partitions, 1),
        "snapshot_write_cpu_seconds": write_s if write_s is not None else "cached",
        "snapshot_load_cpu_seconds_median": round(cpu, 2),
        "snapshot_load_wall_seconds_median": round(statistics.median(r["wall"] for r in loads), 2),
        "snapshot_load_records_per_s": round((partitions + len(image.topics_by_id)) / cpu),
        "snapshot_load_peak_rss_mib": round(rss / 2**20),
        "process_rss_before_load_mib": round(base_rss / 2**20),
        "snapshot_load_peak_rss_bytes_per_partition": round((rss - base_rss) / partitions),
        "image_traced_bytes_per_partition": round(traced["traced_current"] / partitions),
        "image_traced_peak_mib": round(traced["traced_peak"] / 2**20),
    }
    if shell:
        tiny = snap_dir / "tiny"
        tiny.mkdir(exist_ok=True)
        tiny_image = _tiny(image)
        tiny_path = next(iter(sorted(tiny.glob("*.checkpoint"))), None) or write_snapshot(tiny_image, tiny)
        base = [_shell(tiny_path, "256m", _snapshot_record_count(tiny_image)) for _ in range(runs)]
        big = [_shell(path, "6g", _snapshot_record_count(image)) for _ in range(runs)]
        if any(n != len(image.topics_by_id) for _, _, n in big):
            raise AssertionError("kafka-metadata-shell listed another number of topics")
        jvm_wall = statistics.median(w for w, _, _ in base)
        jvm_cpu = statistics.median(c for _, c, _ in base)
        k_wall = statistics.median(w for w, _, _ in big) - jvm_wall
        k_cpu = statistics.median(c for _, c, _ in big) - jvm_cpu
        out.update(
            {
                "metadata_shell_jvm_start_wall_seconds": round(jvm_wall, 2),
                "metadata_shell_load_wall_seconds_median": round(k_wall, 2),
                "metadata_shell_load_cpu_seconds_median": round(k_cpu, 2),
                "ratio_load_wall_kafka_over_ours": round(
                    k_wall / out["snapshot_load_wall_seconds_median"], 2
                ),
                "ratio_load_cpu_kafka_over_ours": round(k_cpu / cpu, 2),
            }
        )
    return out


def _snapshot_record_count(image: MetadataImage) -> int:
    """How many data records ``write_snapshot`` writes for ``image``: the offset of the last one, which is
    the provenance ``kafka-metadata-shell`` shows once it has loaded the whole file (the header is at 0)."""
    return (
        len(image.features)
        + len(image.brokers)
        + len(image.controllers)
        + len(image.topics_by_id)
        + image.partition_count()
        + sum(len(c) for c in image.configs.values())
        + sum(len(q) for q in image.client_quotas.values())
        + (image.next_producer_id >= 0)
        + len(image.acls)
        + len(image.scram)
        + len(image.delegation_tokens)
    )


def _tiny(image: Any) -> Any:
    """The image of one topic with one partition plus the features (a JVM start-up baseline)."""
    from kraftlake.image import load_records

    recs = []
    for i, (rec, _version) in enumerate(snapshot_records(image)):
        if type(rec).__name__ == "FeatureLevelRecord" or i < 5:
            recs.append(rec)
        if len(recs) >= 5:
            break
    return load_records(
        MetadataRecord(i, 1, BASE_TIMESTAMP, i, False, type(r).__name__, 0, 0, r, b"")
        for i, r in enumerate(recs)
    )


# -- entry points ------------------------------------------------------------------------------------------


def run(
    ctx: dict[str, Any],
    *,
    records: int = LOG_RECORDS,
    topics: int = LOG_TOPICS,
    runs: int = RUNS,
    shell: bool = True,
) -> dict[str, Any]:
    work = Path(ctx["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    log_dir = cached_log(work, records, topics)
    generated = json.loads((log_dir.parent / "complete.json").read_text())
    gen_wall = time.perf_counter() - t
    figures = replay_pass(log_dir, generated["records"])
    image = figures.pop("_image")
    out: dict[str, Any] = {
        "log_records": generated["records"],
        "log_bytes": sum(p.stat().st_size for p in log_dir.glob("*.log")),
        "log_generate_seconds": generated["generate_seconds"] if gen_wall > 1 else "cached",
        **figures,
    }
    out.update(snapshot_figures(image, work, runs, shell=shell))
    out["timing"] = "CPU seconds of the process (time.process_time) unless named wall; machine shared"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=LOG_RECORDS)
    parser.add_argument("--topics", type=int, default=LOG_TOPICS, help="topics of 100 partitions")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--no-shell", action="store_true", help="skip kafka-metadata-shell")
    parser.add_argument("--work-dir", default=".cache/bench/image")
    args = parser.parse_args(argv)
    out = run(
        {"work_dir": args.work_dir},
        records=args.records,
        topics=args.topics,
        runs=args.runs,
        shell=not args.no_shell,
    )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
