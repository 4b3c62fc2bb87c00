"""The model choices of ``python -m omniagent.run`` and of eval, with default flags: the shipped tiny agent
decodes under the turn schema unless told not to, and both families' tiny random models (by alias or by
folder) play well-formed episodes on CPU, from the command line and from ``scripts/eval.py``'s config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from testkit import assert_well_formed, compose_conf, small_synth_overrides

from envs.jsonl import read_jsonl
from envs.tasks import Task
from omniagent import run as cli
from omniagent.trajectory import Trajectory

pytestmark = pytest.mark.slow  # each test loads a model and plays whole episodes on a CPU
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omniagent.tiny_model import main

    out = tmp_path_factory.mktemp("qwen3-cli") / "tiny-qwen3-omni"
    assert main(["--family", "qwen3-omni", "--out", str(out)]) == 0
    return out


def test_the_shipped_agent_with_default_flags_gives_well_formed_turns_and_an_answer(
    tasks: list[Task], tmp_path: Path
) -> None:
    for task in [next(t for t in tasks if t.task_type == kind) for kind in ("mcq", "num")]:
        out = tmp_path / f"{task.task_type}.json"
        args = [task.media, task.question, "--task-type", task.task_type, "--model", "tiny", "--quiet",
                "--out", str(out)]  # fmt: skip
        if task.choices:
            args += ["--choices", "|".join(task.choices)]
        assert cli.main(args) == 0
        traj = Trajectory.load_json(out)
        assert traj.stop_reason == "answered" and traj.meta["run"]["policy"]["constrained"] == "auto"
        assert_well_formed(traj)


@pytest.mark.parametrize("model", ["tiny-random-qwen3-omni", "folder"])
def test_a_tiny_qwen3_omni_plays_a_constrained_episode(
    model: str, qwen3_dir: Path, video_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.json"
    name = str(qwen3_dir) if model == "folder" else model
    extra = ["-P", "max_text_chars=64"] if model == "folder" else []  # the alias has this default
    code = cli.main([str(video_path), "Which beep is higher?", "--choices", "first|second", "--model", name,
                     "--constrained", "--max-turns", "2", "--out", str(out), *extra])  # fmt: skip
    assert code == 0
    traj = Trajectory.load_json(out)
    assert traj.stop_reason == "answered" and traj.meta["run"]["policy"]["constrained"] is True
    assert_well_formed(traj)
    if model != "folder":
        assert "answers are noise" in capsys.readouterr().out


def test_no_constrained_opts_out_and_scripted_backends_ignore_it(video_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "free.json"
    base = [str(video_path), "Which beep is higher?", "--choices", "first|second", "--max-turns", "1"]
    assert (
        cli.main([*base, "--model", "tiny", "--no-constrained", "--max-new-tokens", "8", "--out", str(out)])
        == 0
    )
    assert Trajectory.load_json(out).meta["run"]["policy"]["constrained"] is False
    assert (
        cli.main([*base, "--backend", "uniform", "--no-constrained", "--out", str(tmp_path / "u.json")]) == 0
    )
    assert cli.main([*base, "--backend", "uniform", "--constrained", "--out", str(tmp_path / "c.json")]) == 3


def test_eval_runs_a_qwen3_omni_folder(
    tasks: list[Task], synth_dir: Path, qwen3_dir: Path, tmp_path: Path
) -> None:
    from omniagent.eval.pipeline import run_from_config

    out = tmp_path / "eval"
    overrides = [
        *small_synth_overrides(synth_dir, out), "limit=2", "workers=1", "summary.n_boot=10", "benchmark.task_types=[mcq]",
        "benchmark.max_turns=2", "policy.name=transformers", f"+policy.kwargs.model={qwen3_dir}",
        "+policy.kwargs.max_text_chars=64", "+policy.kwargs.device=cpu",
    ]  # fmt: skip
    cfg = compose_conf("eval", overrides)
    summary: dict[str, Any] = run_from_config(cfg, overrides=overrides)
    assert summary["run"]["ran"] == 2
    trajs = [Trajectory.model_validate(t) for t in read_jsonl(out / "trajectories.jsonl")]
    assert len(trajs) == 2
    for traj in trajs:
        assert traj.stop_reason == "answered"
        assert_well_formed(traj)
