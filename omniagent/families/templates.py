"""Chat templates of the tiny test models, one Jinja shape for every Qwen-style omni family.

Parts dispatch on ``type`` only (a ``video`` part carrying an ``audio`` array stays a video). With
``add_vision_id`` / ``add_audio_id`` media get "Picture n: " labels like the Qwen templates; a
conversation without a system message gets ``default_system`` when the family's template adds one.
Real checkpoints ship their own template; these reproduce what a backend relies on: one placeholder
block per media part, in order, and the ``<|im_start|>assistant`` generation prompt.
"""

from __future__ import annotations

from omniagent.families.spec import MediaTokens


def qwen_omni_template(tokens: MediaTokens, default_system: str | None) -> str:
    """The Jinja chat template of a tiny model whose tokenizer spells its media with ``tokens``."""
    system = (
        "{% if loop.first and message['role'] != 'system' %}"
        f"<|im_start|>system\n{default_system}<|im_end|>\n"
        "{% endif %}"
        if default_system is not None
        else ""
    )
    return (
        "{% set image_count = namespace(value=0) %}"
        "{% set video_count = namespace(value=0) %}"
        "{% set audio_count = namespace(value=0) %}"
        "{% for message in messages %}"
        f"{system}"
        "<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}"
        "{{ message['content'] }}"
        "{% else %}"
        "{% for part in message['content'] %}"
        "{% if part['type'] == 'text' %}"
        "{{ part['text'] }}"
        "{% elif part['type'] == 'image' %}"
        "{% set image_count.value = image_count.value + 1 %}"
        "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
        f"{tokens.block('image')}"
        "{% elif part['type'] == 'video' %}"
        "{% set video_count.value = video_count.value + 1 %}"
        "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
        f"{tokens.block('video')}"
        "{% elif part['type'] == 'audio' %}"
        "{% set audio_count.value = audio_count.value + 1 %}"
        "{% if add_audio_id %}Audio {{ audio_count.value }}: {% endif %}"
        f"{tokens.block('audio')}"
        "{% endif %}"
        "{% endfor %}"
        "{% endif %}"
        "<|im_end|>\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
