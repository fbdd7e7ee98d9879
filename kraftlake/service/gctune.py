"""Garbage-collector settings for a process whose main job is a raft voter (`kraftlake quorum start`).

A full collection stops the loop thread for as long as it takes to scan every tracked object, and on the
bench machine that was the largest part of the append latency tail (gen-2 pauses of 70-200 ms). Two things
shrink it: `gc.freeze()` moves everything alive after start-up (modules, classes, the codec's generated
functions: ~26k objects) out of the collector's sight, and a larger gen-0 threshold makes young collections
rarer (the loop allocates mostly short-lived frames, futures and messages that reference counting frees).
The log itself is not scanned: `MemoryRaftLog` stores untracked plain tuples.

Only for a process that is the service; a library user (a Spark driver) keeps its own settings.
"""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 20_000


def tune_for_service() -> None:
    """Collect once, freeze what survived start-up, and raise the gen-0 threshold."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
