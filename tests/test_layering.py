"""The pure layers import without pulling in Spark (the import-linter contracts say the same statically)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

PURE = [
    "logformat",
    "protocol",
    "records",
    "raft",
    "image",
    "controller",
    "sim",
    "history",
    "delta",
    "warehouse",
]


def test_pure_layers_never_load_pyspark() -> None:
    root = Path(__file__).resolve().parents[1] / "kraftlake"
    modules = []
    for layer in PURE:
        if not (root / layer).is_dir():
            continue
        modules.append(f"kraftlake.{layer}")
        modules += [f"kraftlake.{layer}.{m.name}" for m in pkgutil.iter_modules([str(root / layer)])]
    assert modules, "no pure layer found"
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('pyspark', 'delta', 'py4j'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
