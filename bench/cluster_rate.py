"""The rate a real cluster writes its metadata log, as the live benches replay it into a quorum.

A cluster's log is written in three phases: its creation (brokers, topics, partitions) at once; a steady state
of ISR and config churn at a few records a second, with the active controller's NoOp every 500 ms beside
everything; a burst (a broker failure moves the leadership of every partition it led). The values come from a
synthetic log (:func:`cluster_records`): its records before the first change are the creation, the rest, in
log order, the churn, so every record replays onto the ones before it.

Used by ``bench_stream.live_cluster`` (one quorum in the driver) and by ``bench_live_fleet``'s sources (one
quorum per process); neither imports Spark here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

#: Seconds between two NoOps of the active controller.
NOOP_INTERVAL_S = 0.5
#: Records per append when a phase is written at once.
CHUNK = 5000

Append = Callable[[list[bytes]], "Future[tuple[int, int]]"]
"""Appends values through the quorum's leader; the future holds the (first, last) offset once committed."""


@dataclass(frozen=True)
class Phase:
    """The offsets one phase wrote and when its last append was committed (wall clock, seconds)."""

    first: int
    last: int
    ended: float


def cluster_records(log_dir: Path, steady: int, burst: int) -> tuple[list[bytes], list[bytes]]:
    """The creation and ``steady + burst`` churn records of the log in ``log_dir`` (NoOps and control records
    left out: the writer adds its own NoOps on a controller's schedule)."""
    from kraftlake.image.source import log_records

    creation: list[bytes] = []
    churn: list[bytes] = []
    for mr in log_records(log_dir):
        if mr.is_control or mr.type == "NoOpRecord":
            continue
        if not churn and mr.type not in ("PartitionChangeRecord", "ConfigRecord"):
            creation.append(mr.raw)
        else:
            churn.append(mr.raw)
            if len(churn) >= steady + burst:
                break
    return creation, churn


def append_all(append: Append, values: list[bytes], chunk: int = CHUNK) -> Phase:
    """Append ``values`` as fast as the quorum commits them (appends of ``chunk``)."""
    pending = [append(values[i : i + chunk]) for i in range(0, len(values), chunk)]
    offsets = [f.result(timeout=300) for f in pending]
    return Phase(offsets[0][0], offsets[-1][1], time.time())


def write_noops(append: Append, done: threading.Event, noop: bytes) -> None:
    """The active controller's NoOp every :data:`NOOP_INTERVAL_S` until ``done`` is set."""
    while not done.wait(NOOP_INTERVAL_S):
        append([noop]).result(timeout=300)


def write_phases(
    append: Append,
    committed_to: Callable[[int], None],
    creation: list[bytes],
    churn: list[bytes],
    *,
    steady: int,
    churn_rate: float,
    stop: threading.Event,
    phases: dict[str, Phase],
) -> None:
    """Write the creation, then ``steady`` churn records at ``churn_rate`` a second, then the rest of ``churn``
    at once; each phase starts once ``committed_to`` returned for the last offset of the one before (so a phase's
    latency is not the previous phase's backlog). Each finished phase goes into ``phases`` as it ends."""
    phases["creation"] = append_all(append, creation)
    committed_to(phases["creation"].last)
    t0 = time.monotonic()
    sent = 0
    offsets: list[int] = []
    while sent < steady and not stop.is_set():
        # what is due by now, appended at once: the rate holds even when an append is slow
        due = min(steady, int((time.monotonic() - t0) * churn_rate))
        if due > sent:
            offsets.extend(append(churn[sent:due]).result(timeout=300))
            sent = due
        else:
            time.sleep(0.01)
    if not offsets:
        return
    phases["steady"] = Phase(min(offsets), max(offsets), time.time())
    committed_to(phases["steady"].last)
    if stop.is_set() or len(churn) <= steady:
        return
    phases["burst"] = append_all(append, churn[steady:])
    committed_to(phases["burst"].last)
