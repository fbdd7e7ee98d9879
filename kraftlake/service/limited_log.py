"""`LimitedLog`: log lines a peer can cause (refusals, evictions, closes), once per cause per interval.

A stranger who can reach a voter can make it refuse, evict or close as often as it likes; each cause is
logged once per `LOG_INTERVAL_MS`, the next line saying how many were left out meanwhile.
"""

from __future__ import annotations

import logging
import time

LOG_INTERVAL_MS = 60_000
"""Refusals and other lines a peer can cause are logged once per cause in this interval."""
_MAX_CAUSES = 10_000
"""Past this many causes remembered the table starts over (a peer could otherwise grow it without bound)."""


def mono_ms() -> int:
    """The monotonic clock in milliseconds: the time the raft node and the service count in."""
    return int(time.monotonic() * 1000)


class LimitedLog:
    """Log to `logger` at most once per cause per `LOG_INTERVAL_MS`."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._times: dict[object, tuple[int | None, int]] = {}

    def log(self, cause: object, level: int, fmt: str, *args: object, now: int | None = None) -> None:
        """Log once per `cause` per minute; the next line says how many were left out meanwhile."""
        now = mono_ms() if now is None else now
        last, skipped = self._times.get(cause, (None, 0))
        if last is not None and now - last < LOG_INTERVAL_MS:
            self._times[cause] = (last, skipped + 1)
            return
        if len(self._times) > _MAX_CAUSES:
            self._times.clear()
        self._times[cause] = (now, 0)
        suffix = f" ({skipped} more like it in the last minute)" if skipped else ""
        self._logger.log(level, fmt + suffix, *args)
