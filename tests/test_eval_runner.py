"""The evaluation runner (omniagent/eval/: runner, results, summary, passive) on a small synthetic benchmark with
scripted policies: rows, trajectories and summary, resume, failures (the hydra entry point: test_eval_from_config.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from testkit import ROOT, free_port, rows_of

from envs.jsonl import read_jsonl
from envs.messages import Message
from envs.tasks import Task
from omniagent.eval.config import EvalConfig
from omniagent.eval.judges import JudgeError, OpenAIJudge, make_judge
from omniagent.eval.passive import PassiveConfig, matched_frame_budget
from omniagent.eval.results import ConfigMismatchError
from omniagent.eval.runner import PolicyStreakError, run_eval
from omniagent.eval.summary import summarize, write_summary
from omniagent.policy import Policy, PolicyError, TurnOutput, make_policy

SLOW_EVAL = ROOT / "tests" / "slow_eval.py"  # an eval run with a slowed-down oracle, in its own process
# synth_dir and tasks (one small synthetic video and its tasks) are fixtures of conftest.py


def cfg_for(out: Path, **kw: Any) -> EvalConfig:
    base = {
        "out_dir": str(out),
        "policy": "oracle",
        "workers": 2,
        "progress": False,
        "limits": {"max_turns": 8},
    }
    return EvalConfig(**{**base, **kw})


def ids_of(path: Path) -> list[str]:
    return [r["id"] for r in read_jsonl(path)]


# ------------------------------------------------------------------------------------ test policies
class InterruptingOracle(Policy):
    """The oracle, but the (k+1)-th episode started across all instances raises KeyboardInterrupt."""

    name = "oracle"
    started = 0
    lock = threading.Lock()

    def __init__(self, k: int) -> None:
        self.inner = make_policy("oracle")
        self.k = k

    def reset(self, info: dict[str, Any]) -> None:
        with InterruptingOracle.lock:
            InterruptingOracle.started += 1
            self.boom = InterruptingOracle.started > self.k
        self.inner.reset(info)

    def act(self, messages: list[Message]) -> TurnOutput:
        if self.boom:
            raise KeyboardInterrupt
        return self.inner.act(messages)


class FailingPolicy(Policy):
    name = "failing"

    def __init__(self, exc: type[Exception] = PolicyError) -> None:
        self.exc = exc

    def act(self, messages: list[Message]) -> TurnOutput:
        raise self.exc("the server is down")


# ------------------------------------------------------------------------------------------- tests
def test_results_rows_trajectories_and_summary(tasks: list[Task], tmp_path: Path) -> None:
    out = tmp_path / "run"
    report = run_eval(tasks, cfg_for(out), judge=make_judge({"kind": "exact"}))
    assert (report.total, report.ran, report.skipped, report.failed, report.errors) == (
        len(tasks),
        len(tasks),
        0,
        0,
        0,
    )
    rows = rows_of(out)
    assert sorted(r["id"] for r in rows) == sorted(t.id for t in tasks)
    assert sorted(ids_of(out / "trajectories.jsonl")) == sorted(t.id for t in tasks)
    by_id = {r["id"]: r for r in rows}
    for t in tasks:
        r = by_id[t.id]
        assert r["status"] == "ok" and r["answered"] and r["stop_reason"] == "answered"
        assert r["task_type"] == t.task_type and r["ground_truth"] == t.answer and r["question"] == t.question
        assert r["reward"] == pytest.approx(1.0), r  # the oracle answers the truth; ff judged exactly
        assert r["turns"] >= 1 and r["action_counts"]["answer"] == 1
        assert r["wall_seconds"] >= r["env_seconds"] >= 0 and r["duration"] == 20.0
        looks = len(t.answer) if t.task_type == "tr" else 0  # the oracle looks at a tr answer's spans
        assert r["frames_used"] == 4 * looks and r["turns"] == looks + 1
    s = summarize(rows, n_boot=200)
    assert s["n"] == len(tasks) and s["score"]["mean"] == pytest.approx(1.0)
    assert s["score"]["lo"] == pytest.approx(1.0) and s["answer_rate"]["mean"] == 1.0
    assert set(s["by_task_type"]) == {t.task_type for t in tasks}
    assert s["actions"]["answer"] == len(tasks) and s["unscored"] == 0
    js, cs = write_summary(s, out)
    assert json.loads(js.read_text())["n"] == len(tasks)
    assert cs.read_text().splitlines()[0].startswith("group,key,n,score,ci_lo,ci_hi")


def test_ff_without_judge_is_unscored_not_zero(tasks: list[Task], tmp_path: Path) -> None:
    ff = [t for t in tasks if t.task_type == "ff"] + [t for t in tasks if t.task_type == "mcq"][:1]
    assert any(t.task_type == "ff" for t in ff)
    run_eval(ff, cfg_for(tmp_path / "r"))
    rows = rows_of(tmp_path / "r")
    s = summarize(rows, n_boot=100)
    n_ff = sum(t.task_type == "ff" for t in ff)
    assert s["unscored"] == n_ff
    assert s["score"]["n"] == len(ff) - n_ff and s["score"]["mean"] == 1.0  # the mcq, not a silent 0


def test_resume_after_keyboard_interrupt(tasks: list[Task], tmp_path: Path) -> None:
    out = tmp_path / "run"
    InterruptingOracle.started = 0
    with pytest.raises(KeyboardInterrupt):
        run_eval(tasks, cfg_for(out), policy_factory=lambda: InterruptingOracle(k=4))
    first = rows_of(out)
    assert 1 <= len(first) < len(tasks)
    assert len(ids_of(out / "trajectories.jsonl")) == len(first)
    report = run_eval(tasks, cfg_for(out), judge=make_judge({"kind": "exact"}))
    assert report.skipped == len(first) and report.ran == len(tasks) - len(first)
    rows = rows_of(out)
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == len(tasks)  # no duplicates, no loss
    assert rows[: len(first)] == first  # earlier rows untouched
    assert sorted(ids_of(out / "trajectories.jsonl")) == sorted(ids)
    again = run_eval(tasks, cfg_for(out))
    assert again.ran == 0 and len(rows_of(out)) == len(tasks)


def test_torn_last_line_and_orphan_trajectory_are_repaired(tasks: list[Task], tmp_path: Path) -> None:
    out = tmp_path / "run"
    subset = tasks[:5]
    run_eval(subset, cfg_for(out))
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    lost = json.loads(lines[-1])["id"]
    # a kill between the trajectory write and the row write, then one mid-write of the next row
    results.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    report = run_eval(subset, cfg_for(out))
    assert report.ran == 1
    ids = ids_of(results)
    assert sorted(ids) == sorted(t.id for t in subset) and ids[-1] == lost
    traj_ids = ids_of(out / "trajectories.jsonl")
    assert sorted(traj_ids) == sorted(ids)  # the orphan trajectory was dropped, not duplicated
    for line in results.read_text().splitlines():
        json.loads(line)  # every line whole


def test_resume_after_a_killed_process(tasks: list[Task], synth_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(SLOW_EVAL), str(synth_dir / "tasks.jsonl"), str(out)])
    deadline = time.time() + 90
    try:
        while time.time() < deadline and proc.poll() is None:
            if (out / "results.jsonl").exists() and len(
                (out / "results.jsonl").read_text().splitlines()
            ) >= 3:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    done = rows_of(out)
    assert 3 <= len(done) < len(tasks)
    run_eval(tasks, cfg_for(out, workers=2))
    ids = ids_of(out / "results.jsonl")
    assert len(ids) == len(set(ids)) == len(tasks)
    assert sorted(ids_of(out / "trajectories.jsonl")) == sorted(ids)


def test_media_errors_are_failed_rows_and_the_run_goes_on(tasks: list[Task], tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"this is not a video file\n" * 200)  # fixed bytes: random ones can look like a stream
    bad = [
        tasks[0].model_copy(update={"id": "junk", "media": str(junk)}),
        tasks[0].model_copy(update={"id": "gone", "media": str(tmp_path / "gone.mp4")}),
    ]
    out = tmp_path / "run"
    report = run_eval(bad + tasks[:3], cfg_for(out))
    assert report.failed == 2
    by_id = {r["id"]: r for r in rows_of(out)}
    assert len(by_id) == 5
    assert by_id["junk"]["status"] == "failed" and by_id["junk"]["stop_reason"] == "media_error"
    assert by_id["junk"]["error_code"] == "media_unreadable"
    assert by_id["gone"]["error_code"] == "media_not_found" and "file not found" in by_id["gone"]["error"]
    assert all(by_id[t.id]["status"] == "ok" for t in tasks[:3])
    s = summarize(list(by_id.values()), n_boot=100)
    assert s["n_failed"] == 2 and s["error_codes"]["media_not_found"] == 1
    assert s["score"]["mean"] == pytest.approx(3 / 5) and s["score_ok"]["mean"] == pytest.approx(1.0)


def test_policy_errors_are_failed_rows_and_retry_failed_reruns_them(
    tasks: list[Task], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    report = run_eval(tasks[:3], cfg_for(out), policy_factory=FailingPolicy)
    assert report.failed == 3
    rows = rows_of(out)
    assert {r["error_code"] for r in rows} == {"policy_error"} and {r["status"] for r in rows} == {"failed"}
    assert "server is down" in rows[0]["error"]
    assert run_eval(tasks[:3], cfg_for(out)).ran == 0  # failures are final by default
    report = run_eval(tasks[:3], cfg_for(out, retry_failed=True))
    assert report.ran == 3
    rows = rows_of(out)
    assert len(rows) == 3 and {r["status"] for r in rows} == {"ok"}


def test_a_dead_backend_stops_the_run(tasks: list[Task], tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(PolicyStreakError, match="3 tasks in a row"):
        run_eval(
            tasks, cfg_for(out, workers=1, max_consecutive_policy_errors=3), policy_factory=FailingPolicy
        )
    assert 3 <= len(rows_of(out)) < len(tasks)


def test_unexpected_exceptions_are_error_rows_retried_next_run(tasks: list[Task], tmp_path: Path) -> None:
    out = tmp_path / "run"
    report = run_eval(tasks[:2], cfg_for(out), policy_factory=lambda: FailingPolicy(RuntimeError))
    assert report.errors == 2
    assert {r["error_code"] for r in rows_of(out)} == {"exception:RuntimeError"}
    failed = read_jsonl(out / "trajectories.jsonl")  # what the failed tasks did is kept with the error
    assert len(failed) == 2 and all("RuntimeError: the server is down" in t["error"] for t in failed)
    assert run_eval(tasks[:2], cfg_for(out)).ran == 2
    assert [r["status"] for r in rows_of(out)] == ["ok", "ok"]
    assert sorted(ids_of(out / "trajectories.jsonl")) == sorted(
        t.id for t in tasks[:2]
    )  # the retried ones only


def test_duplicate_task_ids_are_rejected(tasks: list[Task], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="duplicate task ids"):
        run_eval([tasks[0], tasks[0]], cfg_for(tmp_path / "r"))


def test_other_settings_in_the_same_folder_are_refused(tasks: list[Task], tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_eval(tasks[:1], cfg_for(out))
    with pytest.raises(ConfigMismatchError, match="max_turns"):
        run_eval(tasks[:1], cfg_for(out, max_turns=3))
    run_eval(tasks[:1], cfg_for(out, workers=1))  # workers do not change the numbers
    import torch

    before = torch.get_num_threads()
    try:  # nor do torch's threads: the same folder takes the run, and the process runs with that many
        run_eval(tasks[:1], cfg_for(out, threads=1))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


def test_a_dead_judge_fails_loudly(tasks: list[Task], tmp_path: Path) -> None:
    url = dead_url()
    with pytest.raises(JudgeError, match="unreachable"):
        make_judge({"kind": "openai", "base_url": url, "model": "judge", "timeout": 2.0, "max_retries": 0})
    ff = [t for t in tasks if t.task_type == "ff"]
    other = [t for t in tasks if t.task_type == "mcq"][:2]
    judge = OpenAIJudge(base_url=url, model="judge", timeout=2.0, max_retries=0)  # went down after the check
    out = tmp_path / "run"
    with pytest.raises(JudgeError, match="failed"):
        run_eval(other + ff, cfg_for(out, workers=1), judge=judge)
    rows = rows_of(out)
    assert all(r["task_type"] != "ff" for r in rows)  # never a silent 0 for a judged task
    assert all(r["reward"] == 1.0 for r in rows)


# ------------------------------------------------------------------------------------------ passive
def test_passive_baseline_runs_with_the_same_answer_format(tasks: list[Task], tmp_path: Path) -> None:
    subset = [t for t in tasks if t.task_type in ("mcq", "num")][:4]
    out = tmp_path / "passive"
    run_eval(
        subset,
        cfg_for(out, mode="passive", passive=PassiveConfig(num_frames=5, max_audio_s=8.0, audio_chunks=2)),
    )
    rows = rows_of(out)
    assert len(rows) == 4 and all(r["answered"] and r["reward"] == 1.0 for r in rows)
    assert {r["turns"] for r in rows} == {1} and {r["frames_used"] for r in rows} == {5}
    assert {r["audio_seconds_used"] for r in rows} == {8.0}  # 20 s of audio capped at 8 s in 2 excerpts
    assert {r["mode"] for r in rows} == {"passive"}
    # a policy that asks for media instead of answering is recorded, not crashed
    out2 = tmp_path / "passive-uniform"
    look = json.dumps(
        {"observation": "", "thought": "", "action": {"type": "get_frames", "start": 0, "end": 5, "num": 2}}
    )
    run_eval(subset[:2], cfg_for(out2, policy="replay", policy_kwargs={"texts": [look]}, mode="passive"))
    rows2 = rows_of(out2)
    assert all(not r["answered"] and r["turn_error_codes"] == {"passive_not_answer": 1} for r in rows2)


def test_passive_prompt_states_the_option_text_answer_only_under_the_opt_in() -> None:
    from envs.media import MediaInfo
    from omniagent.eval.passive import single_turn_system_prompt

    info = MediaInfo(path="v.mp4", duration=10.0, has_video=True, has_audio=False)
    assert "exact text" in single_turn_system_prompt(info, "mcq", "You are shown 4 frames.", option_text=True)
    assert "exact text" not in single_turn_system_prompt(info, "mcq", "You are shown 4 frames.")


def test_matched_frame_budget(tmp_path: Path) -> None:
    rows = [{"frames_used": 10}, {"frames_used": 13}, {"frames_used": 0, "stop_reason": "media_error"}]
    assert matched_frame_budget(rows) == 12  # ceil(23 / 2), media errors left out
