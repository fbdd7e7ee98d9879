"""How large the randomized sweeps are (Hypothesis examples, simulation seeds).

`make test` runs each sweep cut to a size that still exercises every strategy and scenario; `make test-slow`
sets ``KRAFTLAKE_SWEEPS=full`` and runs them at full size. ``tests/`` is on ``sys.path`` (it has no
``__init__``), so this is the module ``sweeps``.
"""

from __future__ import annotations

import os

#: ``KRAFTLAKE_SWEEPS=full``: every sweep at its full size (`make test-slow`).
FULL = os.environ.get("KRAFTLAKE_SWEEPS") == "full"


def sweep(full: int, cut: int) -> int:
    """``full`` under ``KRAFTLAKE_SWEEPS=full``, else ``cut``."""
    if not 0 < cut <= full:
        raise ValueError(f"a cut sweep is smaller than the full one and not empty: {cut} of {full}")
    return full if FULL else cut
