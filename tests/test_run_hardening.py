"""Runs that must not lose anything (issue 9, "Runs"): the CLI saves a trajectory whatever fails,
secrets never reach a file, one run folder has one writer, and eval workers load models safely."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from testkit import free_port

from envs.jsonl import read_jsonl
from envs.tasks import Task
from omniagent import run as cli
from omniagent.backends.scripted import ReplayPolicy
from omniagent.eval.batch import FolderLockedError, RunLock
from omniagent.eval.config import EvalConfig
from omniagent.eval.runner import run_eval
from omniagent.policy import make_policy
from omniagent.trajectory import Trajectory

ROOT = Path(__file__).resolve().parents[1]
SLOW_EVAL = ROOT / "tests" / "slow_eval.py"  # an eval run with a slowed-down oracle, in its own process
# synth_dir and tasks (one small synthetic video and its tasks) are fixtures of conftest.py
FRAMES = {
    "observation": "none",
    "thought": "look",
    "action": {"type": "get_frames", "start": 0, "end": 5, "num": 2},
}


def turn(observation: str, action: dict[str, Any]) -> str:
    return json.dumps({"observation": observation, "thought": "t", "action": action})


# ------------------------------------------------------------------ the CLI always saves a trajectory
def test_lone_surrogates_in_model_output_are_saved_and_reload(tmp_path: Path, video_path: Path) -> None:
    out = tmp_path / "t.json"
    texts = [
        "raw \ud800 text, not JSON",  # a lone surrogate in the model's own text
        turn("\\udc00 escaped in JSON", FRAMES["action"]),  # one the JSON parser produces
        turn("done", {"type": "answer", "content": "A"}),
    ]
    code = cli.main(
        [str(video_path), "Q?", "--choices", "a|b", "--backend", "replay", "-P", f"texts={json.dumps(texts)}",
         "--max-turns", "3", "--out", str(out), "--quiet"]
    )  # fmt: skip
    assert code == 0
    traj = Trajectory.load_json(out)
    assert traj.stop_reason == "answered" and traj.num_turns == 3
    first, second = traj.turns[0].raw_text, traj.turns[1].observation or ""
    assert (
        first.startswith("raw ") and first.endswith(" text, not JSON") and second.endswith(" escaped in JSON")
    )
    assert not any("\ud800" <= ch <= "\udfff" for ch in first + second)  # escaped or replaced, never lost


def test_an_environment_failure_mid_episode_keeps_the_turns(
    tmp_path: Path, video_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from envs.env import OmniVideoEnv

    real_step = OmniVideoEnv.step

    def step(self: OmniVideoEnv, text: str) -> Any:
        if self.turn >= 1:  # the second turn: the audio cache's disk is full
            raise OSError(28, "No space left on device")
        return real_step(self, text)

    monkeypatch.setattr(OmniVideoEnv, "step", step)
    out = tmp_path / "t.json"
    code = cli.main(
        [str(video_path), "Q?", "--backend", "replay", "-P", f"texts={json.dumps([json.dumps(FRAMES)])}",
         "--max-turns", "4", "--out", str(out), "--quiet"]
    )  # fmt: skip
    assert code == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "No space left on device" in err and f"trajectory saved to {out}" in err and "Traceback" not in err
    traj = Trajectory.load_json(out)
    assert traj.num_turns == 1 and traj.turns[0].action_type == "get_frames" and traj.frames_used == 2
    assert traj.meta["error_code"] == "exception:OSError" and "No space left" in traj.error


def test_a_backend_crash_mid_episode_keeps_the_turns(
    tmp_path: Path, video_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_act = ReplayPolicy.act
    calls = Counter()

    def act(self: ReplayPolicy, messages: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real_act(self, messages)

    monkeypatch.setattr(ReplayPolicy, "act", act)
    out = tmp_path / "t.json"
    code = cli.main(
        [str(video_path), "Q?", "--backend", "replay", "-P", f"texts={json.dumps([json.dumps(FRAMES)])}",
         "--max-turns", "5", "--out", str(out), "--quiet", "--report", str(tmp_path / "r.html")]
    )  # fmt: skip
    assert code == cli.EXIT_ERROR
    traj = Trajectory.load_json(out)
    assert traj.num_turns == 2 and "illegal memory access" in traj.error
    assert traj.meta["run"]["backend"] == "replay"


# -------------------------------------------------------------------------------- secrets stay out
def files_under(folder: Path) -> dict[Path, str]:
    return {p: p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()}


def test_the_cli_never_writes_the_api_key(tmp_path: Path, video_path: Path) -> None:
    out_dir = tmp_path / "out"
    url = f"http://127.0.0.1:{free_port()}/v1"
    r = subprocess.run(
        [sys.executable, "-m", "omniagent.run", str(video_path), "Q?", "--backend", "openai", "--base-url", url,
         "--api-key", "sk-cli-secret-1", "-P", "api_key=sk-p-secret-2", "--retries", "0", "--timeout", "5",
         "--out", str(out_dir / "t.json"), "--report", str(out_dir / "r.html")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 3, r.stderr
    written = files_under(out_dir)
    assert {p.name for p in written} == {"t.json", "r.html"}
    for text in [*written.values(), r.stdout, r.stderr]:
        assert "sk-cli-secret-1" not in text and "sk-p-secret-2" not in text
    argv = Trajectory.load_json(out_dir / "t.json").meta["run"]["argv"]
    assert argv[argv.index("--api-key") + 1] == cli.redact_argv(["--api-key", "x"])[1] != "x"


def test_an_eval_run_never_writes_the_api_key(tasks: list[Task], synth_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    url = f"http://127.0.0.1:{free_port()}/v1"
    overrides = [
        f"out_dir={out}", f"benchmark.dataset_kwargs.out_dir={synth_dir}", "benchmark.dataset_kwargs.n_videos=1",
        "benchmark.dataset_kwargs.durations=[20]", "benchmark.dataset_kwargs.config={width: 112, height: 64, fps: 2}",
        "unfreeze=true", "progress=false", "limit=2", "workers=1", "policy.name=openai",
        f"+policy.kwargs.base_url={url}", "+policy.kwargs.api_key=sk-eval-secret-3", "+policy.kwargs.retries=0",
        "+policy.kwargs.timeout=5", "judge.api_key=sk-judge-secret-4",
    ]  # fmt: skip
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval.py"), *overrides],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    written = files_under(out)
    assert {"results.jsonl", "trajectories.jsonl", "run.json", "summary.json"} <= {p.name for p in written}
    for text in [*written.values(), r.stdout, r.stderr]:
        assert "sk-eval-secret-3" not in text and "sk-judge-secret-4" not in text
    assert [row["error_code"] for row in read_jsonl(out / "results.jsonl")] == ["policy_error"] * 2


# ----------------------------------------------------------------------------- one writer per folder
def test_two_eval_processes_on_one_folder(tasks: list[Task], synth_dir: Path, tmp_path: Path) -> None:
    out, go = tmp_path / "run", tmp_path / "go"
    args = [sys.executable, str(SLOW_EVAL), str(synth_dir / "tasks.jsonl"), str(out), "--go", str(go),
            "--workers", "2", "--limit", "6"]  # fmt: skip
    first = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            if (out / ".lock").exists() and (out / ".lock").read_text().strip() == str(first.pid):
                break
            time.sleep(0.05)
        second = subprocess.run(args, capture_output=True, text=True, timeout=180, cwd=ROOT)
        go.touch()
        _, first_err = first.communicate(timeout=180)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 7, second.stderr[-1500:]
    assert f"in use by process {first.pid}" in second.stderr and "use another output folder" in second.stderr
    assert first.returncode == 0, first_err[-1500:]
    ids = [r["id"] for r in read_jsonl(out / "results.jsonl")]
    assert len(ids) == len(set(ids)) == 6
    assert sorted(r["id"] for r in read_jsonl(out / "trajectories.jsonl")) == sorted(ids)
    third = subprocess.run(args, capture_output=True, text=True, timeout=180, cwd=ROOT)  # free again: resumes
    assert third.returncode == 0 and len(read_jsonl(out / "results.jsonl")) == 6


def test_a_stale_lock_of_a_dead_process_is_taken_over(
    tasks: list[Task], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "run"
    out.mkdir()
    (out / ".lock").write_text(f"{dead.pid}\n")
    cfg = EvalConfig(out_dir=str(out), policy="oracle", workers=1, progress=False, limits={"max_turns": 8})
    with caplog.at_level("WARNING", logger="omniagent.eval.batch"):
        report = run_eval(tasks[:3], cfg)
    assert report.ran == 3 and f"from process {dead.pid} (no longer running)" in caplog.text
    assert (out / ".lock").read_text() == ""  # released
    lock = RunLock(out).acquire()  # free again
    lock.release()


def test_the_eval_script_refuses_a_busy_folder(synth_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "busy"
    with RunLock(out):
        r = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "eval.py"), f"out_dir={out}",
             f"benchmark.dataset_kwargs.out_dir={synth_dir}", "benchmark.dataset_kwargs.n_videos=1",
             "benchmark.dataset_kwargs.durations=[20]", "benchmark.dataset_kwargs.config={width: 112, height: 64, fps: 2}",
             "unfreeze=true", "progress=false", "limit=2"],
            capture_output=True, text=True, timeout=180, cwd=ROOT,
        )  # fmt: skip
        with pytest.raises(FolderLockedError, match=f"process {os.getpid()}"):
            RunLock(out).acquire()  # a second lock in the same process is refused too
    assert r.returncode == 6, r.stdout[-1500:] + r.stderr[-1500:]
    assert f"in use by process {os.getpid()}" in " ".join(r.stdout.split())
    assert not (out / "results.jsonl").exists()


# ------------------------------------------------------------------ policies are built before threads
def test_policies_are_built_before_the_worker_threads_start(tasks: list[Task], tmp_path: Path) -> None:
    built_in: list[str] = []

    def factory() -> Any:
        built_in.append(threading.current_thread().name)
        return make_policy("oracle")

    cfg = EvalConfig(out_dir=str(tmp_path / "run"), policy="oracle", workers=3, progress=False)
    report = run_eval(tasks[:5], cfg, policy_factory=factory)
    assert report.ran == 5 and built_in == [threading.main_thread().name] * 3


TINY_EVAL = textwrap.dedent(
    """
    import sys
    from envs.tasks import load_tasks_jsonl
    from omniagent.eval.config import EvalConfig
    from omniagent.eval.runner import run_eval

    tasks = load_tasks_jsonl(sys.argv[1])[:2]
    cfg = EvalConfig(
        out_dir=sys.argv[2], policy="transformers", workers=2, progress=False, limits={"max_turns": 2},
        policy_kwargs={"model": "tiny-random", "max_new_tokens": 8, "device": "cpu", "tiny_dir": sys.argv[3]},
    )
    print(run_eval(tasks, cfg).model_dump_json())
    """
)


@pytest.mark.slow
def test_two_workers_with_the_tiny_model(tasks: list[Task], synth_dir: Path, tmp_path: Path) -> None:
    """A fresh interpreter, as in scripts/eval.py: transformers' lazy imports are first touched here."""
    script = tmp_path / "tiny_eval.py"
    script.write_text(TINY_EVAL)
    out = tmp_path / "run"
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, str(script), str(synth_dir / "tasks.jsonl"), str(out), str(tmp_path / "tiny")],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rows = read_jsonl(out / "results.jsonl")
    assert [row["status"] for row in rows] == ["ok", "ok"], [row.get("error") for row in rows]
    assert all(row["turns"] >= 1 and row["policy"] == "transformers" for row in rows)
    assert time.monotonic() - t0 < 600


def test_an_eval_run_records_any_model_text(tasks: list[Task], tmp_path: Path) -> None:
    """A lone surrogate in the model's output used to abort the run on that task at every rerun."""
    from omniagent.trajectory import load_trajectories

    texts = ["\ud800 not JSON", turn("\\ud83d seen", {"type": "answer", "content": "A"})]
    cfg = EvalConfig(out_dir=str(tmp_path / "run"), policy="replay", workers=2, progress=False)
    mcq = [t for t in tasks if t.task_type == "mcq"][:4]
    report = run_eval(mcq, cfg, policy_factory=lambda: ReplayPolicy(texts=texts, repeat_last=True))
    assert (report.ran, report.errors) == (len(mcq), 0) and len(mcq) >= 2
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert {r["status"] for r in rows} == {"ok"} and all(r["answered"] for r in rows)
    trajs = load_trajectories(tmp_path / "run" / "trajectories.jsonl")
    assert sorted(t.id for t in trajs) == sorted(r["id"] for r in rows)
    assert all(t.turns[0].raw_text.endswith(" not JSON") for t in trajs)
    assert all((t.turns[1].observation or "").endswith(" seen") for t in trajs)


def test_a_policy_argument_the_backend_does_not_take_is_a_config_error(
    synth_dir: Path, tmp_path: Path
) -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval.py"), f"out_dir={tmp_path / 'run'}",
         f"benchmark.dataset_kwargs.out_dir={synth_dir}", "benchmark.dataset_kwargs.n_videos=1",
         "benchmark.dataset_kwargs.durations=[20]", "benchmark.dataset_kwargs.config={width: 112, height: 64, fps: 2}",
         "unfreeze=true", "progress=false", "limit=2", "+policy.kwargs.num_frame=8"],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )  # fmt: skip
    out = " ".join(r.stdout.split())
    assert r.returncode == 2, r.stdout[-1500:] + r.stderr[-1500:]
    assert "'num_frame'" in out and "accepts:" in out and "Traceback" not in r.stderr


def test_an_unwritable_out_path_saves_to_the_temp_folder(
    tmp_path: Path, video_path: Path, capsys: pytest.CaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "t.json"  # its parent is a file: no one can create it
    code = cli.main(
        [str(video_path), "Q?", "--backend", "uniform", "--max-turns", "2", "--out", str(out), "--quiet"]
    )
    assert code == 0
    captured = capsys.readouterr()
    saved = Path(captured.err.split("saved to ")[-1].split()[0])
    assert f"cannot write {out}" in " ".join(captured.err.split()) and saved.name.endswith("t.json")
    traj = Trajectory.load_json(saved)
    assert traj.num_turns == 2 and traj.meta["run"]["backend"] == "uniform"
    saved.unlink()


def test_an_eval_task_that_crashes_mid_episode_keeps_its_turns(
    tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envs.env import OmniVideoEnv

    real_step = OmniVideoEnv.step

    def step(self: OmniVideoEnv, text: str) -> Any:
        if self.turn >= 1:
            raise OSError(28, "No space left on device")
        return real_step(self, text)

    monkeypatch.setattr(OmniVideoEnv, "step", step)
    out = tmp_path / "run"
    cfg = EvalConfig(out_dir=str(out), policy="uniform", workers=2, progress=False, limits={"max_turns": 4})
    report = run_eval(tasks[:3], cfg)
    assert (report.ran, report.errors) == (3, 3)
    rows = read_jsonl(out / "results.jsonl")
    assert {r["error_code"] for r in rows} == {"exception:OSError"}
    trajs = read_jsonl(out / "trajectories.jsonl")
    assert sorted(t["id"] for t in trajs) == sorted(r["id"] for r in rows)
    assert all(len(t["turns"]) == 1 and "No space left" in t["error"] for t in trajs)
