"""Garbage-collector settings for a process whose main job is a raft voter (`kraftlake quorum start`).

A full collection stops the loop thread for as long as it takes to scan every tracked object, and on the
bench machine that was the largest part of the append latency tail (gen-2 pauses of 70-200 ms). Two things
shrink it: `gc.freeze()` moves everything alive after start-up (modules, classes, the codec's generated
functions: ~26k objects) out of the collector's sight, and a larger gen-0 threshold makes young collections
rarer (the loop allocates mostly short-lived frames, futures and messages that reference counting frees).
The log itself is not scanned: `MemoryRaftLog` stores untracked plain tuples.

Memory: glibc's malloc serves a freed large block's size from its heap afterwards (its mmap threshold grows
with each large free, up to 32 MiB), so the 1-8 MiB replies a voter builds for observers stay in its RSS after
a burst; `return_large_buffers` fixes the threshold at 1 MiB, so each such buffer is a mapping of its own,
returned when freed.

Only for a process that is the service; a library user (a Spark driver) keeps its own settings.
"""

from __future__ import annotations

import ctypes
import gc

GEN0_THRESHOLD = 20_000
LARGE_BUFFER_BYTES = 1 << 20
"""Allocations of at least this size get a mapping of their own (returned to the system when freed)."""
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def return_large_buffers() -> bool:
    """Fix glibc's mmap threshold at `LARGE_BUFFER_BYTES`; False where the C library has no ``mallopt``."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES))


def tune_for_service() -> None:
    """Collect once, freeze what survived start-up, raise the gen-0 threshold, return large buffers."""
    return_large_buffers()
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
