"""Replica placement for new topics and partitions: rack-unaware striped round robin.

Simpler than Kafka's ``StripedReplicaPlacer`` but with the same goals of even leaders and replicas: the usable
brokers (registered, unfenced, not in controlled shutdown) are sorted by id; partition ``p`` of a request
gets the ``rf`` consecutive brokers starting at ``(start + p) % n``, where ``start`` is a cluster-wide
counter advanced by every placement, so successive topics start on different brokers. Consecutive brokers
never repeat within a partition, so every replica set has ``rf`` distinct brokers.
"""

from __future__ import annotations

from collections.abc import Sequence


class PlacementError(ValueError):
    """Raised when the replication factor exceeds the usable brokers (INVALID_REPLICATION_FACTOR)."""


def place(usable: Sequence[int], start: int, num_partitions: int, rf: int) -> list[tuple[int, ...]]:
    """Replica lists for ``num_partitions`` partitions of replication factor ``rf``."""
    brokers = sorted(usable)
    n = len(brokers)
    if rf > n:
        raise PlacementError(
            f"Unable to replicate the partition {rf} time(s): The target replication "
            f"factor of {rf} cannot be reached because only {n} broker(s) are registered."
        )
    return [tuple(brokers[(start + p + k) % n] for k in range(rf)) for p in range(num_partitions)]
