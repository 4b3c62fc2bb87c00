"""The OpenAI-compatible backend against a fake server on 127.0.0.1 (tests/fake_openai_server.py)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import time
from typing import Any

import av
import numpy as np
import pytest
import soundfile as sf
from fake_openai_server import ANSWER_TURN, TOPS, FakeServer
from media_factory import read_barcode
from PIL import Image
from testkit import free_port

from envs.env import OmniVideoEnv
from omniagent.backends.entropy import TOPK_ESTIMATOR, topk_entropy
from omniagent.backends.openai_backend import OpenAIPolicy
from omniagent.backends.openai_messages import to_openai_messages
from omniagent.episode import run_episode
from omniagent.policy import PolicyError, make_policy


@pytest.fixture()
def server():
    s = FakeServer()
    yield s
    s.close()


def context_after(media: str, action: dict[str, Any], **reset: Any) -> list[dict[str, Any]]:
    """The environment's context right after serving ``action`` (holding its raw percept)."""
    env = OmniVideoEnv()
    try:
        env.reset(
            options={"media": media, "question": "Q?", "task_type": "mcq", "choices": ["x", "y"], **reset}
        )
        obs, *_ = env.step(json.dumps({"observation": "none", "thought": "t", "action": action}))
        return obs
    finally:
        env.close()


def user_parts(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for m in request["messages"] if isinstance(m["content"], list) for p in m["content"]]


def decode_data_url(url: str, mime: str) -> bytes:
    prefix = f"data:{mime};base64,"
    assert url.startswith(prefix), url[:40]
    return base64.b64decode(url[len(prefix) :])


# ------------------------------------------------------------------------------------------ tests
def lump_entropy(logprobs: list[float]) -> float:
    """The top-k estimate written out: exact head terms plus the unseen mass as one lump."""
    p = np.exp(logprobs)
    rest = 1.0 - p.sum()
    return float(-(p * np.log(p)).sum() - rest * math.log(rest))


def test_frames_become_decodable_images_and_logprobs_give_entropy(server, video_path):
    obs = context_after(str(video_path), {"type": "get_frames", "start": 1.0, "end": 9.0, "num": 3})
    policy = OpenAIPolicy(model="fake-omni", base_url=server.url, retries=0, seed=7, max_tokens=64)
    out = policy.act(obs)

    req = server.requests[-1]
    assert req["model"] == "fake-omni" and req["temperature"] == 0 and req["seed"] == 7
    assert req["max_tokens"] == 64 and req["logprobs"] is True and req["top_logprobs"] == 20
    assert "extra_body" not in req and "mm_processor_kwargs" not in req  # no clip, no processor options
    roles = [m["role"] for m in req["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert isinstance(req["messages"][0]["content"], str) and isinstance(req["messages"][2]["content"], str)
    parts = req["messages"][-1]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 3
    # every image follows its timestamp label; adjacent text parts are merged into one
    kinds = [p["type"] for p in parts]
    assert all(a != b or a != "text" for a, b in zip(kinds, kinds[1:], strict=False))
    for i, p in enumerate(parts):
        if p["type"] == "image_url":
            assert parts[i - 1]["type"] == "text" and "Frame at" in parts[i - 1]["text"]
    times = [
        float(p["text"].rsplit("Frame at ", 1)[1].split("s")[0])
        for p in parts
        if p["type"] == "text" and "Frame at" in p["text"]
    ]
    for img_part, t in zip(images, times, strict=True):
        img = np.asarray(Image.open(io.BytesIO(decode_data_url(img_part["image_url"]["url"], "image/jpeg"))))
        assert img.shape == (72, 128, 3)
        assert read_barcode(img) == round(t * 10)  # the frame shown is the frame at its label's time

    assert out.text == ANSWER_TURN
    assert out.prompt_tokens == 123 and out.completion_tokens == 3
    assert out.token_logprobs == pytest.approx([TOPS[0]] * 3)
    expected = lump_entropy(TOPS)
    assert out.entropy == pytest.approx(expected) and out.entropy_is_estimate is True
    assert out.entropy_estimator == TOPK_ESTIMATOR
    assert out.token_entropies == pytest.approx([expected] * 3)


def test_png_images_are_lossless(server, video_path):
    obs = context_after(str(video_path), {"type": "get_frames", "start": 2.0, "end": 2.0, "num": 1})
    OpenAIPolicy(model="m", base_url=server.url, retries=0, image_format="png").act(obs)
    img = next(p for p in user_parts(server.requests[-1]) if p["type"] == "image_url")
    decoded = np.asarray(Image.open(io.BytesIO(decode_data_url(img["image_url"]["url"], "image/png"))))
    raw = next(p for p in obs[-1]["content"] if p["type"] == "image")["image"]
    assert np.array_equal(decoded, raw)


def test_audio_becomes_wav_input_audio(server, audio_path):
    obs = context_after(str(audio_path), {"type": "get_audio", "start": 2.5, "end": 4.5})
    OpenAIPolicy(model="m", base_url=server.url, retries=0).act(obs)
    audio = [p for p in user_parts(server.requests[-1]) if p["type"] == "input_audio"]
    assert len(audio) == 1 and audio[0]["input_audio"]["format"] == "wav"
    samples, sr = sf.read(io.BytesIO(base64.b64decode(audio[0]["input_audio"]["data"])))
    assert sr == 16000 and len(samples) == pytest.approx(2.0 * 16000, abs=16)
    burst = samples[int(0.6 * sr) : int(1.4 * sr)]  # 3.1-3.9 s: inside the 1 kHz burst at 3-4 s
    assert np.abs(burst).max() > 0.2 and np.abs(samples[: int(0.4 * sr)]).max() < 0.05


def test_clip_becomes_mp4_then_its_audio(server, video_path):
    obs = context_after(str(video_path), {"type": "get_clip", "start": 2.0, "end": 5.0})
    OpenAIPolicy(model="m", base_url=server.url, retries=0).act(obs)
    req = server.requests[-1]
    parts = user_parts(req)
    kinds = [p["type"] for p in parts]
    v = kinds.index("video_url")
    assert kinds[v + 1] == "input_audio"  # the clip's sound right after the clip
    # the clip is 2 fps: one temporal grid (2 frames) per second, the order of its frames and audio in vLLM
    assert req["mm_processor_kwargs"] == {"use_audio_in_video": True, "fps": 2.0, "second_per_grid_ts": [1.0]}
    assert req["media_io_kwargs"] == {"video": {"num_frames": -1}}
    clip = next(p for p in obs[-1]["content"] if p["type"] == "video")
    mp4 = decode_data_url(parts[v]["video_url"]["url"], "video/mp4")
    with av.open(io.BytesIO(mp4)) as c:
        assert not c.streams.audio  # silent mp4: the sound travels separately
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
        rate = float(c.streams.video[0].average_rate)
    assert len(frames) == len(clip["timestamps"]) and rate == pytest.approx(2.0)
    for f, t in zip(frames, clip["timestamps"], strict=True):
        assert read_barcode(f) == round(t * 10)
    samples, sr = sf.read(io.BytesIO(base64.b64decode(parts[v + 1]["input_audio"]["data"])))
    assert sr == 16000 and len(samples) == pytest.approx(3.0 * 16000, abs=16)


def test_clip_audio_muxed(server, video_path):
    obs = context_after(str(video_path), {"type": "get_clip", "start": 2.0, "end": 5.0})
    OpenAIPolicy(model="m", base_url=server.url, retries=0, clip_audio="muxed").act(obs)
    req = server.requests[-1]
    parts = user_parts(req)
    assert [p["type"] for p in parts].count("input_audio") == 0
    # the clip is 2 fps: one temporal grid (2 frames) per second, the order of its frames and audio in vLLM
    assert req["mm_processor_kwargs"] == {"use_audio_in_video": True, "fps": 2.0, "second_per_grid_ts": [1.0]}
    mp4 = decode_data_url(next(p for p in parts if p["type"] == "video_url")["video_url"]["url"], "video/mp4")
    with av.open(io.BytesIO(mp4)) as c:
        assert c.streams.audio and c.streams.audio[0].sample_rate == 16000


def test_silent_clip_has_no_audio(server, silent_video_path):
    obs = context_after(str(silent_video_path), {"type": "get_clip", "start": 1.0, "end": 3.0})
    OpenAIPolicy(model="m", base_url=server.url, retries=0).act(obs)
    req = server.requests[-1]
    assert [p["type"] for p in user_parts(req)].count("input_audio") == 0
    assert req["mm_processor_kwargs"] == {"use_audio_in_video": False, "fps": 2.0}


def test_model_defaults_to_the_served_one(server, video_path):
    obs = context_after(str(video_path), {"type": "get_frames", "start": 0.0, "end": 1.0, "num": 1})
    policy = OpenAIPolicy(model=None, base_url=server.url, retries=0)
    policy.act(obs)
    assert server.requests[-1]["model"] == "fake-omni"


def test_whole_episode_records_entropy(server, video_path):
    env = OmniVideoEnv()
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=0)
    traj = run_episode(
        env,
        policy,
        {
            "media": str(video_path),
            "question": "Q?",
            "task_type": "mcq",
            "choices": ["x", "y"],
            "answer": "B",
        },
    )
    env.close()
    assert traj.stop_reason == "answered" and traj.reward == 1.0
    assert traj.turns[0].entropy is not None and traj.turns[0].entropy_is_estimate
    assert traj.turns[0].context_tokens == 123


def test_server_refusing_logprobs_is_retried_without(server, video_path):
    server.mode = "no-logprobs-allowed"
    obs = context_after(str(video_path), {"type": "get_frames", "start": 0.0, "end": 1.0, "num": 1})
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=0)
    out = policy.act(obs)
    assert out.text == ANSWER_TURN and out.entropy is None and not out.entropy_is_estimate
    assert "logprobs" not in server.requests[-1]
    policy.act(obs)  # remembered: one request, not two
    assert len(server.requests) == 3


# ------------------------------------------------------------------------------------------ errors
def text_context() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_dead_server_says_what_to_do():
    url = f"http://127.0.0.1:{free_port()}/v1"
    policy = OpenAIPolicy(model="harryhsing/OmniAgent-RL-7B", base_url=url, retries=0, timeout=5)
    with pytest.raises(PolicyError) as info:
        policy.act(text_context())
    msg = str(info.value)
    assert msg.startswith(f"no server at {url}") and "vllm serve" in msg and "--base-url" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        ("garbage", "not a chat completion"),
        ("badjson", "not JSON"),
        ("nochoices", "no choices"),
        ("500", "HTTP 500: engine died"),
        ("404", "--base-url ends in /v1"),
    ],
)
def test_bad_replies_raise_policy_error(server, mode, needle):
    server.mode = mode
    policy = OpenAIPolicy(model="nope", base_url=server.url, retries=0)
    with pytest.raises(PolicyError, match=needle) as info:
        policy.act(text_context())
    assert "\n" not in str(info.value)
    if mode == "404":
        assert "fake-omni" in str(info.value)  # lists what the server does serve


def test_null_content_raises(server):
    server.text = None
    with pytest.raises(PolicyError, match="without text content"):
        OpenAIPolicy(model="m", base_url=server.url, retries=0).act(text_context())


def test_timeout_raises_policy_error(server):
    server.delay = 1.5
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=0, timeout=0.3)
    with pytest.raises(PolicyError, match=r"did not answer within 0.3 s.*--timeout"):
        policy.act(text_context())


def test_policy_error_ends_episode_cleanly(video_path):
    env = OmniVideoEnv()
    policy = OpenAIPolicy(model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", retries=0)
    traj = run_episode(env, policy, {"media": str(video_path), "question": "Q?", "task_type": "ff"})
    env.close()
    assert traj.stop_reason == "policy_error" and traj.error.startswith("no server at") and not traj.turns


def test_conversion_rejects_unknown_parts():
    with pytest.raises(ValueError, match="unknown content part"):
        to_openai_messages([{"role": "user", "content": [{"type": "hologram"}]}])


# ------------------------------------------------------------------------------ server extras
def test_generic_server_gets_no_vllm_fields(server, video_path):
    """A server that is not vLLM (transformers serve answers 422 to unknown fields and takes no
    inline video) gets the clip as its labelled frames and its sound, without vLLM's extras."""
    server.owned_by = "huggingface"
    obs = context_after(str(video_path), {"type": "get_clip", "start": 2.0, "end": 5.0})
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=0, extra_body={"top_k": 5})
    policy.act(obs)
    req = server.requests[-1]
    assert "mm_processor_kwargs" not in req and "media_io_kwargs" not in req
    assert req["top_k"] == 5  # configured extras are still sent
    parts = user_parts(req)
    kinds = [p["type"] for p in parts]
    clip = next(p for p in obs[-1]["content"] if p["type"] == "video")
    assert "video_url" not in kinds and kinds.count("image_url") == len(clip["timestamps"])
    images = [i for i, k in enumerate(kinds) if k == "image_url"]
    assert kinds[images[-1] + 1] == "input_audio" and kinds.count("input_audio") == 1  # the clip's sound
    for i, t in zip(images, clip["timestamps"], strict=True):
        assert parts[i - 1]["text"].endswith(f"Frame at {t:.2f}s:")
        img = np.asarray(Image.open(io.BytesIO(decode_data_url(parts[i]["image_url"]["url"], "image/jpeg"))))
        assert read_barcode(img) == round(t * 10)
    assert policy.server_kind() == "generic"


@pytest.mark.parametrize(("setting", "owned_by", "extras"), [("generic", "vllm", False), ("vllm", "x", True)])
def test_server_setting_overrides_detection(server, video_path, setting, owned_by, extras):
    server.owned_by = owned_by
    obs = context_after(str(video_path), {"type": "get_clip", "start": 2.0, "end": 5.0})
    OpenAIPolicy(model="m", base_url=server.url, retries=0, server=setting).act(obs)
    req = server.requests[-1]
    assert ("mm_processor_kwargs" in req) is extras and ("media_io_kwargs" in req) is extras


# ----------------------------------------------------------------------------------- deadline
def test_timeout_is_a_deadline_for_the_whole_request(server):
    """A server that trickles one byte every 0.2 s never trips a per-read time-out; the deadline
    still ends the request (retries included) after ``timeout`` seconds."""
    server.mode = "trickle"
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=2, timeout=1.5)
    t0 = time.perf_counter()
    with pytest.raises(PolicyError, match=r"did not answer within 1.5 s.*--timeout") as info:
        policy.act(text_context())
    assert time.perf_counter() - t0 < 4.0
    assert "\n" not in str(info.value) and len(server.requests) == 1


def test_run_on_loop_inside_and_outside_an_event_loop():
    from omniagent.backends.openai_endpoints import run_on_loop

    assert run_on_loop(lambda: asyncio.sleep(0.01, result=5), 1.0) == 5
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError):
        run_on_loop(lambda: asyncio.sleep(10), 0.2)
    assert time.perf_counter() - t0 < 2.0

    async def from_async_code() -> int:  # e.g. a caller that runs its own loop in this thread
        return run_on_loop(lambda: asyncio.sleep(0.01, result=7), 1.0)

    assert asyncio.run(from_async_code()) == 7


# ------------------------------------------------------------------------------------ secrets
def test_api_key_is_sent_but_never_recorded(server):
    secret = "sk-do-not-record-4242"
    policy = make_policy("openai", model="m", base_url=server.url, retries=0, api_key=secret)
    policy.act(text_context())
    assert server.auth[-1] == f"Bearer {secret}"
    recorded = json.dumps(policy.config()) + repr(policy) + str(policy.params) + repr(policy.params)
    assert secret not in recorded and "**********" in recorded
    assert policy.config()["base_url"] == server.url and policy.config()["server"] == "auto"


# ------------------------------------------------------------------------------------ entropy
def test_topk_estimate_bounds():
    exact = [0.5, 0.3, 0.1, 0.05, 0.05]
    h_true = -sum(p * math.log(p) for p in exact)
    assert topk_entropy(np.log(exact)) == pytest.approx(h_true)  # all the mass known: exact
    top = np.log(exact[:2])
    est = topk_entropy(top)
    assert est == pytest.approx(lump_entropy(list(top)))
    assert est <= h_true <= est + 0.2 * math.log(len(exact) - 2) + 1e-12  # the documented bound
    assert topk_entropy([0.0]) == 0.0 and topk_entropy([]) == 0.0


@pytest.mark.parametrize("chosen_in_top", [True, False])
def test_vllm_and_openai_report_the_same_entropy(chosen_in_top):
    """Both backends give the same number for the same top-k distribution (chosen token included
    as a known term when it fell outside the top-k)."""
    from types import SimpleNamespace as NS

    from omniagent.backends.openai_backend import _logprob_stats
    from omniagent.backends.vllm_backend import step_stats

    tops = {"a": math.log(0.6), "b": math.log(0.2), "c": math.log(0.1)}
    chosen, chosen_lp = ("b", tops["b"]) if chosen_in_top else ("z", math.log(0.04))
    oa_token = NS(
        token=chosen,
        logprob=chosen_lp,
        top_logprobs=[NS(token=t, logprob=lp) for t, lp in tops.items()],
    )
    _, oa_entropies = _logprob_stats(NS(logprobs=NS(content=[oa_token])))
    ids = {"a": 1, "b": 2, "c": 3, "z": 9}
    step = {ids[t]: NS(logprob=lp) for t, lp in tops.items()} | {ids[chosen]: NS(logprob=chosen_lp)}
    lps, vllm_entropies = step_stats([ids[chosen]], [step])
    assert lps == [pytest.approx(chosen_lp)]
    known = list(tops.values()) + ([] if chosen_in_top else [chosen_lp])
    assert oa_entropies == pytest.approx(vllm_entropies, rel=1e-12)
    assert vllm_entropies == pytest.approx([lump_entropy(known)])


def test_constrained_sends_the_envs_turn_schema_and_answer_only_on_the_last_turn(server, video_path):
    env = OmniVideoEnv()
    policy = OpenAIPolicy(model="m", base_url=server.url, retries=0, constrained=True)
    options = {"media": str(video_path), "question": "Q?", "task_type": "num", "answer": 3, "max_turns": 2}
    _, info = env.reset(options=options)
    policy.reset(info)
    first = policy.response_format()
    policy.episode.advance()  # the coming turn is the last of K = 2
    last = policy.response_format()
    assert first["type"] == "json_schema" and first["json_schema"]["schema"] == info["turn_schema"]
    assert last["json_schema"]["schema"] == info["final_turn_schema"]
    traj = run_episode(env, policy, options)
    env.close()
    sent = [r.get("response_format") for r in server.requests]
    assert sent and sent[0] == first  # what went over the wire: the schema of the episode's first turn
    assert traj.num_turns >= 1
    with pytest.raises(Exception, match="before reset"):
        OpenAIPolicy(model="m", base_url=server.url, constrained=True).response_format()
    unconstrained = OpenAIPolicy(model="m", base_url=server.url)
    assert "response_format" not in unconstrained.request_body([])


def test_agent_and_judge_take_the_key_by_one_rule(monkeypatch) -> None:
    from omniagent.backends.openai_endpoints import client_for
    from omniagent.eval.judges import OpenAIJudge

    def agent_key(key: str, where: str) -> str:  # the agent's client as the backend makes it ("": no key)
        return client_for(f"http://127.0.0.1:9/{where}", key).api_key  # clients are kept per URL and key

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert agent_key("", "unset") == "EMPTY" and agent_key("sk-given", "unset") == "sk-given"
    assert OpenAIJudge("http://127.0.0.1:9/v1", "m").client.api_key == "EMPTY"
    monkeypatch.setenv("OPENAI_API_KEY", "")  # set but empty: as unset
    assert OpenAIJudge("http://127.0.0.1:9/v1", "m").client.api_key == "EMPTY"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert agent_key("", "set") == "sk-env" and agent_key("sk-given", "set") == "sk-given"
    assert OpenAIJudge("http://127.0.0.1:9/v1", "m").client.api_key == "sk-env"
    assert OpenAIJudge("http://127.0.0.1:9/v1", "m", api_key="sk-given").client.api_key == "sk-given"
