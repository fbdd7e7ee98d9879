"""No import cycle between the modules of ``kraftlake/``, ``pipelines/``, ``udfs/``, ``jobs/``, ``bench/`` (issue
42's "done when": the import graph between modules shows no cycle).

The graph is read from the source with :mod:`ast`, nothing imported: an edge for every ``import`` and
``from ... import`` statement that names one of these modules, wherever it stands (at the top, inside a
function, under ``try``), since an import inside a function runs too, only later. Left out:

- imports under ``if TYPE_CHECKING:`` (they never run; only the type checker reads them);
- imports by :func:`importlib.import_module` (the CLI's commands, :mod:`kraftlake.history`'s lazy names):
  their names are computed when they run;
- the packages above a named module: ``import a.b.c`` runs ``a/b/__init__.py`` first, but counting that
  would put every submodule in a cycle with the ``__init__`` that re-exports it. An edge goes to the module
  named: ``from a.b import c`` to ``a.b.c`` when that is a module, else to ``a.b`` (its ``__init__``).

A strongly connected component of more than one module is a cycle; the test prints one path around each.
Run ``python tests/test_import_graph.py`` for the report alone (exit 1 when there is a cycle).
"""

from __future__ import annotations

import ast
import functools
import itertools
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("kraftlake", "pipelines", "udfs", "jobs", "bench")

Graph = dict[str, dict[str, int]]
"""module -> {module it imports: line of the first such import}."""

_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def find_modules(root: Path, trees: Sequence[str]) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, whether it is a package's ``__init__``), for every ``.py`` file under `trees`."""
    found = {}
    for tree in trees:
        for path in sorted((root / tree).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(nodes: Sequence[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    # Statements only, down through every block: an import is always a statement, and walking every expression
    # too (ast.walk) would add half the parse's time.
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        for name in _BODIES:
            if name == "body" and isinstance(node, ast.If) and _is_type_checking(node.test):
                continue  # the else branch, if any, runs
            yield from _imports(getattr(node, name, ()))


def import_graph(root: Path = ROOT, trees: Sequence[str] = TREES) -> Graph:
    """The import graph of the modules under `trees` (see the module's docstring for what is an edge)."""
    modules = find_modules(root, trees)

    def named(dotted: str) -> str | None:
        # the module itself, else the nearest package above it, else None (a module of another tree)
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph: Graph = {}
    for module, (path, is_package) in modules.items():
        edges: dict[str, int] = {}
        package = module if is_package else module.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_bytes(), str(path)).body):
            if isinstance(node, ast.Import):
                targets = [named(alias.name) for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else named(base)
                    for alias in node.names
                ]
            for target in targets:
                if target is not None and target != module:
                    edges.setdefault(target, node.lineno)
        graph[module] = edges
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def cycle_path(graph: Graph, component: Sequence[str]) -> list[str]:
    """One path around `component` from its first module back to it (breadth first, so a shortest one)."""
    inside = set(component)
    start = component[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w not in inside or w in came_from:
                    continue
                came_from[w] = v
                if w == start:
                    path = [start]
                    while path[-1] != start or len(path) == 1:
                        path.append(came_from[path[-1]])
                    return path[::-1]
                nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{component} is not strongly connected")


def report(graph: Graph, components: Sequence[Sequence[str]]) -> str:
    """Each cycle as a path of imports, each step with the line that makes it."""
    lines = []
    for component in components:
        path = cycle_path(graph, component)
        lines.append(f"cycle of {len(component)} modules: {', '.join(component)}")
        lines += [f"  {a} imports {b} (line {graph[a][b]})" for a, b in itertools.pairwise(path)]
    return "\n".join(lines)


@functools.cache
def _graph() -> Graph:
    return import_graph()


def test_no_module_imports_itself_through_others() -> None:
    graph = _graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + report(graph, found)


def test_the_graph_has_the_imports_inside_functions_and_not_those_for_type_checking(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg import b\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "pkg" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nimport pkg.a\nif TYPE_CHECKING:\n    from pkg.d import D\n"
    )
    (tmp_path / "pkg" / "d.py").write_text("try:\n    from .c import C\nexcept ImportError:\n    pass\n")
    graph = import_graph(tmp_path, ["pkg"])
    assert graph == {
        "pkg": {},
        "pkg.a": {"pkg.b": 1},
        "pkg.b": {"pkg.a": 2},
        "pkg.c": {"pkg.a": 2},
        "pkg.d": {"pkg.c": 2},
    }
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert "pkg.b imports pkg.a (line 2)" in report(graph, cycles(graph))


def test_the_real_graph_is_read() -> None:
    # a reader that found no imports would pass the test above vacuously
    graph = _graph()
    assert "kraftlake.logformat.batch_encoding" in graph["kraftlake.logformat.batch"]
    assert "udfs.records" in graph["pipelines.sql_route"]  # imported inside a method
    assert sum(map(len, graph.values())) > 1000


if __name__ == "__main__":
    graph = import_graph()
    found = cycles(graph)
    print(report(graph, found) if found else f"no cycle among {len(graph)} modules")
    sys.exit(1 if found else 0)
