"""Trajectory records: built from a step in one place, and any text a model writes saves and reloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envs import jsonl
from omniagent.policy import TurnOutput
from omniagent.trajectory import Trajectory, TurnRecord, load_trajectories, save_trajectories

# any code point, lone UTF-16 surrogates included (hypothesis leaves them out by default)
ANY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=30)
SURROGATE_HEAVY = st.text(
    st.sampled_from(["\ud800", "\udfff", "\ud83d", "\ude00", "a", '"', "\\", "\n", "é"])
)
TEXT = st.one_of(ANY_TEXT, SURROGATE_HEAVY)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def trajectories(draw: st.DrawFn) -> Trajectory:
    turns = [
        TurnRecord.from_step(
            TurnOutput(text=draw(TEXT), entropy=0.5, entropy_estimator="topk_lump"),
            {
                "turn": k + 1,
                "parsed": {
                    "observation": draw(TEXT),
                    "thought": draw(TEXT),
                    "action": {"type": "answer", "content": draw(JSONISH)},
                },
                "action_type": "answer",
                "error": None,
                "notes": draw(st.lists(TEXT, max_size=2)),
                "timestamps": [1.0],
            },
        )
        for k in range(draw(st.integers(0, 3)))
    ]
    return Trajectory(
        id=draw(TEXT),
        media="m.mp4",
        question=draw(TEXT),
        task_type="ff",
        choices=draw(st.none() | st.lists(TEXT, max_size=3)),
        ground_truth=draw(JSONISH),
        max_turns=4,
        turns=turns,
        answer=draw(JSONISH),
        error=draw(st.none() | TEXT),
        meta={"model_said": draw(JSONISH)},
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trajectories())
def test_any_trajectory_serialises_and_reloads(traj: Trajectory) -> None:
    text = traj.model_dump_json()
    text.encode("utf-8")  # writable as UTF-8
    again = Trajectory.model_validate_json(text)
    assert again == traj
    assert again.model_dump_json() == text
    # and through the JSONL writer and reader every run uses
    assert Trajectory.model_validate(json.loads(jsonl.dumps_record(traj))) == traj


@settings(max_examples=60, deadline=None)
@given(ANY_TEXT)
def test_assignment_is_made_safe_too(text: str) -> None:
    traj = Trajectory(id="t", media="m", question="q", task_type="ff", max_turns=1)
    traj.answer, traj.error = {"content": text}, text
    assert Trajectory.model_validate_json(traj.model_dump_json()) == traj


def test_lone_surrogate_becomes_replacement_character(tmp_path: Path) -> None:
    out = TurnOutput(text='{"thought": "\\ud800"} \ud800')
    rec = TurnRecord.from_step(out, {"turn": 1, "parsed": {"thought": "a\ud800b"}})
    assert rec.thought == "a\ufffdb" and rec.raw_text.endswith("\ufffd")
    assert rec.raw_text.startswith('{"thought": "\\ud800"}')  # the escape as written is kept
    traj = Trajectory(id="t", media="m", question="q", task_type="ff", max_turns=1, turns=[rec])
    traj.meta["late"] = "\udc00"  # in-place mutation bypasses validation; saving still works
    traj.save_json(tmp_path / "t.json")
    assert Trajectory.load_json(tmp_path / "t.json").meta["late"] == "\ufffd"
    save_trajectories([traj, traj], tmp_path / "all.jsonl")
    jsonl.append_jsonl(tmp_path / "all.jsonl", traj)
    assert [t.turns[0].thought for t in load_trajectories(tmp_path / "all.jsonl")] == ["a\ufffdb"] * 3


def test_from_step_takes_everything_from_output_and_info() -> None:
    out = TurnOutput(
        text="raw",
        thinking="the frames first",  # a thinking variant's reasoning block, recorded beside the parsed text
        token_logprobs=[-0.1, -0.2],
        entropy=0.3,
        entropy_estimator="exact",
        prompt_tokens=120,
        completion_tokens=2,
        model_seconds=1.5,
        scripted_error=True,
    )
    info: dict[str, Any] = {
        "turn": 2,
        "parsed": {
            "observation": "o",
            "thought": "t",
            "action": {"type": "get_frames", "start": 0, "end": 4, "num": 2},
        },
        "action_type": "get_frames",
        "error": None,
        "error_message": None,
        "notes": ["clamped"],
        "timestamps": [0.0, 4.0],
        "frames_used": 2,
        "audio_seconds_used": 0.0,
        "clip_seconds_used": 0.0,
    }
    rec = TurnRecord.from_step(out, info, env_seconds=0.25)
    assert rec.model_dump() == {
        "turn": 2,
        "raw_text": "raw",
        "thinking": "the frames first",
        "observation": "o",
        "thought": "t",
        "action": {"type": "get_frames", "start": 0, "end": 4, "num": 2},
        "action_type": "get_frames",
        "error": None,
        "error_message": None,
        "notes": ["clamped"],
        "timestamps": [0.0, 4.0],
        "frames_used": 2,
        "audio_seconds_used": 0.0,
        "clip_seconds_used": 0.0,
        "context_tokens": 120,
        "completion_tokens": 2,
        "model_seconds": 1.5,
        "env_seconds": 0.25,
        "entropy": 0.3,
        "entropy_estimator": "exact",
        "token_logprobs": [-0.1, -0.2],
        "scripted_error": True,  # a teacher's staged mistake stays marked in the record
    }
    assert rec.request() == "get_frames 0.00-4.00 s num=2" and not rec.entropy_is_estimate
    single = TurnRecord.from_step(out, {}, timestamps=[1.0], frames_used=8)  # a one-turn baseline
    assert (single.turn, single.timestamps, single.frames_used, single.action_type) == (1, [1.0], 8, None)


@pytest.mark.parametrize(
    ("flag", "entropy", "estimator"), [(True, 0.4, "topk_legacy"), (False, 0.4, "exact"), (True, None, None)]
)
def test_files_with_the_old_estimate_flag_still_load(
    flag: bool, entropy: float | None, estimator: str
) -> None:
    rec = TurnRecord.model_validate(
        {"turn": 1, "raw_text": "x", "entropy": entropy, "entropy_is_estimate": flag}
    )
    assert rec.entropy_estimator == estimator and rec.entropy_is_estimate is (estimator == "topk_legacy")
