"""Observation fidelity (:func:`run_fidelity`): what the agent's text notes lose.

The agent keeps only text notes of what it saw: raw media are purged after one turn. After an
episode we ask follow-up questions whose answers were only in media the agent looked at (for
synthetic tasks, generated from the task engine's known events inside the frames and audio the agent
fetched), and answer each twice with the same policy: from the text memory alone (the trajectory's
observations) and shown the raw media again. The gap (raw - memory accuracy, paired bootstrap 95% CI)
is what the notes lose.

Error bars live in :mod:`omniagent.eval.summary`; the one-turn harness in :mod:`omniagent.eval.passive`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs.env import EnvLimits, OmniVideoEnv
from envs.errors import MediaError, MediaReadError
from envs.media import MediaInfo, MediaSource
from envs.messages import text_part
from envs.percepts import audio_parts, clip_parts, frame_parts
from envs.tasks import LETTERS
from omniagent.eval.intervals import bootstrap_ci
from omniagent.eval.passive import SingleTurnContext, single_turn_episode
from omniagent.policy import Policy
from omniagent.trajectory import Trajectory

__all__ = [
    "FidelityReport",
    "Probe",
    "memory_notes",
    "percepts",
    "print_fidelity",
    "run_fidelity",
    "synthetic_probes",
    "synthetic_timeline",
]


@dataclass
class Probe:
    """A follow-up question about something the agent saw or heard during its episode."""

    id: str
    episode_id: str
    media: str
    question: str
    choices: list[str]
    answer: str  # letter
    kind: str  # the event kind asked about
    percept: dict[str, Any]  # the percept (turn, action, start, end, timestamps, num) that held it

    def options(self) -> dict[str, Any]:
        return {
            "media": self.media,
            "question": self.question,
            "task_type": "mcq",
            "choices": self.choices,
            "answer": self.answer,
        }


def synthetic_timeline(media: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The timeline the synthetic engine wrote beside ``media`` (``<media>.meta.json``), or None."""
    meta = Path(f"{media}.meta.json")
    if not meta.exists():
        return None
    try:
        data = json.loads(meta.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data.get("timeline") if isinstance(data, dict) else None


def percepts(traj: Trajectory) -> list[dict[str, Any]]:
    """The media an episode fetched, in order, each with the note the agent wrote about it next turn."""
    out = []
    for i, t in enumerate(traj.turns):
        if t.action_type not in ("get_frames", "get_audio", "get_clip") or t.error or not t.timestamps:
            continue
        act = t.action or {}
        note = traj.turns[i + 1].observation if i + 1 < len(traj.turns) else None
        if t.action_type == "get_audio":
            start, end = t.timestamps[0], t.timestamps[-1]
        else:
            start, end = float(act.get("start", t.timestamps[0])), float(act.get("end", t.timestamps[-1]))
        out.append(
            {
                "turn": t.turn,
                "action": t.action_type,
                "start": start,
                "end": end,
                "num": act.get("num"),
                "timestamps": list(t.timestamps),
                "note": note,
            }
        )
    return out


def memory_notes(traj: Trajectory) -> str:
    """The episode as the agent's text memory holds it: each percept's span and the note written on it."""
    lines = []
    for p in percepts(traj):
        if p["action"] == "get_frames":
            what = f"frames {p['start']:.2f}s-{p['end']:.2f}s at " + ", ".join(
                f"{t:.2f}s" for t in p["timestamps"]
            )
        elif p["action"] == "get_audio":
            what = f"audio {p['start']:.2f}s-{p['end']:.2f}s"
        else:
            what = f"a clip {p['start']:.2f}s-{p['end']:.2f}s"
        lines.append(
            f"- Turn {p['turn']}: you looked at {what}. Your note: {p['note'] or '(no note written)'}"
        )
    return "\n".join(lines) if lines else "(no media were fetched)"


VISUAL = ("shape", "digit", "word", "flash", "static")
AUDIBLE = ("tone", "speech", "static")
SCENE_OPTIONS = ["a white flash", "static noise", "a coloured shape", "a large digit", "a written word"]
SOUND_OPTIONS = ["a burst of static noise", "a beep", "a spoken word"]


def _rng(*keys: Any) -> np.random.Generator:
    digest = hashlib.sha256("|".join(str(k) for k in keys).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _mcq(rng: np.random.Generator, correct: str, pool: Iterable[str], n: int = 4) -> tuple[list[str], str]:
    others = [p for p in dict.fromkeys(str(x) for x in pool) if p != correct]
    picked = [others[i] for i in rng.permutation(len(others))[: n - 1]]
    choices = [correct, *picked]
    choices = [choices[i] for i in rng.permutation(len(choices))]
    return choices, LETTERS[choices.index(correct)]


def _seen(ev: dict[str, Any], p: dict[str, Any]) -> tuple[float, bool] | None:
    """(time, seen-not-heard) at which percept ``p`` showed event ``ev``: a frame time inside a
    visual event, else the middle of an audio span covering at least half of an audible event."""
    if ev["kind"] in VISUAL and p["action"] in ("get_frames", "get_clip"):
        for t in p["timestamps"]:
            if ev["start"] <= t < ev["end"]:
                return t, True
    if ev["kind"] in AUDIBLE and p["action"] in ("get_audio", "get_clip"):
        a, b = max(ev["start"], p["start"]), min(ev["end"], p["end"])
        if b - a >= 0.5 * (ev["end"] - ev["start"]):
            return 0.5 * (a + b), False
    return None


def _probe_text(
    ev: dict[str, Any], t: float, visual: bool, rng: np.random.Generator
) -> tuple[str, list[str], str] | None:
    from envs import synth

    k = ev["kind"]
    if visual:
        if k == "shape":
            choices, letter = _mcq(rng, ev["color"], synth.SHAPE_COLORS)
            return f"What colour was the shape on screen at {t:.2f} s?", choices, letter
        if k == "digit":
            choices, letter = _mcq(rng, ev["text"], [str(d) for d in range(10)])
            return f"Which digit was shown on screen at {t:.2f} s?", choices, letter
        if k == "word":
            choices, letter = _mcq(rng, ev["text"], synth.SCREEN_WORDS)
            return f"Which word was written on screen at {t:.2f} s?", choices, letter
        name = {"flash": "a white flash", "static": "static noise"}[k]
        choices, letter = _mcq(rng, name, SCENE_OPTIONS)
        return f"What did the screen show at {t:.2f} s?", choices, letter
    span = f"between {ev['start']:.1f} s and {ev['end']:.1f} s"
    if k == "tone":
        choices, letter = _mcq(rng, f"{ev['freq']:g} Hz", [f"{f:g} Hz" for f in synth.TONE_FREQS])
        return f"What was the pitch of the beep heard {span}?", choices, letter
    if k == "speech":
        choices, letter = _mcq(rng, ev["word"], synth.SPOKEN_WORDS)
        return f"Which word was spoken {span}?", choices, letter
    if k == "static":
        choices, letter = _mcq(rng, "a burst of static noise", SOUND_OPTIONS)
        return f"What was heard {span}?", choices, letter
    return None


def synthetic_probes(traj: Trajectory, max_probes: int = 3, seed: int = 0) -> list[Probe]:
    """Follow-up questions about synthetic events inside the media this episode fetched.

    Each event the agent saw (a frame inside a visual event) or heard (an audio or clip span covering
    at least half of an audible event) gives one mcq probe; at most ``max_probes`` per episode,
    chosen deterministically from ``seed`` and the episode id.
    """
    timeline = synthetic_timeline(traj.media)
    if not timeline:
        return []
    found: list[Probe] = []
    used: set[str] = set()
    for p in percepts(traj):
        for ev in timeline.get("events", []):
            if ev["id"] in used:
                continue
            seen = _seen(ev, p)
            if seen is None:
                continue
            t, visual = seen
            made = _probe_text(ev, t, visual, _rng(seed, traj.id, ev["id"]))
            if made is None:
                continue
            used.add(ev["id"])
            question, choices, letter = made
            found.append(
                Probe(
                    id=f"{traj.id}/{ev['id']}",
                    episode_id=traj.id,
                    media=traj.media,
                    question=question,
                    choices=choices,
                    answer=letter,
                    kind=ev["kind"],
                    percept=p,
                )
            )
    if len(found) > max_probes:
        keep = sorted(_rng(seed, traj.id).choice(len(found), size=max_probes, replace=False))
        found = [found[i] for i in keep]
    return found


def _memory_builder(traj: Trajectory) -> Callable[[MediaSource, MediaInfo], SingleTurnContext]:
    notes = memory_notes(traj)

    def build(source: MediaSource, info: MediaInfo) -> SingleTurnContext:
        return SingleTurnContext(
            shown="You cannot see or hear the media now: you only have the notes you wrote while you "
            "looked at parts of it earlier.",
            parts=[text_part("Your notes from earlier:\n" + notes + "\n")],
        )

    return build


def _raw_builder(
    p: dict[str, Any], limits: EnvLimits
) -> Callable[[MediaSource, MediaInfo], SingleTurnContext]:
    """Show the percept again, fetched exactly as the environment served it."""

    def build(source: MediaSource, info: MediaInfo) -> SingleTurnContext:
        start, end = max(0.0, p["start"]), min(info.duration, p["end"])
        parts: list[dict[str, Any]] = []
        frames, audio_s, times = 0, 0.0, []
        try:
            if p["action"] == "get_frames":
                num = 1 if end == start else min(int(p.get("num") or len(p["timestamps"])), limits.max_frames)
                got = source.frames(start, end, num)
                parts += [text_part(f"Frames {start:.2f}s-{end:.2f}s (num={len(got)}):"), *frame_parts(got)]
                frames, times = len(got), [f.time for f in got]
                shown = "You are shown again the frames you looked at earlier."
            elif p["action"] == "get_audio":
                parts += audio_parts(source.audio(start, end), start, end)
                audio_s = end - start
                shown = "You are played again the audio you listened to earlier."
            else:
                clip = source.clip(start, end, limits.clip_fps)
                times = [f.time for f in clip.frames]
                parts += clip_parts(clip)
                frames, audio_s = len(times), (end - start if clip.audio is not None else 0.0)
                shown = "You are shown again the clip you watched earlier."
        except MediaReadError as exc:
            return SingleTurnContext(shown="The media could not be shown again.", parts=[], notes=[exc.code])
        return SingleTurnContext(
            shown=shown, parts=parts, frames=frames, audio_seconds=audio_s, timestamps=times
        )

    return build


class ScriptedPolicyError(ValueError):
    """The probe was asked of a scripted policy, whose answers do not depend on what it is shown."""


SCRIPTED_WARNING = (
    "WARNING: {name} is a scripted policy: it answers the same with or without the media, so its "
    "gap is 0 by construction and measures nothing about memory. Use a model backend."
)


def is_scripted(policy: Policy) -> bool:
    """True for the scripted backends (uniform, oracle, random, replay): no model reads the context."""
    from omniagent.backends.scripted import ScriptedPolicy
    from omniagent.cli_args import SCRIPTED_BACKENDS

    return isinstance(policy, ScriptedPolicy) or getattr(policy, "name", None) in SCRIPTED_BACKENDS


@dataclass
class FidelityReport:
    n_episodes: int
    n_probes: int
    skipped: int  # episodes without probes (not synthetic, nothing fetched, no event seen)
    memory: dict[str, Any]
    raw: dict[str, Any]
    gap: dict[str, Any]  # raw - memory, paired bootstrap
    by_kind: dict[str, dict[str, Any]]
    rows: list[dict[str, Any]]
    warning: str | None = None  # set when a scripted policy was probed (allow_scripted=True)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def _scripted_warning(policy: Policy, allow: bool) -> str | None:
    """The loud warning for a scripted policy (None for a model); raises unless ``allow``."""
    if not is_scripted(policy):
        return None
    warning = SCRIPTED_WARNING.format(name=repr(getattr(policy, "name", policy)))
    if not allow:
        raise ScriptedPolicyError(
            warning.removeprefix("WARNING: ") + " (allow_scripted / --allow-scripted to run it anyway)"
        )
    return warning


def _by_kind(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for kind in sorted({r["kind"] for r in rows}):
        sel = [r for r in rows if r["kind"] == kind]
        out[kind] = {
            "n": len(sel),
            "memory": float(np.mean([r["memory"] for r in sel])),
            "raw": float(np.mean([r["raw"] for r in sel])),
        }
    return out


def run_fidelity(
    trajectories: Iterable[Trajectory],
    policy: Policy,
    *,
    limits: EnvLimits | dict[str, Any] | None = None,
    max_probes: int = 3,
    seed: int = 0,
    n_boot: int = 1000,
    probe_fn: Callable[[Trajectory], list[Probe]] | None = None,
    allow_scripted: bool = False,
) -> FidelityReport:
    """Ask each episode's probes from memory and from the raw media (see the module docstring).

    ``probe_fn`` makes probes for non-synthetic trajectories (default: :func:`synthetic_probes`). A
    scripted policy is refused (:class:`ScriptedPolicyError`): its gap is 0 by construction. With
    ``allow_scripted`` (to test the harness) it runs and the report carries a loud ``warning``.
    """
    warning = _scripted_warning(policy, allow_scripted)
    limits = limits if isinstance(limits, EnvLimits) else EnvLimits(**(limits or {}))
    env = OmniVideoEnv(limits=limits)
    rows: list[dict[str, Any]] = []
    n_episodes = skipped = 0
    try:
        for traj in trajectories:
            n_episodes += 1
            probes = probe_fn(traj) if probe_fn else synthetic_probes(traj, max_probes, seed)
            if not probes:
                skipped += 1
                continue
            for pr in probes:
                try:
                    mem = single_turn_episode(
                        env, policy, pr.options(), _memory_builder(traj), episode_id=pr.id, mode="memory"
                    )
                    raw = single_turn_episode(
                        env,
                        policy,
                        pr.options(),
                        _raw_builder(pr.percept, limits),
                        episode_id=pr.id,
                        mode="raw",
                    )
                except MediaError:
                    skipped += 1
                    break
                rows.append(
                    {
                        "probe": pr.id,
                        "episode": pr.episode_id,
                        "kind": pr.kind,
                        "question": pr.question,
                        "answer": pr.answer,
                        "memory_answer": mem.answer,
                        "raw_answer": raw.answer,
                        "memory": mem.reward,
                        "raw": raw.reward,
                    }
                )
    finally:
        env.close()
    rows.sort(key=lambda r: str(r["probe"]))  # the interval must not depend on episode order
    mem_scores = np.array([r["memory"] for r in rows], dtype=float)
    raw_scores = np.array([r["raw"] for r in rows], dtype=float)
    return FidelityReport(
        n_episodes=n_episodes,
        n_probes=len(rows),
        skipped=skipped,
        memory=bootstrap_ci(mem_scores, n_boot, seed),
        raw=bootstrap_ci(raw_scores, n_boot, seed),
        gap=bootstrap_ci(raw_scores - mem_scores, n_boot, seed),
        by_kind=_by_kind(rows),
        rows=rows,
        warning=warning,
    )


def print_fidelity(report: FidelityReport, printer: Callable[[str], None] = print) -> None:
    def ci(c: dict[str, Any]) -> str:
        return "-" if c["mean"] is None else f"{c['mean']:.3f} [{c['lo']:.3f}, {c['hi']:.3f}]"

    if report.warning:
        printer(report.warning)
    printer(
        f"observation fidelity: {report.n_probes} probe(s) over {report.n_episodes} episode(s) "
        f"({report.skipped} without probes)"
    )
    printer(f"  from text memory: {ci(report.memory)}")
    printer(f"  from raw media:   {ci(report.raw)}")
    printer(f"  gap (raw - memory): {ci(report.gap)}")
    for kind, k in report.by_kind.items():
        printer(
            f"    {kind}: n={k['n']} memory {k['memory']:.3f} raw {k['raw']:.3f} gap {k['raw'] - k['memory']:+.3f}"
        )
    if report.warning:
        printer(report.warning)
