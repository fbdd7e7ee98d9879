"""Run every benchmark module and write bench/results.json.

With ``--only``, the benchmarks not run keep the figures the file already holds (``measured_at`` says when each
benchmark's figures were taken), so measuring one does not erase the others.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path
from typing import Any

import bench as pkg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--out", default="bench/results.json")
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--work-dir", default=".cache/bench")
    args = parser.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    kept = _previous(out) if only else {}
    results: dict[str, Any] = {
        "started": _now(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "benchmarks": dict(kept.get("benchmarks", {})),
        "measured_at": dict(kept.get("measured_at", {})),
    }
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("bench_"))
    status = 0
    for name in names:
        short = name.removeprefix("bench_")
        if only and short not in only:
            continue
        print(f"== {short}", flush=True)
        module = importlib.import_module(f"bench.{name}")
        try:
            figures = module.run({"work_dir": work / short})
        except Exception as exc:  # a failing benchmark is reported, the others still run
            figures = {"error": f"{type(exc).__name__}: {exc}"}
            status = 1
        results["benchmarks"][short] = figures
        results["measured_at"][short] = _now()
        for key, value in figures.items():
            print(f"   {key}: {value}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return status


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _previous(out: Path) -> dict[str, Any]:
    """The results file as a previous run left it ({} when there is none or it is not ours)."""
    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), dict):
        return {}
    measured = data.get("measured_at")
    if not isinstance(measured, dict):
        # written before measured_at existed: every figure is from that run
        measured = {name: data.get("started") for name in data["benchmarks"]}
    return {"benchmarks": data["benchmarks"], "measured_at": measured}


if __name__ == "__main__":
    sys.exit(main())
