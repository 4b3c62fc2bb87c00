"""Whole episodes with the tiny random Qwen2.5-Omni thinker through the transformers backend (CPU)."""

from __future__ import annotations

import pytest
from testkit import beep_options, play_every_percept

from envs.env import OmniVideoEnv
from omniagent import run as cli
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from omniagent.trajectory import Trajectory

MAX_NEW_TOKENS = 8
pytestmark = pytest.mark.slow  # ~30 s to import torch + transformers and load the tiny model on 2 busy cores


@pytest.fixture(scope="module")
def tiny():
    policy = make_policy(
        "transformers", model="tiny-random", device="cpu", max_new_tokens=MAX_NEW_TOKENS, seed=0
    )
    yield policy
    policy.close()


def test_tiny_episode_runs_to_the_budget(tiny, video_path, tmp_path):
    env = OmniVideoEnv()
    traj = run_episode(env, tiny, beep_options(video_path, max_turns=3))
    env.close()
    assert traj.stop_reason in ("turn_budget", "answered")  # random weights: almost surely the budget
    assert 1 <= traj.num_turns <= 3 and traj.policy == "transformers"
    for rec in traj.turns:
        assert rec.context_tokens and rec.context_tokens > 100  # the system prompt alone is longer
        assert 1 <= rec.completion_tokens <= MAX_NEW_TOKENS
        assert rec.token_logprobs is not None and len(rec.token_logprobs) == rec.completion_tokens
        assert rec.entropy is not None and rec.entropy > 0 and not rec.entropy_is_estimate
        assert rec.model_seconds > 0
    contexts = [r.context_tokens for r in traj.turns]
    assert contexts == sorted(contexts)  # each turn adds its output and the env's reply
    traj.save_json(tmp_path / "t.json")
    assert Trajectory.load_json(tmp_path / "t.json") == traj


def test_tiny_model_reads_frames_audio_and_clips(tiny, video_path):
    traj, policy = play_every_percept(tiny, video_path)
    assert traj.stop_reason == "answered" and traj.reward == 1.0
    assert [t.error for t in traj.turns] == [None] * 4
    # the model saw 2 frames, then one audio span, then one clip (the purge keeps one percept)
    assert policy.media_parts == [0, 2, 1, 1]
    assert all(t.context_tokens for t in traj.turns) and traj.frames_used == 2 + 5


def test_cli_with_tiny_model(tmp_path, video_path, capsys):
    out = tmp_path / "t.json"
    code = cli.main(
        [str(video_path), "Which beep is higher?", "--choices", "first|second", "--model", "tiny-random",
         "--device", "cpu", "--max-turns", "2", "--max-new-tokens", str(MAX_NEW_TOKENS), "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "answers are noise" in text and "Turn 1/2" in text
    traj = Trajectory.load_json(out)
    assert traj.meta["run"]["backend"] == "transformers" and traj.meta["run"]["model"] == "tiny-random"
