"""Teacher-trajectory synthesis: dual quality control, judge failures, hindsight leakage, resume.

The teacher is a seeded scripted policy that plays one behaviour per episode (cycling through
``modes``) and names it in its first thought, so every trajectory's expected verdict is known. The
judge is a fake OpenAI chat-completions server on 127.0.0.1 that scores a turn 1 when its Thought
says GUESS and 5 otherwise.
"""

from __future__ import annotations

import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testkit import free_port, turn_text

from envs.jsonl import read_jsonl
from envs.limits import EnvLimits
from envs.tasks import Task, save_tasks_jsonl
from omniagent.policy import POLICIES, Policy, PolicyError, TurnOutput, register_policy
from omniagent.trajectory import Trajectory, load_trajectories
from rl.synthesis import filters as F
from rl.synthesis.audit_judge import AuditJudgeError
from rl.synthesis.synthesize import TeacherPolicy, inject_hint, run_synthesis

# --------------------------------------------------------------------------------------------------
# A stochastic scripted teacher
# --------------------------------------------------------------------------------------------------

MODES = ("good", "wrong", "malformed", "budget", "guess", "good")  # six per task: two good ones
EXPECTED = {  # mode -> rejection code (None: kept, or rejected only as a duplicate)
    "good": None,
    "wrong": "wrong_answer",
    "malformed": "format_error",
    "budget": "turn_budget",
    "guess": "audit_low",
    "leak": "leakage",
}
SEEN_HINTS: list[bool] = []


class StochasticTeacher(Policy):
    """Cycles through ``modes`` episode by episode; details (frame counts, spans) come from ``seed``."""

    name = "test_stochastic"

    def __init__(self, modes: list[str] | tuple[str, ...] = MODES, seed: int = 0, **_: Any) -> None:
        self.modes, self.seed, self.calls = list(modes), int(seed), -1

    def reset(self, info: dict[str, Any]) -> None:
        self.calls += 1
        self.mode = self.modes[self.calls % len(self.modes)]
        self.rng = np.random.default_rng(self.seed)
        self.task, self.duration = info["task"], float(info["media"]["duration"])
        self.k = 0

    def _answer(self, right: bool) -> Any:
        kind, truth = self.task["task_type"], self.task["answer"]
        if right:
            return truth
        return {"mcq": "A" if truth != "A" else "B", "tr": [[0.0, 1.0]], "num": 40}[kind]

    def act(self, messages: list[dict[str, Any]]) -> TurnOutput:
        SEEN_HINTS.append(any("Teacher hint" in p.get("text", "") for m in messages for p in m["content"]))
        self.k += 1
        mode, k = self.mode, self.k
        num = int(self.rng.integers(2, 5))
        look = {"type": "get_frames", "start": 0.0, "end": self.duration, "num": num}
        if mode == "malformed" and k == 1:
            return TurnOutput(text="I think the answer is B")
        if mode == "budget":
            return TurnOutput(
                text=turn_text("none" if k == 1 else "more frames", f"mode={mode}: keep looking", look)
            )
        if mode == "guess":
            answer = {"type": "answer", "content": self._answer(True)}
            return TurnOutput(text=turn_text("none", f"mode={mode}: GUESS without looking", answer))
        if mode == "leak" and k == 1:
            return TurnOutput(text=turn_text("none", f"mode={mode}: the hint says 3.0 s", look))
        if k == 1:
            return TurnOutput(text=turn_text("none", f"mode={mode}: scan the whole video first", look))
        content = self._answer(mode != "wrong")
        return TurnOutput(
            text=turn_text(
                f"{num} frames seen", "the frames settle it", {"type": "answer", "content": content}
            )
        )


if "test_stochastic" not in POLICIES:
    register_policy("test_stochastic")(StochasticTeacher)


def mode_of(traj: Trajectory) -> str:
    first = traj.turns[0]
    if first.thought is None:
        return "malformed"
    return re.match(r"mode=(\w+)", first.thought).group(1)


# --------------------------------------------------------------------------------------------------
# A fake judge
# --------------------------------------------------------------------------------------------------


class FakeJudge:
    def __init__(self, behaviour: str = "ok") -> None:
        self.behaviour, self.requests = behaviour, []
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                judge.requests.append(body)
                reply = judge.reply(body["messages"][-1]["content"])
                payload = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reply(self, prompt: str) -> str:
        if "### Turn" not in prompt:
            return '{"ok": true}'  # preflight
        if self.behaviour == "garbage":
            return "I refuse to answer in JSON."
        turns = []
        for section in prompt.split("### Turn ")[1:]:
            k = int(section.split("\n", 1)[0])
            thought = re.search(r"^Thought: (.*)$", section, re.M).group(1)
            turns.append({"turn": k, "score": 1 if "GUESS" in thought else 5, "reason": "checked"})
        return json.dumps({"turns": turns})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def judge():
    j = FakeJudge()
    yield j
    j.close()


# --------------------------------------------------------------------------------------------------
# Tasks and config
# --------------------------------------------------------------------------------------------------


@pytest.fixture()
def tasks_file(tmp_path: Path, video_path: Path) -> Path:
    media = str(video_path)
    tasks = [
        Task(id="mcq1", media=media, question="Which tone plays first?", task_type="mcq",
             choices=["500 Hz", "1000 Hz", "2000 Hz"], answer="B", evidence=[[3.0, 4.0]], duration=20.0),
        Task(id="tr1", media=media, question="When is the high tone?", task_type="tr",
             answer=[[12.0, 12.5]], evidence=[[12.0, 12.5]], duration=20.0),
        Task(id="num1", media=media, question="How many tone bursts are there?", task_type="num",
             answer=2.0, evidence=[[3.0, 4.0], [12.0, 12.5]], duration=20.0),
    ]  # fmt: skip
    return save_tasks_jsonl(tasks, tmp_path / "tasks.jsonl")


def make_cfg(tasks: Path, out: Path, judge_url: str, **over: Any) -> dict[str, Any]:
    cfg = {
        "data": {"tasks": str(tasks), "task_types": None, "split": None, "limit": None},
        "out_dir": str(out),
        "seed": 0,
        "n_samples": 6,
        "turn_budget": {"min": 3, "max": 4},
        "teacher": {
            "backend": "test_stochastic",
            "kwargs": {"modes": list(MODES)},
            "hindsight": False,
            "hint_template": None,
            "max_consecutive_policy_errors": 0,
        },
        "env": {"limits": {"max_side": 64}},
        "filters": {
            "outcome": {"mcq": 1.0, "tr": 0.5, "num": 0.5, "size": 0.5, "ff": 0.5},
            "allow_error_codes": [],
            "max_keep_per_task": None,
            "audit": {"enabled": True, "min_score": 3, "aggregate": "min", "audit_rejected": False},
            "leakage": {"tolerance": 0.05, "phrases": list(F.DEFAULT_HINT_PHRASES)},
        },
        "judge": {
            "base_url": judge_url,
            "model": "fake-judge",
            "api_key": "EMPTY",
            "timeout": 10,
            "max_retries": 1,
            "retry_wait": 0.0,
            "temperature": 0.0,
            "max_tokens": 512,
            "preflight": True,
            "extra_body": {},
        },
    }
    for key, value in over.items():
        node = cfg
        *path, last = key.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    return cfg


# --------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------


def test_right_trajectories_kept_for_right_reasons(
    tmp_path: Path, tasks_file: Path, judge: FakeJudge
) -> None:
    out = tmp_path / "out"
    summary = run_synthesis(make_cfg(tasks_file, out, judge.url), progress=False)
    kept = load_trajectories(out / "kept.jsonl")
    rejected = load_trajectories(out / "rejected.jsonl")
    assert len(kept) + len(rejected) == 3 * 6
    assert {t.meta["task_id"] for t in kept} == {"mcq1", "tr1", "num1"}
    assert len(kept) == 3  # one per task: the second "good" sample of each task is a duplicate
    for t in kept:
        assert mode_of(t) == "good" and t.meta["qc"]["kept"] and t.meta["qc"]["reasons"] == []
        assert t.meta["qc"]["audit"]["aggregate"] == 5 and t.meta["qc"]["outcome_passed"]
        assert 3 <= t.max_turns <= 4 and t.meta["env_limits"]["max_side"] == 64
    seen_modes = set()
    for t in rejected:
        mode = mode_of(t)
        seen_modes.add(mode)
        codes = [F.reason_code(r) for r in t.meta["qc"]["reasons"]]
        expected = EXPECTED[mode] or "duplicate"
        assert codes == [expected], (mode, t.meta["qc"])
        if expected in ("wrong_answer", "format_error", "turn_budget"):
            assert t.meta["qc"]["audit"] is None  # cheap checks first: never sent to the judge
    assert seen_modes == set(MODES)
    malformed = next(t for t in rejected if mode_of(t) == "malformed")
    assert malformed.meta["qc"]["reasons"] == ["format_error:format_not_json"]

    stats = list(read_jsonl(out / "task_stats.jsonl"))
    assert [s["task_id"] for s in stats] == ["mcq1", "tr1", "num1"]
    for s in stats:
        assert s["n_samples"] == 6 and s["pass_at_n"] == 1.0 and s["n_kept"] == 1
        assert s["mean_turns"] > 1 and s["rejections"].get("duplicate") == 1
    assert summary["kept"] == 3 and summary["tasks"] == 3
    assert json.loads((out / "summary.json").read_text())["rejections"]["turn_budget"] >= 3
    # judge saw only candidates: preflight + (good x2 + guess) per task
    assert len(judge.requests) == 1 + 3 * 3


def test_resume_skips_finished_and_redoes_cut_tasks(
    tmp_path: Path, tasks_file: Path, judge: FakeJudge
) -> None:
    out = tmp_path / "out"
    cfg = make_cfg(
        tasks_file, out, judge.url, n_samples=2, **{"teacher.kwargs": {"modes": ["good", "wrong"]}}
    )
    run_synthesis(cfg, progress=False)
    first_kept = (out / "kept.jsonl").read_text()
    n_requests = len(judge.requests)
    run_synthesis(cfg, progress=False)  # everything finished: no new episodes, no judge calls
    assert (out / "kept.jsonl").read_text() == first_kept and len(judge.requests) == n_requests
    # Simulate a crash inside the last task: its stats line is gone, its records remain.
    lines = (out / "task_stats.jsonl").read_text().splitlines(keepends=True)
    (out / "task_stats.jsonl").write_text("".join(lines[:-1]))
    run_synthesis(cfg, progress=False)
    kept = load_trajectories(out / "kept.jsonl")
    assert sorted(t.meta["task_id"] for t in kept) == ["mcq1", "num1", "tr1"]  # no duplicate num1 record
    assert [t.id for t in kept] == [
        t.id for t in (Trajectory.model_validate_json(x) for x in first_kept.splitlines())
    ]
    assert len(list(read_jsonl(out / "task_stats.jsonl"))) == 3


def test_judge_down_stops_with_clear_error(tmp_path: Path, tasks_file: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    out = tmp_path / "out"
    with pytest.raises(AuditJudgeError, match=r"127\.0\.0\.1.*failed after 2 attempt"):
        run_synthesis(make_cfg(tasks_file, out, url), progress=False)
    assert not (out / "task_stats.jsonl").exists() and not (out / "kept.jsonl").exists()
    # Without the preflight the first audit fails the same way, and the task is not marked done.
    with pytest.raises(AuditJudgeError, match="Start the judge server"):
        run_synthesis(make_cfg(tasks_file, out, url, **{"judge.preflight": False}), progress=False)
    assert not (out / "task_stats.jsonl").exists()


def test_judge_garbage_is_an_error_not_a_verdict(tmp_path: Path, tasks_file: Path) -> None:
    j = FakeJudge("garbage")
    try:
        with pytest.raises(AuditJudgeError, match="no usable audit"):
            run_synthesis(make_cfg(tasks_file, tmp_path / "out", j.url), progress=False)
    finally:
        j.close()


def test_hindsight_hint_reaches_teacher_only_and_leaks_are_rejected(
    tmp_path: Path, tasks_file: Path, judge: FakeJudge
) -> None:
    out = tmp_path / "out"
    SEEN_HINTS.clear()
    cfg = make_cfg(
        tasks_file,
        out,
        judge.url,
        n_samples=2,
        **{"teacher.hindsight": True, "teacher.kwargs": {"modes": ["good", "leak"]}, "data.limit": 1},
    )
    run_synthesis(cfg, progress=False)
    assert SEEN_HINTS and all(SEEN_HINTS)  # the teacher saw the hint on every turn
    kept = load_trajectories(out / "kept.jsonl")
    rejected = load_trajectories(out / "rejected.jsonl")
    assert [mode_of(t) for t in kept] == ["good"] and [mode_of(t) for t in rejected] == ["leak"]
    assert rejected[0].meta["qc"]["reasons"] == ["leakage"]
    assert any("hint" in leak for leak in rejected[0].meta["qc"]["leaks"])
    assert any("3" in leak and "before fetching" in leak for leak in rejected[0].meta["qc"]["leaks"])
    for t in kept:
        assert t.meta["hindsight"] and "hint" not in json.dumps([r.raw_text for r in t.turns]).lower()


def test_config_file_composes_and_runs(tmp_path: Path, tasks_file: Path) -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rl.synthesis.synthesize import REPO_ROOT

    out = tmp_path / "out"
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base=None):
        cfg = compose(
            "synthesize",
            [
                f"data.tasks={tasks_file}",
                f"out_dir={out}",
                "teacher.backend=oracle",
                "teacher.kwargs={}",
                "n_samples=1",
                "filters.audit.enabled=false",
                "+env.limits.max_side=64",
            ],
        )
    assert cfg.turn_budget.min == 5 and cfg.turn_budget.max == 32 and cfg.filters.audit.min_score == 3
    assert cfg.filters.outcome.tr == 0.5 and cfg.filters.outcome.num == 0.5
    summary = run_synthesis(OmegaConf.to_container(cfg, resolve=True), progress=False)
    assert summary["kept"] == 3 and summary["pass_at_n"] == 1.0


class _Crashing(Policy):
    name = "crashing"

    def reset(self, info: dict[str, Any]) -> None:
        pass

    def act(self, messages: list[dict[str, Any]]) -> TurnOutput:
        raise PolicyError("teacher server down")


def test_error_streak_stops_the_run_and_a_second_writer_is_refused(tmp_path: Path, tasks_file: Path) -> None:
    from omniagent.eval.batch import FolderLockedError, RunLock
    from rl.synthesis.synthesize import SynthesisError

    out = tmp_path / "out"
    cfg = make_cfg(tasks_file, out, "http://127.0.0.1:9/v1", n_samples=2)
    cfg["filters"]["audit"]["enabled"] = False
    cfg["teacher"]["max_consecutive_policy_errors"] = 3
    with pytest.raises(SynthesisError, match="3 episodes in a row; last error: .*teacher server down"):
        run_synthesis(cfg, policy=_Crashing(), progress=False)
    summary = json.loads((out / "summary.json").read_text())  # written even when the run stops
    assert summary["tasks"] == 1  # the first task (2 failed episodes) was committed before the third failure
    with RunLock(out), pytest.raises(FolderLockedError, match=str(os.getpid())):
        run_synthesis(cfg, policy=_Crashing(), progress=False)


def test_readme_teacher_overrides_compose(tmp_path: Path, tasks_file: Path) -> None:
    """README's `teacher.kwargs.model=... teacher.kwargs.base_url=...` needs no `+`; unset kwargs are not passed."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from rl.synthesis.synthesize import REPO_ROOT, build_teacher

    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base=None):
        cfg = compose(
            "synthesize",
            [f"data.tasks={tasks_file}", "teacher.kwargs.model=T", "teacher.kwargs.base_url=http://h:1/v1"],
        )
        plain = compose("synthesize", [f"data.tasks={tasks_file}", "teacher.backend=uniform"])
    assert dict(cfg.teacher.kwargs) == {"model": "T", "base_url": "http://h:1/v1"}
    limits = EnvLimits(max_frames=5)
    teacher = build_teacher(
        OmegaConf.to_container(plain, resolve=True), limits
    )  # model/base_url null: left out
    assert teacher.params.limits == limits  # the run's limits reach a backend that takes them


def test_hint_injection_leaves_env_messages_alone() -> None:
    msgs = [{"role": "system", "content": [{"type": "text", "text": "s"}]},
            {"role": "user", "content": [{"type": "text", "text": "q"}]}]  # fmt: skip
    seen = inject_hint(msgs, "HINT")
    assert seen[1]["content"][-1]["text"] == "\nHINT" and len(msgs[1]["content"]) == 1

    class Echo(Policy):
        seed = 0

        def act(self, messages: list[dict[str, Any]]) -> TurnOutput:
            return TurnOutput(text=json.dumps(messages[1]["content"][-1]["text"]))

    inner = Echo()
    wrapped = TeacherPolicy(inner, hint="HINT", seed=123)
    wrapped.reset({})
    assert inner.seed == 123 and wrapped.act(msgs).text == '"\\nHINT"'


def test_random_teacher_on_synthetic_benchmark(tmp_path: Path, judge: FakeJudge) -> None:
    """The built-in seeded "random" teacher on envs.synth tasks: every kept trajectory verifies, the
    rejected ones say why, and a second run from the same seed reproduces the kept set exactly."""
    from envs.synth import generate_benchmark
    from envs.tasks import load_tasks_jsonl

    bench = tmp_path / "bench"
    generate_benchmark(bench, seed=0, n_videos=1, durations=[30])
    tasks = load_tasks_jsonl(bench / "tasks.jsonl")
    over = {
        "n_samples": 3,
        "turn_budget": {"min": 3, "max": 5},
        "teacher.backend": "random",
        "teacher.kwargs": {"max_looks": 2, "max_num": 3},
        "env.limits": {"max_side": 64, "max_clip_s": 3.0, "max_audio_s": 10.0},
        "data.task_types": ["mcq", "tr", "num", "size"],
    }
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        run_synthesis(make_cfg(bench / "tasks.jsonl", out, judge.url, **over), progress=False)
        runs.append(out)
    kept = load_trajectories(runs[0] / "kept.jsonl")
    rejected = load_trajectories(runs[0] / "rejected.jsonl")
    n_tasks = sum(t.task_type in ("mcq", "tr", "num", "size") for t in tasks)
    assert len(kept) + len(rejected) == 3 * n_tasks and kept and rejected
    th = F.OutcomeThresholds()
    for t in kept:
        assert F.outcome_score(t) >= th.for_type(t.task_type) and t.stop_reason == "answered"
        assert not any(r.error for r in t.turns) and F.dedupe_key(t) not in {
            F.dedupe_key(x) for x in kept if x is not t
        }
    for t in rejected:
        assert t.meta["qc"]["reasons"] and not t.meta["qc"]["kept"]
        if "wrong_answer" in t.meta["qc"]["reasons"]:
            assert F.outcome_score(t) < th.for_type(t.task_type)
    again = load_trajectories(runs[1] / "kept.jsonl")
    assert [[r.raw_text for r in t.turns] for t in again] == [[r.raw_text for r in t.turns] for t in kept]
    assert len(list(read_jsonl(runs[0] / "task_stats.jsonl"))) == n_tasks
