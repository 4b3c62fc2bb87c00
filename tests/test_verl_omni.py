"""verl 0.9.1's Qwen2.5-Omni support (rl/verl_ext/omni_patches.py, loaded as ``external_lib``) with the tiny random thinker on
CPU: verl accepts the processor, bans media tokens in its vLLM sampler, and gets the thinker's own rope indices."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from testkit import verl_tiny_thinker

pytest.importorskip("verl", reason="verl is not installed (pip install 'verl[verl-core]==0.9.1')")

from verl.experimental.agent_loop.agent_loop import _agent_loop_registry  # noqa: E402

from rl.verl_ext import omni_patches as verl_omni  # noqa: E402  (patches verl as external_lib would, registers the agent loop)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return verl_tiny_thinker(tmp_path_factory.mktemp("tiny"))


def test_verl_accepts_the_omni_processor_through_external_lib(tiny):
    from verl.workers.config import HFModelConfig

    with pytest.warns(UserWarning, match="Unsupported processor type"):
        assert verl_omni._original_hf_processor(str(tiny.path)) is None  # the gap the plugin closes

    config = HFModelConfig(
        path=str(tiny.path), external_lib="rl.verl_ext.omni_patches"
    )  # what every verl worker builds
    processor = config.processor
    assert type(processor).__name__ == "Qwen2_5OmniProcessor"
    assert isinstance(processor.get_rope_index, verl_omni.OmniRopeIndex)
    assert processor.get_rope_index_kwargs is verl_omni.rope_index_kwargs
    assert isinstance(pickle.loads(pickle.dumps(processor.get_rope_index)), verl_omni.OmniRopeIndex)
    assert processor.audio_token_id == tiny.tokenizer.convert_tokens_to_ids("<|AUDIO|>")
    assert _agent_loop_registry["omniagent"] == {"_target_": "rl.verl_ext.agent_loop.OmniAgentLoop"}

    from verl.utils import hf_processor
    from verl.workers.rollout import utils as rollout_utils

    assert type(hf_processor(str(tiny.path))).__name__ == "Qwen2_5OmniProcessor"
    banned = rollout_utils.get_vision_placeholder_token_ids(processor)  # what the vLLM server masks out
    conv = tiny.tokenizer.convert_tokens_to_ids
    media = ["<|IMAGE|>", "<|VIDEO|>", "<|AUDIO|>", "<|vision_bos|>", "<|vision_eos|>", "<|audio_bos|>"]
    assert {conv(t) for t in [*media, "<|audio_eos|>"]} == set(banned)


def test_rope_index_of_an_interleaved_clip_matches_the_thinker(tiny):
    from omniagent.backends.convert import build_model_inputs

    rng = np.random.default_rng(0)
    clip = {
        "type": "video",
        "video": rng.integers(0, 255, (4, 64, 64, 3), dtype=np.uint8),
        "timestamps": [0.0, 0.5, 1.0, 1.5],
        "fps": 2.0,
        "audio": (0.1 * rng.standard_normal(16000 * 3)).astype(np.float32),
        "sampling_rate": 16000,
    }
    messages = [{"role": "user", "content": [{"type": "text", "text": "Clip:"}, clip]}]
    batch, prepared = build_model_inputs(messages, tiny.processor)
    assert prepared.use_audio_in_video
    mm = {k: v for k, v in batch.items() if k not in ("input_ids", "attention_mask", "use_audio_in_video")}
    ours, _ = tiny.processor.get_rope_index(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        video_grid_thw=batch["video_grid_thw"],
        **verl_omni.rope_index_kwargs(mm),
    )
    theirs, _ = tiny.model.get_rope_index(
        batch["input_ids"],
        None,
        batch["video_grid_thw"],
        batch["attention_mask"],
        True,
        batch["feature_attention_mask"].sum(-1),
        batch["video_second_per_grid"],
    )
    assert torch.equal(ours, theirs)
    # the flag was inferred from the ids: the interleaved block starts <|vision_bos|><|audio_bos|>
    assert verl_omni.audio_in_video_from_ids(batch["input_ids"], tiny.model.config)
    assert not verl_omni.audio_in_video_from_ids(batch["input_ids"][:, :5], tiny.model.config)
