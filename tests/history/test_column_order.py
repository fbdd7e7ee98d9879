"""The sorts and counts of integer columns give what numpy's general functions give."""

from __future__ import annotations

import numpy as np

from kraftlake.history.column_order import distinct_count, is_lexsorted, lexsort_order


def test_packed_order_is_lexsorts_with_ties_in_place() -> None:
    rng = np.random.default_rng(7)
    for spans in ((5, 300, 40, 10**6), (2, 2, 2, 2), (3, 2**40, 2**30, 7)):  # the last: too wide to pack
        keys = tuple(rng.integers(-9, span, 5_000) for span in spans)
        assert (lexsort_order(keys) == np.lexsort(keys)).all()
    assert len(lexsort_order((np.zeros(0, dtype=np.int64),))) == 0


def test_distinct_count_is_uniques() -> None:
    rng = np.random.default_rng(8)
    for top in (1, 50, 10**5, 2**40):  # the last: too sparse for a mark per value
        codes = rng.integers(0, top, 3_000)
        assert distinct_count(codes) == len(np.unique(codes))
    assert distinct_count(np.zeros(0, dtype=np.int64)) == 0


def test_in_order_is_a_lexsort_that_moves_nothing() -> None:
    rng = np.random.default_rng(9)
    for _ in range(50):
        keys = (
            rng.integers(0, 4, 30),
            rng.integers(0, 3, 30),
            np.array([f"t{i}" for i in rng.integers(0, 3, 30)]),
        )
        order = np.lexsort(keys)
        assert is_lexsorted(keys) == bool((order == np.arange(30)).all())
        assert is_lexsorted(tuple(k[order] for k in keys))
    names = np.array(["a", None, "b"], dtype=object)
    assert not is_lexsorted((np.arange(3), names)) and is_lexsorted((np.arange(1),))
