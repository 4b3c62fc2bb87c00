"""The RL reward, defined once for both trainers: verl's agent loop (:mod:`rl.verl_ext.agent_loop`) and the local
reference trainer (``rl/train_local.py``) read the same ``env.reward`` block and call :func:`shaped_reward`.

The reward is the environment's verifiable score minus optional format penalties. Every other option is off by
default; each changes what an episode is paid for:

- ``evidence_gate``: for tasks that know where their answer is (synthetic tasks, annotated benchmarks), the score
  counts only when the episode was served a percept that touches the task's evidence, so an answer that never
  looked where the answer is earns nothing, however right; tasks without evidence are not gated. When few
  episodes touch the evidence, most groups then earn nothing at all and have no advantage to learn from.
- ``evidence_bonus``: a fixed credit for an episode whose percepts touched the evidence, right answer or not: a
  dense signal that still ranks the episodes of a group when few of them answer right.
- ``reading_credit``: checks what the agent wrote, not where it looked. On synthetic media, whose every frame and
  sound is known, each Observation is read against the percept served before it (:func:`reading_rate`), and the
  episode earns the credit times the share of served frames and audio spans it described exactly. A look at the
  right time passes the gate whatever the answer came from; an exact reading cannot come from a prior. Media
  without a ground truth earn no credit. ``reading_scope: events`` counts only frames that show something besides
  the background and audio spans that hold a sound, so serving many empty frames does not earn it.
- ``prior_tasks``: a training task file; the score then counts only above what the no-look ``prior`` answer
  (:class:`omniagent.backends.prior.PriorTable`, fitted on that file) earns on the task: ``max(0, score - prior's)``.
  An answer no better than the best constant earns nothing, so only what perception adds is paid. (A plain
  per-task offset would change nothing under a group-relative advantage, whose group mean absorbs it; the floor
  at 0 is what makes it a different reward.)
- ``num_credit``: grades number and size answers by how many orders of magnitude they are off (:func:`closeness`):
  the credit times ``1 - |ln((1 + answer) / (1 + truth))| / ln(num_credit_span)``, floored at 0. The score of these
  tasks (MRA) is 0 for any answer more than 50% off, so a group whose answers are all far off earns the same 0
  on every episode and GRPO has nothing to rank; the credit is monotone in the error, as MRA is, so it points the
  same way and only adds a slope where MRA is flat. It is paid under the same gate as the score.
  ``num_credit_scope: flat`` pays it only in a group where every episode's score is 0 (:func:`group_credit`): where
  one right answer already ranks a group, near-miss credit would dilute it. Needing the whole group, it is
  computed by the local trainer; the verl path refuses it up front.

A percept touches the evidence when a served frame's timestamp lies inside an evidence interval (frames are
instants), or when the served span of an audio or clip look intersects one (closed intervals):
:func:`percept_spans` and :func:`touches_evidence`, which :mod:`rl.local.evidence` applies to recorded turns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, get_args

from envs.scoring import AnswerFormatError, NumScorer
from envs.tasks import Task
from omniagent.backends.prior import PriorTable
from omniagent.backends.synth_world import (
    Item,
    SynthWorld,
    WorldError,
    parse_observation,
    percept_from_record,
)
from omniagent.trajectory import TurnRecord
from rl.synthesis.audit_rules import item_ok, sound_ok

PERCEPT_ACTIONS = ("get_frames", "get_audio", "get_clip")

Span = tuple[float, float]
NumCreditScope = Literal["all", "flat"]  # pay num_credit on every episode, or only in all-zero groups
ReadingScope = Literal["all", "events"]


@dataclass
class RewardConfig:
    """The config's ``env.reward`` block."""

    format_error_penalty: float = 0.0  # subtracted once per turn whose output was rejected (info["error"])
    no_answer_penalty: float = 0.0  # subtracted when the episode ends without an answer
    evidence_gate: bool = False  # true: the score counts only if a served percept touched the task's evidence
    evidence_bonus: float = 0.0  # added when a served percept touched the evidence, whatever the answer
    reading_credit: float = 0.0  # added times the share of served frames/audio the Observations read exactly
    # what that share counts: every served frame and audio span ("all"), or only frames that show an event and
    # audio spans that hold a sound ("events")
    reading_scope: ReadingScope = "all"
    # a training task file: the score counts only above what its no-look prior answer earns, max(0, score - prior)
    prior_tasks: str | None = None
    # a graded credit for number and size answers: num_credit x closeness to the truth on a log scale (see above)
    num_credit: float = 0.0
    num_credit_span: float = 1000.0  # the answer/truth ratio (either way) at which the closeness reaches 0
    # "flat": only in a group whose episodes all scored 0 (group_credit)
    num_credit_scope: NumCreditScope = "all"

    def __post_init__(self) -> None:
        if self.reading_scope not in get_args(ReadingScope):
            raise ValueError(
                f"env.reward.reading_scope must be one of {get_args(ReadingScope)}, not {self.reading_scope!r}"
            )
        if self.num_credit_scope not in get_args(NumCreditScope):
            raise ValueError(
                f"env.reward.num_credit_scope must be one of {get_args(NumCreditScope)}, "
                f"not {self.num_credit_scope!r}"
            )
        if self.num_credit_span <= 1.0:
            raise ValueError(f"env.reward.num_credit_span must be above 1, not {self.num_credit_span}")
        if self.prior_tasks is not None:
            prior_table(self.prior_tasks)  # a missing or empty file fails at start, not in the first rollout


@lru_cache(maxsize=4)
def prior_table(path: str) -> PriorTable:
    """The prior fitted on ``path`` (once per process: both trainers score every episode against it)."""
    try:
        return PriorTable.from_file(path)
    except (FileNotFoundError, ValueError) as exc:
        raise ValueError(f"env.reward.prior_tasks: {exc}") from None


def prior_score(cfg: RewardConfig, task: Task) -> float | None:
    """What the no-look prior earns on ``task`` under ``cfg.prior_tasks`` (None: not set, or no answer)."""
    if cfg.prior_tasks is None or task.answer is None:
        return None
    return prior_table(cfg.prior_tasks).score(task)


NUMBER_TYPES = ("num", "size")  # the task types num_credit grades


def closeness(answer: Any, truth: Any, span: float) -> float | None:
    """How close a number answer is to the truth on a log scale: 1 when equal, falling linearly in
    ``|ln((1 + answer) / (1 + truth))|`` to 0 at a ratio of ``span`` (negatives count as 0). The ``1 +`` keeps
    counts of 0 finite. None when either is not a finite number (a missing or unparsed answer)."""
    try:  # the number scorer's own parse: finite numbers only, a boolean is none
        a, t = (NumScorer().parse(value) for value in (answer, truth))
    except AnswerFormatError:
        return None
    gap = abs(math.log1p(max(a, 0.0)) - math.log1p(max(t, 0.0)))
    return max(0.0, 1.0 - gap / math.log(span))


def answer_closeness(cfg: RewardConfig, task_type: str, answer: Any, truth: Any) -> float | None:
    """:func:`closeness` of an episode's answer when ``num_credit`` is set and the task is a number or size
    question; else None (nothing to grade)."""
    if not cfg.num_credit or task_type not in NUMBER_TYPES:
        return None
    return closeness(answer, truth, cfg.num_credit_span)


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


def score_paid(cfg: RewardConfig, evidence_seen: bool | None) -> bool:
    """Whether the score counts: always without ``evidence_gate``; with it, unless the evidence was never served
    (None, a task without evidence, is never gated)."""
    return evidence_seen is not False or not cfg.evidence_gate


def group_credit(
    cfg: RewardConfig,
    scores: Sequence[float],
    closes: Sequence[float | None],
    seen: Sequence[bool | None],
) -> list[float]:
    """Per episode of one group, the ``num_credit_scope: flat`` credit to add to its shaped reward: ``num_credit``
    times its closeness (0 where None or gated out by ``seen``) when every episode's paid score is 0, else 0 for all.
    A group whose score already differs between episodes is ranked by the score alone; a group of equal non-zero
    scores has equal closeness too. All zeros under scope ``all`` (:func:`shaped_reward` pays it there)."""
    if not (len(scores) == len(closes) == len(seen)):
        raise ValueError(
            f"one score, closeness and evidence flag per episode: {len(scores)}/{len(closes)}/{len(seen)}"
        )
    if cfg.num_credit_scope != "flat" or not cfg.num_credit:
        return [0.0] * len(scores)
    paid = [score_paid(cfg, s) for s in seen]
    if any(p and float(x) != 0.0 for p, x in zip(paid, scores, strict=True)):
        return [0.0] * len(scores)
    return [
        cfg.num_credit * float(c) if c is not None and p else 0.0 for c, p in zip(closes, paid, strict=True)
    ]


def shaped_reward(
    env_reward: float,
    errors: int,
    answered: bool,
    cfg: RewardConfig,
    evidence_seen: bool | None = None,
    reading: float | None = None,
    prior: float | None = None,
    close: float | None = None,
) -> float:
    """The environment's score (zero under ``evidence_gate`` when the evidence was never served; only its part
    above ``prior``, floored at 0, when given), plus ``evidence_bonus`` when the evidence was served, plus
    ``reading_credit`` times ``reading``, minus penalties (``errors``: the rejected turns).

    ``evidence_seen`` is None for a task without evidence: neither the gate nor the bonus has anything to test.
    ``reading`` (:func:`reading_rate`) is None for media without a ground truth or an episode that saw nothing.
    ``prior`` (:func:`prior_score`) is None unless ``prior_tasks`` is set. ``close`` (:func:`answer_closeness`)
    adds ``num_credit`` times it, under the same gate as the score (``num_credit_scope: all`` only; a flat-scope
    credit is the group's: :func:`group_credit`)."""
    paid = score_paid(cfg, evidence_seen)
    reward = float(env_reward) if paid else 0.0
    if prior is not None:
        reward = max(0.0, reward - float(prior))
    if close is not None and paid and cfg.num_credit_scope == "all":
        reward += cfg.num_credit * float(close)
    if evidence_seen:  # ... nor paid for a look it cannot check
        reward += cfg.evidence_bonus
    if reading is not None:
        reward += cfg.reading_credit * float(reading)
    reward -= cfg.format_error_penalty * errors
    if not answered:
        reward -= cfg.no_answer_penalty
    return reward


# ---------------------------------------------------------------------------------------- exact readings


@dataclass
class TurnText:
    """A turn as the verl agent loop sees it (the environment's ``info``), for :func:`reading_rate`: the fields it
    reads of a :class:`omniagent.trajectory.TurnRecord`, which the local trainer passes instead."""

    observation: str | None
    action: dict[str, Any] | None
    timestamps: list[float]
    error: str | None


def shows_event(frame: Sequence[Item]) -> bool:
    """Whether a frame's items (:meth:`SynthWorld.frame`) hold anything besides the background."""
    return any(i.kind != "background" for i in frame)


def _same_items(claimed: list[Item], truth: list[Item], ok: Callable[[Item, list[Item]], bool]) -> bool:
    """Every claimed item is in ``truth`` and every true item was claimed (``ok``: the matching test)."""
    return all(ok(i, truth) for i in claimed) and all(ok(t, claimed) for t in truth)


def reading_rate(
    media: str, turns: Sequence[TurnText] | Sequence[TurnRecord], scope: ReadingScope = "all"
) -> float | None:
    """The share of what was served that the next turn's Observation described exactly.

    Each distinct served frame counts once: read when a frame sentence covering its time names exactly what the
    frame shows (nothing missing, nothing extra; shape widths within the audit's tolerance). Each served audio
    span (an audio look, a clip's sound) counts once: read when an audio sentence with that span names exactly
    its sounds ("only the background hum" when there are none). A percept whose turn was the last one has no
    Observation and does not count. ``scope="events"`` leaves out frames that show only the background and audio
    spans without a sound. None when ``media`` has no synthetic ground truth or nothing (in scope) was served."""
    try:
        world = SynthWorld.for_media(media)
    except WorldError:
        return None
    served = read = 0
    for prev, turn in zip(turns, turns[1:], strict=False):
        percept = percept_from_record(prev.action, list(prev.timestamps), prev.error)
        if percept.kind not in ("frames", "audio", "clip"):
            continue
        span = percept.span if world.has_audio else None
        claims = parse_observation(turn.observation or "")
        for t in sorted({round(float(x), 2) for x in percept.times}):
            shown = world.frame(t)
            if scope == "events" and not shows_event(shown):
                continue
            served += 1
            read += any(
                c.kind == "frames"
                and c.first - 1e-6 <= t <= c.last + 1e-6
                and _same_items(c.items, shown, item_ok)
                for c in claims
            )
        truth = world.sounds(*span) if span is not None else []
        if span is not None and (truth or scope == "all"):
            served += 1
            read += any(
                c.kind == "audio"
                and abs(c.first - span[0]) <= 0.011
                and abs(c.last - span[1]) <= 0.011
                and (c.silent if not truth else _same_items(c.items, truth, sound_ok))
                for c in claims
            )
    return read / served if served else None
