"""The offline rule-based auditor: teacher trajectories pass; doctored ones (an invented event, a wrong
colour, a fact from a time never requested, an unobserved fact in a thought) fail with a reason; and
``python rl/synthesize.py`` runs fully offline on the synthetic benchmark with teacher + auditor."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from envs.env import OmniVideoEnv
from envs.synth import generate_benchmark
from envs.tasks import Task
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from omniagent.trajectory import Trajectory
from rl.synthesis.audit_judge import AuditJudgeError, build_judge
from rl.synthesis.audit_rules import RulesAuditor, judge_kind
from rl.synthesis.synthesize import run_synthesis

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Task]]:
    out = tmp_path_factory.mktemp("synth")
    tasks = generate_benchmark(
        out, seed=2, n_videos=2, durations=[40, 60], config={"max_tasks_per_template": 1}
    )
    return out, tasks


@pytest.fixture(scope="module")
def trajs(bench: tuple[Path, list[Task]]) -> list[Trajectory]:
    env = OmniVideoEnv()
    return [
        run_episode(env, make_policy("synth_teacher", seed=seed), task.env_options(budget))
        for task in bench[1]
        for seed, budget in ((0, 6), (1, 16))
    ]


def doctored(traj: Trajectory, turn: int, field: str, text: str) -> Trajectory:
    out = traj.model_copy(deep=True)
    setattr(out.turns[turn], field, text)
    return out


def failing_reasons(traj: Trajectory) -> str:
    result = RulesAuditor().audit(traj)
    return " | ".join(s.reason for s in result.scores if s.score < 5)


def find_turn(trajs: list[Trajectory], pattern: str) -> tuple[Trajectory, int, re.Match[str]]:
    for traj in trajs:
        for i, turn in enumerate(traj.turns):
            m = re.search(pattern, turn.observation or "")
            if m:
                return traj, i, m
    raise AssertionError(f"no observation matches {pattern!r}")


def test_teacher_trajectories_pass(trajs: list[Trajectory]) -> None:
    auditor = RulesAuditor()
    for traj in trajs:
        result = auditor.audit(traj)
        assert [s.turn for s in result.scores] == [t.turn for t in traj.turns]
        assert result.passed(5), (traj.id, [s.reason for s in result.scores if s.score < 5])


def test_invented_event_fails(trajs: list[Trajectory]) -> None:
    traj, i, m = find_turn(trajs, r"Frames? [\d.]+s(?:-[\d.]+s \(\d+\))?: (\w+) background\.")
    obs = traj.turns[i].observation.replace(m.group(0), m.group(0)[:-1] + ", the digit 7.", 1)
    assert "does not show the digit 7" in failing_reasons(doctored(traj, i, "observation", obs))


def test_wrong_colour_fails(trajs: list[Trajectory]) -> None:
    traj, i, m = find_turn(trajs, r"an? (red|green|blue|yellow|cyan) (square|circle|triangle)")
    other = "magenta" if m.group(1) != "magenta" else "red"
    obs = traj.turns[i].observation.replace(m.group(0), f"a {other} {m.group(2)}", 1)
    reasons = failing_reasons(doctored(traj, i, "observation", obs))
    assert f"does not show a {other} {m.group(2)}" in reasons


def test_fact_from_a_time_not_requested_fails(trajs: list[Trajectory]) -> None:
    traj, i, _ = find_turn(trajs, r"^Frame")
    served = {round(t, 2) for t in traj.turns[i - 1].timestamps}
    t = next(x / 10 for x in range(1, 400) if round(x / 10, 2) not in served)
    obs = traj.turns[i].observation + f" Frame {t:.2f}s: red background."
    assert f"claims a frame at {t:.2f}s, a time that was not served" in failing_reasons(
        doctored(traj, i, "observation", obs)
    )


def test_wrong_sound_fails(trajs: list[Trajectory]) -> None:
    traj, i, m = find_turn(trajs, r"a (\d+) Hz beep at")
    freq = "500" if m.group(1) != "500" else "700"
    obs = traj.turns[i].observation.replace(m.group(0), f"a {freq} Hz beep at", 1)
    assert f"a {freq} Hz beep" in failing_reasons(doctored(traj, i, "observation", obs))
    silent = re.sub(r"(Audio [\d.]+s-[\d.]+s): [^.]*(\.\d+s[^.]*)*\.", r"\1: only the background hum.", obs)
    assert "says only the hum is audible" in failing_reasons(doctored(traj, i, "observation", silent))


def test_thought_must_follow_from_memory(trajs: list[Trajectory]) -> None:
    traj = next(t for t in trajs if len(t.turns) >= 3)
    fake = "I saw the orange triangle at 12.30s and the word ZOO. Next: look again."
    reasons = failing_reasons(doctored(traj, 1, "thought", fake))
    assert "the thought states shape orange triangle at 12.30s" in reasons
    assert "word ZOO, which was never observed" in reasons
    count = failing_reasons(doctored(traj, 1, "thought", "I heard 9 beeps so far. Next: listen."))
    assert "counts 9 beeps" in count
    # the plan and the answer are not claims; naming what the question asks about is not one either
    plan = doctored(traj, 1, "thought", "Next: look for the magenta circle at 3.00s. Answer later.")
    assert RulesAuditor().audit(plan).scores[1].score == 5


def test_first_observation_and_free_text_fail(trajs: list[Trajectory]) -> None:
    traj = trajs[0]
    assert "nothing was served" in failing_reasons(
        doctored(traj, 0, "observation", "Frame 1.00s: red background.")
    )
    assert "not a percept sentence" in failing_reasons(doctored(traj, 1, "observation", "I see a red car."))


def test_non_synthetic_media_is_refused(trajs: list[Trajectory], video_path: Path) -> None:
    other = trajs[0].model_copy(update={"media": str(video_path)})
    with pytest.raises(AuditJudgeError, match="synthetic-benchmark media only"):
        RulesAuditor().audit(other)


def test_judge_choice(bench: tuple[Path, list[Task]], video_path: Path) -> None:
    tasks = bench[1]
    real = tasks[0].model_copy(update={"media": str(video_path)})
    assert judge_kind({"kind": "auto", "model": None}, tasks) == "rules"
    assert judge_kind({"kind": "rules"}, [real]) == "rules"
    assert judge_kind({"kind": "auto", "model": "judge-7b"}, tasks) == "openai"  # a named model is used
    for cfg, some in (({"kind": "auto", "model": None}, [real]), ({"kind": "openai", "model": "???"}, tasks)):
        with pytest.raises(AuditJudgeError, match=r"judge\.kind=rules"):
            judge_kind(cfg, some)
    cfg = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "synthesize.yaml"))
    assert isinstance(build_judge(cfg, tasks), RulesAuditor)  # the shipped default, offline
    assert (
        RulesAuditor.ff_judge("q", "GOLD", "gold.") == 1.0
        and RulesAuditor.ff_judge("q", "GOLD", "SUN") == 0.0
    )


@pytest.mark.slow
def test_synthesis_offline_in_process(bench: tuple[Path, list[Task]], tmp_path: Path) -> None:
    cfg = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "synthesize.yaml"))
    cfg.update(out_dir=str(tmp_path / "out"), n_samples=2)
    cfg["data"].update(tasks=str(bench[0] / "tasks.jsonl"))
    cfg["teacher"]["backend"] = "synth_teacher"
    summary = run_synthesis(cfg, progress=False)
    assert summary["tasks"] == len(bench[1]) and summary["samples"] == 2 * len(bench[1])
    assert summary["kept"] > 0 and "audit_low" not in summary["rejections"]
    assert "unverifiable" not in summary["rejections"]  # ff answers scored by exact match offline
    kept = [json.loads(line) for line in (tmp_path / "out" / "kept.jsonl").read_text().splitlines()]
    assert {k["task_type"] for k in kept} >= {"mcq", "tr", "num", "size", "ff"}
    assert all(k["meta"]["qc"]["audit"]["aggregate"] == 5 for k in kept)
    assert all(any(t["action_type"] != "answer" for t in k["turns"]) for k in kept)  # they looked


@pytest.mark.slow
def test_synthesize_command_runs_offline(bench: tuple[Path, list[Task]], tmp_path: Path) -> None:
    out = tmp_path / "cli"
    cmd = [sys.executable, "rl/synthesize.py", f"data.tasks={bench[0] / 'tasks.jsonl'}", f"out_dir={out}"]
    cmd += ["teacher.backend=synth_teacher", "n_samples=2", "data.limit=4"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == 4 and summary["kept"] >= 1
    bad = subprocess.run(
        [*cmd[:4], "teacher.backend=synth_teacher", "data.limit=1", "judge.kind=openai"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "judge.kind=rules" in bad.stderr
