"""Qwen2.5-Omni (3B, 7B): the thinker of ``Qwen/Qwen2.5-Omni-{3B,7B}`` and the paper's OmniAgent models.

Audio: Whisper log-mel (128 bins, hop 160 at 16 kHz), a stride-2 convolution and a 2x pool: 25 tokens per
second, at most 300 s per clip. Vision: 14-pixel patches merged 2x2, so one token covers 28x28 pixels;
2 frames per temporal patch. Audio in video interleaves 2-second chunks (the chunk's frames, then its
audio). No thinking variant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omniagent.families.spec import (
    ChatQuirks,
    Classes,
    MediaTokens,
    ModelFamily,
    Patches,
    ProcessorArgs,
    TinyModel,
    Variant,
    tiny_special_tokens,
    tiny_thinker_tokens,
)
from omniagent.families.templates import qwen_omni_template

TOKENS = MediaTokens(
    image="<|IMAGE|>",
    video="<|VIDEO|>",
    audio="<|AUDIO|>",
    vision_start="<|vision_bos|>",
    vision_end="<|vision_eos|>",
    audio_start="<|audio_bos|>",
    audio_end="<|audio_eos|>",
)
DEFAULT_SYSTEM = "You are a helpful assistant."  # the tiny template's; the hub template names Qwen


def audio_output_tokens(mel_frames: int) -> int:
    """Audio tokens of one clip: a stride-2 convolution, then a 2x average pool."""
    after_conv = (mel_frames - 1) // 2 + 1
    return (after_conv - 2) // 2 + 1


def tiny_thinker_config(ids: Mapping[str, int], vocab_size: int) -> dict[str, Any]:
    """Keyword arguments of the tiny thinker's ``Qwen2_5OmniThinkerConfig`` (~0.3 M parameters)."""
    return dict(
        audio_config=dict(
            num_mel_bins=128, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64, d_model=32,
            output_dim=64,
        ),
        vision_config=dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
            fullatt_block_indexes=[1],
        ),
        text_config=dict(
            vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
            pad_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
        ),
        **tiny_thinker_tokens(TOKENS, ids, "_token_index"),
    )  # fmt: skip


FAMILY = ModelFamily(
    name="qwen2.5-omni",
    title="Qwen2.5-Omni",
    thinker_model_type="qwen2_5_omni_thinker",
    full_model_type="qwen2_5_omni",
    classes=Classes(
        thinker="Qwen2_5OmniThinkerForConditionalGeneration",
        full="Qwen2_5OmniForConditionalGeneration",
        thinker_config="Qwen2_5OmniThinkerConfig",
        processor="Qwen2_5OmniProcessor",
        processor_module="transformers.models.qwen2_5_omni.processing_qwen2_5_omni",
        videos_kwargs="Qwen2_5_OmniVideosKwargs",
        modeling_module="transformers.models.qwen2_5_omni.modeling_qwen2_5_omni",
        rope_index="Qwen2_5OmniPreTrainedModelForConditionalGeneration",
        text_model="Qwen2_5OmniThinkerTextModel",
    ),
    tokens=TOKENS,
    audio_output_tokens=audio_output_tokens,
    processor=ProcessorArgs(patch_size=14, position_id_per_seconds=25),
    chat=ChatQuirks(
        default_system=DEFAULT_SYSTEM,
        notes=(
            "the hub template's default system prompt is the one Qwen requires for speech output; "
            "text-only use may replace it",
        ),
    ),
    variants=(Variant("instruct", hub_ids=("Qwen/Qwen2.5-Omni-7B", "Qwen/Qwen2.5-Omni-3B")),),
    patches=Patches(
        vllm=("register_standalone_thinker",),  # core vLLM maps only the full architecture to its thinker
        verl=("hf_processor_accepts_omni", "omni_rope_index", "ban_media_tokens", "ulysses_input_slicing"),
    ),
    tiny=TinyModel(
        chat_template=qwen_omni_template(TOKENS, DEFAULT_SYSTEM),
        special_tokens=tiny_special_tokens(
            TOKENS, audio=(TOKENS.audio, TOKENS.audio_start, TOKENS.audio_end)
        ),
        added_tokens=(),
        thinker_config=tiny_thinker_config,
        aliases=("tiny-random", "tiny-random-qwen2.5-omni"),
    ),  # fmt: skip
    notes=(
        "transformers 5.x: the processor takes use_audio_in_video inside videos_kwargs (4.52-5.10); the "
        "flag must also reach generate/forward",
    ),
)
