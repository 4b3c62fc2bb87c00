"""The installed package is how scripts and tests find the code: console scripts, ``python -m`` and
``python scripts/...`` all work from any folder, and nothing edits ``sys.path``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def declared_scripts() -> list[str]:
    """The names in pyproject.toml's ``[project.scripts]`` table (read as text: py3.10 has no tomllib)."""
    text = (ROOT / "pyproject.toml").read_text()
    table = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return sorted(m.group(1) for m in re.finditer(r"^([\w-]+)\s*=", table, re.M))


SCRIPTS = declared_scripts()


def test_no_sys_path_edits_in_the_package_scripts_or_tests() -> None:
    edit = re.compile(r"sys\.path\.(insert|append|extend)|sys\.path\s*=|sys\.path\s*\+=")
    offenders = [
        f"{p.relative_to(ROOT)}:{i}"
        for folder in ("omniagent", "envs", "scripts", "tests")
        for p in sorted((ROOT / folder).rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), start=1)
        if edit.search(line) and p.name != "test_packaging.py"
    ]
    assert offenders == []


def test_every_command_has_a_console_script() -> None:
    assert {"omniagent-run", "omniagent-report", "omniagent-eval", "omniagent-turn-scaling"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_console_scripts_are_installed_and_answer_help(name: str, tmp_path: Path) -> None:
    exe = shutil.which(name)
    assert exe, f"{name} is not installed: run `pip install -e .`"
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-1500:]
    assert "usage" in r.stdout.lower() or "== Config ==" in r.stdout or "Powered by Hydra" in r.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["scripts/eval.py", "--cfg", "job"],
        ["scripts/turn_scaling.py", "--cfg", "job"],
        ["scripts/compare_runs.py", "--help"],
        ["scripts/fidelity.py", "--help"],
        ["scripts/overlap_guard.py", "--help"],
        ["scripts/bench/turn_overhead.py", "--help"],
        ["-m", "omniagent.run", "--help"],
        ["-m", "omniagent.report", "--help"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_scripts_run_from_any_folder(command: list[str], tmp_path: Path) -> None:
    args = [str(ROOT / c) if c.startswith("scripts/") else c for c in command]
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-1500:]
    assert "policy" in r.stdout or "usage" in r.stdout.lower()


def test_the_eval_console_script_composes_the_same_config(tmp_path: Path) -> None:
    via_script = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval.py"), "--cfg", "job", "policy.name=random"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    via_console = subprocess.run(
        [shutil.which("omniagent-eval") or "omniagent-eval", "--cfg", "job", "policy.name=random"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert via_script.returncode == via_console.returncode == 0, via_console.stderr[-1500:]
    assert via_script.stdout == via_console.stdout and "name: random" in via_script.stdout
