"""Fixtures of the service tests: an in-process 3-voter quorum with short timers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import CLUSTER, fast_config

from kraftlake.service import LocalQuorum


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[LocalQuorum]:
    q = LocalQuorum(3, tmp_path / "q", CLUSTER, fsync=False, quorum=fast_config())
    q.start()
    try:
        yield q
    finally:
        q.stop()
