"""Qwen3-Omni (30B-A3B, mixture of experts): the thinker of the Instruct and Thinking models.

Audio: Whisper log-mel (128 bins, hop 160 at 16 kHz) through three stride-2 convolutions, counted per
100-frame window (13 tokens per full second, fewer for a partial one). Vision: 16-pixel patches merged
2x2, so one token covers 32x32 pixels; 2 frames per temporal patch; DeepStack features from three
vision layers. Temporal RoPE: 13 positions per second (``position_id_per_seconds``); audio in video
interleaves frames and audio by their position, not in 2-second chunks.

Variants: Instruct (answers directly), Thinking (writes ``<think>...</think>`` first; text output only,
no talker), Captioner (audio in, a caption out: it cannot follow the agent's turn format).
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
    Thinking,
    TinyModel,
    Variant,
    tiny_special_tokens,
    tiny_thinker_tokens,
)
from omniagent.families.templates import qwen_omni_template

TOKENS = MediaTokens(
    image="<|image_pad|>",
    video="<|video_pad|>",
    audio="<|audio_pad|>",
    vision_start="<|vision_start|>",
    vision_end="<|vision_end|>",
    audio_start="<|audio_start|>",
    audio_end="<|audio_end|>",
)
POSITIONS_PER_SECOND = 13


def audio_output_tokens(mel_frames: int) -> int:
    """Audio tokens of one clip: 13 per full window of 100 mel frames, and three stride-2 convolutions
    over the rest (transformers' ``_get_feat_extract_output_lengths`` of this family)."""
    rest = mel_frames % 100
    after_first = (rest - 1) // 2 + 1
    return ((after_first - 1) // 2 + 1 - 1) // 2 + 1 + (mel_frames // 100) * 13


def tiny_thinker_config(ids: Mapping[str, int], vocab_size: int) -> dict[str, Any]:
    """Keyword arguments of the tiny thinker's ``Qwen3OmniMoeThinkerConfig`` (4 experts, 2 active)."""
    return dict(
        audio_config=dict(
            num_mel_bins=128, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64, d_model=32,
            output_dim=64, downsample_hidden_size=8, n_window=50, n_window_infer=100,
        ),
        vision_config=dict(
            depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=16,
            spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
            deepstack_visual_indexes=[0],
        ),
        text_config=dict(
            vocab_size=vocab_size, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
            num_experts=4, num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=32768,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3],
                             "interleaved": True},
            pad_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
        ),
        position_id_per_seconds=POSITIONS_PER_SECOND,
        **tiny_thinker_tokens(TOKENS, ids, "_token_id"),
    )  # fmt: skip


FAMILY = ModelFamily(
    name="qwen3-omni",
    title="Qwen3-Omni",
    thinker_model_type="qwen3_omni_moe_thinker",
    full_model_type="qwen3_omni_moe",
    classes=Classes(
        thinker="Qwen3OmniMoeThinkerForConditionalGeneration",
        full="Qwen3OmniMoeForConditionalGeneration",
        thinker_config="Qwen3OmniMoeThinkerConfig",
        processor="Qwen3OmniMoeProcessor",
        processor_module="transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe",
        videos_kwargs="Qwen3OmniMoeVideosKwargs",
        modeling_module="transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe",
        rope_index="Qwen3OmniMoePreTrainedModelForConditionalGeneration",
        text_model="Qwen3OmniMoeThinkerTextModel",
    ),
    tokens=TOKENS,
    audio_output_tokens=audio_output_tokens,
    processor=ProcessorArgs(
        patch_size=16,
        position_id_per_seconds=POSITIONS_PER_SECOND,
        # the processor orders interleaved frames and audio with its own default (13); the model
        # computes positions with its config's value: pass the config's on every call
        video_kwargs_from_config=("position_id_per_seconds",),
    ),
    chat=ChatQuirks(
        default_system=None,
        drops_assistant_thinking=True,
        notes=(
            "the hub template renders no <think> block for assistant turns given as a list of parts, so "
            "an SFT target with reasoning must be appended after the rendered prompt, not rendered by it",
        ),
    ),
    variants=(
        Variant("instruct", hub_ids=("Qwen/Qwen3-Omni-30B-A3B-Instruct",)),
        Variant(
            "thinking",
            thinking=True,
            hub_ids=("Qwen/Qwen3-Omni-30B-A3B-Thinking",),
            note="thinker only (no talker); reasoning before every answer costs tokens per turn",
        ),
        Variant(
            "captioner",
            agent=False,
            hub_ids=("Qwen/Qwen3-Omni-30B-A3B-Captioner",),
            note="audio in, a caption out, no text prompt: not an agent (use it to caption audio offline)",
        ),
    ),
    patches=Patches(
        # core vLLM registers Qwen3OmniMoeForConditionalGeneration (mapped to its thinker) and reads the
        # thinker config from a full config: a thinker-only folder needs the same registration as 2.5
        vllm=("register_standalone_thinker",),
        # ulysses_input_slicing also slices the DeepStack inputs (visual_pos_masks, deepstack_visual_embeds)
        verl=("hf_processor_accepts_omni", "omni_rope_index", "ban_media_tokens", "ulysses_input_slicing"),
        verl_gaps=(
            (
                "lora",
                "verl 0.9.1 has no LoRA path for the Qwen3-Omni thinker: with its default "
                "target_modules=all-linear peft refuses the thinker (a whole encoder layer matches a Linear's "
                "name), and the MoE experts are fused 3-D parameters no Linear target reaches (verl-omni "
                "unfuses them); train it in full (lora_rank=0)",
            ),
        ),
    ),
    tiny=TinyModel(
        chat_template=qwen_omni_template(TOKENS, None),
        special_tokens=tiny_special_tokens(
            TOKENS, audio=(TOKENS.audio_start, TOKENS.audio_end, TOKENS.audio)
        ),
        added_tokens=("<think>", "</think>"),
        thinker_config=tiny_thinker_config,
        aliases=("tiny-random-qwen3-omni",),
    ),  # fmt: skip
    thinking=Thinking(open_tag="<think>", close_tag="</think>"),
)
