"""What an omni thinker needs from an OpenAI-compatible exchange beyond plain chat (used by the openai backend).

**vLLM's clip fields.** A clip goes to ``vllm serve`` as an mp4 at the clip's frame rate. With its audio
interleaved (``use_audio_in_video``), vLLM's Qwen-Omni thinkers order the clip's frames and audio by
``second_per_grid_ts`` read from ``mm_processor_kwargs`` and assume 1 s per temporal grid without it (Qwen3-Omni's
positions per second make a wrong value misorder them). :func:`vllm_clip_kwargs` gives ``fps`` and that list, as
the offline vLLM request does (:func:`omniagent.backends.vllm_backend.build_vllm_request`).

**Reasoning.** A thinking variant (Qwen3-Omni-...-Thinking) writes a reasoning block before its turn. A server
run with a reasoning parser (``vllm serve --reasoning-parser ...``) returns it apart, as ``reasoning_content``
(``reasoning`` in newer releases); without one, it stays at the head of the content, in the model family's
format (:class:`omniagent.families.Thinking`). :func:`split_reasoning` returns ``(reasoning, text)`` either way,
so the environment parses only the turn and the trajectory records the reasoning.
"""

from __future__ import annotations

from typing import Any

from envs.messages import Message
from omniagent.backends.convert import TEMPORAL_PATCH_SIZE
from omniagent.families import FAMILIES, Thinking

DEFAULT_CLIP_FPS = 2.0  # what openai_messages encodes a clip at when it names no frame rate
_GENERIC_THINKING = Thinking()  # <think>...</think>, the open reasoning models' common format


def vllm_clip_kwargs(messages: list[Message], audio_in_video: bool) -> dict[str, Any]:
    """``mm_processor_kwargs`` entries for the clips of ``messages`` sent as mp4 to a vLLM server: the frame
    rate and, when their audio is interleaved, each clip's seconds per temporal grid (empty without clips)."""
    rates = [
        float(part.get("fps") or DEFAULT_CLIP_FPS)
        for message in messages
        if not isinstance(message.get("content"), str)
        for part in message["content"]
        if part.get("type") == "video"
    ]
    if not rates:
        return {}
    kwargs: dict[str, Any] = {"fps": rates[0]}  # vLLM hands the processor one frame rate per request
    if audio_in_video:
        kwargs["second_per_grid_ts"] = [TEMPORAL_PATCH_SIZE / fps for fps in rates]
    return kwargs


def thinking_format(model: str | None) -> Thinking:
    """The reasoning-block format of the family a served model's name belongs to (a variant's hub id or the
    family's name in it), else the common ``<think>...</think>``."""
    name = (model or "").lower()
    for family in FAMILIES.values():
        ids = [hub.lower() for v in family.variants for hub in v.hub_ids]
        if family.thinking is not None and (name in ids or any(name.endswith(i.split("/")[-1]) for i in ids)):
            return family.thinking
    return _GENERIC_THINKING


def split_reasoning(message: Any, text: str, model: str | None) -> tuple[str | None, str]:
    """``(reasoning, text the environment parses)`` of a chat reply's ``message`` whose content is ``text``."""
    for field in ("reasoning_content", "reasoning"):
        reasoning = getattr(message, field, None)
        if reasoning is None and isinstance(getattr(message, "model_extra", None), dict):
            reasoning = message.model_extra.get(field)  # fields the openai client does not declare
        if isinstance(reasoning, str) and reasoning.strip():
            return reasoning.strip(), text
    return thinking_format(model).split(text)
