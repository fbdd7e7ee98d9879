"""CPU seconds of this machine's processes by their part in a Spark job on a local standalone cluster, read from
``/proc``: where a benchmark's cores went (the driver's JVM and Python, the executors' JVMs and Python workers,
the master and workers, anything else running).

:func:`processes` reads every process's CPU time once; :func:`cpu_by_role` sums what each role used between
two readings. A process that ended between them is counted through its parent when the parent reaped it (its
time then shows in the parent's time of reaped children), else not at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: The roles, in the order they are reported.
ROLES = (
    "driver_jvm",
    "driver_python",
    "driver_python_workers",
    "executor_jvms",
    "executor_python",
    "spark_daemons",
    "other",
)


@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    seconds: float
    """User and system time, its own and that of the children it reaped."""
    command: str


def processes(proc: Path = Path("/proc")) -> dict[int, Process]:
    """Every process readable now."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, Process] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        # the command name in parentheses may hold spaces: the fields are counted from its closing one
        fields = stat[stat.rfind(")") + 2 :].split()
        seconds = sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick
        out[int(entry.name)] = Process(int(entry.name), int(fields[1]), seconds, command)
    return out


#: A Spark JVM by its main class: its own role, and that of the Python processes descending from it.
JVMS = (
    ("org.apache.spark.deploy.SparkSubmit", "driver_jvm", "driver_python_workers"),
    ("CoarseGrainedExecutorBackend", "executor_jvms", "executor_python"),
    ("org.apache.spark.deploy.master.Master", "spark_daemons", "spark_daemons"),
    ("org.apache.spark.deploy.worker.Worker", "spark_daemons", "spark_daemons"),
)


def role_of(pid: int, table: dict[int, Process], driver_python: int) -> str:
    """The part process ``pid`` plays: a JVM by its main class, another process by the nearest JVM it descends
    from (an executor's Python worker descends from the executor, which the worker daemon started)."""
    if pid == driver_python:
        return "driver_python"
    seen: set[int] = set()
    at, own = pid, True
    while at in table and at not in seen:
        seen.add(at)
        for main_class, role, descendants in JVMS:
            if main_class in table[at].command:
                return role if own else descendants
        at, own = table[at].parent, False
    return "other"


def cpu_by_role(
    before: dict[int, Process], after: dict[int, Process], driver_python: int | None = None
) -> dict[str, float]:
    """CPU seconds each role used between two readings of :func:`processes`; ``driver_python``: the driver's
    Python process (default: this one)."""
    me = os.getpid() if driver_python is None else driver_python
    used = dict.fromkeys(ROLES, 0.0)
    for pid, now in after.items():
        then = before.get(pid)
        # a pid reused by another process counts from zero
        start = then.seconds if then is not None and then.command == now.command else 0.0
        used[role_of(pid, after, me)] += max(0.0, now.seconds - start)
    return {k: round(v, 1) for k, v in used.items()}
