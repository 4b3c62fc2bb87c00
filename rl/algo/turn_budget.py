"""The episode's turn budget K from the config's ``env.turns`` block, shared by both trainers.

Why a module of its own: the verl agent loop (:mod:`rl.verl_ext.agent_loop`) and the single-process trainer
(:mod:`rl.train_local`) must give an episode the same K, and importing the agent loop pulls in verl
(seconds, and absent on a CPU-only install), so the rule lives here, free of verl.

``dynamic_by_duration``: ``K = min(min + floor(duration / seconds_per_extra_turn), max)``; otherwise
``sample_uniform`` draws K uniformly from ``[min, max]`` with the episode's ``rng``; else ``K = max``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TurnBudgetConfig", "turn_budget"]


@dataclass
class TurnBudgetConfig:
    """``env.turns``: the bounds of K and how it is chosen (see the module docstring)."""

    min: int = 5
    max: int = 10
    dynamic_by_duration: bool = True
    seconds_per_extra_turn: float = 60.0
    sample_uniform: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.max:
            raise ValueError(f"env.turns needs 1 <= min <= max, got min={self.min} max={self.max}")
        if self.dynamic_by_duration and self.seconds_per_extra_turn <= 0:
            raise ValueError("env.turns.seconds_per_extra_turn must be positive")


def turn_budget(
    duration: float | None,
    turns: TurnBudgetConfig | Mapping[str, Any],
    rng: random.Random | None = None,
) -> int:
    """The episode's turn budget K; ``turns`` may be the config block itself (a dict, validated here).

    ``sample_uniform`` draws only when an ``rng`` is given: without one (the local trainer, so that a
    resumed run replays the same episodes) K is ``max``. An unknown or non-finite duration adds no turns.
    """
    if not isinstance(turns, TurnBudgetConfig):
        turns = TurnBudgetConfig(**dict(turns))
    if turns.dynamic_by_duration:
        extra = (
            0
            if duration is None or not math.isfinite(duration)
            else int(duration // turns.seconds_per_extra_turn)
        )
        return min(turns.min + max(extra, 0), turns.max)
    if turns.sample_uniform and rng is not None:
        return rng.randint(turns.min, turns.max)
    return turns.max
