"""No import circles among our modules, counting imports inside functions too (a function-level import only
hides a circle until the function runs). A package ``__init__`` may import its own submodules (its plugins).

The graph is built from the source with ``ast``: ``import a.b`` and ``from a.b import c`` add an edge to ``a.b.c``
when that is one of our modules, else to ``a.b``; imports under ``if TYPE_CHECKING:`` are left out (never run).

No module takes an underscore-prefixed (private) name from another of our modules either: what one module needs from
another is that module's public, documented API. A package ``__init__`` may re-export its submodules' names.
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


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _import_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` reads from, a relative one resolved against ``package``."""
    if not node.level:
        return node.module or ""
    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Our modules that module ``name`` (file ``path``) imports anywhere, function bodies included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_checking_nodes(tree)
    package = _package_of(name, path)
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
            base = _import_base(node, package)
            for alias in node.names:
                resolve(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    if path.name == "__init__.py":  # a package may import its own submodules (registering its plugins)
        found = {m for m in found if not m.startswith(name + ".")}
    return found


def import_graph(packages: Iterable[str], root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(packages, root)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(name: str, path: Path, known: dict[str, Path]) -> list[str]:
    """``"module: source._name"`` for each underscore-prefixed name module ``name`` (file ``path``) takes from
    another of our modules: ``from m import _x`` (relative forms and ``TYPE_CHECKING`` imports included) and
    ``m._x`` where ``m`` was bound by ``import m`` or ``from p import m``. Dunder names (``__version__``) are
    public; a package ``__init__`` may import its own submodules' private names (re-exports)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _package_of(name, path)
    bound: dict[str, str] = {}  # a local (dotted) name -> the module of ours it stands for
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                dotted = [".".join(parts[: i + 1]) for i in range(len(parts))]
                for target in [alias.name] if alias.asname else dotted:
                    if target in known:
                        bound[alias.asname or target] = target
        elif isinstance(node, ast.ImportFrom):
            base = _import_base(node, package)
            if base not in known or base == name:
                continue
            reexport = path.name == "__init__.py" and base.startswith(name + ".")
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif _is_private(alias.name) and not reexport:
                    found.append(f"{name}: {base}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            target = bound.get(ast.unparse(node.value))
            if target is not None and target != name:
                found.append(f"{name}: {target}.{node.attr}")
    return sorted(set(found))


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


def test_no_module_takes_a_private_name_from_another() -> None:
    known = modules(PACKAGES)
    assert [hit for name, path in known.items() for hit in private_imports(name, path, known)] == []


def test_the_check_finds_private_names_in_every_import_form(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import _x\n__version__ = '1'\n")  # a re-export: allowed
    (pkg / "a.py").write_text("import os\n_x = 1\n_y = os._exit\n")  # its own and a foreign module's: allowed
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from ..a import _y\nfrom pkg import __version__\n")
    (pkg / "sub" / "c.py").write_text("import pkg.a\nfrom pkg import a as alias\nv = pkg.a._x + alias._y\n")
    (pkg / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.b import _z\ndef f():\n"
        "    from pkg.a import _x, public\n"
    )
    known = modules(["pkg"], tmp_path)
    hits = [hit for name, path in known.items() for hit in private_imports(name, path, known)]
    assert hits == [
        "pkg.d: pkg.a._x",
        "pkg.d: pkg.sub.b._z",
        "pkg.sub.b: pkg.a._y",
        "pkg.sub.c: pkg.a._x",
        "pkg.sub.c: pkg.a._y",
    ]
