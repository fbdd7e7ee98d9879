"""Commit-to-queryable bookkeeping of the live benches: from when each record was appended and when each
micro-batch's commit point was published, each record's latency and how far the stream was behind.

A record is queryable from the commit of the first micro-batch whose offsets hold it; its latency is that
commit's wall time minus its append time (the timestamp the leader gave its batch). Times are wall-clock
seconds of one machine (the writer and the stream share its clock).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Commit:
    """One committed micro-batch: its offsets (inclusive) and when its commit point was published."""

    first_offset: int
    last_offset: int
    at: float


def quantile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` (not empty)."""
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def latencies(commits: Iterable[Commit], appended: Mapping[int, float]) -> dict[int, float]:
    """Each appended record's commit-to-queryable latency, by offset (records no commit holds are left out)."""
    out: dict[int, float] = {}
    for c in sorted(commits, key=lambda c: c.at):
        for o in range(c.first_offset, c.last_offset + 1):
            if o in appended and o not in out:
                out[o] = c.at - appended[o]
    return out


def summary(values: list[float], prefix: str = "") -> dict[str, float | None]:
    """p50, p99 and max of ``values`` (seconds, two decimals; None when there are none)."""
    if not values:
        return {f"{prefix}p50_s": None, f"{prefix}p99_s": None, f"{prefix}max_s": None}
    return {
        f"{prefix}p50_s": round(quantile(values, 0.5), 2),
        f"{prefix}p99_s": round(quantile(values, 0.99), 2),
        f"{prefix}max_s": round(max(values), 2),
    }


def behind_at(commits: Iterable[Commit], appended: Mapping[int, float], t: float) -> int:
    """How many records appended by ``t`` no micro-batch committed by ``t`` holds."""
    done = max((c.last_offset for c in commits if c.at <= t), default=-1)
    return sum(1 for o, at in appended.items() if at <= t and o > done)
