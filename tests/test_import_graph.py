"""The import graph of ``opgate``'s modules has no circle.

The graph is read from the source with ``ast`` (nothing is imported): an edge
``a -> b`` for each ``import`` or ``from … import`` in module ``a`` that names
module ``b`` of the package. Three kinds of import are told apart:

- *runtime*: executed when the module is imported (at module level, also inside a
  module-level ``if``/``try``/``with`` or a class body);
- *type-checking*: inside ``if TYPE_CHECKING:``; never executed;
- *deferred*: inside a function, executed on the first call.

A circle of runtime imports makes the import order matter (a module sees its peer
half-initialised), so the runtime graph must have none. A deferred import that only
dodges such a circle is a circle too, so the runtime and deferred graphs together
must have none either. A type-checking circle breaks nothing at run time, but it
still says two modules each need the other: none either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path

import pytest

_SOURCE = Path(__file__).resolve().parent.parent / "src"
_PACKAGE = "opgate"

Graph = Mapping[str, Set[str]]


@dataclass
class ImportGraph:
    """The three import graphs of a package's modules (module name to imported names)."""

    runtime: dict[str, set[str]] = field(default_factory=dict)
    type_checking: dict[str, set[str]] = field(default_factory=dict)
    deferred: dict[str, set[str]] = field(default_factory=dict)


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``, by dotted name (a package by its own)."""
    names: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(
    body: list[ast.stmt], kind: str, in_function: bool
) -> Iterator[tuple[str, ast.Import | ast.ImportFrom]]:
    """Each import statement under ``body`` with its kind (runtime, type_checking, deferred)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield ("deferred" if in_function and kind == "runtime" else kind), node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _imports(node.body, kind, True)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports(node.body, "type_checking", in_function)
            yield from _imports(node.orelse, kind, in_function)
        else:  # a module-level if, try, with, for or a class body: executed on import
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from _imports([child], kind, in_function)
                elif isinstance(child, ast.ExceptHandler):
                    yield from _imports(child.body, kind, in_function)


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: Set[str]
) -> set[str]:
    """The package's modules that one import statement in ``module`` runs.

    ``from p import m`` names module ``p.m`` if there is one, else the name ``m`` of
    ``p`` (an edge to ``p``). Importing ``p.q.m`` also runs ``p.q`` and ``p`` unless
    ``module`` is inside them (then they are already being imported).
    """
    if isinstance(node, ast.Import):
        named = {alias.name for alias in node.names}
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            origin = ".".join([*base, node.module] if node.module else base)
        else:
            origin = node.module or ""
        named = {
            f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
            for alias in node.names
        }
    found: set[str] = set()
    for name in named & known:
        found.add(name)
        parts = name.split(".")
        for end in range(1, len(parts)):
            parent = ".".join(parts[:end])
            if parent in known and not (module == parent or module.startswith(parent + ".")):
                found.add(parent)
    return found


def build_graph(root: Path = _SOURCE, package: str = _PACKAGE) -> ImportGraph:
    """The import graphs of ``package`` as its source under ``root`` writes them."""
    names = module_names(root, package)
    graph = ImportGraph()
    for module, path in names.items():
        for edges in (graph.runtime, graph.type_checking, graph.deferred):
            edges[module] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for kind, node in _imports(tree.body, "runtime", False):
            targets = _targets(node, module, is_package, names.keys()) - {module}
            getattr(graph, kind)[module] |= targets
    return graph


def find_circles(graph: Graph) -> list[list[str]]:
    """One circle (``[a, b, …, a]``) through each strongly connected group of ``graph``.

    A shortest path back to the group's first module names the circle. Sorted, so
    the report is stable.
    """
    return sorted(_circle(graph, group) for group in tangles(graph))


def tangles(graph: Graph) -> list[set[str]]:
    """The strongly connected groups of ``graph`` that hold a circle (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for peer in sorted(graph.get(node, ())):
            if peer not in index:
                connect(peer)
                low[node] = min(low[node], low[peer])
            elif peer in on_stack:
                low[node] = min(low[node], index[peer])
        if low[node] == index[node]:
            group: set[str] = set()
            while True:
                peer = stack.pop()
                on_stack.discard(peer)
                group.add(peer)
                if peer == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return groups


def _circle(graph: Graph, group: set[str]) -> list[str]:
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for peer in sorted(graph.get(node, ())):
                if peer == start:
                    return [*paths[node], start]
                if peer in group and peer not in paths:
                    paths[peer] = [*paths[node], peer]
                    following.append(peer)
        frontier = following
    raise AssertionError("a strongly connected group always has a circle")  # pragma: no cover


def _merged(*graphs: Graph) -> dict[str, set[str]]:
    merged: dict[str, set[str]] = {}
    for graph in graphs:
        for module, targets in graph.items():
            merged.setdefault(module, set()).update(targets)
    return merged


def _report(graph: Graph) -> str:
    lines = ["import circles (one per tangle of modules that import each other):"]
    for group in tangles(graph):
        lines.append("  " + " -> ".join(_circle(graph, group)))
        lines.append(f"    in the tangle of {len(group)}: {', '.join(sorted(group))}")
    return "\n".join(lines)


# --- the checker -------------------------------------------------------------------------


def test_the_checker_finds_a_planted_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert find_circles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert find_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_checker_reports_the_shortest_circle_of_a_group() -> None:
    graph = {"a": {"b", "x"}, "b": {"c"}, "c": {"d"}, "d": {"a"}, "x": {"a"}}
    assert find_circles(graph) == [["a", "x", "a"]]
    assert tangles(graph) == [{"a", "b", "c", "d", "x"}]
    assert "in the tangle of 5: a, b, c, d, x" in _report(graph)


def test_the_checker_reads_each_kind_of_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import A\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "import pkg.sub.c\n"
        "if TYPE_CHECKING:\n"
        "    from .sub import d\n"
        "try:\n"
        "    from .sub.c import C\n"
        "except ImportError:\n"
        "    pass\n"
        "def f():\n"
        "    from .sub import e\n"
        "class K:\n"
        "    from .b import B\n"
    )
    (package / "b.py").write_text("from .a import A\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from .. import A, a\nfrom ..b import B\n")
    (package / "sub" / "d.py").write_text("")
    (package / "sub" / "e.py").write_text("from pkg import sub\n")
    graph = build_graph(tmp_path, "pkg")
    assert graph.runtime == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b", "pkg.sub", "pkg.sub.c"},
        "pkg.b": {"pkg.a"},
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg", "pkg.a", "pkg.b"},
        "pkg.sub.d": set(),
        "pkg.sub.e": {"pkg.sub"},
    }
    assert graph.type_checking["pkg.a"] == {"pkg.sub", "pkg.sub.d"}
    assert graph.deferred["pkg.a"] == {"pkg.sub", "pkg.sub.e"}
    assert find_circles(graph.runtime) == [["pkg", "pkg.a", "pkg.sub.c", "pkg"]]


# --- opgate ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return build_graph()


def test_the_graph_covers_the_package(graph: ImportGraph) -> None:
    assert {"opgate", "opgate._invoke", "opgate.mcp", "opgate.openapi"} <= graph.runtime.keys()
    assert "opgate._failures" in graph.runtime["opgate._invoke"]


def test_no_circle_of_runtime_imports(graph: ImportGraph) -> None:
    if find_circles(graph.runtime):
        pytest.fail(_report(graph.runtime))


def test_no_deferred_import_closes_a_circle(graph: ImportGraph) -> None:
    merged = _merged(graph.runtime, graph.deferred)
    if find_circles(merged):
        pytest.fail(_report(merged))


def test_no_circle_through_type_checking_imports(graph: ImportGraph) -> None:
    merged = _merged(graph.runtime, graph.deferred, graph.type_checking)
    if find_circles(merged):
        pytest.fail(_report(merged))
