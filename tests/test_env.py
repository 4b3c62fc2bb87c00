"""The Gymnasium environment: API conformance, percept purging, frame labels, rewards, bad input."""

from __future__ import annotations

import json
import math
import re
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from media_factory import read_barcode, tone_energy

import envs
from envs import prompts
from envs.env import OmniVideoEnv
from envs.errors import MediaError
from envs.messages import count_media_parts, media_messages, message_text


def turn(action: dict, observation: str = "none", thought: str = "look") -> str:
    return json.dumps({"observation": observation, "thought": thought, "action": action})


@pytest.fixture()
def env(video_path: Path) -> OmniVideoEnv:
    e = OmniVideoEnv(
        media=str(video_path),
        question="Which option?",
        task_type="mcq",
        choices=["red", "green", "blue"],
        answer="B",
        limits={"max_turns": 8, "max_frames": 16},
    )
    yield e
    e.close()


def test_registered_and_passes_check_env(video_path: Path) -> None:
    assert envs.ENV_ID in gym.registry
    e = gym.make(
        envs.ENV_ID,
        media=str(video_path),
        question="q?",
        task_type="num",
        answer=3,
    )
    check_env(e.unwrapped)
    e.close()


def test_reset_builds_system_and_question(env: OmniVideoEnv) -> None:
    obs, info = env.reset(seed=0)
    assert [m["role"] for m in obs] == ["system", "user"]
    system = message_text(obs[0])
    for word in (
        "observation",
        "thought",
        "get_frames",
        "get_audio",
        "get_clip",
        "answer",
        "1 to 16",
        "at most 300 s",
        "at most 60 s",
    ):
        assert word in system
    question = message_text(obs[1])
    assert "duration 20.00 s" in question and "10 fps" in question and "has audio" in question
    assert "A. red" in question and "C. blue" in question and "Turn 1 of 8" in question
    assert info["media"]["has_audio"] and info["max_turns"] == 8 and info["task"]["answer"] == "B"
    notice = obs[1]["content"][-1]["text"]  # the turn notice is the message's own last text part
    assert prompts.is_turn_notice(notice) and not prompts.is_turn_notice(obs[1]["content"][0]["text"])


def test_frames_percept_labels_each_frame_with_its_time(env: OmniVideoEnv) -> None:
    env.reset()
    obs, reward, term, trunc, info = env.step(
        turn({"type": "get_frames", "start": 2.0, "end": 4.0, "num": 5})
    )
    assert (reward, term, trunc, info["error"]) == (0.0, False, False, None)
    parts = obs[-1]["content"]
    images = [i for i, p in enumerate(parts) if p["type"] == "image"]
    assert len(images) == 5 and info["timestamps"] == [2.0, 2.5, 3.0, 3.5, 4.0]
    for i in images:
        t = parts[i]["timestamp"]
        assert parts[i - 1]["text"].strip() == f"Frame at {t:.2f}s:"
        assert read_barcode(parts[i]["image"]) == round(t * 10)
    assert "Turn 2 of 8" in parts[-1]["text"]
    assert info["frames_used"] == 5


def test_purge_keeps_one_raw_percept_and_exact_stubs(env: OmniVideoEnv) -> None:
    env.reset()
    rng = np.random.default_rng(0)
    served = []
    for k in range(7):
        kind = ["get_frames", "get_audio", "get_clip"][k % 3]
        s = float(rng.uniform(0, 15))
        action = {"type": kind, "start": s, "end": s + 2.0}
        if kind == "get_frames":
            action["num"] = int(rng.integers(1, 6))
        obs, _, term, trunc, info = env.step(turn(action, observation=f"obs {k}"))
        assert info["error"] is None and not term and not trunc
        served.append((kind, info["timestamps"], info["turn"]))
        assert len(media_messages(obs)) == 1, "only the newest percept may hold raw media"
        assert media_messages(obs) == [len(obs) - 1]
        # every earlier percept became a stub that names its exact times and the observation's turn
        stubs = [message_text(m) for m in obs if m["role"] == "user" and "MEDIA REMOVED" in message_text(m)]
        assert len(stubs) == k
        for stub, (kind_i, times_i, turn_i) in zip(stubs, served[:-1], strict=True):
            assert f"see your observation in turn {turn_i + 1}" in stub
            if kind_i == "get_audio":
                assert f"Audio {times_i[0]:.2f}s-{times_i[1]:.2f}s" in stub
            else:
                assert all(f"{t:.2f}s" in stub for t in times_i)
    # the assistant messages (the text memory) are never touched
    assert [json.loads(message_text(m))["observation"] for m in obs if m["role"] == "assistant"] == [
        f"obs {k}" for k in range(7)
    ]
    obs, _, _, _, _ = env.step(turn({"type": "answer", "content": "B"}))
    assert count_media_parts(obs) == 0


def test_audio_and_clip_percepts(env: OmniVideoEnv) -> None:
    env.reset()
    obs, _, _, _, info = env.step(turn({"type": "get_audio", "start": 3.0, "end": 4.0}))
    (audio,) = [p for p in obs[-1]["content"] if p["type"] == "audio"]
    assert (
        audio["sampling_rate"] == 16_000
        and audio["audio"].shape == (16_000,)
        and audio["audio"].dtype == np.float32
    )
    assert info["audio_seconds_used"] == 1.0
    obs, _, _, _, info = env.step(turn({"type": "get_clip", "start": 1.0, "end": 3.0}))
    (video,) = [p for p in obs[-1]["content"] if p["type"] == "video"]
    assert video["video"].shape[0] == 5 and video["timestamps"] == [1.0, 1.5, 2.0, 2.5, 3.0]
    assert video["audio"].shape == (32_000,) and video["fps"] == 2.0
    assert info["frames_used"] == 5 and info["audio_seconds_used"] == 3.0 and info["clip_seconds_used"] == 2.0


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("I think the answer is B", "format_not_json"),
        ("", "format_empty"),
        (
            '{"observation": "a", "thought": "b", "action": {"type": "answer", "content": "B"}} done',
            "format_trailing_text",
        ),
        (
            '```json\n{"observation": "a", "thought": "b", "action": {"type": "answer", "content": "B"}}\n```',
            "format_code_fence",
        ),
        ('{"observation": "a", "action": {"type": "answer", "content": "B"}}', "format_missing_key"),
        ('{"observation": "a", "thought": "b", "action": {"type": "zoom", "start": 1}}', "action_unknown"),
        ('{"observation": "a", "thought": "b", "action": {"start": 1}}', "action_missing_type"),
        (
            '{"observation": "a", "thought": "b", "action": {"type": "get_frames", "start": 1, "end": 2}}',
            "action_invalid_field",
        ),
        (
            '{"observation": "a", "thought": "b", "action": {"type": "get_frames", "start": "x", "end": 2, "num": 2}}',
            "action_invalid_field",
        ),
        (
            '{"observation": "a", "thought": "b", "action": {"type": "get_frames", "start": NaN, "end": 2, "num": 2}}',
            "time_not_finite",
        ),
        (
            '{"observation": "a", "thought": "b", "action": {"type": "get_audio", "start": 1, "end": Infinity}}',
            "time_not_finite",
        ),
        ("[1, 2]", "format_not_object"),
        (turn({"type": "get_frames", "start": 8, "end": 2, "num": 3}), "time_reversed"),
        (turn({"type": "get_frames", "start": 1e12, "end": 2e12, "num": 3}), "time_out_of_range"),
        (turn({"type": "get_audio", "start": -50, "end": -1}), "time_out_of_range"),
        (turn({"type": "get_frames", "start": 1, "end": 2, "num": 0}), "num_invalid"),
        (turn({"type": "get_audio", "start": 2, "end": 2}), "span_empty"),
        (turn({"type": "get_clip", "start": 0, "end": 20}), None),
        (turn({"type": "answer", "content": "Z"}), "answer_invalid"),
        (turn({"type": "answer", "content": "the second one"}), "answer_invalid"),
    ],
)
def test_bad_output_gives_error_percept_and_counts_the_turn(
    env: OmniVideoEnv, text: str, code: str | None
) -> None:
    env.reset()
    obs, reward, term, trunc, info = env.step(text)
    assert info["error"] == code
    assert info["turn"] == 1 and not term and not trunc and reward == 0.0
    if code is not None:
        msg = message_text(obs[-1])
        assert msg.startswith(f"ERROR ({code}):") and "this turn still counted" in msg
        assert count_media_parts(obs) == 0
        assert "Turn 2 of 8" in msg


def test_span_caps_reject_and_num_cap_clamps(video_path: Path) -> None:
    e = OmniVideoEnv(
        media=str(video_path),
        question="q",
        task_type="num",
        answer=2,
        limits={"max_audio_s": 5, "max_clip_s": 3, "max_frames": 4},
    )
    e.reset()
    _, _, _, _, info = e.step(turn({"type": "get_audio", "start": 0, "end": 6}))
    assert info["error"] == "span_too_long" and "at most 5 s" in info["error_message"]
    _, _, _, _, info = e.step(turn({"type": "get_clip", "start": 0, "end": 3.5}))
    assert info["error"] == "span_too_long"
    _, _, _, _, info = e.step(turn({"type": "get_clip", "start": 1.0, "end": 1.01}))
    assert info["error"] == "span_too_short" and "at least 0.1 s" in info["error_message"]
    _, _, _, _, info = e.step(turn({"type": "get_clip", "start": 1.0, "end": 1.1}))
    assert info["error"] is None and info["timestamps"]
    obs, _, _, _, info = e.step(turn({"type": "get_frames", "start": -3, "end": 50, "num": 10**9}))
    assert info["error"] is None and len(info["timestamps"]) == 4
    assert any("lowered" in n for n in info["notes"]) and any("trimmed" in n for n in info["notes"])
    assert "Note:" in message_text(obs[-1])
    _, _, _, _, info = e.step(turn({"type": "get_frames", "start": 5, "end": 5, "num": 3}))
    assert info["timestamps"] == [5.0]
    e.close()


def test_lenient_format_unwraps_code_fences(video_path: Path) -> None:
    e = OmniVideoEnv(
        media=str(video_path),
        question="q",
        task_type="num",
        answer=2,
        limits={"strict_format": False},
    )
    e.reset()
    text = "```json\n" + turn({"type": "answer", "content": "2"}) + "\n```"
    _, reward, term, _, info = e.step(text)
    assert term and reward == 1.0 and info["error"] is None


def test_answer_terminates_with_reward(env: OmniVideoEnv) -> None:
    env.reset()
    _, reward, term, trunc, info = env.step(turn({"type": "answer", "content": "(b)"}))
    assert (reward, term, trunc, info["stop_reason"], info["answer"]) == (1.0, True, False, "answered", "B")
    with pytest.raises(RuntimeError):
        env.step(turn({"type": "answer", "content": "B"}))
    env.reset()
    _, reward, term, _, _ = env.step(turn({"type": "answer", "content": "A"}))
    assert term and reward == 0.0


def test_mcq_option_text_opt_in_is_stated_offered_and_scored_as_the_letter(video_path: Path) -> None:
    """With ``mcq_option_text`` the system prompt says an option's text is an answer, the answer schema lists the
    texts, and "green" scores as option B; without it the same answer is a format error the agent sees."""
    task = {"media": str(video_path), "question": "Which?", "task_type": "mcq", "choices": ["red", "green", "blue"],
            "answer": "B"}  # fmt: skip
    for opt_in in (True, False):
        e = OmniVideoEnv(**task, limits={"max_turns": 3, "mcq_option_text": opt_in})
        obs, info = e.reset()
        enum = info["final_turn_schema"]["properties"]["action"]["properties"]["content"]["enum"]
        assert ("exact text" in message_text(obs[0]), "green" in enum) == (opt_in, opt_in)
        obs, reward, term, _, info = e.step(turn({"type": "answer", "content": " Green"}))
        if opt_in:
            assert (term, reward, info["answer"], info["error"]) == (True, 1.0, "B", None)
        else:
            assert not term and info["error"] == "answer_invalid" and "Green" in message_text(obs[-1])
        e.close()


def test_turn_budget_truncates(env: OmniVideoEnv) -> None:
    env.reset(options={"max_turns": 3})
    for _ in range(3):
        obs, reward, term, trunc, info = env.step("not json")
    assert trunc and not term and reward == 0.0 and info["stop_reason"] == "turn_budget"
    assert "last turn" in message_text(env.messages[-3])
    assert "turn budget is spent" in message_text(obs[-1])


@pytest.mark.parametrize(
    ("task_type", "truth", "content", "expected"),
    [
        ("tr", [[2.0, 4.0]], "[[3.0, 5.0]]", 1.0 / 3.0),
        ("tr", [[0.0, 2.0], [10.0, 12.0]], [[0.0, 2.0], [10.0, 11.0]], 3.0 / 4.0),
        ("num", 10, "10", 1.0),
        ("num", 10, "12", 0.6),
        ("size", 100.0, 72, 0.5),
        ("ff", "a red square", "a red square", 0.0),
    ],
)
def test_rewards_per_task_type(video_path: Path, task_type, truth, content, expected) -> None:
    e = OmniVideoEnv(
        media=str(video_path),
        question="q",
        task_type=task_type,
        answer=truth,
    )
    e.reset()
    _, reward, term, _, info = e.step(turn({"type": "answer", "content": content}))
    assert term and math.isclose(reward, expected, abs_tol=1e-9)
    if task_type == "ff":
        assert info["reward_available"] is False and "no judge" in info["notes"][0]
    e.close()


def test_free_form_uses_a_configured_judge(video_path: Path) -> None:
    calls = []

    def judge(question: str, reference: str, prediction: str) -> float:
        calls.append((question, reference, prediction))
        return 0.75

    e = OmniVideoEnv(
        media=str(video_path),
        question="Describe it",
        task_type="ff",
        answer="ref",
        judge=judge,
    )
    e.reset()
    _, reward, _, _, info = e.step(turn({"type": "answer", "content": "a grey screen"}))
    assert reward == 0.75 and info["reward_available"] and calls == [("Describe it", "ref", "a grey screen")]


def test_actions_a_file_cannot_serve(audio_path: Path, silent_video_path: Path) -> None:
    e = OmniVideoEnv(
        media=str(audio_path),
        question="q",
        task_type="num",
        answer=1,
    )
    obs, _ = e.reset()
    assert "get_frames" not in message_text(obs[0]) and "audio only" in message_text(obs[1])
    _, _, _, _, info = e.step(turn({"type": "get_frames", "start": 0, "end": 5, "num": 3}))
    assert info["error"] == "no_video"
    obs, _, _, _, info = e.step(turn({"type": "get_audio", "start": 2.5, "end": 4.5}))
    assert info["error"] is None and count_media_parts(obs) == 1
    e.close()
    e = OmniVideoEnv(media=str(silent_video_path), question="q", task_type="num", answer=1)
    obs, _ = e.reset()
    assert "get_audio" not in message_text(obs[0]) and "no audio track" in message_text(obs[1])
    _, _, _, _, info = e.step(turn({"type": "get_audio", "start": 0, "end": 5}))
    assert info["error"] == "no_audio" and "no audio track" in info["error_message"]
    e.close()


def test_reset_rejects_unusable_media_and_bad_tasks(tmp_path: Path, video_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00" * 1000)
    e = OmniVideoEnv(question="q", task_type="num")
    with pytest.raises(MediaError):
        e.reset(options={"media": str(bad)})
    with pytest.raises(ValueError, match="media path and a question"):
        e.reset(options={})
    with pytest.raises(ValueError, match="choices"):
        e.reset(options={"media": str(video_path), "task_type": "mcq"})
    with pytest.raises(ValueError, match="task_type"):
        e.reset(options={"media": str(video_path), "task_type": "essay"})


def test_context_size_does_not_grow_with_old_media(env: OmniVideoEnv) -> None:
    """Raw media bytes in the context stay bounded by one percept however many turns pass."""
    env.reset(options={"max_turns": 12})
    sizes = []
    for k in range(10):
        obs, *_ = env.step(turn({"type": "get_frames", "start": k, "end": k + 1, "num": 4}))
        sizes.append(sum(p["image"].nbytes for m in obs for p in m["content"] if p["type"] == "image"))
    assert len(set(sizes)) == 1
    assert re.search(r"Turn 11 of 12", message_text(obs[-1]))


def test_get_audio_is_decoded_on_demand(video_path: Path) -> None:
    """No audio cache: reset starts no extraction and the first get_audio decodes its span directly."""
    e = OmniVideoEnv(media=str(video_path), question="q", task_type="num", answer=1)
    e.reset()
    assert not [t for t in threading.enumerate() if t.name.startswith("audio-cache")]
    obs, _, _, _, info = e.step(turn({"type": "get_audio", "start": 3.0, "end": 4.0}))
    (audio,) = [p for p in obs[-1]["content"] if p["type"] == "audio"]
    assert info["error"] is None and tone_energy(audio["audio"], 1000) > 0.8
    e.close()
