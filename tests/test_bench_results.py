"""``python -m bench --only X`` keeps the other benchmarks' figures in the results file."""

from __future__ import annotations

import importlib
import json
import types
from pathlib import Path
from typing import Any

import pytest

from bench import __main__ as bench


def _fake(figures: dict[str, Any]) -> types.ModuleType:
    module = types.ModuleType("fake_bench")
    module.run = lambda ctx: figures  # type: ignore[attr-defined]
    return module


def test_only_replaces_the_benchmarks_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results.json"
    out.write_text(
        json.dumps(
            {
                "started": "2026-11-25T10:00:00Z",
                "benchmarks": {"decode": {"ratio": 0.9}, "spark": {"p50": 1.1}},
            }
        )
    )
    real_import = importlib.import_module
    monkeypatch.setattr(
        importlib,
        "import_module",
        lambda name: _fake({"p50": 0.9}) if name == "bench.bench_spark" else real_import(name),
    )
    assert bench.main(["--only", "spark", "--out", str(out), "--work-dir", str(tmp_path / "w")]) == 0
    data = json.loads(out.read_text())
    assert data["benchmarks"] == {"decode": {"ratio": 0.9}, "spark": {"p50": 0.9}}
    # the kept figures say when they were taken: the older file's start
    assert data["measured_at"]["decode"] == "2026-11-25T10:00:00Z"
    assert data["measured_at"]["spark"] >= data["started"]


def test_a_whole_run_starts_the_file_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"benchmarks": {"gone": {"x": 1}}}))
    monkeypatch.setattr(importlib, "import_module", lambda name: _fake({"n": 1}))
    assert bench.main(["--out", str(out), "--work-dir", str(tmp_path / "w")]) == 0
    data = json.loads(out.read_text())
    assert "gone" not in data["benchmarks"] and data["benchmarks"]["spark"] == {"n": 1}
    assert set(data["measured_at"]) == set(data["benchmarks"])


def test_an_unreadable_file_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results.json"
    out.write_text("not json")
    monkeypatch.setattr(importlib, "import_module", lambda name: _fake({"n": 2}))
    assert bench.main(["--only", "image", "--out", str(out), "--work-dir", str(tmp_path / "w")]) == 0
    assert json.loads(out.read_text())["benchmarks"] == {"image": {"n": 2}}
