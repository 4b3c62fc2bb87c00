"""The RL reward both trainers share (rl/reward.py): format penalties and the evidence gate, on the spans the real
environment serves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.env import OmniVideoEnv
from envs.tasks import Task
from rl.reward import RewardConfig, percept_spans, shaped_reward, touches_evidence


def _turn(action: dict) -> str:
    return json.dumps({"observation": "none", "thought": "Next.", "action": action})


def _served(video_path: Path, looks: list[dict]) -> tuple[list[tuple[float, float]], float]:
    """The spans the environment served for ``looks`` on the 20 s test video, and the answer's score."""
    task = Task(
        id="t", media=str(video_path), question="Which?", task_type="mcq", choices=["x", "y"], answer="B"
    )
    env = OmniVideoEnv()
    env.reset(options=task.env_options(len(looks) + 1))
    spans: list[tuple[float, float]] = []
    for look in looks:
        _, _, _, _, info = env.step(_turn(look))
        spans += [] if info.get("error") else percept_spans(info["action_type"], info["timestamps"])
    _, reward, terminated, _, _ = env.step(_turn({"type": "answer", "content": "B"}))
    assert terminated
    env.close()
    return spans, float(reward)


def test_served_spans_are_frame_instants_and_audio_or_clip_ranges(video_path: Path) -> None:
    frames, _ = _served(video_path, [{"type": "get_frames", "start": 0.0, "end": 20.0, "num": 3}])
    assert len(frames) == 3 and all(s == e for s, e in frames)  # the served frames' true timestamps
    assert frames[0][0] == pytest.approx(0.0, abs=0.11) and 9.0 <= frames[1][0] <= 11.0 < frames[2][0]
    audio, _ = _served(video_path, [{"type": "get_audio", "start": 2.0, "end": 14.0}])
    assert audio == [(pytest.approx(2.0), pytest.approx(14.0))]
    rejected, _ = _served(video_path, [{"type": "get_frames", "start": 15.0, "end": 5.0, "num": 2}])
    assert rejected == []  # a refused look served nothing
    assert percept_spans("answer", [3.0]) == []


def test_evidence_gate_pays_a_right_answer_only_after_a_look_at_the_evidence(video_path: Path) -> None:
    # three frames over the whole video land near 0 and 10 s and after 11 s: 4-6 s is never served
    spans, score = _served(video_path, [{"type": "get_frames", "start": 0.0, "end": 20.0, "num": 3}])
    assert score == 1.0
    missed, hit = [[4.0, 6.0]], [[9.0, 11.0]]
    assert not touches_evidence(spans, missed) and touches_evidence(spans, hit)
    audio, _ = _served(video_path, [{"type": "get_audio", "start": 2.0, "end": 14.0}])
    assert touches_evidence(audio, missed) and touches_evidence(audio, [[14.0, 15.0]])  # closed intervals
    assert not touches_evidence(audio, [[14.5, 15.0]])

    gate, plain = RewardConfig(evidence_gate=True), RewardConfig()
    for seen, gated in ((touches_evidence(spans, hit), 1.0), (touches_evidence(spans, missed), 0.0)):
        assert shaped_reward(score, 0, True, gate, seen) == gated
        assert shaped_reward(score, 0, True, plain, seen) == 1.0  # off by default: the plain outcome reward
    # the dense credit: a look at the evidence pays, right answer or not; a task without evidence (None) gets none
    dense = RewardConfig(evidence_gate=True, evidence_bonus=0.2)
    assert shaped_reward(score, 0, True, dense, True) == pytest.approx(1.2)
    assert shaped_reward(0.0, 0, True, dense, True) == pytest.approx(0.2)
    assert shaped_reward(score, 0, True, dense, False) == 0.0
    assert shaped_reward(score, 0, True, dense, None) == 1.0
    assert shaped_reward(0.0, 0, True, dense, None) == 0.0
    no_gate = RewardConfig(evidence_bonus=0.2)
    assert shaped_reward(score, 0, True, no_gate, False) == 1.0  # without the gate a guess still pays
    # penalties still apply under the gate, to an answer that earns nothing
    penalised = RewardConfig(format_error_penalty=0.1, no_answer_penalty=0.5, evidence_gate=True)
    assert shaped_reward(1.0, 2, True, penalised, False) == pytest.approx(-0.2)
    assert shaped_reward(0.0, 0, False, penalised, True) == pytest.approx(-0.5)
