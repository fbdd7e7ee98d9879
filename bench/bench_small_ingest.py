"""A small log imported as a new user imports it: ``kraftlake ingest --log-dir D --warehouse W``, default options,
a fresh warehouse each run, timed from the command's start to its exit (JVM start included).

The log is ``kraftlake simulate``'s (5 brokers, 20 topics of 10 partitions, 5,000 events, seed 7, written
``--through local``): 5,619 records. Runs alternate between the command as it ships and the same command with the
JVM's class-data archive turned off (``KRAFTLAKE_CLASS_ARCHIVE=off``, the baseline in the same run), ``RUNS``
of each. Figures: the medians, their ratio, and issue 15's goal (under 30 s).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RUNS = int(os.environ.get("KRAFTLAKE_BENCH_SMALL_INGEST_RUNS", "3"))
GOAL_S = 30.0


def _kraftlake(args: list[str], **extra: str) -> tuple[float, str]:
    from pipelines.serve import command_env

    t = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kraftlake.cli", *args],
        env=command_env(**extra),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kraftlake {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - t, done.stdout


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    work: Path = ctx["work_dir"]
    log = work / "log"
    if not (log / "__cluster_metadata-0").is_dir():
        shutil.rmtree(log, ignore_errors=True)
        simulate = "simulate --brokers 5 --topics 20 --partitions-per-topic 10 --events 5000 --seed 7"
        _kraftlake([*simulate.split(), "--through", "local", "--no-progress", "--data-dir", str(log)])
    shipped: list[float] = []
    baseline: list[float] = []
    records = ""
    for i in range(RUNS):
        for runs, extra in ((shipped, {}), (baseline, {"KRAFTLAKE_CLASS_ARCHIVE": "off"})):
            warehouse = work / f"warehouse-{i}"
            shutil.rmtree(warehouse, ignore_errors=True)
            seconds, out = _kraftlake(
                ["ingest", "--log-dir", str(log), "--warehouse", str(warehouse)], **extra
            )
            runs.append(round(seconds, 2))
            records = out.split()[1]
            shutil.rmtree(warehouse, ignore_errors=True)
    p50, base = statistics.median(shipped), statistics.median(baseline)
    return {
        "small_ingest_records": int(records),
        "small_ingest_s_p50": round(p50, 2),
        "small_ingest_runs_s": shipped,
        "small_ingest_without_class_archive_s_p50": round(base, 2),
        "small_ingest_without_class_archive_runs_s": baseline,
        "small_ingest_speedup": round(base / p50, 2) if p50 else 0.0,
        "small_ingest_goal_s": GOAL_S,
        "small_ingest_goal_met": p50 < GOAL_S,
        "load_average": round(os.getloadavg()[0], 1),
    }
