"""``omniagent-demo``: a synthetic video, one question to the shipped tiny agent, a report to check it in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omniagent import demo

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_demo_asks_the_shipped_agent_and_writes_a_checkable_report(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "omniagent.demo", "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "right answer, from the generator: 26.0" in proc.stdout
    traj = json.loads((out / "trajectory.json").read_text())
    assert traj["stop_reason"] == "answered" and traj["ground_truth"] == 26.0
    assert isinstance(traj["answer"], float) and traj["reward"] is not None
    run = traj["meta"]["run"]
    assert run["model"] == "tiny" and run["policy"]["constrained"] is True
    assert run["limits"]["max_frames"] == demo.TINY_LIMITS.max_frames
    html = (out / "report.html").read_text()
    assert "A magenta circle is on screen at about 17 s" in html and "evidence in yellow" in html


def test_list_prints_every_question_and_a_bad_key_names_them(tmp_path, capsys) -> None:
    assert demo.main(["--out", str(tmp_path), "--list"]) == 0
    listed = capsys.readouterr().out
    assert "shape_width_size-01" in listed and "How many beeps" in listed and "options: " in listed
    assert demo.main(["--out", str(tmp_path), "--task", "no_such_task-00"]) == 2
    err = capsys.readouterr().err
    assert "matches no question" in err and "digit_mcq-00" in err


def test_the_question_reaches_the_cli_as_the_recipe_evaluates_it(tmp_path) -> None:
    tasks = demo.make_video(tmp_path, demo.DEFAULT_SEED)
    task = demo.pick_task(tasks, "digit_mcq-00")
    argv = demo.run_argv(task, tmp_path)
    assert argv[:2] == [task.media, task.question] and argv[argv.index("--answer") + 1] == task.answer
    assert argv[argv.index("--choices") + 1] == "|".join(task.choices)
    for flag in ("--constrained", "--model", "--max-frames", "--max-answer-chars", "--report"):
        assert flag in argv
    with pytest.raises(ValueError, match=r"matches \d+ questions"):
        demo.pick_task(tasks, "00")  # the end of every template's first id


def test_the_console_script_is_declared() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts["omniagent-demo"].partition(":")
    assert (module, func) == ("omniagent.demo", "main") and callable(getattr(demo, func))
