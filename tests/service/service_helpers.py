"""Helpers shared by the service tests."""

from __future__ import annotations

from kraftlake.raft.config import QuorumConfig

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
