"""Waiting in tests: on the condition the test then checks, bounded by a deadline, never for a fixed time.

A fixed sleep is either too short on a loaded machine (the test fails for no reason) or longer than needed
everywhere else; a poll returns as soon as the condition holds and, when it never does, fails naming what was
awaited and what was seen last. ``tests/`` is on ``sys.path`` (it has no ``__init__``): ``from waiting import
wait_until``.

A test that must let time pass (to show that something does *not* happen during an interval, or that an outage
outlasts a timeout) sleeps on purpose, with the interval as a named constant saying why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The awaited condition did not hold before the deadline.

    An AssertionError, so pytest reports it as a failed check; the message names what was awaited and the
    last value seen.
    """


def wait_until(
    condition: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.1,
    *,
    seen: Callable[[], object] | None = None,
    retry: tuple[type[BaseException], ...] = (),
    fail: Callable[[str], BaseException] = WaitTimeout,
) -> T:
    """Call `condition` every `interval` seconds until it returns a truthy value, and return that value (so a
    condition answering ``X | None`` gives an ``X``). A value that can be 0 or empty when it is the awaited one
    goes in a list.

    The first call is at once, the last one at or after the deadline (so a condition that holds by then is
    not failed for the time the calls took). An exception of a type in `retry` counts as a falsy answer (a
    server not listening yet); any other goes through to the test at once.

    Raises
    ------
    WaitTimeout
        When `timeout` seconds pass first: names `what` and the last thing seen, `seen()` if given (for a
        condition that only answers True or False), else the condition's last value or `retry` exception.
        `fail` makes another exception of that message instead (a peer's own error, with its log's tail).
    """
    deadline = time.monotonic() + timeout
    while True:
        last: object
        try:
            last = value = condition()
        except retry as exc:
            last = exc
        else:
            if value:
                return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            shown = seen() if seen is not None else last
            raise fail(f"{what}: not within {timeout:g}s; last seen: {shown!r}")
        time.sleep(min(interval, remaining))
