"""Quality control for teacher trajectories (pure logic: no hydra, no models, no network).

A teacher trajectory becomes SFT data only if it passes *dual quality control*:

1. **Outcome verification** (:func:`outcome_check`): it answered, and the answer scores at least the
   threshold of its task type (MCQ exact, TR IoU >= 0.5, NUM/SIZE MRA >= 0.5 by default).
2. **Reasoning audit** (:class:`AuditResult`, scored by a judge model elsewhere): every turn's
   Thought must follow from the memory so far and the turn's new Observation. This module builds the
   judge prompt (:func:`build_audit_messages`) and parses its reply (:func:`parse_audit_reply`).

Plus hygiene checks (:func:`hygiene_reasons`): no format errors or rejected actions in any turn, no
turn-budget exhaustion, no policy error; in hindsight-teacher mode a leakage check
(:func:`find_leaks`) rejects trajectories whose text reveals the hint before the media showed it;
and :class:`Deduper` keeps one trajectory per (media, question, answer).

Rejection reasons are short stable codes (``REASONS``), optionally with a ``:detail`` suffix for
error codes (``format_error:format_not_json``), so statistics can group on the part before ``:``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from envs.scoring import AnswerFormatError, get_scorer
from omniagent.trajectory import Trajectory, TurnRecord

# Stable rejection codes (documented; statistics key on them).
REASONS = {
    "policy_error": "the teacher failed to produce a turn (server down, garbage)",
    "interrupted": "the episode was interrupted",
    "turn_budget": "the turn budget ran out before an answer",
    "no_answer": "the episode ended without an answer for another reason",
    "format_error": "a turn's output did not parse (suffix: the parser's code)",
    "invalid_action": "a turn's action was rejected by the environment (suffix: the error code)",
    "wrong_answer": "the answer scored below the task type's threshold",
    "unverifiable": "no ground truth (or no judge for free-form answers) to verify the outcome",
    "leakage": "hindsight mode: the text reveals the evidence hint before media covering it was fetched",
    "audit_low": "the reasoning audit scored below the threshold",
    "duplicate": "same (media, question, answer) as a trajectory already kept",
}

FORMAT_CODE_PREFIXES = ("format_", "action_")  # parse_turn codes; everything else is an env rejection


class OutcomeThresholds(BaseModel):
    """Minimum score per task type for the outcome check (scores are the environment's rewards)."""

    mcq: float = 1.0  # exact letter match
    tr: float = 0.5  # temporal IoU
    num: float = 0.5  # mean relative accuracy
    size: float = 0.5  # mean relative accuracy
    ff: float = 0.5  # judge score in [0, 1]; only when the environment had a judge

    def for_type(self, task_type: str) -> float:
        if not hasattr(self, task_type):
            raise ValueError(f"no outcome threshold for task type {task_type!r}")
        return float(getattr(self, task_type))


@dataclass
class OutcomeResult:
    passed: bool
    score: float | None
    reason: str | None = None  # rejection code when not passed
    detail: str = ""


def outcome_score(traj: Trajectory) -> float | None:
    """Re-score the trajectory's answer against its ground truth (``None`` when it cannot be scored).

    MCQ/TR/NUM/SIZE are recomputed with :mod:`envs.scoring` (deterministic); free-form answers keep the
    environment's judged reward only when the environment says a judge scored them.
    """
    if not traj.answered or traj.ground_truth is None:
        return None
    if traj.task_type == "ff":
        return float(traj.reward) if traj.meta.get("reward_available") else None
    option_text = bool((traj.meta.get("env_limits") or {}).get("mcq_option_text"))  # as the episode's env
    scorer = get_scorer(traj.task_type, option_text=option_text)
    try:
        prediction = scorer.parse(traj.answer, traj.choices)
    except AnswerFormatError:
        return 0.0
    return float(scorer.score(prediction, traj.ground_truth, question=traj.question))


def outcome_check(traj: Trajectory, thresholds: OutcomeThresholds) -> OutcomeResult:
    if not traj.answered:
        return OutcomeResult(False, None, "no_answer", f"stop_reason={traj.stop_reason}")
    score = outcome_score(traj)
    if score is None:
        return OutcomeResult(False, None, "unverifiable", "no ground truth or unjudged free-form answer")
    need = thresholds.for_type(traj.task_type)
    if score + 1e-9 < need:
        return OutcomeResult(False, score, "wrong_answer", f"score {score:.3f} < {need:g} ({traj.task_type})")
    return OutcomeResult(True, score)


def hygiene_reasons(traj: Trajectory, allow_error_codes: Iterable[str] = ()) -> list[str]:
    """Rejection codes for how the episode ran: stop reason and per-turn errors (deduplicated, ordered).

    A teacher's scripted mistake (``TurnRecord.scripted_error``) is not a rejection: the turn after it
    shows the recovery, and the export never makes the mistake itself a target."""
    allowed = set(allow_error_codes)
    reasons: list[str] = []
    if traj.stop_reason in ("policy_error", "interrupted", "turn_budget"):
        reasons.append(traj.stop_reason)
    elif traj.stop_reason not in ("answered",):
        reasons.append("no_answer")
    for t in traj.turns:
        if not t.error or t.error in allowed or t.scripted_error:  # a teacher's practice mistake
            continue
        kind = "format_error" if t.error.startswith(FORMAT_CODE_PREFIXES) else "invalid_action"
        reasons.append(f"{kind}:{t.error}")
    return list(dict.fromkeys(reasons))


# --------------------------------------------------------------------------------------------------
# Hindsight leakage
# --------------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
DEFAULT_HINT_PHRASES = ("hint", "ground truth", "ground-truth", "evidence interval", "evidence window")


def numbers_in(text: str) -> list[float]:
    return [float(m.group()) for m in _NUMBER.finditer(text or "")]


def fetched_spans(turns: list[TurnRecord]) -> list[tuple[int, float, float]]:
    """``(turn, start, end)`` of every percept the environment actually served (errors excluded)."""
    spans = []
    for t in turns:
        act = t.action or {}
        if t.error or act.get("type") not in ("get_frames", "get_audio", "get_clip"):
            continue
        try:
            start, end = float(act["start"]), float(act["end"])
        except (KeyError, TypeError, ValueError):
            continue
        if t.timestamps:
            start, end = min(start, min(t.timestamps)), max(end, max(t.timestamps))
        spans.append((t.turn, start, end))
    return spans


def find_leaks(
    traj: Trajectory,
    evidence: list[list[float]] | None,
    *,
    hint_phrases: Iterable[str] = DEFAULT_HINT_PHRASES,
    tolerance: float = 0.05,
    allowed_numbers: Iterable[float] = (),
    duration: float | None = None,
) -> list[str]:
    """Places where a hindsight teacher's text gives away its hint. Empty list = no leak.

    * any hint phrase (case-insensitive) in any turn's observation or thought;
    * an evidence endpoint (within ``tolerance`` s) named in the observation or thought of turn k when
      no percept fetched at a turn before k covers that time. Numbers already in the un-hinted context
      (``allowed_numbers``: the question, the duration) and endpoints at 0 or at the file's end are
      ignored, since the model may name them without any hint.
    """
    leaks: list[str] = []
    phrases = [p.lower() for p in hint_phrases if p]
    allowed = list(allowed_numbers)
    endpoints = sorted({float(x) for pair in (evidence or []) for x in pair})
    endpoints = [
        e
        for e in endpoints
        if e > tolerance
        and not (duration is not None and e >= duration - tolerance)
        and not any(abs(e - a) <= tolerance for a in allowed)
    ]
    spans = fetched_spans(traj.turns)
    for t in traj.turns:
        text = f"{t.observation or ''}\n{t.thought or ''}"
        low = text.lower()
        for p in phrases:
            if p in low:
                leaks.append(f"turn {t.turn}: mentions {p!r}")
        seen_before = [(s, e) for (k, s, e) in spans if k < t.turn]
        for num in numbers_in(text):
            for ev in endpoints:
                if abs(num - ev) > tolerance:
                    continue
                if any(s - tolerance <= ev <= e + tolerance for s, e in seen_before):
                    continue
                leaks.append(f"turn {t.turn}: names evidence time {ev:g} s before fetching media covering it")
    return list(dict.fromkeys(leaks))


# --------------------------------------------------------------------------------------------------
# Reasoning audit: prompt and reply parsing (the HTTP call lives in rl/synthesis/audit_judge.py)
# --------------------------------------------------------------------------------------------------

AUDIT_SYSTEM = """\
You audit the step-by-step reasoning of an agent that answers a question about a long video or audio \
recording it cannot see all at once. Each turn the agent received the result of its previous request \
(frames, audio, a clip, or an error), then wrote:
- Observation: what that latest media showed;
- Thought: what it knows so far, what is missing, and why its next action helps;
- Action: its next request, or its final answer.
You do not see the media. Judge only the reasoning: for EVERY turn, rate how well the Thought follows \
from the agent's memory so far (the question, its earlier observations and thoughts) together with \
that turn's new Observation, and whether the Action follows from the Thought.

Scale:
5 = every claim in the Thought is supported by the memory or the new Observation; the Action follows.
4 = sound, with a minor gap or imprecision.
3 = mostly supported; one unsupported but plausible step.
2 = important claims are not supported, contradict earlier observations, or the Action does not follow.
1 = incoherent, or it asserts facts (times, contents, the answer) that nothing observed so far supports.
An Observation that describes media of a request that failed or was never made counts as unsupported.

Reply with one JSON object and nothing else:
{"turns": [{"turn": 1, "score": <1-5>, "reason": "<one sentence>"}, ...]}
with exactly one entry per turn, in order."""


def _fmt_action(action: dict[str, Any] | None) -> str:
    return json.dumps(action, ensure_ascii=False) if action else "(none)"


def percept_summary(prev: TurnRecord | None) -> str:
    """What the agent received before a turn, in words (the media itself is not shown to the judge)."""
    if prev is None:
        return "(the question only; nothing requested yet)"
    if prev.error:
        return f"an error ({prev.error}): {prev.error_message or ''}".strip()
    act = prev.action or {}
    kind = act.get("type")
    times = ", ".join(f"{x:.2f}" for x in prev.timestamps)
    if kind == "get_frames":
        return f"{len(prev.timestamps)} frames from {act.get('start')} s to {act.get('end')} s at [{times}] s"
    if kind == "get_audio":
        return f"audio from {act.get('start')} s to {act.get('end')} s"
    if kind == "get_clip":
        return f"a clip from {act.get('start')} s to {act.get('end')} s (frames at [{times}] s, with sound)"
    return "(nothing)"


def build_audit_messages(traj: Trajectory) -> list[dict[str, str]]:
    """Chat messages asking the judge to score every turn of ``traj`` (one call per trajectory)."""
    lines = [f"Question: {traj.question}"]
    if traj.choices:
        lines += [f"  {chr(65 + i)}. {c}" for i, c in enumerate(traj.choices)]
    lines.append(f"Turn budget: {traj.max_turns}. Number of turns to rate: {len(traj.turns)}.")
    prev: TurnRecord | None = None
    for t in traj.turns:
        lines += [
            "",
            f"### Turn {t.turn}",
            f"Received before this turn: {percept_summary(prev)}",
            f"Observation: {t.observation if t.observation is not None else '(unparseable output)'}",
            f"Thought: {t.thought if t.thought is not None else '(unparseable output)'}",
            f"Action: {_fmt_action(t.action)}",
        ]
        prev = t
    return [{"role": "system", "content": AUDIT_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


class AuditJudgeError(RuntimeError):
    """The reasoning auditor is unreachable, misconfigured or keeps replying garbage: synthesis stops.

    Not the evaluation's answer-judge error: this judge audits reasoning, for training data only. Raised by the
    judge model's client (:mod:`rl.synthesis.audit_judge`) and the rule-based auditor
    (:mod:`rl.synthesis.audit_rules`) alike, so it lives below both."""


class AuditParseError(ValueError):
    """The judge's reply is not a complete, well-formed audit."""


class TurnScore(BaseModel):
    turn: int
    score: int = Field(ge=1, le=5)
    reason: str = ""


class AuditResult(BaseModel):
    scores: list[TurnScore]
    aggregate: float
    method: str = "min"
    raw: str = ""

    def passed(self, min_score: float) -> bool:
        return self.aggregate + 1e-9 >= min_score


def _extract_json_object(text: str) -> Any:
    body = re.sub(r"^\s*```[a-zA-Z]*\s*|\s*```\s*$", "", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise AuditParseError(f"no JSON object in the judge reply: {text[:120]!r}")
    try:
        return json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise AuditParseError(f"judge reply is not valid JSON ({exc.msg}): {text[:120]!r}") from exc


def parse_audit_reply(text: str, n_turns: int, method: str = "min") -> AuditResult:
    """Parse ``{"turns": [{"turn", "score", "reason"}, ...]}``; every turn 1..n must be scored once."""
    obj = _extract_json_object(text)
    items = obj.get("turns") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        raise AuditParseError('judge reply lacks a "turns" list')
    scores: dict[int, TurnScore] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise AuditParseError(f"entry {i} is not an object")
        try:
            turn = int(item.get("turn", i + 1))
            raw = item.get("score")
            if isinstance(raw, bool) or raw is None:
                raise ValueError(raw)
            value = float(raw)
            if not math.isfinite(value) or value != int(value):
                raise ValueError(raw)
            ts = TurnScore(turn=turn, score=int(value), reason=str(item.get("reason", "")))
        except (TypeError, ValueError) as exc:
            raise AuditParseError(f"entry {i} has no integer score in 1..5: {item!r}") from exc
        if turn in scores:
            raise AuditParseError(f"turn {turn} scored twice")
        scores[turn] = ts
    missing = [k for k in range(1, n_turns + 1) if k not in scores]
    extra = [k for k in scores if not 1 <= k <= n_turns]
    if missing or extra:
        raise AuditParseError(f"judge scored turns {sorted(scores)}, expected 1..{n_turns}")
    ordered = [scores[k] for k in range(1, n_turns + 1)]
    values = [s.score for s in ordered]
    if method == "min":
        agg = float(min(values))
    elif method == "mean":
        agg = float(sum(values) / len(values))
    else:
        raise ValueError(f"unknown audit aggregate {method!r} (min or mean)")
    return AuditResult(scores=ordered, aggregate=agg, method=method, raw=text)


# --------------------------------------------------------------------------------------------------
# Dedupe
# --------------------------------------------------------------------------------------------------


def answer_key(answer: Any) -> str:
    """Canonical text of a parsed answer (floats rounded to 1e-6, lists as JSON)."""

    def norm(x: Any) -> Any:
        if isinstance(x, float):
            return round(x, 6)
        if isinstance(x, list | tuple):
            return [norm(v) for v in x]
        if isinstance(x, str):
            return x.strip()
        return x

    return json.dumps(norm(answer), sort_keys=True, ensure_ascii=False)


def dedupe_key(traj: Trajectory) -> tuple[str, str, str]:
    return (traj.media, traj.question.strip(), answer_key(traj.answer))


@dataclass
class Deduper:
    """Remembers kept (media, question, answer) keys; :meth:`add` returns False for a repeat."""

    seen: set[tuple[str, str, str]] = field(default_factory=set)

    def add(self, traj: Trajectory) -> bool:
        key = dedupe_key(traj)
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def reason_code(reason: str) -> str:
    """``format_error:format_not_json`` -> ``format_error``."""
    return reason.split(":", 1)[0]
