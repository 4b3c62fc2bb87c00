"""Qwen2.5-Omni media token ids: the placeholders and boundaries a model must never generate.

A leaf module (imports nothing from ``rl`` and nothing heavy), shared by the agent loop, which cuts a response
before any of these tokens, and by :mod:`rl.verl_ext.omni_patches`, which bans them in verl's vLLM sampler.
"""

from __future__ import annotations

from typing import Any

# processor attributes naming the placeholder and boundary tokens
MEDIA_TOKEN_ATTRS = (
    "image_token",
    "video_token",
    "audio_token",
    "vision_bos_token",
    "vision_eos_token",
    "audio_bos_token",
    "audio_eos_token",
)


def omni_media_token_ids(processor: Any) -> list[int]:
    """Ids of the Qwen2.5-Omni media placeholder and media boundary tokens (empty for other processors).

    None of them may appear in generated text: a stray placeholder has no features behind it, and a stray
    ``<|vision_bos|>``/``<|audio_bos|>`` throws off ``get_rope_index``'s media count; either breaks the
    training forward of the whole batch.
    """
    tokenizer = getattr(processor, "tokenizer", None)
    if tokenizer is None or getattr(processor, "audio_token", None) is None:
        return []
    ids = []
    for attr in MEDIA_TOKEN_ATTRS:
        token = getattr(processor, attr, None)
        if token is None:
            continue
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id != getattr(tokenizer, "unk_token_id", None):
            ids.append(token_id)
    return sorted(set(ids))
