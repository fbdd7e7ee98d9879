"""kraftlake.progress: what is drawn, when, and that nothing is drawn off a terminal."""

from __future__ import annotations

import io
import itertools

import pytest

from kraftlake.progress import ENV, Progress, enabled_for


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_off_a_terminal_unless_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    out = io.StringIO()
    with Progress("compact", 3, stream=out) as bar:
        bar.advance(3)
    assert out.getvalue() == ""
    assert enabled_for(Tty())
    monkeypatch.setenv(ENV, "0")
    assert not enabled_for(Tty())
    monkeypatch.setenv(ENV, "1")
    assert enabled_for(io.StringIO())
    assert not enabled_for(io.StringIO(), enabled=False)


def test_lines_with_a_total_redrawn_in_place_and_ended() -> None:
    clock = Clock()
    out = io.StringIO()
    with Progress("compact", 4, unit="tables", stream=out, enabled=True, clock=clock) as bar:
        clock.now += 1.0
        bar.advance(1, note="partitions")
        clock.now += 0.01  # within the redraw interval: counted, not drawn
        bar.advance(1, note="x")
        clock.now += 1.0
        bar.advance(2, note="brokers")
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    frames = text.rstrip("\n").split("\r")[1:]
    assert frames[0].rstrip() == "compact  0/4 tables    0%  0.0s"
    assert frames[1].rstrip() == "compact  1/4 tables   25%  1.0s  partitions"
    assert all("2/4" not in frame for frame in frames)
    assert frames[-1].rstrip() == "compact  4/4 tables  100%  2.0s  brokers"
    # each frame covers the previous one: padded to at least its length
    for before, after in itertools.pairwise(frames):
        assert len(after) >= len(before.rstrip())


def test_unknown_total_shows_count_and_rate_and_long_durations() -> None:
    clock = Clock()
    bar = Progress("ingest", unit="records", stream=io.StringIO(), enabled=True, clock=clock)
    clock.now += 2.0
    bar.update(5000)
    assert bar.line() == "ingest  5000 records  2,500 records/s  2.0s"
    clock.now += 3600 + 62
    assert bar.line().endswith("1h01m")
    bar.update(5000, total=0)
    assert " 100%" in bar.line()


def test_close_is_idempotent_and_negative_total_refused() -> None:
    out = io.StringIO()
    bar = Progress("x", 1, stream=out, enabled=True)
    bar.close()
    bar.close()
    assert out.getvalue().count("\n") == 1
    with pytest.raises(ValueError, match="negative"):
        Progress("x", -1)
