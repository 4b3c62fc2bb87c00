"""What a question cost: tokens, media and time, per question (``results.jsonl``) and per run (summary).

Per question (:func:`usage_fields`, merged into each row):

- ``prompt_tokens`` / ``completion_tokens``: summed over the episode's turns. Taken from what the
  backend reports (a server's ``usage``, a local model's own count); a turn without it is *counted*
  (:class:`MeteredPolicy`): the completion's text and the prompt's text parts, as words and symbols
  (:func:`count_tokens`; an estimate, not the model's tokenizer, and the media of a counted prompt are
  left out: they are accounted as frames and seconds below). ``tokens_counted_turns`` says how many
  turns were counted, so a mixed figure is never mistaken for the server's;
- ``frames_used``, ``audio_seconds_used`` (already in every row) and ``clip_seconds`` (the seconds of
  media served by ``get_clip``: the environment's ``clip_seconds_used``, so a span trimmed to the
  file counts what was served, not what was asked for, and a refused clip counts 0);
- ``wall_seconds`` and ``model_seconds`` (already in every row).

Per run (:func:`cost_summary`): totals and means per question of the same, so two policies can be
compared on cost as well as score.
"""

from __future__ import annotations

import re
from typing import Any

from envs.messages import Message, message_text
from omniagent.policy import Policy, TurnOutput
from omniagent.trajectory import Trajectory

__all__ = ["MeteredPolicy", "cost_summary", "count_tokens", "usage_fields"]

_PIECES = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """A tokenizer-free count: words and single symbols (close to BPE counts for English prose)."""
    return len(_PIECES.findall(text))


class MeteredPolicy(Policy):
    """Wraps a policy; fills a turn's token counts the backend did not give (see the module docstring)."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.counted_turns = 0

    def reset(self, info: dict[str, Any]) -> None:
        self.counted_turns = 0
        self.inner.reset(info)

    def act(self, messages: list[Message]) -> TurnOutput:
        out = self.inner.act(messages)
        update: dict[str, int] = {}
        if out.prompt_tokens is None:
            update["prompt_tokens"] = sum(count_tokens(message_text(m)) for m in messages)
        if out.completion_tokens is None:
            update["completion_tokens"] = count_tokens(out.text)
        if update:
            self.counted_turns += 1
            out = out.model_copy(update=update)
        return out

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # endpoint_stats, seed, ... of the wrapped backend
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "seed":  # a per-episode seed is meant for the wrapped backend
            setattr(self.inner, name, value)
        else:
            super().__setattr__(name, value)


def usage_fields(traj: Trajectory, counted_turns: int = 0) -> dict[str, Any]:
    """The row fields of a question's cost that the row does not already hold."""
    prompt = [t.context_tokens for t in traj.turns if t.context_tokens is not None]
    return {
        "prompt_tokens": sum(prompt) if prompt else None,
        "tokens_counted_turns": counted_turns,
        "clip_seconds": round(traj.clip_seconds_used, 3),
    }


def _stats(values: list[float]) -> dict[str, Any]:
    return {
        "total": round(float(sum(values)), 3),
        "per_task": round(float(sum(values)) / len(values), 3) if values else None,
    }


def cost_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals and per-question means of tokens, media and time over the attempted rows."""
    attempted = [r for r in rows if r.get("stop_reason") not in (None, "media_error")]
    prompt = [r.get("prompt_tokens") or 0 for r in attempted]
    completion = [r.get("completion_tokens") or 0 for r in attempted]
    return {
        "tasks": len(attempted),
        "prompt_tokens": _stats(prompt),
        "completion_tokens": _stats(completion),
        "tokens_per_task": (sum(prompt) + sum(completion)) / len(attempted) if attempted else None,
        "turns_with_counted_tokens": sum(r.get("tokens_counted_turns") or 0 for r in attempted),
        "frames": _stats([r.get("frames_used") or 0 for r in attempted]),
        "audio_seconds": _stats([r.get("audio_seconds_used") or 0.0 for r in attempted]),
        "clip_seconds": _stats([r.get("clip_seconds") or 0.0 for r in attempted]),
        "wall_seconds": _stats([r.get("wall_seconds") or 0.0 for r in attempted]),
        "model_seconds": _stats([r.get("model_seconds") or 0.0 for r in attempted]),
    }
