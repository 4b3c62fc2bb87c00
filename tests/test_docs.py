"""The docs hold together: every relative link in the README, docs/ and the recipes' READMEs resolves (files and
#anchors), each study page links a study script that exists and is indexed, every study script parses as bash and
calls only modules and files that exist, and the README stays a user guide."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from doc_texts import ROOT, STUDIES, doc_files, study_dirs, study_scripts

EXPERIMENTS = ROOT / "docs" / "experiments"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", prose(page.read_text(encoding="utf-8")), flags=re.M):
        base, n = slug(heading), 0
        while (name := base if n == 0 else f"{base}-{n}") in found:
            n += 1
        found.add(name)
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no such heading)")
    return broken


def test_slugs_follow_github() -> None:
    assert slug("4. TAURA on one machine") == "4-taura-on-one-machine"
    assert slug("Why a read stage that keeps only the encoder, and a vision-only read after SFT") == (
        "why-a-read-stage-that-keeps-only-the-encoder-and-a-vision-only-read-after-sft"
    )
    assert slug("Media access (`python scripts/bench/media.py`)") == "media-access-python-scriptsbenchmediapy"


def test_every_relative_link_resolves(tmp_path: Path) -> None:
    pages = doc_files()
    assert len(pages) > 30 and all(p.exists() for p in pages)
    broken = {str(p.relative_to(ROOT)): b for p in pages if (b := broken_links(p))}
    assert broken == {}
    bad = tmp_path / "bad.md"  # the check itself finds a missing file and a missing heading
    bad.write_text("# Title\n\n[a](missing.md) [b](#title) [c](#no-such) `[d](in-code.md)`\n")
    assert broken_links(bad) == ["missing.md (no such file)", "#no-such (no such heading)"]


def test_each_study_page_links_its_script_and_the_index_lists_every_page() -> None:
    index = (EXPERIMENTS / "README.md").read_text(encoding="utf-8")
    pages = sorted(p for p in EXPERIMENTS.glob("*.md") if p.name != "README.md")
    scripts = {str(p.relative_to(ROOT)) for p in study_scripts() if p.name != "common.sh"}
    linked = set()
    for page in pages:
        assert f"]({page.name})" in index, f"{page.name} is not in docs/experiments/README.md"
        named = re.findall(r"(recipes/[\w-]+/studies/([\w-]+\.sh))\)", page.read_text(encoding="utf-8"))
        assert [name for _, name in named] == [page.stem + ".sh"], page.name  # one script, named as the page
        assert f"](../../{named[0][0]})" in index, f"the index row of {page.name} links its script"
        linked.update(path for path, _ in named)
    assert linked == scripts, "every study script belongs to a page"
    assert {p.parent.parent.name for p in study_scripts()} >= {"tiny_agent"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_study_scripts_parse_as_bash() -> None:
    scripts = study_scripts()
    assert len(scripts) >= 20
    for script in scripts:
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, (script.name, proc.stderr)
        text = script.read_text(encoding="utf-8")
        if script.name != "common.sh":
            assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text, script.name


def called_code(script: str) -> tuple[set[str], set[str]]:
    """The modules (``python -m X``) and files (``python X.py``, ``source X``) a script calls."""
    joined = script.replace("\\\n", " ")
    modules = set(re.findall(r"\bpython -m ([\w.]+)", joined))
    files = set(re.findall(r"\bpython ([\w./-]+\.py)\b", joined))
    files |= set(re.findall(r"^\s*source ([\w./-]+)", joined, flags=re.M))
    return modules, files


def module_exists(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def test_study_scripts_call_code_that_exists() -> None:
    modules: set[str] = set()
    files: set[str] = set()
    for script in study_scripts():
        m, f = called_code(script.read_text(encoding="utf-8"))
        modules |= m
        files |= f
    assert {"recipes.tiny_agent", "recipes.tiny_agent.probes.turn_labels", "envs.synth"} <= modules
    assert {"rl/train_local.py", "scripts/eval.py", "recipes/tiny_agent/studies/common.sh"} <= files
    assert not [m for m in sorted(modules) if not module_exists(m)], (
        "python -m of a module that does not exist"
    )
    assert not [f for f in sorted(files) if not (ROOT / f).is_file()], "a script or file that does not exist"


def test_called_code_reads_continued_lines() -> None:
    script = "source recipes/x.sh\npython -m a.b --flag \\\n    1\nOMP_NUM_THREADS=1 python rl/t.py x=1\npython - <<'PY'\n"
    assert called_code(script) == ({"a.b"}, {"rl/t.py", "recipes/x.sh"})
    assert module_exists("envs.synth") and module_exists("omniagent.demo") and not module_exists("envs.nope")


def test_the_readme_is_a_user_guide() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 400
    assert "python -m pytest" in readme and "bash scripts/setup.sh" in readme  # what CI runs
    assert "omniagent-demo" in readme and "docs/experiments/README.md" in readme
    assert STUDIES.is_dir() and STUDIES in study_dirs()
