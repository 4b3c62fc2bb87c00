"""Did a turn, or an episode, look at the task's evidence? The test the local trainer needs on recorded turns.

A turn's percept **overlaps** the evidence when a served frame's timestamp lies inside an evidence interval
(``get_frames``: frames are instants), or when the served span ``[start, end]`` of a ``get_audio`` / ``get_clip``
intersects one (the served timestamps' range when the environment reports them, else the request's
``start``/``end``); turns without a percept (answers, rejected output) never overlap. The span test itself is
:func:`rl.algo.reward.touches_evidence`, which verl's agent loop applies to the same spans.

Used by ``rl/train_local.py`` for ``env.reward`` (``evidence_gate``, ``evidence_bonus``: :func:`touched_evidence`)
and ``taura.mode=oracle`` (a turn's score is 1 when it overlaps the evidence: :func:`overlaps_evidence`).
"""

from __future__ import annotations

from collections.abc import Sequence

from omniagent.trajectory import Trajectory, TurnRecord
from rl.algo.reward import Span, touches_evidence
from rl.algo.reward import percept_spans as spans_of


def percept_spans(turn: TurnRecord) -> list[Span]:
    """What the turn's percept covered (:func:`rl.algo.reward.percept_spans`); a rejected turn served nothing."""
    return [] if turn.error else spans_of(turn.action_type, turn.timestamps, turn.action)


def overlaps_evidence(turn: TurnRecord, evidence: Sequence[Sequence[float]]) -> bool:
    """True when the turn's percept touches any evidence interval (closed intervals)."""
    return touches_evidence(percept_spans(turn), evidence)


def touched_evidence(traj: Trajectory, evidence: Sequence[Sequence[float]]) -> bool:
    """True when any of the trajectory's percepts touched the evidence (what ``env.reward.evidence_gate`` asks)."""
    return any(overlaps_evidence(turn, evidence) for turn in traj.turns)
