"""Which Kafka releases a controller's ApiVersions answer looks like, and what kraftlake can follow.

A controller listener advertises its release's KRaft RPC ranges; from 3.3 (KRaft production-ready) every release
speaks Fetch v13 or later, the first version that names topics by id, which kraftlake needs. The table is read
from each release's ``kafka-clients`` jar (``common/message/*.json``); a release newer than the table is whatever
speaks the newest ranges.
"""

from __future__ import annotations

from collections.abc import Mapping

from kraftlake.protocol.rpc import SUPPORTED, ApiKey

#: (Fetch max, FetchSnapshot max, DescribeQuorum max, Vote max) of each release line, oldest first.
_SIGNATURES: tuple[tuple[tuple[int, int, int, int], str], ...] = (
    ((13, 0, 1, 0), "3.3-3.4"),
    ((15, 0, 1, 0), "3.5-3.6"),
    ((16, 0, 1, 0), "3.7-3.8"),
    ((17, 1, 2, 1), "3.9"),
    ((17, 1, 2, 2), "4.0"),
    ((18, 1, 2, 2), "4.1 or later"),
)

KRAFT_KEYS = (ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT, ApiKey.DESCRIBE_QUORUM, ApiKey.VOTE)
FOLLOWED = "Kafka 3.3 and later"


def supported_ranges() -> str:
    """What kraftlake speaks, as one phrase: ``Fetch v13-18, FetchSnapshot v0-1``."""
    return (
        f"Fetch v{SUPPORTED[ApiKey.FETCH]}, FetchSnapshot v{SUPPORTED[ApiKey.FETCH_SNAPSHOT]}, "
        f"DescribeQuorum v{SUPPORTED[ApiKey.DESCRIBE_QUORUM]}"
    )


def describe_ranges(ranges: Mapping[int, tuple[int, int]]) -> str:
    """A peer's KRaft ranges as ``Fetch v0-13, FetchSnapshot v0, ...`` (``none`` for a missing one)."""
    names = {
        ApiKey.FETCH: "Fetch",
        ApiKey.FETCH_SNAPSHOT: "FetchSnapshot",
        ApiKey.DESCRIBE_QUORUM: "DescribeQuorum",
        ApiKey.VOTE: "Vote",
    }
    parts = []
    for key in KRAFT_KEYS:
        found = ranges.get(key)
        if found is None:
            parts.append(f"{names[key]} none")
        else:
            lo, hi = found
            parts.append(f"{names[key]} v{lo}" + (f"-{hi}" if hi != lo else ""))
    return ", ".join(parts)


def guess_release(ranges: Mapping[int, tuple[int, int]]) -> str:
    """The Kafka release line whose controller advertises these ranges (``"3.7-3.8"``), or a description of
    what it is not."""
    fetch = ranges.get(ApiKey.FETCH)
    if fetch is None:
        return "not a KRaft controller"
    if fetch[1] < 13:
        return "Kafka older than 3.3"
    signature = tuple(ranges.get(k, (0, -1))[1] for k in KRAFT_KEYS)
    best = "a Kafka release kraftlake has not seen"
    for sig, name in _SIGNATURES:
        if signature == sig:
            return f"Kafka {name}"
        if signature > sig:
            best = f"Kafka {name} or later"
    return best
