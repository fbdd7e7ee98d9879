"""The sim package's modules form no import cycle (type-only imports included), and its code reads no private
member of another object."""

from __future__ import annotations

import ast
from pathlib import Path

import kraftlake.sim

PACKAGE = Path(kraftlake.sim.__file__).parent
ROOT = PACKAGE.parent.parent


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _sim_imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kraftlake.sim"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("kraftlake.sim"))
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return [*stack[stack.index(n) :], n]
            if n not in state and (found := visit(n)) is not None:
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def test_no_import_cycle_in_sim() -> None:
    graph = {_module(p): _sim_imports(p) - {_module(p)} for p in PACKAGE.rglob("*.py")}
    # a package's __init__ importing its submodules is not a cycle of the code
    for name in graph:
        graph[name] = {n for n in graph[name] if not name.startswith(n + ".")}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_check_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_private_member_of_another_object_is_read() -> None:
    """``x._name`` only on ``self`` or ``cls`` (record classes' ``_api_key`` is their public class data, named
    as namedtuple names its own)."""
    files = [*PACKAGE.rglob("*.py"), ROOT / "kraftlake" / "commands" / "simulate.py"]
    reaches = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and node.attr != "_api_key"
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    assert reaches == []
