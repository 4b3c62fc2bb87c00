"""Media token ids of an omni processor: the placeholders and boundaries a model must never generate.

A leaf module (imports nothing from ``rl`` and nothing heavy), shared by the agent loop, which cuts a response
before any of these tokens, and by :mod:`rl.verl_ext.omni_patches`, which bans them in verl's vLLM sampler. The
tokens come from the processor's model family (:mod:`omniagent.families`), the one place they are declared.
"""

from __future__ import annotations

from typing import Any

from omniagent.families import UnknownFamilyError, family_for_processor


def omni_media_token_ids(processor: Any) -> list[int]:
    """Ids of the media placeholder and media boundary tokens of an omni processor (empty for other processors).

    None of them may appear in generated text: a stray placeholder has no features behind it, and a stray
    vision or audio start token throws off ``get_rope_index``'s media count; either breaks the training forward
    of the whole batch.
    """
    tokenizer = getattr(processor, "tokenizer", None)
    if tokenizer is None:
        return []
    try:
        family = family_for_processor(processor)
    except UnknownFamilyError:
        return []
    return family.media_token_ids(tokenizer)
