"""The fleet bench's CPU accounting (:mod:`bench.cpu_use`): roles by main class and by the JVM a
Python process descends from, seconds between two readings, on a made-up ``/proc`` and on this one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.cpu_use import ROLES, cpu_by_role, processes

TICK = os.sysconf("SC_CLK_TCK")


def _proc(root: Path, pid: int, parent: int, command: str, ticks: tuple[int, int, int, int]) -> None:
    d = root / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    # the fields after the command name: state, ppid, then 9 more before utime, stime, cutime, cstime
    rest = ["S", str(parent), *["0"] * 9, *map(str, ticks), *["0"] * 10]
    (d / "stat").write_text(f"{pid} (a name (with) spaces) {' '.join(rest)}\n")
    (d / "cmdline").write_bytes(command.replace(" ", "\0").encode() + b"\0")


def _cluster(root: Path, scale: int, reused_pid_command: str) -> None:
    jvm = "/usr/bin/java -cp x org.apache.spark.deploy.SparkSubmit --master spark://h:1 runner.py"
    _proc(root, 10, 1, jvm, (100 * scale, 0, 0, 0))
    _proc(root, 11, 10, "python runner.py fleet", (50 * scale, 0, 0, 0))
    _proc(root, 12, 10, "python -m pyspark.daemon pyspark.sql.worker.lookup_data_sources", (20, 0, 0, 0))
    executor = "/usr/bin/java -cp x org.apache.spark.executor.CoarseGrainedExecutorBackend --driver-url y"
    _proc(root, 20, 30, executor, (30 * scale, 10 * scale, 0, 0))
    _proc(root, 21, 20, "python -m pyspark.daemon pyspark.worker", (5, 0, 300 * (scale - 1), 0))
    _proc(root, 22, 21, "python -m pyspark.daemon pyspark.worker", (400 * scale, 0, 0, 0))
    _proc(
        root,
        30,
        1,
        "/usr/bin/java -cp x org.apache.spark.deploy.worker.Worker spark://h:1",
        (7 * scale, 0, 0, 0),
    )
    _proc(root, 40, 1, reused_pid_command, (60, 0, 0, 0))
    (root / "self").mkdir(exist_ok=True)  # not a pid: skipped


def test_roles_and_seconds_between_two_readings(tmp_path: Path) -> None:
    _cluster(tmp_path / "a", 1, "make bench")
    _cluster(tmp_path / "b", 2, "gzip big.file")  # pid 40 is another process now
    before, after = processes(tmp_path / "a"), processes(tmp_path / "b")
    assert after[20].seconds == 80 / TICK and after[20].parent == 30
    used = cpu_by_role(before, after, driver_python=11)
    assert list(used) == list(ROLES)
    assert used == {
        "driver_jvm": round(100 / TICK, 1),
        "driver_python": round(50 / TICK, 1),
        "driver_python_workers": 0.0,
        "executor_jvms": round(40 / TICK, 1),
        # the worker's own time, and the daemon's reaped children
        "executor_python": round(700 / TICK, 1),
        "spark_daemons": round(7 / TICK, 1),
        # the reused pid counts from zero
        "other": round(60 / TICK, 1),
    }


def test_a_process_that_started_between_the_readings_counts_whole(tmp_path: Path) -> None:
    _cluster(tmp_path / "a", 1, "make bench")
    _cluster(tmp_path / "b", 1, "make bench")
    _proc(tmp_path / "b", 23, 20, "python -m pyspark.daemon pyspark.worker", (90, 0, 0, 0))
    used = cpu_by_role(processes(tmp_path / "a"), processes(tmp_path / "b"), driver_python=11)
    assert used["executor_python"] == round(90 / TICK, 1)
    assert sum(used.values()) == used["executor_python"]


def test_this_machine_counts_a_busy_child_as_this_process_s_reaped_time() -> None:
    before = processes()
    subprocess.run([sys.executable, "-c", "x = 0\nfor i in range(3_000_000): x += i"], check=True)
    after = processes()
    me = os.getpid()
    assert after[me].seconds - before[me].seconds >= 0.05
    assert cpu_by_role(before, after)["driver_python"] >= 0.05
