"""One rule for the API key of the OpenAI-compatible clients (the agent's backend and the judge).

The key given; else the one the openai library reads itself when it is given none (its own set-up variable,
``OPENAI_API_KEY``); else ``EMPTY``, what a local vLLM or ``transformers serve`` accepts. Imports nothing of
ours, so the backends and the evaluation's judges share it without importing each other.
"""

from __future__ import annotations

from typing import Any, TypeVar

C = TypeVar("C")
NO_KEY = "EMPTY"


def make_client(cls: type[C], api_key: str | None, **kwargs: Any) -> C:
    """``cls(api_key=..., **kwargs)`` for ``openai.OpenAI`` or ``openai.AsyncOpenAI`` with the key chosen by
    the module's rule."""
    import openai

    if api_key:
        return cls(api_key=api_key, **kwargs)
    try:
        client = cls(api_key=None, **kwargs)  # the library reads its variable
    except openai.OpenAIError:  # none set
        return cls(api_key=NO_KEY, **kwargs)
    return client if getattr(client, "api_key", None) else cls(api_key=NO_KEY, **kwargs)
