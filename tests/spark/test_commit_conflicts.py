"""Slice writes losing a Delta commit conflict (to a scheduled compaction) are tried again; other errors are not."""

from __future__ import annotations

import pytest


def test_a_lost_conflict_is_tried_again() -> None:
    import delta.exceptions as dx

    from kraftlake.spark.tables.writes import retry_conflicts

    calls: list[int] = []

    def write() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise dx.ConcurrentAppendException(message="Files were added by a concurrent update")
        return "committed"

    assert retry_conflicts(write, backoff_s=0.0) == "committed"
    assert len(calls) == 3


def test_other_errors_and_the_last_conflict_propagate() -> None:
    import delta.exceptions as dx

    from kraftlake.spark.tables.writes import retry_conflicts

    def broken() -> None:
        raise ValueError("not a conflict")

    with pytest.raises(ValueError):
        retry_conflicts(broken, backoff_s=0.0)
    calls: list[int] = []

    def always() -> None:
        calls.append(1)
        raise dx.ConcurrentDeleteReadException(message="a concurrent DELETE")

    with pytest.raises(dx.ConcurrentDeleteReadException):
        retry_conflicts(always, attempts=4, backoff_s=0.0)
    assert len(calls) == 4
