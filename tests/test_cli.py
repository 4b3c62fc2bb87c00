"""``python -m omniagent.run`` end to end with scripted policies: exit codes, output, saved trajectories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testkit import free_port

from envs.env import OmniVideoEnv
from omniagent import cli_args
from omniagent import run as cli
from omniagent.backends.scripted import ReplayPolicy, UniformPolicy
from omniagent.episode import EpisodeInterrupted, run_episode
from omniagent.policy import Policy, TurnOutput
from omniagent.trajectory import Trajectory

ROOT = Path(__file__).resolve().parents[1]
FRAMES = json.dumps(
    {
        "observation": "none",
        "thought": "look",
        "action": {"type": "get_frames", "start": 0, "end": 5, "num": 2},
    }
)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-m", "omniagent.run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ----------------------------------------------------------------------------- through a subprocess
@pytest.mark.parametrize(
    "content", [b"", b"\x00garbage, not a video\xff" * 200], ids=["zero-byte", "garbage"]
)
def test_rejected_media_exits_2_with_one_line(tmp_path, content):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(content)
    out = tmp_path / "t.json"
    r = run_cli(str(bad), "What happens?", "--backend", "uniform", "--out", str(out))
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot use") and str(bad) in lines[0]
    assert ("empty" in lines[0]) if not content else ("not readable" in lines[0] or "no video" in lines[0])
    assert "Traceback" not in r.stderr + r.stdout and f"trajectory saved to {out}" in lines[0]
    traj = Trajectory.load_json(out)  # saved even though nothing could be played
    assert traj.stop_reason == "media_error" and traj.num_turns == 0 and traj.meta["error_code"]


def test_never_valid_output_ends_at_budget_and_exits_0(tmp_path, video_path):
    out = tmp_path / "t.json"
    r = run_cli(
        str(video_path), "Which colour?", "--choices", "red|blue", "--backend", "replay",
        "-P", 'texts=["I think the answer is red."]', "--max-turns", "3", "--out", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "no answer within the turn budget (3 turns)" in r.stdout
    assert r.stdout.count("format_not_json") == 3 and "Turn 3/3" in r.stdout
    traj = Trajectory.load_json(out)
    assert traj.stop_reason == "turn_budget" and traj.answer is None and traj.num_turns == 3
    assert [t.error for t in traj.turns] == ["format_not_json"] * 3
    assert traj.meta["run"]["backend"] == "replay" and traj.choices == ["red", "blue"]


def test_answer_is_scored_and_trajectory_reloads(tmp_path, video_path):
    out = tmp_path / "sub" / "t.json"
    r = run_cli(
        str(video_path), "When is the first beep?", "--task-type", "tr", "--answer", "[[3, 4]]",
        "--backend", "oracle", "--out", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "reward" in r.stdout and "1.000" in r.stdout and "Turn 1/16  get_frames 3.00-4.00 s" in r.stdout
    traj = Trajectory.load_json(out)
    assert traj.stop_reason == "answered" and traj.reward == pytest.approx(1.0)
    assert traj.ground_truth == [[3, 4]] and traj.turns[0].timestamps
    assert Trajectory.model_validate_json(traj.model_dump_json()) == traj


def test_dead_server_exits_3_and_says_what_to_do(tmp_path, video_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    out = tmp_path / "t.json"
    r = run_cli(
        str(video_path), "Q?", "--backend", "openai", "--base-url", url, "--retries", "0", "--out", str(out)
    )
    assert r.returncode == 3
    assert f"no server at {url}" in r.stderr and "--base-url" in r.stderr and "vllm serve" in r.stderr
    assert "Traceback" not in r.stderr
    assert Trajectory.load_json(out).stop_reason == "policy_error"


def _default_sigint() -> None:
    """A shell starts a background job (``cmd &``, nohup) with SIGINT ignored, and Python then never
    raises KeyboardInterrupt; the run under test gets the default, as from a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_saves_partial_trajectory(tmp_path, video_path):
    out = tmp_path / "t.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "120"}
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "omniagent.run", str(video_path), "Q?", "--backend", "replay",
            "-P", f"texts={json.dumps([FRAMES])}", "-P", "delay=0.3", "--max-turns", "50", "--out", str(out),
        ],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("Turn 2/50") or not line:
                break
        assert line.startswith("Turn 2/50"), "the run did not get to turn 2"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "partial trajectory saved" in stderr and "Traceback" not in stderr
    traj = Trajectory.load_json(out)
    assert traj.stop_reason == "interrupted" and 2 <= traj.num_turns < 50
    assert all(t.action_type == "get_frames" for t in traj.turns)


# ----------------------------------------------------------------------------------- in process
def test_episode_interrupted_keeps_completed_turns(video_path):
    class Interrupting(Policy):
        def __init__(self) -> None:
            self.n = 0

        def act(self, messages):
            self.n += 1
            if self.n == 3:
                raise KeyboardInterrupt
            return TurnOutput(text=FRAMES)

    env = OmniVideoEnv()
    with pytest.raises(EpisodeInterrupted) as info:
        run_episode(env, Interrupting(), {"media": str(video_path), "question": "Q?", "task_type": "ff"})
    env.close()
    traj = info.value.trajectory
    assert traj.stop_reason == "interrupted" and traj.num_turns == 2 and traj.frames_used == 4


def test_usage_errors_exit_2(tmp_path, video_path, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([str(video_path), "Q?", "--task-type", "mcq"])
    assert info.value.code == 2 and "needs --choices" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main([str(video_path), "Q?", "-P", "novalue"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        cli.main([str(video_path), "Q?", "--backend", "nonesuch", "--out", str(tmp_path / "t.json")])
    assert info.value.code == 2
    assert "unknown backend 'nonesuch'" in capsys.readouterr().err


def test_audio_only_uniform_and_report(tmp_path, audio_path, capsys):
    out, html = tmp_path / "t.json", tmp_path / "r.html"
    code = cli.main(
        [str(audio_path), "How many beeps?", "--task-type", "num", "--answer", "2", "--backend", "uniform",
         "--out", str(out), "--report", str(html)]
    )  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "get_audio 0.00-20.00 s → audio 0.00-20.00 s" in text and "ground truth" in text
    traj = Trajectory.load_json(out)
    assert [t.action_type for t in traj.turns] == ["get_audio", "answer"] and traj.answer == 0.0
    assert traj.audio_seconds_used == pytest.approx(20.0) and html.stat().st_size > 1000


def test_choices_and_answers_parse():
    assert cli_args.parse_choices(["red|blue| green "]) == ["red", "blue", "green"]
    assert cli_args.parse_choices(["red", "blue"]) == ["red", "blue"]
    assert cli_args.parse_choices(None) is None
    assert cli_args.parse_answer("blue", "mcq", ["red", "blue"]) == "B"
    assert cli_args.parse_answer("(c)", "mcq", ["a", "b", "c"]) == "C"
    assert cli_args.parse_answer("[[1, 2]]", "tr", None) == [[1, 2]]
    assert cli_args.parse_answer("3.5", "num", None) == 3.5
    assert cli_args.parse_policy_args(['texts=["a"]', "delay=0.5", "name=x"]) == {
        "texts": ["a"],
        "delay": 0.5,
        "name": "x",
    }


def test_backend_resolution(monkeypatch):
    assert cli.resolve_backend("auto", "m", "http://h:1/v1") == "openai"
    assert cli.resolve_backend("auto", "tiny-random", None) == "transformers"
    assert cli.resolve_backend("auto", "tiny", None) == "transformers"  # the shipped agent runs on CPU
    assert cli.resolve_backend("replay", "m", None) == "replay"
    monkeypatch.setattr(cli, "cuda_available", lambda: False)
    assert cli.resolve_backend("auto", cli_args.DEFAULT_MODEL, None) == "transformers"


def test_scripted_policies_stay_within_budget(video_path):
    env = OmniVideoEnv()
    opts = {
        "media": str(video_path),
        "question": "Q?",
        "task_type": "mcq",
        "choices": ["a", "b"],
        "max_turns": 1,
    }
    traj = run_episode(env, UniformPolicy(), opts)
    assert [t.action_type for t in traj.turns] == ["answer"] and traj.answer == "A"
    for seed in range(5):
        from omniagent.backends.scripted import RandomPolicy

        traj = run_episode(env, RandomPolicy(seed=seed), {**opts, "max_turns": 6})
        assert traj.stop_reason == "answered" and all(t.error is None for t in traj.turns), traj.turns
    traj = run_episode(env, ReplayPolicy(texts=["x"], repeat_last=False), {**opts, "max_turns": 4})
    assert traj.stop_reason == "policy_error" and traj.num_turns == 1
    env.close()


def test_backend_that_cannot_start_exits_3(tmp_path, video_path, capsys, monkeypatch):
    def broken(backend, args, limits):
        raise OSError(f"cannot load model {args.model!r}: not available offline")

    monkeypatch.setattr(cli, "build_policy", broken)
    code = cli.main(
        [
            str(video_path),
            "Q?",
            "--backend",
            "transformers",
            "--model",
            "x/y",
            "--out",
            str(tmp_path / "t.json"),
        ]
    )
    assert code == 3
    err = capsys.readouterr().err
    assert "backend 'transformers' could not start: cannot load model 'x/y'" in err
    assert "--model tiny-random" in err and "--backend openai --base-url" in err  # says what to do
    traj = Trajectory.load_json(tmp_path / "t.json")
    assert traj.stop_reason == "policy_error" and "cannot load model 'x/y'" in traj.error


@pytest.mark.slow
def test_missing_checkpoint_offline_exits_3(tmp_path, video_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = cli.main(
        [str(video_path), "Q?", "--backend", "transformers", "--model", str(tmp_path / "no-such-checkpoint"),
         "--device", "cpu", "--out", str(tmp_path / "t.json")]
    )  # fmt: skip
    assert code == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "could not start" in err and "--model tiny" in err and "tiny-random" in err
    assert "Traceback" not in err


def test_random_policy_draw_depends_on_task_not_order(video_path, silent_video_path):
    from omniagent.backends.scripted import RandomPolicy

    tasks = [
        {"media": str(video_path), "question": "Q1?", "task_type": "num", "max_turns": 6},
        {"media": str(silent_video_path), "question": "Q2?", "task_type": "num", "max_turns": 6},
    ]

    def actions(order, seed=3):
        env, policy, out = OmniVideoEnv(), RandomPolicy(seed=seed), {}
        for i in order:
            out[i] = [t.raw_text for t in run_episode(env, policy, tasks[i]).turns]
        env.close()
        return out

    assert actions([0, 1]) == actions([1, 0])
    assert actions([0], seed=3) != actions([0], seed=4)


def test_limit_flags_are_generated_from_env_limits(tmp_path, video_path, capsys):
    from envs.limits import EnvLimits

    parser = cli_args.build_parser()
    dests = {a.dest for a in parser._actions}
    assert {cli_args.LIMIT_DESTS.get(name, name) for name in EnvLimits.model_fields} <= dests
    args = parser.parse_args(
        [str(video_path), "Q?", "--max-frames", "4", "--decoder", "pyav", "--lenient-format"]
    )
    limits = cli_args.make_limits(args)
    assert limits == EnvLimits(max_frames=4, backend="pyav", strict_format=False)
    assert (
        cli_args.make_limits(parser.parse_args([str(video_path), "Q?"])) == EnvLimits()
    )  # one set of defaults
    with pytest.raises(SystemExit) as info:
        cli.main([str(video_path), "Q?", "--max-frames", "0", "--out", str(tmp_path / "t.json")])
    assert (
        info.value.code == 2
        and "--max-frames: Input should be greater than or equal to 1" in capsys.readouterr().err
    )
