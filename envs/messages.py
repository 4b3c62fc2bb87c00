"""The chat-message format the environment speaks, and helpers every consumer shares.

An observation is the model's whole current context: a list of messages
``{"role": "system" | "user" | "assistant", "content": [part, ...]}``. Parts are plain dicts so
that any backend (transformers processor, vLLM, an OpenAI-compatible server) can read them:

- ``{"type": "text", "text": str}``
- ``{"type": "image", "image": uint8 array (H, W, 3), "timestamp": float}``
- ``{"type": "audio", "audio": float32 array (n,), "sampling_rate": 16000, "start": float, "end": float}``
- ``{"type": "video", "video": uint8 array (T, H, W, 3), "timestamps": [float, ...], "fps": float,
  "audio": float32 array or None, "sampling_rate": 16000, "start": float, "end": float}``

Every media part is preceded by a text part naming its absolute time, so a model that reads the
text alone still knows when each frame or sound was taken (TimeAnchor-style labels).
"""

from __future__ import annotations

from typing import Any

MEDIA_TYPES = ("image", "audio", "video")
SAMPLE_RATE = 16_000

Message = dict[str, Any]


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def is_media(part: dict[str, Any]) -> bool:
    return part.get("type") in MEDIA_TYPES


def count_media_parts(messages: list[Message]) -> int:
    """Number of raw media parts in a context (the purge invariant keeps this to one percept)."""
    return sum(1 for m in messages for p in m["content"] if is_media(p))


def media_messages(messages: list[Message]) -> list[int]:
    """Indices of messages that still hold raw media."""
    return [i for i, m in enumerate(messages) if any(is_media(p) for p in m["content"])]


def message_text(message: Message) -> str:
    """The text of a message with its media parts left out (content may also be a plain string)."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p["type"] == "text")
