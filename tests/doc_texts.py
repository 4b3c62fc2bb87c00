"""The user-facing text of the repository, for tests that check commands and lists written in it: README.md, every
page under docs/, each recipe's README, and (on request) the recipes' study scripts with their parameters filled in."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "recipes" / "tiny_agent" / "studies"  # the first recipe's; every recipe may have one


def study_dirs() -> list[Path]:
    """Every recipe's ``studies/`` folder (``recipes/<recipe>/studies``), in a stable order."""
    return sorted(p for p in (ROOT / "recipes").glob("*/studies") if p.is_dir())


def doc_files() -> list[Path]:
    """README.md, docs/**/*.md and recipes/**/README.md, in a stable order."""
    docs = sorted((ROOT / "docs").rglob("*.md"))
    recipes = sorted((ROOT / "recipes").rglob("README.md"))
    return [ROOT / "README.md", *docs, *recipes]


def study_scripts() -> list[Path]:
    """Every study script of every recipe (``recipes/<recipe>/studies/*.sh``)."""
    return sorted(p for d in study_dirs() for p in d.glob("*.sh"))


def expand_parameters(script: str) -> str:
    """``script`` with ``$NAME`` and ``${NAME}`` replaced by the values its top-level ``NAME=value`` lines assign."""
    values: dict[str, str] = {}
    for m in re.finditer(r"^([A-Z][A-Z0-9_]*)=(.*)$", script, flags=re.M):
        value = re.sub(r"\s+#.*$", "", m.group(2)).strip()
        if not value.startswith("("):  # bash arrays stay as written
            values[m.group(1)] = value.strip("\"'")
    for name, value in sorted(values.items(), key=lambda kv: -len(kv[0])):
        script = re.sub(r"\$\{" + name + r"\}|\$" + name + r"\b", lambda _m, v=value: v, script)
    return script


def doc_text(with_scripts: bool = False) -> str:
    """The concatenated text of :func:`doc_files` (and of the study scripts, parameters expanded)."""
    parts = [p.read_text(encoding="utf-8") for p in doc_files()]
    if with_scripts:
        parts += [expand_parameters(p.read_text(encoding="utf-8")) for p in study_scripts()]
    return "".join(part.rstrip("\n") + "\n\n" for part in parts)  # paragraphs never run across files
