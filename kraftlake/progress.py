"""Progress lines on stderr for the long-running commands (ingest, stream catch-up, compact, validate).

A `Progress` redraws one line (``label  done/total unit  pct%  elapsed``) in place with a carriage return, at
most ten times a second, and ends it with a newline when closed. It draws only when its stream is a terminal,
so pipes, CI logs and tests see nothing unless drawing is forced (``enabled=True`` or the environment variable
``KRAFTLAKE_PROGRESS=1``; ``KRAFTLAKE_PROGRESS=0`` turns it off on a terminal too). Standard library only; no
pyspark, so any layer may use it.

    with Progress("compact", total=len(tables), unit="tables") as bar:
        for table in tables:
            ...
            bar.advance(1, note=table)
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

ENV = "KRAFTLAKE_PROGRESS"
"""``1``/``0`` force drawing on or off whatever the stream is."""

_INTERVAL = 0.1
"""Seconds between two redraws; updates in between only count."""


def enabled_for(stream: TextIO, enabled: bool | None = None) -> bool:
    """Whether progress is drawn on `stream`: `enabled` when given, else ``$KRAFTLAKE_PROGRESS`` when set to
    ``0``/``1``, else whether the stream is a terminal."""
    if enabled is not None:
        return enabled
    forced = os.environ.get(ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """One progress line for a task of `total` units (None: unknown, the count and rate are shown instead of a
    percentage). `advance` and `update` may be called any number of times; only redraws are throttled. Usable
    as a context manager; `close` is idempotent. `clock` is injectable for tests."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        unit: str = "",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total is not None and total < 0:
            raise ValueError(f"progress total {total} is negative")
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.note = ""
        self._stream = stream if stream is not None else sys.stderr
        self.enabled = enabled_for(self._stream, enabled)
        self._clock = clock
        self._started = clock()
        self._drawn_at: float | None = None
        self._width = 0
        self._closed = False

    def __enter__(self) -> Progress:
        self._draw(force=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def advance(self, units: int = 1, *, note: str | None = None) -> None:
        """Count `units` more done (and show `note`, e.g. the item being worked on)."""
        self.update(self.done + units, note=note)

    def update(self, done: int, *, note: str | None = None, total: int | None = None) -> None:
        """Set the units done (and the note, or a total learnt late)."""
        self.done = done
        if note is not None:
            self.note = note
        if total is not None:
            self.total = total
        self._draw(force=False)

    def line(self) -> str:
        """The text of the progress line as it would be drawn now."""
        elapsed = self._clock() - self._started
        unit = f" {self.unit}" if self.unit else ""
        parts = [self.label]
        if self.total is not None:
            pct = 100.0 if self.total == 0 else min(100.0, 100.0 * self.done / self.total)
            parts.append(f"{self.done}/{self.total}{unit}")
            parts.append(f"{pct:3.0f}%")
        else:
            parts.append(f"{self.done}{unit}")
            if elapsed > 0 and self.done:
                parts.append(f"{self.done / elapsed:,.0f}{unit}/s")
        parts.append(_duration(elapsed))
        if self.note:
            parts.append(self.note)
        return "  ".join(parts)

    def close(self) -> None:
        """Draw the final state and end the line (nothing when not drawing)."""
        if self._closed:
            return
        self._closed = True
        if self.enabled:
            self._draw(force=True)
            self._stream.write("\n")
            self._stream.flush()

    def _draw(self, *, force: bool) -> None:
        if not self.enabled or (self._closed and not force):
            return
        now = self._clock()
        if not force and self._drawn_at is not None and now - self._drawn_at < _INTERVAL:
            return
        self._drawn_at = now
        text = self.line()
        # Pad over the rest of a longer previous line (a shorter note, a shrinking rate).
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self._stream.write(f"\r{text}{pad}")
        self._stream.flush()
