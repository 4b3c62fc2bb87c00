"""Evaluation protocols: decoding and turn-budget settings applied on top of every benchmark preset.

A preset (``conf/benchmarks/*.yaml``) fixes what a benchmark measures; a protocol (``conf/protocol/``)
fixes how the agent is run on it, the same way for every benchmark:

- ``greedy`` (the default): the preset as it is: temperature 0, the preset's turn budget and limits;
- ``official``: OmniAgent's released evaluation settings: temperature 1.0, top-p 0.95, top-k 20, 4,096
  new tokens per turn, at most 32 turns scaled by the media's length (``K = min(5 + floor(duration /
  60), 32)``, the released code's dynamic step rule) and 60 frames / 300 s audio / 60 s clips per call.

A protocol's fields are frozen like a preset's (overriding one needs ``unfreeze=true``); its name and
settings are part of the run's fingerprint. :func:`turn_budget_for` gives a task's budget when the
protocol scales it by duration (the annotation's duration, else the media file's, probed).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from envs.tasks import Task

__all__ = ["ProtocolConfig", "TurnsByDuration", "media_duration", "turn_budget_for"]


class TurnsByDuration(BaseModel):
    """``K = min(min + floor(duration / seconds_per_turn), max_turns)``."""

    model_config = ConfigDict(extra="forbid")

    min: int = Field(5, ge=1, description="turns of the shortest media")
    seconds_per_turn: float = Field(60.0, gt=0, description="one more turn per this many seconds of media")


class ProtocolConfig(BaseModel):
    """One protocol (``conf/protocol/<name>.yaml``); ``None`` keeps the preset's value."""

    model_config = ConfigDict(extra="forbid")

    name: str = "greedy"
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    max_turns: int | None = Field(None, ge=1)
    turns_by_duration: TurnsByDuration | None = None
    limits: dict[str, Any] = Field(default_factory=dict, description="EnvLimits fields over the preset's")

    def sampling(self) -> dict[str, Any]:
        """The decoding settings backends take by name (``make_policy``'s shared settings), set ones only."""
        return {
            k: v
            for k, v in (("top_p", self.top_p), ("top_k", self.top_k), ("max_tokens", self.max_tokens))
            if v is not None
        }

    def fingerprint(self) -> dict[str, Any] | None:
        """None for the default protocol (so runs made before protocols existed keep their fingerprint)."""
        return None if self.name == "greedy" else self.model_dump()


def media_duration(task: Task) -> float | None:
    """The task's media length: the annotation's, else probed from the file (None when unreadable)."""
    if task.duration:
        return float(task.duration)
    from envs.errors import MediaError
    from envs.media import probe

    try:
        return float(probe(task.media).duration)
    except (MediaError, OSError, ValueError):
        return None  # the episode's reset reports the media error itself


def turn_budget_for(task: Task, max_turns: int, rule: TurnsByDuration | None) -> int:
    """The task's turn budget: ``max_turns``, or scaled by its media's duration under ``rule``."""
    if rule is None:
        return max_turns
    duration = media_duration(task)
    extra = 0 if duration is None or not math.isfinite(duration) else int(duration // rule.seconds_per_turn)
    return max(1, min(rule.min + extra, max_turns))
