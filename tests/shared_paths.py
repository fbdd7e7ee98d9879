"""Where the project's shared material is: ``../shared`` beside the checkout (as in CI), else /work/shared."""

from __future__ import annotations

from pathlib import Path

_BESIDE = Path(__file__).resolve().parents[2] / "shared"
SHARED = _BESIDE if _BESIDE.is_dir() else Path("/work/shared")
KAFKA_LOGS = SHARED / "fixtures" / "kafka-logs"
