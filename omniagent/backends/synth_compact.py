"""The compact form of the synthetic world's controlled language, for the ``search`` level of :mod:`envs.synth`.

The full language of :mod:`omniagent.backends.synth_world` spends about 120 tokens on a turn; an agent of a
million weights, which must write every token of its Observation, learns and samples a short one faster. The
compact form keeps what a search needs (which colour is where, the digit and the beep, and when) and drops the
rest: times in whole seconds (the fraction dropped), no sentence frame, one clause per run of alike frames::

    0-17 blue, 26 yellow, 34 yellow 9, 43 green, 51-60 red
    audio 0-30: 2000 Hz at 12, cut beep at 29
    audio 28-58: none
    clip 10-20: 10-14 red, 15-20 red 7; audio 10-20: 500 Hz at 16

A frame clause ``a-b hue [digit]`` covers the consecutive served frames from the one at ``a`` to the one at
``b`` (``a`` alone: frames in one second), all showing that background and digit and nothing else; ``flash``
and ``static`` cover the whole picture. An audio clause names the served span and every sound in it: a whole
beep by its pitch and the second of its middle, a beep cut by the span's edge as ``cut beep``.

With ``fields`` (the teacher's ``field_clauses``) a look's frames are written by colour instead, one **field clause**
per colour they show, in the fixed order of :data:`HUES`, whatever the order on screen::

    red 43-60, yellow 17-43 digit 9 at 34, blue 0-26

A field clause ``hue a-b [digit d at t]`` gives the seconds of the served frames on either side of that colour's
frames (frames of other colours; the file's first or last second where the look has none), so the colour's field
lies between ``a`` and ``b``; and the digit its frames show, with the second of the first frame that shows it. It
starts with a colour's name where a frame clause starts with a number, so both parse without a flag.

Thoughts on this level are compact too (:func:`thought_facts` reads the facts they state):
``red 17-43`` (where the red field can lie), ``digit 9 at 34``, ``1000 Hz at 35``, ``green at 41``,
``no 2000 Hz``, ``no red``; an answer ends ``: D`` (``, 9: D`` when the teacher's ``option_thought``
writes the chosen option's text before its letter).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from omniagent.backends.synth_world import HUES, Item, Percept, SynthWorld  # HUES: the field clauses' order

__all__ = [
    "CompactClaim",
    "CompactFact",
    "HUES",
    "describe_compact",
    "field_clauses",
    "frame_clauses",
    "is_compact",
    "parse_compact",
    "sec",
]

_HUE = f"({'|'.join(HUES)})"
_FRAME = re.compile(rf"^(\d+)(?:-(\d+))? (?:{_HUE}(?: (\d))?|(flash|static))$")
_FIELD = re.compile(rf"^{_HUE} (\d+)-(\d+)(?: digit (\d) at (\d+))?$")
_AUDIO = re.compile(r"^audio (\d+)-(\d+): (.+)$")
_CLIP = re.compile(r"^clip (\d+)-(\d+)$")
_TONE = re.compile(r"^(\d+) Hz at (\d+)$")
_CUT = re.compile(r"^cut (beep|word|static) at (\d+)$")
_CUT_KINDS = {"tone": "beep", "speech": "word", "static": "static"}


def sec(t: float) -> int:
    """A time in whole seconds, its fraction dropped (the compact language's only time format): written from a
    frame's label ``Frame at 34.80s`` it is a copy of the digits before the point, no arithmetic."""
    return int(math.floor(float(t) + 1e-6))


def _frame_text(items: list[Item]) -> str:
    """A frame's content: ``hue``, ``hue digit``, ``flash`` or ``static``; anything else has no compact form."""
    kinds = {i.kind: i.value for i in items}
    if set(kinds) <= {"flash"} or set(kinds) <= {"static"}:
        return next(iter(kinds), "static")
    if set(kinds) - {"background", "digit"}:
        raise ValueError(f"no compact form for a frame showing {', '.join(i.phrase() for i in items)}")
    return kinds["background"] + (f" {kinds['digit']}" if "digit" in kinds else "")


def frame_clauses(world: SynthWorld, times: list[float]) -> list[str]:
    """One clause per run of consecutive served frames that look alike."""
    runs: list[tuple[list[float], str]] = []
    for t in times:
        content = _frame_text(world.frame(t))
        if runs and runs[-1][1] == content:
            runs[-1][0].append(t)
        else:
            runs.append(([t], content))
    out = []
    for ts, content in runs:
        a, b = sec(ts[0]), sec(ts[-1])
        out.append(f"{a} {content}" if a == b else f"{a}-{b} {content}")
    return out


def field_clauses(world: SynthWorld, times: list[float]) -> list[str]:
    """One field clause per colour the frames at ``times`` show, in the order of :data:`HUES` (see the module doc).
    Every frame must show a colour (and at most a digit), and each colour's frames must be one run of the look."""
    times = sorted(times)
    shown = [_frame_text(world.frame(t)).split() for t in times]
    if any(parts[0] not in HUES for parts in shown):
        raise ValueError("field clauses need a colour on every frame")
    out = []
    for hue in HUES:
        run = [i for i, parts in enumerate(shown) if parts[0] == hue]
        if not run:
            continue
        if run[-1] - run[0] + 1 != len(run):
            raise ValueError(f"field clauses need the {hue} frames in one run of the look")
        a = sec(times[run[0] - 1]) if run[0] > 0 else 0
        b = sec(times[run[-1] + 1]) if run[-1] + 1 < len(times) else sec(world.duration)
        digit = next((i for i in run if len(shown[i]) > 1), None)
        out.append(
            f"{hue} {a}-{b}"
            + (f" digit {shown[digit][1]} at {sec(times[digit])}" if digit is not None else "")
        )
    return out


def _sound_text(item: Item) -> str:
    mid = sec(0.5 * (float(item.start) + float(item.end)))
    if item.kind == "tone" and item.full:
        return f"{item.value} Hz at {mid}"
    return f"cut {_CUT_KINDS.get(item.kind, 'static')} at {mid}"


def audio_clause(world: SynthWorld, start: float, end: float) -> str:
    sounds = world.sounds(start, end)
    return f"audio {sec(start)}-{sec(end)}: " + (", ".join(_sound_text(s) for s in sounds) or "none")


def describe_compact(world: SynthWorld, percept: Percept, fields: bool = False) -> str:
    """The compact Observation of a served percept (``none`` before any; ``rejected`` after an error); with
    ``fields``, its frames in field clauses (:func:`field_clauses`)."""
    if percept.kind == "none":
        return "none"
    if percept.kind == "error":
        return "rejected"
    parts: list[str] = []
    if percept.kind == "clip":
        assert percept.clip is not None
        parts.append(f"clip {sec(percept.clip[0])}-{sec(percept.clip[1])}")
    if percept.times:
        parts.append(", ".join((field_clauses if fields else frame_clauses)(world, percept.times)))
    if percept.span:
        parts.append(audio_clause(world, *percept.span))
    text = "; ".join(parts)
    return text.replace("; ", ": ", 1) if percept.kind == "clip" else text


@dataclass
class CompactClaim:
    """One parsed clause: frames ``first``..``last`` (whole seconds) showing ``items`` exactly; a colour's field
    between the frames at ``first`` and ``last`` (``items``: its background, and its digit with ``start`` the second
    of the first frame showing it); an audio span and its sounds (``items``: tones with ``start == end`` = the
    second of their middle); or a clip span."""

    kind: str  # frames | field | audio | clip | error
    first: int = 0
    last: int = 0
    items: list[Item] = field(default_factory=list)
    error: str = ""


def is_compact(text: str | None) -> bool:
    """Whether an Observation is in the compact language (the full one writes ``Frame``/``Audio``/``Clip``)."""
    text = (text or "").strip()
    return text in ("rejected",) or bool(re.match(rf"^(?:\d|audio |clip |{_HUE} \d)", text))


def _field_claim(clause: str) -> CompactClaim:
    m = _FIELD.match(clause)
    if not m:
        return CompactClaim("error", error=f"unreadable field clause {clause!r}")
    items = [Item("background", m.group(1))]
    if m.group(4):
        items.append(Item("digit", m.group(4), start=float(m.group(5)), end=float(m.group(5))))
    return CompactClaim("field", int(m.group(2)), int(m.group(3)), items)


def _frame_claim(clause: str) -> CompactClaim:
    if re.match(_HUE, clause):
        return _field_claim(clause)
    m = _FRAME.match(clause)
    if not m:
        return CompactClaim("error", error=f"unreadable frame clause {clause!r}")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) else first
    if m.group(5):
        items = [Item(m.group(5))]
    else:
        items = [Item("background", m.group(3))] + ([Item("digit", m.group(4))] if m.group(4) else [])
    return CompactClaim("frames", first, last, items)


def _audio_claim(clause: str) -> CompactClaim:
    m = _AUDIO.match(clause)
    if not m:
        return CompactClaim("error", error=f"unreadable audio clause {clause!r}")
    claim = CompactClaim("audio", int(m.group(1)), int(m.group(2)))
    body = m.group(3).strip()
    if body == "none":
        return claim
    for part in body.split(", "):
        if tone := _TONE.match(part):
            at = float(tone.group(2))
            claim.items.append(Item("tone", tone.group(1), start=at, end=at))
        elif cut := _CUT.match(part):
            kind = {v: k for k, v in _CUT_KINDS.items()}[cut.group(1)]
            at = float(cut.group(2))
            claim.items.append(Item(kind, "", start=at, end=at, full=False))
        else:
            return CompactClaim("error", error=f"unreadable sound {part!r}")
    return claim


def parse_compact(text: str) -> list[CompactClaim]:
    """The claims of a compact Observation, in order (``none`` and ``rejected`` hold none)."""
    text = (text or "").strip()
    if text in ("none", "rejected", ""):
        return []
    claims: list[CompactClaim] = []
    clip = _CLIP.match(text.split(": ", 1)[0])
    if clip:
        claims.append(CompactClaim("clip", int(clip.group(1)), int(clip.group(2))))
        text = text.split(": ", 1)[1] if ": " in text else ""
    for section in text.split("; "):
        section = section.strip()
        if section.startswith("audio "):
            claims.append(_audio_claim(section))
        elif section:
            claims += [_frame_claim(c.strip()) for c in section.split(", ")]
    return claims


@dataclass(frozen=True)
class CompactFact:
    """A fact a compact Thought states: ``kind`` digit | tone | background (at ``at``) or its absence."""

    kind: str
    value: str
    at: int | None  # None: the fact is stated absent ("no 2000 Hz", "no red")


_FACTS = [
    (re.compile(r"\bdigit (\d) at (\d+)\b"), "digit"),
    (re.compile(r"\b(\d+) Hz at (\d+)\b"), "tone"),
    (re.compile(rf"\b{_HUE} at (\d+)\b"), "background"),
]
_ABSENT = [(re.compile(r"\bno (\d+) Hz\b"), "tone"), (re.compile(rf"\bno {_HUE}\b"), "background")]


def thought_facts(text: str) -> list[CompactFact]:
    """The facts a compact Thought states (a field's span ``red 17-43`` is a plan, not a fact)."""
    facts = [CompactFact(kind, m.group(1), int(m.group(2))) for p, kind in _FACTS for m in p.finditer(text)]
    return facts + [CompactFact(kind, m.group(1), None) for p, kind in _ABSENT for m in p.finditer(text)]
