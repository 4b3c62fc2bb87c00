"""Offline dual QC for synthetic data: a rule-based auditor, the judge model's offline counterpart.

On the synthetic benchmark (:mod:`envs.synth`) the truth of every percept is known, so the reasoning
audit needs no model: :class:`RulesAuditor` reads each turn in the controlled language of
:mod:`omniagent.backends.synth_world` and checks

- the **Observation against the timeline at the served times**: every sentence must parse; it may
  only describe the percept served in reply to the previous turn (frame times that were served, the
  audio span that was served), and every item it names must be there at those times (a shape of
  that colour and size, that digit or word, that beep pitch or spoken word, within
  ``SOUND_TOL`` seconds for sounds). Nothing is claimed on the first turn.
- the **Thought against the memory so far**: a fact stated with a time (``the red square at
  30.00s``) must have been reported by an earlier or the current Observation at that time; a fact
  named without a time must have been observed or be part of the question; counts
  (``3 beeps``, ``2 background changes``) must match what was observed. Clauses starting with
  ``Next`` (the plan) or ``Answer`` are not claims. A fact mentioned with a time counts as a
  claim to have observed it then, so a negative (``no red square``) is written without a time.

The language is the one the perceiving teacher writes (and so what an agent trained on its data
writes); free text from another model fails here and needs the judge model.

It has the interface the synthesis pipeline uses for the judge model (:class:`rl.synthesis.audit_judge.AuditJudge`:
``preflight()``, ``audit(traj) -> AuditResult``): a turn with no problem scores 5, a turn with any
scores 1 with the reasons. The judge model stays for real data, where no timeline exists.
"""

from __future__ import annotations

import re
from typing import Any

from omniagent.backends.synth_compact import is_compact
from omniagent.backends.synth_world import (
    SOUND_TOL,
    Claim,
    Item,
    Memory,
    Percept,
    SynthWorld,
    WorldError,
    parse_observation,
    percept_from_record,
)
from omniagent.trajectory import Trajectory, TurnRecord
from rl.synthesis.audit_compact import audit_compact_observation, audit_compact_thought
from rl.synthesis.filters import AuditJudgeError, AuditResult, TurnScore

__all__ = [
    "JUDGE_KINDS",
    "RulesAuditor",
    "audit_observation",
    "audit_thought",
    "is_synthetic",
    "item_ok",
    "judge_kind",
    "sound_ok",
]

PASS, FAIL = 5, 1
_COLORS = "red|green|blue|yellow|magenta|cyan|orange"
_HUES = "red|yellow|green|cyan|blue|magenta"
_ATOMS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b(?:{_COLORS}) (?:square|circle|triangle)\b"), "shape"),
    (re.compile(rf"\b({_HUES}) background\b"), "background"),
    (re.compile(r"\bdigit (\d)\b"), "digit"),
    (re.compile(r"\bword ([A-Z]{2,})\b"), "word"),
    (re.compile(r"\b(\d+) Hz\b"), "tone"),
    (re.compile(r"\bpart of a beep\b"), "tone"),  # unrecognised pitch: its own fact, with its own times
    (re.compile(r"\bpart of a spoken word\b"), "speech"),
    (re.compile(r'"([a-z]+)"'), "speech"),
    (re.compile(r"\bflash"), "flash"),
    (re.compile(r"\bstatic\b"), "static"),
]
_COUNTS = [
    (re.compile(r"\b(\d+) beeps?\b"), "beeps"),
    (re.compile(r"\b(\d+) background changes?\b"), "changes"),
]
_TIME = re.compile(r"(\d+(?:\.\d+)?)s\b")
JUDGE_KINDS = ("auto", "rules", "openai")
NO_JUDGE = (
    "no reasoning judge is configured (judge.model is not set). Offline, on the synthetic benchmark, "
    "use the rule-based auditor: judge.kind=rules (judge.kind=auto picks it when every task is "
    "synthetic and no judge.model is set). For real data set judge.model and judge.base_url of a "
    "running OpenAI-compatible server. filters.audit.enabled=false skips the audit."
)


def _words(text: str) -> list[str]:
    return re.sub(r"[^\w\s]", " ", str(text).lower()).split()


def is_synthetic(media: str) -> bool:
    """True when ``media`` has the synthetic benchmark's sidecar (so its ground truth is known)."""
    try:
        SynthWorld.for_media(media)
    except WorldError:
        return False
    return True


# --------------------------------------------------------------------------------------------------
# Observation vs the timeline at the served times
# --------------------------------------------------------------------------------------------------


def item_ok(claimed: Item, truth: list[Item]) -> bool:
    """Whether a claimed visual item is among ``truth`` (shapes: width within 2 px or 10%)."""
    for item in truth:
        if item.kind != claimed.kind or item.value != claimed.value:
            continue
        if claimed.kind == "shape" and abs((claimed.width or 0) - (item.width or 0)) > max(
            2, 0.1 * (item.width or 0)
        ):
            continue
        return True
    return False


def _check_frames(world: SynthWorld, claim: Claim, percept: Percept, memory: Memory) -> list[str]:
    served = sorted(round(t, 2) for t in percept.times)  # a frame served twice counts twice
    missing = [t for t in (claim.first, claim.last) if round(t, 2) not in served]
    if missing:
        return [f"claims a frame at {missing[0]:.2f}s, a time that was not served (served: {_fmt(served)})"]
    frames = [t for t in served if claim.first - 1e-6 <= t <= claim.last + 1e-6]
    if len(frames) != claim.count:
        return [
            f"says {claim.count} frames in {claim.first:.2f}s-{claim.last:.2f}s, {len(frames)} were served"
        ]
    problems = []
    for t in sorted(set(frames)):
        truth = world.frame(t)
        wrong = [i for i in claim.items if not item_ok(i, truth)]
        if wrong:
            shown = ", ".join(i.phrase() for i in truth)
            problems.append(f"the frame at {t:.2f}s does not show {wrong[0].phrase()} (it shows {shown})")
        else:
            memory.add_frame(t, claim.items)
    return problems[:3]


def _fmt(times: list[float]) -> str:
    shown = ", ".join(f"{t:.2f}s" for t in times[:8])
    return shown + (", ..." if len(times) > 8 else "")


def sound_ok(claimed: Item, truth: list[Item]) -> bool:
    """Whether a claimed sound is among ``truth`` (its audible part within ``SOUND_TOL`` seconds)."""
    for item in truth:
        if item.kind != claimed.kind or (claimed.full and item.value != claimed.value):
            continue
        if abs(item.start - claimed.start) <= SOUND_TOL and abs(item.end - claimed.end) <= SOUND_TOL:
            return True
    return False


def _check_audio(world: SynthWorld, claim: Claim, percept: Percept, memory: Memory) -> list[str]:
    span = percept.span
    if span is None or abs(span[0] - claim.first) > 0.011 or abs(span[1] - claim.last) > 0.011:
        served = f"{span[0]:.2f}s-{span[1]:.2f}s" if span else "no audio"
        return [f"describes audio {claim.first:.2f}s-{claim.last:.2f}s, which was not served ({served})"]
    truth = world.sounds(*span)
    if claim.silent:
        return [f"says only the hum is audible, but {truth[0].phrase()}"] if truth else []
    problems = []
    for item in claim.items:
        if not sound_ok(item, truth):
            heard = ", ".join(i.phrase() for i in truth) or "only the background hum"
            problems.append(f"{item.phrase()} is not in the audio (it holds {heard})")
    if not problems:
        memory.add_sounds(span, claim.items)
    return problems


def audit_observation(world: SynthWorld, text: str | None, percept: Percept, memory: Memory) -> list[str]:
    """Problems of one Observation given the percept served before it; true claims go to ``memory``."""
    if text is None:
        return ["the turn did not parse, so it has no observation"]
    claims = parse_observation(text)
    if percept.kind in ("none", "error") and claims:
        return ["describes media, but nothing was served before this turn"]
    problems: list[str] = []
    for claim in claims:
        if claim.kind == "error":
            problems.append(claim.error)
        elif claim.kind == "clip":
            if (
                percept.clip is None
                or abs(percept.clip[0] - claim.first) > 0.011
                or abs(percept.clip[1] - claim.last) > 0.011
            ):
                problems.append(f"describes a clip {claim.first:.2f}s-{claim.last:.2f}s that was not served")
        elif claim.kind == "frames":
            problems += _check_frames(world, claim, percept, memory)
        else:
            problems += _check_audio(world, claim, percept, memory)
    return problems


# --------------------------------------------------------------------------------------------------
# Thought vs the memory so far
# --------------------------------------------------------------------------------------------------


def _atoms(clause: str) -> list[tuple[str, str | None, list[float]]]:
    """The facts a clause names, each with the times written after it (up to the next fact; the
    first fact also takes times written before it when it has none of its own)."""
    found: list[tuple[int, int, str, str | None]] = []
    for pattern, kind in _ATOMS:
        for m in pattern.finditer(clause):
            value = m.group(1) if m.groups() else (m.group(0) if kind == "shape" else None)
            found.append((m.start(), m.end(), kind, value))
    found.sort()
    times = [(m.start(), float(m.group(1))) for m in _TIME.finditer(clause)]
    out = []
    for i, (_, end, kind, value) in enumerate(found):
        stop = found[i + 1][0] if i + 1 < len(found) else len(clause)
        mine = [t for pos, t in times if end <= pos < stop]
        if not mine and i == 0:
            mine = [t for pos, t in times if pos < found[0][0]]
        out.append((kind, value, mine))
    return out


def _observed_at(memory: Memory, kind: str, value: str | None, t: float) -> bool:
    frame = memory.frames.get(round(t, 2), [])
    if any(i.kind == kind and (value is None or i.value == value) for i in frame):
        return True
    return any(
        s.start - SOUND_TOL <= t <= s.end + SOUND_TOL and (value is None or s.value == value)
        for s in memory.heard(kind)
    )


def _observed(memory: Memory, kind: str, value: str | None) -> bool:
    return bool(memory.hits(kind, value) or memory.heard(kind, value))


def audit_thought(text: str | None, memory: Memory, context: str) -> list[str]:
    """Problems of one Thought: facts it states that the memory so far does not hold.

    ``context`` is the question and its choices: naming what the question asks about is not a claim
    of having seen it."""
    if text is None:
        return ["the turn did not parse, so it has no thought"]
    problems: list[str] = []
    for clause in re.split(r"(?<=[.;])\s+", text.strip()):
        if not clause or clause.startswith(("Next", "Answer")):
            continue
        for kind, value, times in _atoms(clause):
            what = f"{kind} {value}" if value else kind
            if times:
                bad = [t for t in times if not _observed_at(memory, kind, value, t)]
                if bad:
                    problems.append(
                        f"the thought states {what} at {bad[0]:.2f}s, which no observation reported"
                    )
            elif not _observed(memory, kind, value) and (value or kind) not in context:
                problems.append(f"the thought states {what}, which was never observed")
        problems += _check_counts(clause, memory)
    return list(dict.fromkeys(problems))


def _check_counts(clause: str, memory: Memory) -> list[str]:
    problems = []
    for pattern, what in _COUNTS:
        for m in pattern.finditer(clause):
            truth = len(memory.heard("tone")) if what == "beeps" else memory.background_changes()
            if int(m.group(1)) != truth:
                problems.append(f"the thought counts {m.group(0)}, but the observations hold {truth}")
    return problems


# --------------------------------------------------------------------------------------------------
# The auditor
# --------------------------------------------------------------------------------------------------


class RulesAuditor:
    """The offline reasoning auditor for synthetic media (same interface as the judge model)."""

    name = "rules"

    def __init__(self, aggregate: str = "min") -> None:
        if aggregate not in ("min", "mean"):
            raise ValueError(f"aggregate must be min or mean, got {aggregate!r}")
        self.aggregate = aggregate

    @staticmethod
    def ff_judge(question: str, reference: str, prediction: str) -> float:
        """Free-form answers of the synthetic benchmark are one word by construction (a word on screen,
        a spoken word): exact match, ignoring case and punctuation, scores them offline."""
        return float(_words(reference) == _words(prediction))

    def preflight(self) -> None:
        """Nothing to reach: the timeline is read from each media file's sidecar."""

    def audit(self, traj: Trajectory) -> AuditResult:
        try:
            world = SynthWorld.for_media(traj.media)
        except WorldError as exc:
            raise AuditJudgeError(
                f"the rule-based auditor checks synthetic-benchmark media only: {exc}. "
                "Use the judge model (judge.kind=openai) for real data."
            ) from exc
        context = " ".join([traj.question, *(traj.choices or [])])
        memory, prev = Memory(), None
        compact = any(is_compact(turn.observation) for turn in traj.turns)  # the search level's short form
        scores: list[TurnScore] = []
        for turn in traj.turns:
            problems = self.audit_turn(world, turn, prev, memory, context, compact)
            reason = (
                "; ".join(problems) if problems else "observation true at the served times; thought follows"
            )
            scores.append(TurnScore(turn=turn.turn, score=FAIL if problems else PASS, reason=reason))
            prev = turn
        values = [s.score for s in scores] or [PASS]
        agg = float(min(values)) if self.aggregate == "min" else sum(values) / len(values)
        return AuditResult(scores=scores, aggregate=agg, method=self.aggregate, raw="")

    @staticmethod
    def audit_turn(
        world: SynthWorld,
        turn: TurnRecord,
        prev: TurnRecord | None,
        memory: Memory,
        context: str,
        compact: bool = False,
    ) -> list[str]:
        """Problems of one turn (observation first, then thought); fills ``memory``. ``compact``: the turn is
        in the compact language (:mod:`rl.synthesis.audit_compact`)."""
        percept = (
            Percept("none") if prev is None else percept_from_record(prev.action, prev.timestamps, prev.error)
        )
        if percept.kind == "clip" and not world.has_audio:
            percept.span = None  # a clip of a silent video has no sound to describe
        if compact:
            found = audit_compact_observation(world, turn.observation, percept, memory)
            return [f"observation: {p}" for p in found] + [
                f"thought: {p}" for p in audit_compact_thought(turn.thought, memory)
            ]
        problems = [f"observation: {p}" for p in audit_observation(world, turn.observation, percept, memory)]
        problems += [f"thought: {p}" for p in audit_thought(turn.thought, memory, context)]
        return problems


def judge_kind(judge_cfg: dict[str, Any], tasks: list[Any] | None = None) -> str:
    """``rules`` or ``openai`` for the synthesis config's ``judge`` section.

    ``kind: auto`` picks the rule-based auditor when no judge model is named and every task's media
    is synthetic (has the benchmark's sidecar); a named ``model`` is used as asked (a model teacher
    writes free text, which only a judge model can read). A judge model without ``model`` fails at
    once with a message naming the offline option, instead of waiting on a server that does not
    exist. A config without ``kind`` means the judge model (older configs).
    """
    kind = judge_cfg.get("kind") or "openai"
    if kind not in JUDGE_KINDS:
        raise AuditJudgeError(f"judge.kind must be one of {', '.join(JUDGE_KINDS)}, got {kind!r}")
    named = judge_cfg.get("model") not in (None, "", "???")
    if kind == "auto":
        kind = "openai" if named or not all(is_synthetic(t.media) for t in tasks or []) else "rules"
    if kind == "openai" and not named:
        raise AuditJudgeError(NO_JUDGE)
    return kind
