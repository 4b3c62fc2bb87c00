"""The layout is the architecture: envs imports nothing of ours, omniagent imports envs but not rl, rl imports
envs and omniagent, and recipes sit on top: nothing below imports a recipe (nor scripts)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "envs": {"omniagent", "rl", "scripts", "recipes"},
    "omniagent": {"rl", "scripts", "recipes"},
    "rl": {"scripts", "recipes"},
    "scripts": {"recipes"},
}


def imported_top_levels(path: Path) -> set[str]:
    """Top-level package names a module imports anywhere (also inside functions)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_a_higher_layer(package: str) -> None:
    bad = {
        str(p.relative_to(ROOT)): sorted(imported_top_levels(p) & FORBIDDEN[package])
        for p in sorted((ROOT / package).rglob("*.py"))
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("import os\n\ndef f():\n    from rl.algo.taura import x\n    import omniagent.policy\n")
    assert imported_top_levels(mod) == {"os", "rl", "omniagent"}
