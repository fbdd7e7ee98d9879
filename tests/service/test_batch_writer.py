"""The service's fast batch writer is byte-identical to logformat's KRaft batch builder."""

from __future__ import annotations

import random

import pytest

from kraftlake.logformat import build_data_batch
from kraftlake.service.batch_writer import kraft_data_batch


@pytest.mark.parametrize("seed", range(5))
def test_fast_batches_equal_the_reference_builder(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 2, 127, 128, 3000, 8192, 9000])
    values = [
        rng.randbytes(
            rng.choice([0, 1, 63, 64, 256, 8191, 8192, 40_000]) if i % 97 == 0 else rng.randrange(300)
        )
        for i in range(n)
    ]
    args = (rng.randrange(1 << 40), rng.randrange(1 << 20), 1_700_000_000_000 + seed)
    assert kraft_data_batch(*args, values) == build_data_batch(*args, values)
