"""What ``heavy`` may mark: a test whose docstring says why, in a module that keeps at least one test in
``make test``, so that ``make test`` still runs every module's layer and fixtures and ``make test-slow`` runs the
rest."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _marks(node: ast.FunctionDef) -> set[str]:
    names = set()
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Attribute)
            and target.value.attr == "mark"
        ):
            names.add(target.attr)
    return names


def _tests(path: Path) -> dict[str, tuple[set[str], str | None]]:
    tree = ast.parse(path.read_text(), str(path))
    module_marks: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            module_marks |= {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute)}
    return {
        node.name: (_marks(node) | module_marks, ast.get_docstring(node))
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def test_a_heavy_test_says_why_and_its_module_keeps_a_test_in_make_test() -> None:
    heavy_modules = 0
    for path in sorted(TESTS.rglob("test_*.py")):
        tests = _tests(path)
        heavy = [name for name, (marks, _) in tests.items() if "heavy" in marks]
        if not heavy:
            continue
        heavy_modules += 1
        for name in heavy:
            assert tests[name][1], f"{path.name}::{name} is heavy and has no docstring saying why"
        kept = [name for name, (marks, _) in tests.items() if "heavy" not in marks]
        assert kept, f"{path.name}: every test is heavy, so make test would not run the module at all"
    assert heavy_modules > 0  # the marker is in use: make test-slow has scenarios to run
