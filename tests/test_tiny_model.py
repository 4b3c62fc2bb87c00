"""The tiny random Qwen2.5-Omni thinker: builds offline, deterministically, loads by path, generates."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from omniagent.tiny_model import (  # noqa: E402
    BUILD_VERSION,
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    build_tiny_thinker,
    load_tiny_thinker,
)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny") / "seed0"


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path):
    return build_tiny_thinker(seed=0, out_dir=tiny_dir)


def _state(model) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def test_build_writes_a_loadable_checkpoint(tiny, tiny_dir: Path) -> None:
    model, processor = tiny
    names = {p.name for p in tiny_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "processor_config.json"} <= names
    marker = {"seed": 0, "version": BUILD_VERSION, "family": "qwen2.5-omni"}
    assert json.loads((tiny_dir / "BUILD_OK").read_text()) == marker
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["model_type"] == "qwen2_5_omni_thinker"
    assert type(model).__name__ == "Qwen2_5OmniThinkerForConditionalGeneration"
    assert type(processor).__name__ == "Qwen2_5OmniProcessor"
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    assert not model.training

    # Loading by path, like a checkpoint, gives the same weights and processor settings.
    model2, processor2 = load_tiny_thinker(tiny_dir)
    a, b = _state(model), _state(model2)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert processor2.tokenizer.get_vocab() == processor.tokenizer.get_vocab()
    assert processor2.chat_template == CHAT_TEMPLATE
    assert processor2.feature_extractor.feature_size == 128
    # A second build into the same folder reuses the cache instead of rebuilding.
    stamp = (tiny_dir / "model.safetensors").stat().st_mtime_ns
    build_tiny_thinker(seed=0, out_dir=tiny_dir)
    assert (tiny_dir / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="seed=0"):
        build_tiny_thinker(seed=1, out_dir=tiny_dir)
    foreign = tiny_dir.parent / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="non-empty folder"):
        build_tiny_thinker(seed=0, out_dir=foreign)


def test_deterministic_given_seed(tiny, tmp_path: Path) -> None:
    model, processor = tiny
    again, again_proc = build_tiny_thinker(seed=0, out_dir=tmp_path / "again")
    a, b = _state(model), _state(again)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert again_proc.tokenizer.get_vocab() == processor.tokenizer.get_vocab()
    other, _ = build_tiny_thinker(seed=1, out_dir=tmp_path / "other")
    c = _state(other)
    assert not np.array_equal(a["lm_head.weight"], c["lm_head.weight"])


def test_tokenizer_specials_and_json(tiny) -> None:
    _, processor = tiny
    tok = processor.tokenizer
    ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    assert len(set(ids)) == len(SPECIAL_TOKENS)
    for token, tid in zip(SPECIAL_TOKENS, ids, strict=True):
        assert tok.encode(token, add_special_tokens=False) == [tid]
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    # The processor reads its placeholder tokens from the tokenizer.
    assert (processor.image_token, processor.video_token, processor.audio_token) == (
        "<|IMAGE|>",
        "<|VIDEO|>",
        "<|AUDIO|>",
    )
    reply = '{"action": "frames", "start": 12.5, "end": 60.0, "count": 8, "note": "dog barks"}'
    enc = tok.encode(reply, add_special_tokens=False)
    assert tok.decode(enc) == reply
    assert len(enc) < 0.6 * len(reply.encode())  # merges learned on JSON-ish text
    odd = "naïve café — 東京 🚗"
    assert tok.decode(tok.encode(odd, add_special_tokens=False)) == odd  # byte-level: anything encodes


def test_chat_template_placeholders(tiny) -> None:
    _, processor = tiny
    conversation = [
        {"role": "user", "content": [{"type": "text", "text": "[t=1.0s] "}, {"type": "image"}]},
        {"role": "assistant", "content": [{"type": "text", "text": '{"action": "audio"}'}]},
        {
            "role": "user",
            "content": [
                {"type": "audio"},
                {"type": "video", "audio": "not an audio part"},
                {"type": "text", "text": "?"},
            ],
        },
    ]
    text = processor.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n[t=1.0s] <|vision_bos|><|IMAGE|><|vision_eos|><|im_end|>\n"
        '<|im_start|>assistant\n{"action": "audio"}<|im_end|>\n'
        "<|im_start|>user\n<|audio_bos|><|AUDIO|><|audio_eos|><|vision_bos|><|VIDEO|><|vision_eos|>?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    with_system = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert processor.apply_chat_template(with_system, tokenize=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
    )


def test_small_frames_give_few_tokens_and_model_generates(tiny) -> None:
    model, processor = tiny
    text = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what?"}]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    image = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    batch = processor(text=[text], images=[image], return_tensors="pt")
    assert batch["image_grid_thw"].tolist() == [[1, 4, 4]]  # 64x64 -> 56x56 -> 4x4 patches
    image_id = processor.tokenizer.convert_tokens_to_ids("<|IMAGE|>")
    assert int((batch["input_ids"] == image_id).sum()) == 4  # 2x2 merge
    with torch.inference_mode():
        out1 = model.generate(**batch, max_new_tokens=5, min_new_tokens=5, do_sample=False)
        out2 = model.generate(**batch, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    prompt_len = batch["input_ids"].shape[1]
    assert out1.shape == (1, prompt_len + 5)
    assert torch.equal(out1, out2)  # greedy and deterministic
    assert torch.equal(out1[:, :prompt_len], batch["input_ids"])
    assert int(out1[0, prompt_len:].max()) < len(processor.tokenizer)
