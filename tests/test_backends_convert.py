"""Chat messages -> Qwen2.5-Omni processor / vLLM inputs, checked token by token on the tiny thinker (the transformers
policy that runs them: test_transformers_policy.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from testkit import RNG, SR, SYSTEM, audio_part, audio_tokens, image_part, text, tone, user

from omniagent.backends.convert import (
    build_model_inputs,
    fps_from_timestamps,
    pad_frames,
    plan_messages,
)
from omniagent.backends.entropy import topk_entropy, topk_entropy_gap
from omniagent.backends.vllm_backend import build_vllm_request
from omniagent.policy import POLICIES, make_policy


def frames(n: int, h: int = 64, w: int = 64) -> np.ndarray:
    return RNG.integers(0, 256, (n, h, w, 3), dtype=np.uint8)


def video_part(start: float, n: int, fps: float, with_audio: bool) -> dict:
    ts = [start + i / fps for i in range(n)]
    end = start + n / fps
    return {
        "type": "video",
        "video": frames(n),
        "timestamps": ts,
        "fps": fps,
        "audio": tone(end - start) if with_audio else None,
        "sampling_rate": SR,
        "start": start,
        "end": end,
    }


def runs(ids: list[int], token: int) -> list[tuple[int, int]]:
    """(start, length) of each maximal run of ``token``."""
    out, i = [], 0
    while i < len(ids):
        if ids[i] == token:
            j = i
            while j < len(ids) and ids[j] == token:
                j += 1
            out.append((i, j - i))
            i = j
        else:
            i += 1
    return out


# --------------------------------------------------------------------------------------------------
# Pure planning (no torch)
# --------------------------------------------------------------------------------------------------


def test_fps_and_padding_helpers() -> None:
    assert fps_from_timestamps([10.0, 10.5, 11.0, 11.5]) == pytest.approx(2.0)
    assert fps_from_timestamps([0.0, 1.0, 3.0]) == pytest.approx(2 / 3)  # mean rate over the span
    assert fps_from_timestamps([5.0], fallback=4.0) == 4.0
    assert fps_from_timestamps([2.0, 2.0], fallback=None) == 2.0  # default when timing is unusable
    clip = frames(5)
    padded, pad = pad_frames(clip)
    assert pad == 1 and padded.shape[0] == 6
    assert np.array_equal(padded[5], clip[4]) and np.array_equal(padded[:5], clip)
    same, pad = pad_frames(frames(4))
    assert pad == 0 and same.shape[0] == 4


def test_plan_keeps_labels_in_place_and_collects_media() -> None:
    img1, img2 = image_part(1.0), image_part(2.5)
    aud = audio_part(30.0, 31.0)
    vid = video_part(40.0, 7, 2.0, with_audio=False)
    messages = [
        SYSTEM,
        user(text("[t=1.0s]"), img1, text("[t=2.5s]"), img2),
        {"role": "assistant", "content": [text('{"action": "audio"}')]},
        user(text("[audio 30.0-31.0s]"), aud, text("[clip 40.0-43.5s]"), vid, text("Q?")),
    ]
    plan = plan_messages(messages)
    assert plan.conversation == [
        {"role": "system", "content": [text("Answer with JSON.")]},
        {
            "role": "user",
            "content": [text("[t=1.0s]"), {"type": "image"}, text("[t=2.5s]"), {"type": "image"}],
        },
        {"role": "assistant", "content": [text('{"action": "audio"}')]},
        {
            "role": "user",
            "content": [
                text("[audio 30.0-31.0s]"),
                {"type": "audio"},
                text("[clip 40.0-43.5s]"),
                {"type": "video"},
            ]
            + [text("Q?")],
        },
    ]
    assert [id(a) for a in plan.images] == [id(img1["image"]), id(img2["image"])]
    assert len(plan.audios) == 1 and np.array_equal(plan.audios[0], aud["audio"])
    (v,) = plan.videos
    assert v.fps == pytest.approx(2.0) and v.padded_frames == 1 and v.frames.shape[0] == 8
    assert v.timestamps == vid["timestamps"] and v.audio is None
    assert plan.use_audio_in_video is False


def test_plan_rejects_bad_media() -> None:
    with pytest.raises(TypeError, match="uint8"):
        plan_messages([user({"type": "image", "image": np.zeros((8, 8, 3), np.float32)})])
    with pytest.raises(ValueError, match="16000"):
        plan_messages([user({"type": "audio", "audio": tone(0.5), "sampling_rate": 8000})])
    with pytest.raises(ValueError, match="unknown content part"):
        plan_messages([user({"type": "smell"})])


@pytest.mark.parametrize("scale", [0.3, 2.0, 6.0])  # flat, typical, peaked steps
def test_topk_entropy_documented_bounds(scale: float) -> None:
    """The shared estimate is exact with the full distribution, and otherwise within its bound:
    ``estimate <= H <= estimate + r log(V - k)``."""
    logits = RNG.normal(size=50) * scale
    p = np.exp(logits - logits.max())
    p /= p.sum()
    exact = float(-(p * np.log(p)).sum())
    assert topk_entropy(np.log(p)) == pytest.approx(exact, rel=1e-9)
    for k in (1, 5, 20):
        top = np.sort(np.log(p))[::-1][:k]
        estimate, gap = topk_entropy(top), topk_entropy_gap(top, vocab_size=50)
        rest = 1 - float(np.exp(top).sum())
        assert gap == pytest.approx(rest * math.log(50 - k))
        assert estimate <= exact <= estimate + gap + 1e-12


# --------------------------------------------------------------------------------------------------
# vLLM request builder (pure; vLLM itself is not installed)
# --------------------------------------------------------------------------------------------------


def test_vllm_request_builder(tiny_thinker) -> None:
    _, processor = tiny_thinker
    img = image_part(3.0)
    aud = audio_part(10.0, 12.0)
    vid = video_part(20.0, 5, 2.5, with_audio=True)
    req = build_vllm_request(
        [SYSTEM, user(text("[t=3.0s]"), img, text("[clip]"), vid, text("Q?"))], processor
    )
    assert req["prompt"].count("<|vision_bos|><|VIDEO|><|vision_eos|>") == 1  # vLLM expands placeholders
    assert req["prompt"].count("<|IMAGE|>") == 1 and "<|AUDIO|>" not in req["prompt"]
    assert "[t=3.0s]<|vision_bos|><|IMAGE|>" in req["prompt"]
    data = req["multi_modal_data"]
    assert set(data) == {"image", "video", "audio"}
    assert data["image"][0] is img["image"]
    assert data["video"][0].shape == (6, 64, 64, 3)  # 5 frames padded to the temporal patch
    ((clip_audio, sr),) = data["audio"]
    assert sr == 16000 and np.array_equal(clip_audio, vid["audio"])
    # vLLM orders an interleaved clip's frames and audio by second_per_grid_ts (2 frames at 2.5 fps)
    assert req["mm_processor_kwargs"] == {
        "fps": pytest.approx(2.5), "use_audio_in_video": True, "second_per_grid_ts": [pytest.approx(0.8)]
    }  # fmt: skip

    # A standalone audio part next to a clip with audio: no interleaving, items in prompt order.
    req = build_vllm_request([user(aud, vid)], processor, mm_processor_kwargs={"max_pixels": 12544})
    assert req["mm_processor_kwargs"] == {"max_pixels": 12544, "fps": pytest.approx(2.5)}
    assert [a.shape[0] for a, _ in req["multi_modal_data"]["audio"]] == [aud["audio"].size, vid["audio"].size]
    assert req["prompt"].count("<|audio_bos|><|AUDIO|><|audio_eos|>") == 2
    assert "<|VIDEO|><|vision_eos|><|audio_bos|>" in req["prompt"]

    text_only = build_vllm_request([user(text("hi"))], processor)
    assert set(text_only) == {"prompt"}


def test_vllm_policy_needs_vllm() -> None:
    import omniagent.backends  # noqa: F401  (fills the registry)

    assert {"transformers", "vllm"} <= set(POLICIES)
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"pip install omniagent\[vllm\]"):
            make_policy("vllm", model="Qwen/Qwen2.5-Omni-7B")
    else:  # pragma: no cover - only where vLLM is installed
        pytest.skip("vLLM is installed here")


# --------------------------------------------------------------------------------------------------
# Processor path on the tiny thinker
# --------------------------------------------------------------------------------------------------


def token_id(processor, token: str) -> int:
    return processor.tokenizer.convert_tokens_to_ids(token)


def test_image_tokens_match_grids_and_labels_precede_frames(tiny_thinker) -> None:
    _, processor = tiny_thinker
    labels = ["[t=1.0s]", "[t=2.5s]", "[t=61.25s]"]
    parts = [text("Frames:\n")]
    sizes = [(64, 64), (64, 64), (60, 100)]
    for label, (h, w) in zip(labels, sizes, strict=True):
        parts += [text(label), image_part(0.0, h, w)]
    batch, prepared = build_model_inputs([SYSTEM, user(*parts, text("Q?"))], processor)
    ids = batch["input_ids"][0].tolist()
    grids = batch["image_grid_thw"].tolist()
    assert grids[0] == [1, 4, 4] and grids[2] == [1, 4, 8]  # small frames are not upscaled
    image_runs = runs(ids, token_id(processor, "<|IMAGE|>"))
    assert [n for _, n in image_runs] == [t * h * w // 4 for t, h, w in grids]
    bos, eos = token_id(processor, "<|vision_bos|>"), token_id(processor, "<|vision_eos|>")
    starts = [i for i, t in enumerate(ids) if t == bos]
    assert [s + 1 for s in starts] == [s for s, _ in image_runs]
    for k, (label, start) in enumerate(zip(labels, starts, strict=True)):
        if k == 0:
            assert processor.tokenizer.decode(ids[:start]).endswith("Frames:\n" + label)
        else:  # exactly the label sits between the previous frame's <|vision_eos|> and this one's tokens
            assert ids[start - 1] != eos
            prev_eos = max(i for i in range(start) if ids[i] == eos)
            assert processor.tokenizer.decode(ids[prev_eos + 1 : start]) == label
    assert prepared.use_audio_in_video is False and "use_audio_in_video" not in batch


def test_video_tokens_fps_and_odd_frames(tiny_thinker) -> None:
    _, processor = tiny_thinker
    vid = video_part(100.0, 7, 2.0, with_audio=False)
    batch, prepared = build_model_inputs([user(text("[clip 100.0-103.5s]"), vid)], processor)
    assert prepared.call_kwargs["videos_kwargs"]["size"] == {
        "shortest_edge": 4 * 28 * 28,
        "longest_edge": 16 * 28 * 28,
    }
    assert prepared.plan.videos[0].padded_frames == 1
    assert batch["video_grid_thw"].tolist() == [[4, 4, 4]]  # 8 frames / 2, 64x64 -> 4x4 (not upscaled)
    assert batch["video_second_per_grid"].tolist() == [pytest.approx(1.0)]  # 2 frames per grid at 2 fps
    ids = batch["input_ids"][0].tolist()
    assert runs(ids, token_id(processor, "<|VIDEO|>")) == [
        (ids.index(token_id(processor, "<|vision_bos|>")) + 1, 16)
    ]
    # Different frame rates in one context: corrected per video after the call.
    batch, _ = build_model_inputs([user(vid, video_part(200.0, 4, 4.0, with_audio=False))], processor)
    assert batch["video_second_per_grid"].tolist() == [pytest.approx(1.0), pytest.approx(0.5)]


def test_audio_tokens_match_length(tiny_thinker) -> None:
    _, processor = tiny_thinker
    clips = [audio_part(0.0, 2.3), audio_part(50.0, 51.0)]
    batch, _ = build_model_inputs([user(text("[0-2.3s]"), clips[0], text("[50-51s]"), clips[1])], processor)
    ids = batch["input_ids"][0].tolist()
    expected = [audio_tokens(c["audio"].size) for c in clips]
    assert expected == [57, 25]  # 25 tokens per second
    assert [n for _, n in runs(ids, token_id(processor, "<|AUDIO|>"))] == expected
    assert batch["feature_attention_mask"].sum(-1).tolist() == [c["audio"].size // 160 for c in clips]


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # inside transformers
def test_audio_in_video_interleaves_and_reaches_positions(tiny_thinker) -> None:
    model, processor = tiny_thinker
    import torch

    vid = video_part(300.0, 8, 2.0, with_audio=True)  # 4 s: 4 temporal grids, 100 audio tokens
    batch, prepared = build_model_inputs([user(text("[clip 300-304s]"), vid, text("Q?"))], processor)
    assert prepared.use_audio_in_video is True and batch["use_audio_in_video"] is True
    assert prepared.call_kwargs["videos_kwargs"]["use_audio_in_video"] is True
    ids = batch["input_ids"][0].tolist()
    t = {
        name: token_id(processor, name)
        for name in ("<|vision_bos|>", "<|audio_bos|>", "<|VIDEO|>", "<|AUDIO|>")
    }
    t |= {name: token_id(processor, name) for name in ("<|audio_eos|>", "<|vision_eos|>")}
    start = ids.index(t["<|vision_bos|>"])
    # 2-second chunks: video grids 0-1 (8 tokens), 50 audio tokens, grids 2-3, the next 50 audio tokens.
    block = (
        [t["<|vision_bos|>"], t["<|audio_bos|>"]]
        + [t["<|VIDEO|>"]] * 8
        + [t["<|AUDIO|>"]] * 50
        + [t["<|VIDEO|>"]] * 8
        + [t["<|AUDIO|>"]] * 50
        + [t["<|audio_eos|>"], t["<|vision_eos|>"]]
    )
    assert ids[start : start + len(block)] == block
    assert processor.tokenizer.decode(ids[:start]).endswith("[clip 300-304s]")

    # The flag must reach the model: with it, chunk 2's first video token and first audio token share a
    # temporal position (2 s = 50 positions after the block start).
    grid = batch["video_grid_thw"]
    seqlens = batch["feature_attention_mask"].sum(-1)
    kwargs = dict(
        attention_mask=batch["attention_mask"],
        audio_seqlens=seqlens,
        second_per_grids=batch["video_second_per_grid"],
    )
    pos, _ = model.get_rope_index(batch["input_ids"], None, grid, use_audio_in_video=True, **kwargs)
    v2, a2 = start + 2 + 8 + 50, start + 2 + 8 + 50 + 8
    first_video = int(pos[0, 0, start + 2])
    assert int(pos[0, 0, v2]) == first_video + 50 == int(pos[0, 0, a2])
    with torch.inference_mode():
        with_flag = model(**batch).logits
        without = model(**{k: v for k, v in batch.items() if k != "use_audio_in_video"}).logits
    assert with_flag.shape[:2] == batch["input_ids"].shape
    assert not torch.allclose(with_flag[0, -1], without[0, -1])  # dropping the flag changes the output


def test_mixed_videos_send_clip_audio_separately(tiny_thinker) -> None:
    _, processor = tiny_thinker
    with_audio = video_part(10.0, 4, 2.0, with_audio=True)
    silent = video_part(20.0, 4, 2.0, with_audio=False)
    batch, prepared = build_model_inputs([user(with_audio, silent)], processor)
    assert prepared.use_audio_in_video is False and prepared.plan.notes
    ids = batch["input_ids"][0].tolist()
    names = ["<|vision_eos|>", "<|audio_bos|>", "<|AUDIO|>"]
    first_eos = ids.index(token_id(processor, "<|vision_eos|>"))
    assert ids[first_eos : first_eos + 3] == [token_id(processor, n) for n in names]
    assert [n for _, n in runs(ids, token_id(processor, "<|AUDIO|>"))] == [
        audio_tokens(with_audio["audio"].size)
    ]
    assert [n for _, n in runs(ids, token_id(processor, "<|VIDEO|>"))] == [8, 8]
