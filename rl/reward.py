"""The RL reward, defined once for both trainers: verl's agent loop (:mod:`rl.agent_loop`) and the local
reference trainer (``rl/train_local.py``) read the same ``env.reward`` block and call :func:`shaped_reward`.

The reward is the environment's verifiable score minus optional format penalties. ``evidence_gate`` adds one
more condition, for tasks that know where their answer is (synthetic tasks, annotated benchmarks): the score
counts only when the episode was served a percept that touches the task's evidence. Why: on the tiny agent,
every RL batch without it learned answer priors (a favourite letter, a usual width) that score as well on black
frames, and lost the media dependence SFT had given it (README, "On a set no RL setting was chosen on"). With
the gate an answer that never looked where the answer is earns nothing, however right; tasks without evidence
are not gated. Measured on the tiny agent (README, "Paying only answers that looked") it did stop the priors but
starved the update: with a policy that seldom touches the evidence most groups earn nothing at all, so it is off
by default.

A percept touches the evidence when a served frame's timestamp lies inside an evidence interval (frames are
instants), or when the served span of an audio or clip look intersects one (closed intervals). The ground-truth
turn labels of :mod:`rl.turn_labels` use the same test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PERCEPT_ACTIONS = ("get_frames", "get_audio", "get_clip")

Span = tuple[float, float]


@dataclass
class RewardConfig:
    """The config's ``env.reward`` block."""

    format_error_penalty: float = 0.0  # subtracted once per turn whose output was rejected (info["error"])
    no_answer_penalty: float = 0.0  # subtracted when the episode ends without an answer
    evidence_gate: bool = False  # true: the score counts only if a served percept touched the task's evidence


def percept_spans(
    action_type: str | None, timestamps: Sequence[float], action: Mapping[str, Any] | None = None
) -> list[Span]:
    """What an accepted turn's percept covered: one zero-length span per served frame, one span for audio or a
    clip (the served timestamps' range when reported, else the request's start and end); none for an answer."""
    if action_type not in PERCEPT_ACTIONS:
        return []
    times = [float(t) for t in timestamps]
    if action_type == "get_frames":
        return [(t, t) for t in times]
    if times:
        return [(min(times), max(times))]
    if action and "start" in action and "end" in action:
        return [(float(action["start"]), float(action["end"]))]
    return []


def touches_evidence(spans: Sequence[Span], evidence: Sequence[Sequence[float]]) -> bool:
    """True when any span intersects any evidence interval (closed intervals)."""
    return any(s <= float(e1) and float(e0) <= e for s, e in spans for e0, e1 in evidence)


def shaped_reward(
    env_reward: float, format_errors: int, answered: bool, cfg: RewardConfig, evidence_seen: bool = True
) -> float:
    """The environment's score (zero under ``evidence_gate`` when the evidence was never served) minus penalties.

    ``evidence_seen`` must be True for a task without evidence: the gate has nothing to test there."""
    reward = float(env_reward) if evidence_seen or not cfg.evidence_gate else 0.0
    reward -= cfg.format_error_penalty * format_errors
    if not answered:
        reward -= cfg.no_answer_penalty
    return reward
