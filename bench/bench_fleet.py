"""Fleet catch-up on a Spark standalone cluster: ``CLUSTERS`` synthetic logs of ``RECORDS`` records each
(:func:`kraftlake.sim.workloads.churn.generate_log`, one seed a cluster) ingested into one warehouse by
:func:`pipelines.fleet_ingest.ingest_fleet` (each cluster's history replayed in an executor task), on a master
with two 1-core workers started from pyspark's distribution (:mod:`bench.standalone`), the package
shipped as ``--py-files``.

Figures: records/s of the fleet with one executor core (``spark.cores.max=1``: one worker) and with two (both
workers), their ratio (goal >= 1.6), and records/s of the same logs ingested one after another into one warehouse
each by the driver's replay (:func:`pipelines.ingest.ingest`), as a user with one warehouse a cluster would. Each
run is timed inside its ``spark-submit`` (the JVM's start left out). Also the cost of a resume image: rebuilt
from the warehouse at the commit point through Spark (:func:`pipelines.reconstruct.image_at_offset`) and by
kraftlake's Delta reader (:func:`kraftlake.warehouse.images.image_at_offset`, what a resumed cluster's task
runs), against pickling it into the task row and back. Where the time goes (summed over the clusters): seconds the driver
waited for the tasks (``task_s``, queueing for a core included), of which the tasks read and replayed the
records (``replay_s``) and wrote the slices' files (``write_s``), and seconds the driver committed them
(``commit_s``); the times of the first and the last commit and what came after it (the fold of the closes).
CPU seconds each process used during the timed run, by its part (:mod:`bench.cpu_use`: the driver's JVM
and Python, the executors' JVMs and Python workers, the master and workers, anything else on the machine), and
the cores they kept busy on average. ``KRAFTLAKE_BENCH_FLEET_CLUSTERS`` / ``_RECORDS`` / ``_TOPICS`` shrink the run; the load average is reported
beside the figures (the workers share the machine's cores with the driver).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from bench import cpu_use
from bench.standalone import (
    build_package,
    isolated_python,
    standalone_cluster,
    submit,
    submit_env,
    submit_options,
)

CLUSTERS = int(os.environ.get("KRAFTLAKE_BENCH_FLEET_CLUSTERS", "8"))
RECORDS = int(os.environ.get("KRAFTLAKE_BENCH_FLEET_RECORDS", "250000"))
TOPICS = int(os.environ.get("KRAFTLAKE_BENCH_FLEET_TOPICS", "200"))
BATCH_RECORDS = 100_000
GOAL_RATIO = 1.6

#: Submitted to the cluster: ``fleet`` or ``serial`` over the log dirs given, its timings as one JSON line. The
#: shipped package holds no ``bench``: :mod:`bench.cpu_use` (standard library only) is copied beside the runner,
#: whose directory is the first entry of the driver's ``sys.path``.
RUNNER = """
import json, pickle, sys, time
from pathlib import Path
from pyspark.sql import SparkSession
from kraftlake.spark.session import build_session

mode, warehouse, batch = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
dirs = [(a.split("=", 1)[0], a.split("=", 1)[1]) for a in sys.argv[4:]]
spark = build_session("kraftlake-bench-fleet", verbose=False)
import logging
logging.basicConfig(level=logging.WARNING)
logging.getLogger("kraftlake").setLevel(logging.INFO)
out = {}
from cpu_use import cpu_by_role, processes
cpu0 = processes()
t0 = time.monotonic()
if mode == "fleet":
    from pipelines.fleet_ingest import ingest_fleet
    commits = []
    results = ingest_fleet(spark, dirs, warehouse, batch, lambda r: commits.append(time.monotonic() - t0))
    out["first_commit_s"], out["last_commit_s"] = min(commits), max(commits)
else:
    from pipelines.ingest import ingest
    results = [ingest(spark, d, warehouse / n, batch, cluster=n) for n, d in dirs]
out["seconds"] = time.monotonic() - t0
out["cpu_s"] = cpu_by_role(cpu0, processes())
out["records"] = sum(r.records for r in results)
if mode == "fleet":
    for k in ("task_s", "replay_s", "write_s", "commit_s"):
        out[k] = sum(getattr(r, k) for r in results)
    out["after_last_commit_s"] = out["seconds"] - out["last_commit_s"]
    out["fold_s"], out["checkpoints_s"] = sum(r.fold_s for r in results), results[0].checkpoints_s
    from pipelines.reconstruct import image_at_offset
    name, last = results[0].cluster, results[0].last_offset
    t = time.monotonic()
    image = image_at_offset(spark, warehouse, name, last)
    out["resume_rebuild_s"] = time.monotonic() - t
    from kraftlake.warehouse.images import image_at_offset as rebuilt_by_reader
    t = time.monotonic()
    assert rebuilt_by_reader(warehouse, name, last) == image
    out["resume_rebuild_reader_s"] = time.monotonic() - t
    t = time.monotonic()
    blob = pickle.dumps(image, pickle.HIGHEST_PROTOCOL)
    pickle.loads(blob)
    out["resume_pickle_s"] = time.monotonic() - t
    out["resume_pickle_bytes"] = len(blob)
print("BENCH " + json.dumps(out))
spark.stop()
"""


def fleet_logs(work: Path, clusters: int, records: int, topics: int) -> list[tuple[str, Path]]:
    """The synthetic logs (name, partition dir) for these sizes under ``work``, generated on first use."""
    from kraftlake.sim.workloads.churn import generate_log

    out = []
    for i in range(clusters):
        d = work / f"logs-{records}-{topics}" / f"c{i}" / "__cluster_metadata-0"
        done = d.parent / "complete.json"
        if not done.exists():
            shutil.rmtree(d.parent, ignore_errors=True)
            n = generate_log(d, records, topics, seed=i)
            done.write_text(json.dumps({"records": n}))
        out.append((f"c{i}", d))
    return out


def _run(args: list[str], env: dict[str, str], log: Path, cwd: Path) -> dict[str, Any]:
    out = submit(args, env, log, cwd, timeout=7200)
    line = next(x for x in out.splitlines() if x.startswith("BENCH "))
    return dict(json.loads(line[6:]))


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    work: Path = Path(ctx["work_dir"]).resolve()
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    logs = fleet_logs(work, CLUSTERS, RECORDS, TOPICS)
    generate_s = time.monotonic() - t0
    root = work / "run"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    package = build_package(root)
    python = isolated_python(root)
    runner = root / "runner.py"
    runner.write_text(RUNNER)
    shutil.copy(cpu_use.__file__, root / "cpu_use.py")
    env = submit_env()
    log = root / "submit.log"
    flags = [f"{n}={d}" for n, d in logs]
    figures: dict[str, Any] = {}
    loads: list[float] = []
    with standalone_cluster(root, env, workers=2, memory="2g") as (url, _):
        for key, mode, cores in (
            ("one_worker", "fleet", 1),
            ("two_workers", "fleet", 2),
            ("serial", "serial", 2),
        ):
            warehouse = root / f"warehouse-{key}"
            args = [*submit_options(url, package, python, cores), str(runner), mode, str(warehouse)]
            got = _run([*args, str(BATCH_RECORDS), *flags], env, log, root)
            loads.append(os.getloadavg()[0])
            rate = got["records"] / got["seconds"] if got["seconds"] else 0.0
            figures[f"fleet_{key}_records_per_s"] = round(rate)
            figures[f"fleet_{key}_s"] = round(got["seconds"], 1)
            figures[f"fleet_{key}_cpu_s"] = got["cpu_s"]
            figures[f"fleet_{key}_cores_busy"] = round(sum(got["cpu_s"].values()) / got["seconds"], 2)
            for k in (
                "resume_rebuild_s",
                "resume_rebuild_reader_s",
                "resume_pickle_s",
                "resume_pickle_bytes",
            ):
                if k in got:
                    figures[f"fleet_{k}"] = round(got[k], 3) if k.endswith("_s") else got[k]
            for k in (
                "task_s",
                "replay_s",
                "write_s",
                "commit_s",
                "first_commit_s",
                "last_commit_s",
                "after_last_commit_s",
                "fold_s",
                "checkpoints_s",
            ):
                if k in got:
                    figures[f"fleet_{key}_{k}"] = round(got[k], 1)
            shutil.rmtree(warehouse, ignore_errors=True)
    one, two = figures["fleet_one_worker_records_per_s"], figures["fleet_two_workers_records_per_s"]
    ratio = two / one if one else 0.0
    return {
        "fleet_clusters": CLUSTERS,
        "fleet_records_per_cluster": RECORDS,
        "fleet_topics_per_cluster": TOPICS,
        "fleet_generate_s": round(generate_s, 1),
        **figures,
        "fleet_two_over_one_worker": round(ratio, 2),
        "fleet_goal_ratio": GOAL_RATIO,
        "fleet_goal_met": ratio >= GOAL_RATIO,
        "fleet_over_serial": round(
            figures["fleet_two_workers_records_per_s"] / figures["fleet_serial_records_per_s"], 2
        )
        if figures["fleet_serial_records_per_s"]
        else 0.0,
        "load_average": [round(x, 1) for x in loads],
    }
