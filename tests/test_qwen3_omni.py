"""Qwen3-Omni end to end on its tiny random thinker (CPU): the checkpoint folder, the processor path,
the transformers backend (inputs that reach ``generate``, whole episodes, constrained decoding, a full
checkpoint with the talker disabled, the thinking variant) and the vLLM request."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testkit import assert_well_formed, beep_options, play_every_percept

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from envs.env import OmniVideoEnv  # noqa: E402
from omniagent.backends.convert import build_model_inputs, model_video_kwargs  # noqa: E402
from omniagent.backends.vllm_backend import build_vllm_request  # noqa: E402
from omniagent.checkpoint import check_checkpoint, checkpoint_family, missing_files  # noqa: E402
from omniagent.episode import run_episode  # noqa: E402
from omniagent.families import get_family  # noqa: E402
from omniagent.policy import PolicyConfigError, make_policy  # noqa: E402
from omniagent.tiny_model import load_tiny_thinker, main  # noqa: E402
from omniagent.trajectory import Trajectory  # noqa: E402

FAMILY = get_family("qwen3-omni")
SR = 16_000
RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def tiny(tiny3_dir: Path):
    return load_tiny_thinker(tiny3_dir)


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def clip(start: float, n: int, fps: float) -> dict[str, Any]:
    end = start + n / fps
    return {"type": "video", "video": RNG.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8),
            "timestamps": [start + i / fps for i in range(n)], "fps": fps, "audio": tone(end - start),
            "sampling_rate": SR, "start": start, "end": end}  # fmt: skip


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


def text(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


def token_id(processor: Any, token: str) -> int:
    return processor.tokenizer.convert_tokens_to_ids(token)


# --------------------------------------------------------------------------------------------------
# The checkpoint folder
# --------------------------------------------------------------------------------------------------


def test_the_folder_loads_through_every_path_a_checkpoint_takes(
    tiny, tiny3_dir: Path, tmp_path: Path, capsys
) -> None:
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    model, processor = tiny
    assert missing_files(tiny3_dir) == [] and check_checkpoint(tiny3_dir) == tiny3_dir
    assert checkpoint_family(tiny3_dir) is FAMILY
    assert json.loads((tiny3_dir / "BUILD_OK").read_text())["family"] == "qwen3-omni"
    assert AutoConfig.from_pretrained(tiny3_dir).model_type == "qwen3_omni_moe_thinker"
    auto = AutoModelForImageTextToText.from_pretrained(tiny3_dir)  # how verl's FSDP engine loads a thinker
    assert type(auto).__name__ == "Qwen3OmniMoeThinkerForConditionalGeneration"
    assert type(AutoProcessor.from_pretrained(tiny3_dir)).__name__ == "Qwen3OmniMoeProcessor"
    tok = AutoTokenizer.from_pretrained(tiny3_dir)
    assert tok.chat_template == FAMILY.tiny.chat_template and len(tok) == len(processor.tokenizer)
    assert (
        sum(p.numel() for p in model.parameters()) < 1_000_000 and model.config.text_config.num_experts == 4
    )
    assert model.config.position_id_per_seconds == 13
    for token in FAMILY.tokens.all():  # one token each, named on the processor as the family spells it
        assert tok.encode(token, add_special_tokens=False) == [token_id(processor, token)]
    assert processor.audio_token == FAMILY.tokens.audio and processor.vision_bos_token == "<|vision_start|>"
    # <think> is an ordinary added token: decoding with skip_special_tokens keeps it
    think = tok.encode("<think>a</think>", add_special_tokens=False)
    assert tok.decode(think, skip_special_tokens=True) == "<think>a</think>"

    # the command line writes the same build (same seed: same weights)
    out = tmp_path / "cli"
    assert main(["--family", "qwen3-omni", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out.resolve())
    again, _ = load_tiny_thinker(out)
    a, b = model.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert main(["--family", "qwen2.5-omni", "--out", str(out)]) == 2  # another family's build: refused


# --------------------------------------------------------------------------------------------------
# The processor path
# --------------------------------------------------------------------------------------------------


def test_token_counts_match_the_family_spec(tiny) -> None:
    _, processor = tiny
    frame = {"type": "image", "image": RNG.integers(0, 256, (64, 64, 3), dtype=np.uint8)}
    audio = {"type": "audio", "audio": tone(2.3), "sampling_rate": SR}
    video = {**clip(5.0, 7, 2.0), "audio": None}
    batch, prepared = build_model_inputs([user(text("[t=1s]"), frame, audio, video, text("Q?"))], processor)
    ids = batch["input_ids"][0]
    count = {
        k: int((ids == token_id(processor, getattr(FAMILY.tokens, k))).sum())
        for k in ("image", "video", "audio")
    }
    assert batch["image_grid_thw"].tolist() == [[1, 4, 4]]  # 64x64 at 16 px patches: not upscaled
    assert batch["video_grid_thw"].tolist() == [[4, 4, 4]] and prepared.plan.videos[0].padded_frames == 1
    assert (
        count
        == {
            "image": FAMILY.visual_tokens(batch["image_grid_thw"][0]),
            "video": FAMILY.visual_tokens(batch["video_grid_thw"][0]),
            "audio": FAMILY.audio_tokens(audio["audio"].size),
        }
        == {"image": 4, "video": 16, "audio": 30}
    )
    assert prepared.call_kwargs["videos_kwargs"]["size"] == {
        "shortest_edge": 4 * 32 * 32,
        "longest_edge": 16 * 32 * 32,
    }


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_a_clip_carries_its_audio_in_the_order_of_the_models_positions(tiny) -> None:
    """Audio in video: frames and audio interleaved in the order of their temporal positions. The
    processor orders them with the position rate it is given; the backend hands it the model config's,
    so the sequence and the model's rope positions agree (with another rate they would not)."""
    model, processor = tiny
    messages = [user(text("[clip 10-14s]"), clip(10.0, 8, 2.0), text("Q?"))]
    kwargs = model_video_kwargs(processor, model.config)
    assert kwargs == {"position_id_per_seconds": 13}
    batch, prepared = build_model_inputs(messages, processor, video_kwargs=kwargs)
    assert prepared.use_audio_in_video and batch["use_audio_in_video"] is True
    assert prepared.call_kwargs["videos_kwargs"]["use_audio_in_video"] is True

    def block_positions(batch: Any) -> tuple[list[int], list[float]]:
        ids = batch["input_ids"][0].tolist()
        start, end = (
            ids.index(token_id(processor, "<|audio_start|>")),
            ids.index(token_id(processor, "<|audio_end|>")),
        )
        pos, _ = model.get_rope_index(
            batch["input_ids"], None, batch["video_grid_thw"], batch["attention_mask"], True,
            batch["feature_attention_mask"].sum(-1), batch["video_second_per_grid"],
        )  # fmt: skip
        return ids[start + 1 : end], pos[0, 0, start + 1 : end].tolist()

    video_id, audio_id = token_id(processor, FAMILY.tokens.video), token_id(processor, FAMILY.tokens.audio)

    def by_kind(batch: Any) -> tuple[list[float], list[float]]:
        media, temporal = block_positions(batch)
        assert media.count(video_id) == 16 and media.count(audio_id) == FAMILY.audio_tokens(4 * SR) == 52
        return [p for t, p in zip(media, temporal, strict=True) if t == audio_id], [
            p for t, p in zip(media, temporal, strict=True) if t == video_id
        ]

    audio, video = by_kind(batch)
    assert audio == [audio[0] + k for k in range(52)]  # each audio token gets the next position
    assert sorted(set(video)) == [video[0] + 13 * k for k in range(4)]  # a grid per second, 4 tokens each
    audio, _ = by_kind(
        build_model_inputs(messages, processor, video_kwargs={"position_id_per_seconds": 25})[0]
    )
    assert audio != [audio[0] + k for k in range(52)]  # the processor's order no longer matches the model's
    # the family's rope-index class computes the same positions from the config alone (no model), as the
    # training side's indexer does
    owner = FAMILY.rope_index_class()
    names = ("get_rope_index", "get_llm_pos_ids_for_vision", "get_chunked_index")
    indexer = type("Indexer", (), {n: getattr(owner, n) for n in names})()
    indexer.config, indexer.spatial_merge_size = model.config, model.config.vision_config.spatial_merge_size
    args = (batch["input_ids"], None, batch["video_grid_thw"], batch["attention_mask"], True,
            batch["feature_attention_mask"].sum(-1), batch["video_second_per_grid"])  # fmt: skip
    assert torch.equal(indexer.get_rope_index(*args)[0], model.get_rope_index(*args)[0])
    with torch.inference_mode():
        assert model(**batch).logits.shape[:2] == batch["input_ids"].shape


# --------------------------------------------------------------------------------------------------
# The transformers backend
# --------------------------------------------------------------------------------------------------


def spy_generate(policy: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    generate = policy.model.generate

    def recording(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return generate(**kwargs)

    policy.model.generate = recording
    return calls


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_media_reach_generate(tiny3_dir: Path) -> None:
    policy = make_policy(
        "transformers", model=str(tiny3_dir), device="cpu", max_new_tokens=4, constrained=False
    )
    assert policy.family is FAMILY and policy.video_kwargs == {"position_id_per_seconds": 13}
    calls = spy_generate(policy)
    frames = [{"type": "image", "image": RNG.integers(0, 256, (64, 64, 3), dtype=np.uint8)} for _ in range(2)]
    policy.act([user(text("[t=1s]"), frames[0], text("[t=2s]"), frames[1])])
    policy.act([user(text("[audio 0-1.5s]"), {"type": "audio", "audio": tone(1.5), "sampling_rate": SR})])
    out = policy.act([user(text("[clip 3-5s]"), clip(3.0, 4, 2.0))])
    images, audio, video = calls
    ids = [c["input_ids"][0] for c in calls]
    assert (
        images["pixel_values"].shape[0] == 2 * 16
        and int((ids[0] == token_id(policy.processor, "<|image_pad|>")).sum()) == 8
    )
    assert audio["input_features"].shape[1] == 128 and int(audio["feature_attention_mask"].sum()) == 150
    assert int((ids[1] == token_id(policy.processor, "<|audio_pad|>")).sum()) == FAMILY.audio_tokens(
        int(1.5 * SR)
    )
    # the clip carries its audio: its frames and its sound reach the model together, interleaved
    assert video["pixel_values_videos"] is not None and video["use_audio_in_video"] is True
    assert int(video["feature_attention_mask"].sum()) == 2 * SR // 160
    assert int((ids[2] == token_id(policy.processor, "<|video_pad|>")).sum()) == FAMILY.visual_tokens(
        video["video_grid_thw"][0]
    )
    assert int((ids[2] == token_id(policy.processor, "<|audio_pad|>")).sum()) == FAMILY.audio_tokens(2 * SR)
    assert out.thinking is None and out.completion_tokens == len(out.token_logprobs) == 4


@pytest.fixture(scope="module")
def constrained_policy(tiny3_dir: Path):
    policy = make_policy("transformers", model="tiny-random-qwen3-omni", tiny_dir=str(tiny3_dir), device="cpu",
                         max_new_tokens=320)  # fmt: skip
    yield policy
    policy.close()


@pytest.mark.slow
def test_episode_with_frames_audio_and_a_clip_under_constrained_decoding(
    constrained_policy, video_path: Path
) -> None:
    calls = spy_generate(constrained_policy)
    traj, policy = play_every_percept(constrained_policy, video_path)
    assert traj.stop_reason == "answered" and [t.error for t in traj.turns] == [None] * 4
    assert policy.media_parts == [0, 2, 1, 1]
    assert [k in c for c in calls for k in ("pixel_values",)] == [False, True, False, False]
    assert (
        "input_features" in calls[2] and "pixel_values_videos" in calls[3] and calls[3]["use_audio_in_video"]
    )
    assert all("logits_processor" in c for c in calls)  # every turn decoded under the turn schema


@pytest.mark.slow
def test_every_constrained_turn_of_the_random_model_is_well_formed(
    constrained_policy, video_path: Path
) -> None:
    env = OmniVideoEnv(limits={"max_side": 64})
    traj = run_episode(env, constrained_policy, beep_options(video_path, max_turns=3))
    env.close()
    assert traj.stop_reason == "answered" and all(rec.thinking is None for rec in traj.turns)
    assert_well_formed(traj)


@pytest.mark.slow
def test_thinking_variant_keeps_its_reasoning_out_of_the_parse(
    tiny3_dir: Path, video_path: Path, tmp_path: Path
) -> None:
    # max_text_chars: a folder given by path gets no tiny-model default
    policy = make_policy("transformers", model=str(tiny3_dir), device="cpu", max_new_tokens=320, thinking=True,
                         max_thinking_chars=24, max_text_chars=64)  # fmt: skip
    assert policy.thinking is FAMILY.thinking
    env = OmniVideoEnv(limits={"max_side": 64})
    traj = run_episode(env, policy, beep_options(video_path, max_turns=2))
    env.close()
    assert traj.stop_reason == "answered"
    for rec in traj.turns:
        assert isinstance(rec.thinking, str) and len(rec.thinking) <= 24
        assert rec.raw_text.startswith("{") and "<think>" not in rec.raw_text and rec.action_type is not None
    traj.save_json(tmp_path / "t.json")
    assert [t.thinking for t in Trajectory.load_json(tmp_path / "t.json").turns] == [
        t.thinking for t in traj.turns
    ]


def test_a_full_checkpoint_loads_its_thinker_with_the_talker_disabled(
    tiny, tiny3_dir: Path, tmp_path: Path
) -> None:
    from transformers import Qwen3OmniMoeConfig, Qwen3OmniMoeForConditionalGeneration

    thinker, processor = tiny
    config = Qwen3OmniMoeConfig(thinker_config=thinker.config.to_dict(), enable_audio_output=False)
    full = Qwen3OmniMoeForConditionalGeneration(config)
    full.thinker.load_state_dict(thinker.state_dict())
    full.generation_config = thinker.generation_config
    folder = tmp_path / "full"
    full.save_pretrained(folder)
    processor.save_pretrained(folder)
    assert (
        checkpoint_family(folder) is FAMILY
        and json.loads((folder / "config.json").read_text())["model_type"] == "qwen3_omni_moe"
    )
    messages = [
        user(text("[audio 0-1s]"), {"type": "audio", "audio": tone(1.0), "sampling_rate": SR}, text("?"))
    ]
    by_full = make_policy(
        "transformers", model=str(folder), device="cpu", max_new_tokens=5, constrained=False
    )
    assert type(by_full.model).__name__ == "Qwen3OmniMoeThinkerForConditionalGeneration"
    by_thinker = make_policy(
        "transformers", model=str(tiny3_dir), device="cpu", max_new_tokens=5, constrained=False
    )
    a, b = by_full.act(messages), by_thinker.act(messages)
    assert a.text == b.text and a.token_logprobs == pytest.approx(b.token_logprobs, abs=1e-5)


def test_a_captioner_is_refused_as_an_agent(tiny3_dir: Path, tmp_path: Path) -> None:
    captioner = tmp_path / "Qwen3-Omni-30B-A3B-Captioner"
    shutil.copytree(tiny3_dir, captioner)
    with pytest.raises(PolicyConfigError, match="captioner variant: audio in, a caption out"):
        make_policy("transformers", model=str(captioner), device="cpu")
    with pytest.raises(PolicyConfigError, match="Qwen2.5-Omni has no thinking variant"):
        make_policy("transformers", model="tiny-random", tiny_dir=str(tmp_path / "q25"), thinking=True)


# --------------------------------------------------------------------------------------------------
# vLLM: the request (vLLM itself does not run on a CPU)
# --------------------------------------------------------------------------------------------------


def test_vllm_request_for_a_qwen3_thinker(tiny) -> None:
    _, processor = tiny
    frame = {"type": "image", "image": RNG.integers(0, 256, (64, 64, 3), dtype=np.uint8)}
    video = clip(20.0, 5, 2.5)
    req = build_vllm_request([user(text("[t=3s]"), frame, text("[clip]"), video, text("Q?"))], processor)
    assert (
        "[t=3s]<|vision_start|><|image_pad|><|vision_end|>[clip]<|vision_start|><|video_pad|><|vision_end|>Q?"
        in req["prompt"]
    )
    assert (
        "<|audio_pad|>" not in req["prompt"]
    )  # the clip's audio is interleaved by vLLM, not a part of its own
    data = req["multi_modal_data"]
    assert data["image"][0] is frame["image"] and data["video"][0].shape == (6, 64, 64, 3)
    ((audio, sr),) = data["audio"]
    assert sr == SR and np.array_equal(audio, video["audio"])
    assert req["mm_processor_kwargs"] == {
        "fps": pytest.approx(2.5), "use_audio_in_video": True, "second_per_grid_ts": [pytest.approx(0.8)]
    }  # fmt: skip


def test_vllm_policy_splits_a_thinking_turn(tiny3_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    reply = '<think>\nthe beep at 12 s is higher\n</think>\n\n{"observation": "none"}'
    mod = types.ModuleType("vllm")
    mod.SamplingParams = lambda **kw: kw  # type: ignore[attr-defined]
    out = types.SimpleNamespace(text=reply, token_ids=[1, 2, 3], logprobs=None)

    class LLM:
        def __init__(self, **engine: Any) -> None:
            self.engine = engine

        def generate(self, requests: list[Any], sampling_params: Any, use_tqdm: bool) -> list[Any]:
            return [types.SimpleNamespace(outputs=[out], prompt_token_ids=[0])]

    mod.LLM = LLM  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", mod)
    thinking = make_policy("vllm", model=str(tiny3_dir), thinking=True).act([user(text("hi"))])
    assert (thinking.thinking, thinking.text) == ("the beep at 12 s is higher", '{"observation": "none"}')
    plain = make_policy("vllm", model=str(tiny3_dir)).act([user(text("hi"))])  # an instruct name: untouched
    assert (plain.thinking, plain.text) == (None, reply)
