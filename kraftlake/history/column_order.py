"""Orders and counts of integer columns, as numpy's general functions give them, in fewer passes: the sorts of
the risk windows' and the report's columns (hundreds of thousands of rows, mostly in order already)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def lexsort_order(keys: Sequence[np.ndarray]) -> np.ndarray:
    """``np.lexsort(keys)`` (the last key sorts first) of integer keys: one stable sort of the keys packed into
    one integer, each above its least value, where their ranges fit in 62 bits together; else ``np.lexsort``."""
    n = len(keys[0]) if keys else 0
    if not n:
        return np.zeros(0, dtype=np.int64)
    lows = [int(k.min()) for k in keys]
    widths = [(int(k.max()) - low).bit_length() for k, low in zip(keys, lows, strict=True)]
    if sum(widths) > 62:
        return np.lexsort(keys)
    packed = np.zeros(n, dtype=np.int64)
    shift = 0
    for key, low, width in zip(keys, lows, widths, strict=True):
        packed |= (key.astype(np.int64) - low) << shift
        shift += width
    return np.argsort(packed, kind="stable")


def distinct_count(codes: np.ndarray) -> int:
    """How many distinct values ``codes`` (non-negative integers) holds: a mark per value where they are codes
    of a range not far larger than their number, else by sorting (``np.unique``)."""
    if not len(codes):
        return 0
    top = int(codes.max()) + 1
    if top > 4 * len(codes) + (1 << 20):
        return len(np.unique(codes))
    seen = np.zeros(top, dtype=bool)
    seen[codes] = True
    return int(np.count_nonzero(seen))


def is_lexsorted(keys: Sequence[np.ndarray]) -> bool:
    """Whether the rows are in ``np.lexsort(keys)`` order already (the last key sorts first): each row's keys
    not before the row's above it. Keys of numbers or strings (object arrays); False where two cells cannot be
    compared (a None among strings)."""
    n = len(keys[0]) if keys else 0
    if n < 2:
        return True
    in_order = np.ones(n - 1, dtype=bool)
    try:
        for key in keys:
            after, before = key[1:], key[:-1]
            in_order = (after > before) | ((after == before) & in_order)
    except TypeError:
        return False
    return bool(in_order.all())
