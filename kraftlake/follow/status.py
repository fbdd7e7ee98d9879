"""The follower's status file: what a supervisor (systemd, a health check) reads to know it is well.

One JSON object, replaced atomically (written beside, fsynced, renamed) on every progress report and when the
follower stops::

    {"state": "following", "pid": 4242, "offset": 5382, "high_watermark": 5383, "lag": 1, "leader": 2,
     "epoch": 7, "last_error": "", "last_progress": "2026-11-26T21:40:12.345Z",
     "last_progress_age_s": 0.4, "updated": "2026-11-26T21:40:12.512Z"}

``state`` is ``following``, ``stopped`` (a clean stop) or ``failed`` (then ``last_error`` says why).
``last_progress`` is when an answer last moved following on; a large ``last_progress_age_s`` with a
``last_error`` is a quorum the follower cannot reach (it retries: with ``--give-up never`` for ever).
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def status(follower: Any, state: str, error: str = "") -> dict[str, Any]:
    """The status of a `kraftlake.follow.follower.Follower` as the file holds it."""
    p = follower.progress
    age = max(0.0, time.monotonic() - follower.last_progress)
    return {
        "state": state,
        "pid": os.getpid(),
        "offset": p.log_end,
        "high_watermark": p.high_watermark,
        "lag": p.lag,
        "leader": p.leader_id,
        "epoch": p.epoch,
        "last_error": error or p.last_error,
        "last_progress": _iso(time.time() - age),
        "last_progress_age_s": round(age, 3),
        "updated": _iso(time.time()),
    }


def write_status(path: str | os.PathLike[str], doc: dict[str, Any]) -> None:
    """Replace the status file with `doc` (atomically: a reader sees the old or the new one, whole)."""
    target = Path(path)
    part = target.with_name(target.name + ".part")
    with open(part, "w", encoding="utf-8") as f:
        json.dump(doc, f)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, target)
