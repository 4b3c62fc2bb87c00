"""The openai backend's omni extras (omniagent/backends/openai_omni.py) against the fake server: a thinking
variant's reasoning, returned apart by a reasoning parser or at the head of the content, reaches
TurnOutput.thinking and stays out of the parse; a clip to vLLM carries its frame rate and seconds per grid."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_openai_server import ANSWER_TURN, FakeServer

from envs.env import OmniVideoEnv
from omniagent.backends.openai_backend import OpenAIPolicy
from omniagent.backends.openai_omni import split_reasoning, thinking_format, vllm_clip_kwargs
from omniagent.families import Thinking, get_family


@pytest.fixture()
def server():
    s = FakeServer()
    yield s
    s.close()


def with_reasoning(server: FakeServer, reasoning: str) -> None:
    """Replies carry ``reasoning_content`` beside the content, as ``vllm serve --reasoning-parser`` sends them."""
    plain = server.completion

    def completion(body: dict[str, Any]) -> dict[str, Any]:
        reply = plain(body)
        reply["choices"][0]["message"]["reasoning_content"] = reasoning
        return reply

    server.completion = completion  # type: ignore[method-assign]


def test_a_parsers_reasoning_content_becomes_the_turns_thinking(server) -> None:
    with_reasoning(server, "  The tone is at 3 s.  ")
    out = OpenAIPolicy(model="Qwen/Qwen3-Omni-30B-A3B-Thinking", base_url=server.url, retries=0).act([])
    assert out.thinking == "The tone is at 3 s." and out.text == ANSWER_TURN


def test_reasoning_left_in_the_content_is_cut_off_in_the_familys_format(server) -> None:
    server.text = "<think>\nlisten first\n</think>\n\n" + ANSWER_TURN
    out = OpenAIPolicy(model="Qwen3-Omni-30B-A3B-Thinking", base_url=server.url, retries=0).act([])
    assert (out.thinking, out.text) == ("listen first", ANSWER_TURN)
    json.loads(out.text)  # what the environment parses is the turn alone
    server.text = ANSWER_TURN  # a model that writes no block: nothing cut
    out = OpenAIPolicy(model="m", base_url=server.url, retries=0).act([])
    assert (out.thinking, out.text) == (None, ANSWER_TURN)


def test_the_thinking_format_comes_from_the_served_models_family() -> None:
    qwen3 = get_family("qwen3-omni").thinking
    assert thinking_format("Qwen/Qwen3-Omni-30B-A3B-Thinking") is qwen3
    assert thinking_format("qwen3-omni-30b-a3b-thinking") is qwen3  # a served name without the org
    assert thinking_format("some-hosted-model") == Thinking() and thinking_format(None) == Thinking()
    message = type("Message", (), {"reasoning": "r", "model_extra": {}})()  # vLLM's newer field name
    assert split_reasoning(message, "t", None) == ("r", "t")


def test_a_clip_to_vllm_carries_its_frame_rate_and_seconds_per_grid(server, video_path) -> None:
    env = OmniVideoEnv()
    try:
        env.reset(
            options={"media": str(video_path), "question": "Q?", "task_type": "mcq", "choices": ["x", "y"]}
        )
        turn = {
            "observation": "none",
            "thought": "t",
            "action": {"type": "get_clip", "start": 2.0, "end": 5.0},
        }
        obs, *_ = env.step(json.dumps(turn))
    finally:
        env.close()
    clip = next(p for p in obs[-1]["content"] if p["type"] == "video")
    OpenAIPolicy(model="m", base_url=server.url, retries=0, server="vllm").act(obs)
    mm = server.requests[-1]["mm_processor_kwargs"]
    assert mm == {"use_audio_in_video": True, "fps": clip["fps"], "second_per_grid_ts": [2 / clip["fps"]]}
    assert vllm_clip_kwargs(obs, audio_in_video=False) == {"fps": clip["fps"]}
    assert vllm_clip_kwargs([], audio_in_video=True) == {}
