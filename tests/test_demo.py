"""``omniagent-demo``: a synthetic video, one question to the shipped tiny agent, a report to check it in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omniagent import demo, tiny_agent
from omniagent.tiny_agent import ASSET_DIR, MANIFEST, ShippedAgentError

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
    assert run["limits"]["max_frames"] == demo.tiny_limits().max_frames
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


def test_the_demo_runs_the_agent_under_its_manifests_limits(tmp_path: Path, monkeypatch) -> None:
    recorded = json.loads((ASSET_DIR / MANIFEST).read_text())["recipe_args"]
    limits = demo.tiny_limits()
    assert {k: getattr(limits, k) for k in demo.LIMIT_ARGS} == {k: recorded[k] for k in demo.LIMIT_ARGS}
    assert demo.tiny_max_new_tokens() == recorded["max_new_tokens"]
    # the manifest is the one source: another manifest's values reach the command line
    other = {**recorded, "max_frames": 3, "max_clip_s": 4.5, "max_audio_s": 7.0, "max_answer_chars": 9}
    (tmp_path / MANIFEST).write_text(json.dumps({"recipe_args": {**other, "max_new_tokens": 55}}))
    monkeypatch.setattr(tiny_agent, "ASSET_DIR", tmp_path)
    task = demo.pick_task(demo.make_video(tmp_path, demo.DEFAULT_SEED), demo.DEFAULT_TASK)
    argv = demo.run_argv(task, tmp_path)
    flags = {"--max-new-tokens": "55", "--max-frames": "3", "--max-clip-s": "4.5", "--max-audio-s": "7.0",
             "--max-answer-chars": "9"}  # fmt: skip
    assert {flag: argv[argv.index(flag) + 1] for flag in flags} == flags
    (tmp_path / MANIFEST).write_text(json.dumps({"recipe_args": {"max_frames": 3}}))
    with pytest.raises(ShippedAgentError, match="max_clip_s, max_audio_s, max_answer_chars"):
        demo.tiny_limits()


def test_the_console_script_is_declared() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = scripts["omniagent-demo"].partition(":")
    assert (module, func) == ("omniagent.demo", "main") and callable(getattr(demo, func))
