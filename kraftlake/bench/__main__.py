"""Run every benchmark module and write bench/results.json."""

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

import kraftlake.bench as pkg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kraftlake.bench")
    parser.add_argument("--out", default="bench/results.json")
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--work-dir", default=".cache/bench")
    args = parser.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "benchmarks": {},
    }
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("bench_"))
    status = 0
    for name in names:
        short = name.removeprefix("bench_")
        if only and short not in only:
            continue
        print(f"== {short}", flush=True)
        module = importlib.import_module(f"kraftlake.bench.{name}")
        try:
            figures = module.run({"work_dir": work / short})
        except Exception as exc:  # a failing benchmark is reported, the others still run
            figures = {"error": f"{type(exc).__name__}: {exc}"}
            status = 1
        results["benchmarks"][short] = figures
        for key, value in figures.items():
            print(f"   {key}: {value}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
