"""No import circles among our modules, counting imports inside functions too (a function-level import only
hides a circle until the function runs). A package ``__init__`` may import its own submodules (its plugins).

The graph is built from the source with ``ast``: ``import a.b`` and ``from a.b import c`` add an edge to ``a.b.c``
when that is one of our modules, else to ``a.b``; imports under ``if TYPE_CHECKING:`` are left out (never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "omniagent", "rl", "recipes", "scripts")  # every package of ours


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(packages: Iterable[str], root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``packages`` by dotted name (a package by its ``__init__``)."""
    return {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    return skip


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Our modules that module ``name`` (file ``path``) imports anywhere, function bodies included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def resolve(target: str) -> None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                resolve(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                resolve(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    if path.name == "__init__.py":  # a package may import its own submodules (registering its plugins)
        found = {m for m in found if not m.startswith(name + ".")}
    return found


def import_graph(packages: Iterable[str], root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(packages, root)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
    return found


def test_our_packages_have_no_import_circles() -> None:
    assert cycles(import_graph(PACKAGES)) == []


def test_the_check_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg import a\n")  # a package importing its own module: allowed
    (pkg / "a.py").write_text("from pkg.sub.b import g\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def g():\n    from ..a import x\n    return x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n")
    (pkg / "d.py").write_text("import pkg.c\n")
    graph = import_graph(["pkg"], tmp_path)
    assert graph["pkg"] == set() and graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.c"] == set()
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]
