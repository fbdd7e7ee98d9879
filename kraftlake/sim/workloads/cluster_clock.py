"""Record times at a real cluster's pace for the synthetic churn log, so that a day of it is a day.

A controller's log is quiet most of the time and busy in bursts: the records of one command (a topic created
with its partitions, a topic deleted and created again, a broker registering) are written within
milliseconds, a broker fenced or unfenced is followed by a flurry of partition changes, and operators' changes
come more often in working hours than at night. The clock gives each record a gap to the one before it:

- a command's own records (``TopicRecord``, ``PartitionRecord``, ``RemoveTopicRecord``,
  ``RegisterBrokerRecord``, ``FeatureLevelRecord``): 1-5 ms;
- the ``BURST`` records after a ``BrokerRegistrationChangeRecord``: 1-20 ms;
- any other record: exponential, of mean ``mean_gap_ms`` scaled by the hour of the day (half the mean at
  14:00 UTC, one and a half times it at 02:00).

A batch is stamped with the time of its last record, so stamps grow batch by batch. Seeded, and drawing from
its own random source, so the log's records are the same with or without a clock.
"""

from __future__ import annotations

import math
import random
from typing import Any

from kraftlake.protocol import messages as m

BURST = 8
"""How many records after a broker's fencing or unfencing come within milliseconds."""
DIURNAL = 0.5
"""How far the hour of the day moves the calm gap from its mean, as a share of it."""

_DAY_MS = 86_400_000
_COMMAND = (
    m.TopicRecord,
    m.PartitionRecord,
    m.RemoveTopicRecord,
    m.RegisterBrokerRecord,
    m.FeatureLevelRecord,
)


class ClusterClock:
    """The time of the latest record (``now``, epoch ms), advanced record by record with :meth:`tick`."""

    def __init__(self, start_ms: int, mean_gap_ms: float, seed: int = 0) -> None:
        if mean_gap_ms <= 0:
            raise ValueError(f"a cluster clock's mean gap must be positive, not {mean_gap_ms} ms")
        self.now = start_ms
        self.mean_gap_ms = mean_gap_ms
        self._rng = random.Random(seed ^ 0x5EED_C10C)
        self._burst = 0

    def tick(self, record: Any) -> int:
        """Advance past ``record`` and return its time."""
        rng = self._rng
        if isinstance(record, _COMMAND):
            gap = rng.randint(1, 5)
        elif self._burst > 0:
            self._burst -= 1
            gap = rng.randint(1, 20)
        else:
            hour = (self.now % _DAY_MS) / 3_600_000
            scale = 1.0 - DIURNAL * math.cos(2 * math.pi * (hour - 14.0) / 24.0)
            gap = max(1, round(rng.expovariate(1.0 / (self.mean_gap_ms * scale))))
        if isinstance(record, m.BrokerRegistrationChangeRecord):
            self._burst = BURST
        self.now += gap
        return self.now


def spread_over(days: float, records: int, command_records: int, burst_share: float) -> float:
    """The mean calm gap (ms) that spreads ``records`` over about ``days`` days: the ``command_records`` and
    the ``burst_share`` of the others take no time worth counting, and the busy hours, holding more of the
    records, shorten the average gap by a factor sqrt(1 - DIURNAL**2)."""
    calm = max(1.0, (records - command_records) * (1.0 - burst_share))
    return days * _DAY_MS / calm / math.sqrt(1.0 - DIURNAL**2)
