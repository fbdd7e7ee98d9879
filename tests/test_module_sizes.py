"""Rooms one can hold in one's head (issue 26's "done when"): no module of ``kraftlake/``, ``pipelines/``,
``udfs/``, ``jobs/`` (the benchmarks, ``bench/``, aside) over 900 lines, no function over 120.

Exempt: generated modules (a ``# ... do not edit`` line at the top), modules whose docstring says they hold
hand-inlined hot loops, and functions whose docstring, or the comment right above or at the top of their body,
says "hand-inlined".

``PENDING`` lists what is oversized and not split yet: each entry is an expected failure (xfail) until its
module or function is split, then it passes (XPASS in the report) and its entry should go. Anything oversized
that is not listed fails. Run ``python tests/test_module_sizes.py`` for the report alone (exit 1 when an
unlisted module or function is oversized).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ("kraftlake", "pipelines", "udfs", "jobs")  # not bench/: the benchmarks are aside
MAX_MODULE_LINES = 900
MAX_FUNCTION_LINES = 120

# Oversized and not split yet: "path" for a module, "path::qualified.name" for a function. Remove an entry
# when its split lands (the test then reports XPASS).
PENDING: dict[str, str] = {}

_GENERATED = re.compile(r"^#.*\bdo not edit\b", re.IGNORECASE)
_HAND_INLINED = re.compile(r"hand[- ]inlined", re.IGNORECASE)


def is_generated(text: str) -> bool:
    """Whether one of the first five lines is a ``# ... do not edit`` comment."""
    return any(_GENERATED.match(line) for line in text.splitlines()[:5])


def _marked(func: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> bool:
    doc = ast.get_docstring(func)
    if doc is not None and _HAND_INLINED.search(doc):
        return True
    first = min([func.lineno, *(d.lineno for d in func.decorator_list)])
    above = []
    i = first - 2  # the line above the def (0-based index)
    while i >= 0 and lines[i].lstrip().startswith("#"):
        above.append(lines[i])
        i -= 1
    body_start = func.body[0].lineno - 1
    top = []
    i = func.lineno  # the line after the def line
    while i < body_start and i < len(lines):
        top.append(lines[i])
        i += 1
    i = body_start
    while i < len(lines) and lines[i].lstrip().startswith("#"):
        top.append(lines[i])
        i += 1
    return any(_HAND_INLINED.search(line) for line in above + top if line.lstrip().startswith("#"))


def _functions(
    node: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{child.name}"
            yield name, child
            yield from _functions(child, f"{name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def oversized(rel: str, text: str) -> dict[str, int]:
    """The module (key ``rel``) and functions (``rel::name``) of one source file over the limits, with their
    line counts."""
    if is_generated(text):
        return {}
    out: dict[str, int] = {}
    tree = ast.parse(text)
    lines = text.splitlines()
    doc = ast.get_docstring(tree) or ""
    if len(lines) > MAX_MODULE_LINES and not _HAND_INLINED.search(doc):
        out[rel] = len(lines)
    for name, func in _functions(tree):
        length = (func.end_lineno or func.lineno) - func.lineno + 1
        if length > MAX_FUNCTION_LINES and not _marked(func, lines):
            out[f"{rel}::{name}"] = length
    return out


def scan(root: Path = ROOT) -> dict[str, int]:
    """Everything oversized under the checked trees of ``root``."""
    out: dict[str, int] = {}
    for tree in TREES:
        for path in sorted((root / tree).rglob("*.py")):
            out.update(oversized(path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")))
    return out


@functools.cache
def _scan_repo() -> dict[str, int]:
    return scan()


def _describe(found: dict[str, int]) -> str:
    return "\n".join(
        f"  {key}: {n} lines (max {MAX_FUNCTION_LINES if '::' in key else MAX_MODULE_LINES})"
        for key, n in sorted(found.items())
    )


def test_nothing_oversized_but_the_pending_list() -> None:
    unlisted = {k: n for k, n in _scan_repo().items() if k not in PENDING}
    assert not unlisted, "oversized, split it (or mark a hot loop hand-inlined):\n" + _describe(unlisted)


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(k, marks=pytest.mark.xfail(reason=f"not split yet: {why}", strict=False))
        for k, why in PENDING.items()
    ],
)
def test_pending_split(key: str) -> None:
    """Fails (xfail) while ``key`` is oversized; passes once it is split: then remove it from PENDING."""
    found = _scan_repo()
    assert key not in found, f"{key}: {found.get(key)} lines"


# -- the checker itself ---------------------------------------------------------------------------------------


def _module(lines: int, doc: str = "a module") -> str:
    return f'"""{doc}"""\n' + "x = 1\n" * (lines - 1)


def _function(lines: int, marker: str = "") -> str:
    body = "".join("    x = 1\n" for _ in range(lines - 2))
    return f"{marker}def f():\n    '''a function'''\n{body}"


def test_the_checker_counts_modules() -> None:
    assert oversized("m.py", _module(900)) == {}
    assert oversized("m.py", _module(901)) == {"m.py": 901}
    assert oversized("m.py", "# Generated by a tool: do not edit.\n" + _module(1000)) == {}
    assert oversized("m.py", _module(1000, "Parsing; holds hand-inlined hot loops.")) == {}
    assert oversized("kraftlake/raft/node.py", _module(1000)) == {"kraftlake/raft/node.py": 1000}


def test_the_checker_counts_functions() -> None:
    assert oversized("m.py", _function(120)) == {}
    assert oversized("m.py", _function(121)) == {"m.py::f": 121}
    assert oversized("m.py", _function(121, "# hand-inlined: the decoder's hot loop\n")) == {}
    marked_inside = _function(121).replace("'''a function'''", "'''A hand-inlined hot loop.'''")
    assert oversized("m.py", marked_inside) == {}
    nested = "class C:\n" + "".join("    " + line + "\n" for line in _function(130).splitlines())
    assert oversized("m.py", nested) == {"m.py::C.f": 130}


def test_the_benchmarks_are_aside(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "bench" / "big.py").write_text(_module(2000))
    (tmp_path / "pipelines" / "big.py").write_text(_module(2000))
    assert scan(tmp_path) == {"pipelines/big.py": 2000}


def main() -> int:
    found = scan()
    unlisted = {k: n for k, n in found.items() if k not in PENDING}
    listed = {k: n for k, n in found.items() if k in PENDING}
    done = sorted(k for k in PENDING if k not in found)
    print(f"oversized, not split yet (PENDING):\n{_describe(listed) or '  none'}")
    print(f"oversized and not listed (fails the test):\n{_describe(unlisted) or '  none'}")
    print("split since listed (remove from PENDING):\n" + ("\n".join(f"  {k}" for k in done) or "  none"))
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
