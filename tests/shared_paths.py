"""Where the project's shared material is: ``../shared`` beside the checkout (as in CI), else /work/shared.

The fixture logs are part of the test suite: without them every module that imports this one fails to
collect, naming the paths it looked at, so a run without ``../shared`` is red instead of quietly skipping.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_BESIDE = Path(__file__).resolve().parents[2] / "shared"
_CANDIDATES = (_BESIDE, Path("/work/shared"))


def _find_shared() -> Path:
    for shared in _CANDIDATES:
        logs = shared / "fixtures" / "kafka-logs"
        if logs.is_dir() and any(logs.rglob("*.log")):
            return shared
    looked = " or ".join(str(s / "fixtures" / "kafka-logs") for s in _CANDIDATES)
    pytest.fail(
        f"the shared fixture logs are missing: no Kafka log under {looked} "
        "(check out the shared material beside the repository as ../shared)",
        pytrace=False,
    )


SHARED = _find_shared()
KAFKA_LOGS = SHARED / "fixtures" / "kafka-logs"
