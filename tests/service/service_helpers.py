"""Helpers shared by the service tests."""

from __future__ import annotations

from waiting import wait_until

from kraftlake.raft.config import QuorumConfig
from kraftlake.service import LocalQuorum

CLUSTER = "svc-test-cluster"


def fast_config(n: int = 3) -> QuorumConfig:
    """Shorter timers than Kafka's so elections in tests take a fraction of a second."""
    return QuorumConfig(
        voters=frozenset(range(1, n + 1)),
        election_timeout_ms=300,
        fetch_timeout_ms=600,
        election_backoff_max_ms=300,
        request_timeout_ms=1000,
        max_fetch_wait_ms=200,
        append_linger_ms=5,
    )


def wait_until_committed(quorum: LocalQuorum, end: int, timeout: float = 10.0) -> None:
    """Until every voter's high watermark reaches `end`: all appended before it is committed everywhere."""
    services = list(quorum.services.values())
    wait_until(
        lambda: all(s.high_watermark >= end for s in services),
        timeout,
        f"every voter's high watermark at {end}",
        0.02,
        seen=lambda: {s.node_id: s.high_watermark for s in services},
    )
