"""What a served percept shows in the synthetic world (:mod:`envs.synth`), and the small controlled
language in which the perceiving teacher (:mod:`omniagent.backends.teacher`) writes it down and the
offline auditor (:mod:`rl.synthesis.audit_rules`) reads it back.

The truth comes from the benchmark's sidecar (``<media>.meta.json``: config and timeline), evaluated
at the times the environment actually served. One Observation is a run of sentences::

    Frame 30.00s: blue background, a red square about 31 px wide.
    Frames 0.00s-22.50s (4): green background.
    Frame 37.40s: white flash.
    Audio 0.00s-60.00s: a 1000 Hz beep at 12.31s-12.80s, the spoken word "apple" at 30.10s-30.72s.
    Audio 60.00s-120.00s: only the background hum.

A clip is introduced by ``Clip 0.00s-60.00s (120 frames, with sound).`` and followed by its frame and
audio sentences. Every claim names the served time it is about, so it can be checked.
"""

from __future__ import annotations

import colorsys
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from envs.synth.search import grid_bounds

HUES = ("red", "yellow", "green", "cyan", "blue", "magenta")  # 60-degree buckets centred on 0, 60, ...
TIME = r"(\d+(?:\.\d+)?)s"
SOUND_TOL = 0.15  # seconds: how far a stated sound boundary may be from the truth


class WorldError(RuntimeError):
    """The media is not a synthetic benchmark file with its sidecar (no ground truth to perceive)."""


def hue_name(rgb: list[int] | tuple[int, ...]) -> str:
    """The hue bucket of a background colour; consecutive segments always differ by >= 72 degrees,
    so they always get different names."""
    h, _, _ = colorsys.rgb_to_hsv(*(c / 255.0 for c in rgb))
    return HUES[int(((h * 360.0 + 30.0) % 360.0) // 60.0)]


@dataclass(frozen=True)
class Item:
    """One thing a percept shows: a visual item on a frame, or a sound within an audio span."""

    kind: str  # background | shape | digit | word | flash | static | tone | speech
    value: str = ""  # hue, "red square", "7", "SUN", "1000", "apple"; "" when not recognisable
    width: int | None = None  # shapes: width in pixels
    start: float | None = None  # sounds: audible part within the served span
    end: float | None = None
    full: bool = True  # sounds: the whole event lies inside the served span

    def phrase(self) -> str:
        """The item in the controlled language."""
        if self.kind == "background":
            return f"{self.value} background"
        if self.kind == "shape":
            color = self.value.split()[0]
            return f"{'an' if color[0] in 'aeiou' else 'a'} {self.value} about {self.width} px wide"
        if self.kind in ("digit", "word"):
            return f"the {self.kind} {self.value}"
        if self.kind == "flash":
            return "white flash"
        if self.kind == "static" and self.start is None:
            return "static noise"
        span = f"at {self.start:.2f}s-{self.end:.2f}s"
        if self.kind == "tone":
            return f"a {self.value} Hz beep {span}" if self.full else f"part of a beep {span}"
        if self.kind == "speech":
            return f'the spoken word "{self.value}" {span}' if self.full else f"part of a spoken word {span}"
        return f"a burst of static noise {span}"


class SynthWorld:
    """The ground truth of one synthetic media file: what each frame shows, what each span sounds like."""

    def __init__(self, meta: dict[str, Any]) -> None:
        cfg = meta["config"]
        self.fps = int(cfg["fps"])
        self.duration = float(cfg["duration"])
        self.video = cfg["mode"] == "video"
        self.has_audio = cfg["mode"] == "audio" or bool(cfg.get("audio", True))
        timeline = meta["timeline"]
        self.segments = [(round(s["start"] * self.fps), hue_name(s["color_a"])) for s in timeline["segments"]]
        self.events = timeline["events"]
        # the bounds of a search-level video's four equal fields (config search_fields='grid'): a rule of the
        # level, which a searcher may know, not a fact of this video
        grid = cfg.get("level") == "search" and cfg.get("search_fields") == "grid"
        self.field_grid: list[float] | None = grid_bounds(self.duration, self.fps) if grid else None

    @classmethod
    def for_media(cls, path: str | Path) -> SynthWorld:
        """Load the world of ``path`` from its sidecar (cached by path and modification time)."""
        meta = Path(str(path) + ".meta.json")
        try:
            return _load_world(str(meta), meta.stat().st_mtime_ns)
        except (OSError, KeyError, ValueError) as exc:
            raise WorldError(
                f"{path} has no readable synthetic-benchmark sidecar {meta.name} ({type(exc).__name__}); "
                "this needs media built by `python -m envs.synth`"
            ) from exc

    def frame_index(self, t: float) -> int:
        return int(round(t * self.fps))

    def frame(self, t: float) -> list[Item]:
        """Everything visible on the frame presented at ``t``: the background (unless the whole
        picture is covered by a flash or static) and the inserted events."""
        idx = self.frame_index(t)
        items: list[Item] = []
        for ev in self.events:
            if ev["kind"] in ("shape", "digit", "word", "flash", "static") and (
                ev["start_frame"] <= idx < ev["end_frame"]
            ):
                if ev["kind"] == "shape":
                    items.append(Item("shape", f"{ev['color']} {ev['shape']}", width=int(ev["width_px"])))
                elif ev["kind"] in ("digit", "word"):
                    items.append(Item(ev["kind"], str(ev["text"])))
                else:
                    return [Item(ev["kind"])]  # the whole picture is covered
        hue = next(h for start, h in reversed(self.segments) if start <= idx)
        return [Item("background", hue), *items]

    def sounds(self, start: float, end: float) -> list[Item]:
        """Audible events overlapping [start, end], clipped to it (``full`` when wholly inside)."""
        if not self.has_audio:
            return []
        out = []
        for ev in self.events:
            if ev["kind"] not in ("tone", "speech", "static") or ev["end"] <= start or ev["start"] >= end:
                continue
            full = ev["start"] >= start - 1e-6 and ev["end"] <= end + 1e-6
            value = {"tone": f"{ev.get('freq', 0):g}", "speech": str(ev.get("word", ""))}.get(ev["kind"], "")
            s, e = max(start, float(ev["start"])), min(end, float(ev["end"]))
            out.append(Item(ev["kind"], value if full else "", start=round(s, 2), end=round(e, 2), full=full))
        return out


@lru_cache(maxsize=64)
def _load_world(meta_path: str, mtime_ns: int) -> SynthWorld:
    return SynthWorld(json.loads(Path(meta_path).read_text(encoding="utf-8")))


# --------------------------------------------------------------------------------------------------
# Percepts: what the environment served, read from its message parts
# --------------------------------------------------------------------------------------------------


@dataclass
class Percept:
    """The served percept of one turn: frame times and/or an audio span (``error`` when rejected)."""

    kind: str  # frames | audio | clip | error | none
    times: list[float] = field(default_factory=list)
    span: tuple[float, float] | None = None  # the served audio span (audio, or a clip with sound)
    clip: tuple[float, float] | None = None
    error: str = ""


def percept_from_parts(parts: list[dict[str, Any]]) -> Percept:
    """The percept in a user message's parts, from the timestamps the environment attached."""
    for p in parts:
        if p.get("type") == "image":
            times = [float(q["timestamp"]) for q in parts if q.get("type") == "image"]
            return Percept("frames", times=times)
        if p.get("type") == "audio":
            return Percept("audio", span=(float(p["start"]), float(p["end"])))
        if p.get("type") == "video":
            span = (float(p["start"]), float(p["end"]))
            sound = span if p.get("audio") is not None else None
            return Percept("clip", times=[float(t) for t in p["timestamps"]], span=sound, clip=span)
    text = "".join(q.get("text", "") for q in parts if q.get("type") == "text")
    if "error" in text.lower() or "rejected" in text.lower():
        return Percept("error", error=text.strip().splitlines()[0] if text.strip() else "error")
    return Percept("none")


def percept_from_record(action: dict[str, Any] | None, timestamps: list[float], error: str | None) -> Percept:
    """The percept a trajectory turn fetched, from its recorded action and served timestamps."""
    kind = (action or {}).get("type")
    if error:
        return Percept("error", error=error)
    if kind == "get_frames":
        return Percept("frames", times=list(timestamps))
    if kind == "get_audio" and len(timestamps) == 2:
        return Percept("audio", span=(float(timestamps[0]), float(timestamps[1])))
    if kind == "get_clip":
        start, end = float(action["start"]), float(action["end"])
        return Percept("clip", times=list(timestamps), span=(start, end), clip=(start, end))
    return Percept("none")


# --------------------------------------------------------------------------------------------------
# The controlled language: write a percept, parse an observation
# --------------------------------------------------------------------------------------------------


def frame_sentences(world: SynthWorld, times: list[float], group: bool = True) -> list[str]:
    """One sentence per run of consecutive frames that look the same (``group=False``: per frame, a
    frame served twice at one time still one sentence, ``Frames 39.80s-39.80s (2)``)."""
    out: list[str] = []
    runs: list[tuple[list[float], str]] = []
    for t in times:
        content = ", ".join(item.phrase() for item in world.frame(t))
        if runs and runs[-1][1] == content and (group or runs[-1][0][-1] == t):
            runs[-1][0].append(t)
        else:
            runs.append(([t], content))
    for ts, content in runs:
        head = f"Frame {ts[0]:.2f}s" if len(ts) == 1 else f"Frames {ts[0]:.2f}s-{ts[-1]:.2f}s ({len(ts)})"
        out.append(f"{head}: {content}.")
    return out


def audio_sentence(world: SynthWorld, start: float, end: float) -> str:
    items = world.sounds(start, end)
    body = ", ".join(i.phrase() for i in items) if items else "only the background hum"
    return f"Audio {start:.2f}s-{end:.2f}s: {body}."


def describe(world: SynthWorld, percept: Percept, per_frame: bool = False) -> str:
    """The Observation of a served percept: true to the world at the served times, nothing else.

    Frames are written one sentence per run of alike frames, or with ``per_frame`` one sentence per
    frame a ``get_frames`` look served, in the order served (a clip's 2 fps frames stay grouped, or
    its turn would outgrow the generation limit). Per frame, writing a sentence is copying one frame
    label and reading the image after it, the task single-frame captions teach; by runs, the writer must
    also find where runs start and end and count them."""
    if percept.kind == "none":
        return "none"
    if percept.kind == "error":
        return "The request was rejected; nothing was shown."
    parts: list[str] = []
    if percept.kind == "clip":
        assert percept.clip is not None
        sound = "with sound" if percept.span else "no sound"
        parts.append(
            f"Clip {percept.clip[0]:.2f}s-{percept.clip[1]:.2f}s ({len(percept.times)} frames, {sound})."
        )
    if percept.times:
        parts += frame_sentences(world, percept.times, group=not per_frame or percept.kind == "clip")
    if percept.span:
        parts.append(audio_sentence(world, *percept.span))
    return " ".join(parts)


_SENTENCE_SPLIT = re.compile(r"(?<=\.)\s+(?=(?:Frames?|Audio|Clip) )")
_FRAME = re.compile(rf"^Frames? {TIME}(?:-{TIME} \((\d+)\))?: (.+)$")
_AUDIO = re.compile(rf"^Audio {TIME}-{TIME}: (.+)$")
_CLIP = re.compile(rf"^Clip {TIME}-{TIME} \((\d+) frames, (with sound|no sound)\)$")
_VISUAL_ITEMS = [
    (re.compile(r"^(\w+) background$"), "background"),
    (re.compile(r"^an? (\w+ (?:square|circle|triangle)) about (\d+) px wide$"), "shape"),
    (re.compile(r"^the digit (\d)$"), "digit"),
    (re.compile(r"^the word ([A-Z]+)$"), "word"),
    (re.compile(r"^white flash$"), "flash"),
    (re.compile(r"^static noise$"), "static"),
]
_SOUND_ITEMS = [
    (re.compile(rf"^a (\d+) Hz beep at {TIME}-{TIME}$"), "tone", True),
    (re.compile(rf"^part of a beep at {TIME}-{TIME}$"), "tone", False),
    (re.compile(rf'^the spoken word "([a-z]+)" at {TIME}-{TIME}$'), "speech", True),
    (re.compile(rf"^part of a spoken word at {TIME}-{TIME}$"), "speech", False),
    (re.compile(rf"^a burst of static noise at {TIME}-{TIME}$"), "static", True),
]


@dataclass
class Claim:
    """One parsed sentence: items claimed on frames (``first``..``last``, ``count`` of them) or in an
    audio span; ``error`` when the sentence is not in the controlled language."""

    kind: str  # frames | audio | clip | error
    first: float = 0.0
    last: float = 0.0
    count: int = 1
    items: list[Item] = field(default_factory=list)
    silent: bool = False  # audio: "only the background hum"
    sound: bool = False  # clip: "with sound"
    error: str = ""


def _visual_item(text: str) -> Item | None:
    for pattern, kind in _VISUAL_ITEMS:
        m = pattern.match(text)
        if m:
            if kind == "shape":
                return Item("shape", m.group(1), width=int(m.group(2)))
            return Item(kind, m.group(1) if m.groups() else "")
    return None


def _sound_item(text: str) -> Item | None:
    for pattern, kind, full in _SOUND_ITEMS:
        m = pattern.match(text)
        if m:
            value = m.group(1) if len(m.groups()) == 3 else ""
            s, e = float(m.group(len(m.groups()) - 1)), float(m.group(len(m.groups())))
            return Item(kind, value, start=s, end=e, full=full)
    return None


def _parse_sentence(sentence: str) -> Claim:
    if m := _CLIP.match(sentence):
        return Claim(
            "clip", float(m.group(1)), float(m.group(2)), int(m.group(3)), sound=m.group(4) == "with sound"
        )
    if m := _FRAME.match(sentence):
        first = float(m.group(1))
        last = float(m.group(2)) if m.group(2) else first
        items = [_visual_item(p.strip()) for p in m.group(4).split(", ")]
        if any(i is None for i in items):
            return Claim("error", error=f"unreadable frame claim {sentence!r}")
        return Claim("frames", first, last, int(m.group(3) or 1), items=[i for i in items if i])
    if m := _AUDIO.match(sentence):
        body = m.group(3).strip()
        claim = Claim("audio", float(m.group(1)), float(m.group(2)), silent=body == "only the background hum")
        if not claim.silent:
            items = [_sound_item(p.strip()) for p in body.split(", ")]
            if any(i is None for i in items):
                return Claim("error", error=f"unreadable audio claim {sentence!r}")
            claim.items = [i for i in items if i]
        return claim
    return Claim("error", error=f"not a percept sentence: {sentence[:80]!r}")


def parse_observation(text: str) -> list[Claim]:
    """The claims of an Observation ("none" and the rejection notice hold none)."""
    text = (text or "").strip()
    if text.lower() in ("none", "", "the request was rejected; nothing was shown."):
        return []
    return [_parse_sentence(s.strip().rstrip(".")) for s in _SENTENCE_SPLIT.split(text) if s.strip()]


# --------------------------------------------------------------------------------------------------
# Memory: what has been observed so far (the teacher's notes; the auditor's reading of the notes)
# --------------------------------------------------------------------------------------------------


@dataclass
class Memory:
    """Observed facts: items on frames by served time, and distinct sounds heard."""

    frames: dict[float, list[Item]] = field(default_factory=dict)
    sounds: list[Item] = field(default_factory=list)
    spans: list[tuple[float, float]] = field(default_factory=list)

    def add_frame(self, t: float, items: list[Item]) -> None:
        self.frames[round(t, 2)] = list(items)

    def add_sounds(self, span: tuple[float, float], items: list[Item]) -> None:
        """Merge sounds heard in ``span``; the same event cut at a window edge and heard whole in an
        overlapping window counts once (the whole hearing wins)."""
        self.spans.append(span)
        for item in items:
            same = [
                i
                for i, s in enumerate(self.sounds)
                if s.kind == item.kind and s.start < item.end + 0.05 and item.start < s.end + 0.05
            ]
            if not same:
                self.sounds.append(item)
            elif item.full and not self.sounds[same[0]].full:
                self.sounds[same[0]] = item
        self.sounds.sort(key=lambda s: s.start)

    def add_percept(self, world: SynthWorld, percept: Percept) -> None:
        for t in percept.times:
            self.add_frame(t, world.frame(t))
        if percept.span:
            self.add_sounds(percept.span, world.sounds(*percept.span))

    def hits(self, kind: str, value: str | None = None) -> list[float]:
        """Sorted frame times showing an item of ``kind`` (and ``value``)."""
        return [t for t in sorted(self.frames) if any(_match(i, kind, value) for i in self.frames[t])]

    def runs(self, kind: str, value: str | None, step: float) -> list[list[float]]:
        """Intervals during which the item was on screen, estimated from the frames seen: a boundary
        next to a neighbouring frame (``step`` apart) is exact, otherwise halfway to the nearest miss."""
        out: list[list[float]] = []
        times = sorted(self.frames)
        cur: list[float] | None = None
        miss: float | None = None
        for t in times:
            if any(_match(i, kind, value) for i in self.frames[t]):
                if cur is None:
                    if miss is None:
                        start = max(0.0, t - step / 2)
                    else:
                        start = t if t - miss <= step * 1.01 else (t + miss) / 2
                    cur = [start, t]
                cur[1] = t
                continue
            if cur is not None:
                end = cur[1] + step if t - cur[1] <= step * 1.01 else (cur[1] + t) / 2
                out.append([round(cur[0], 2), round(end, 2)])
                cur = None
            miss = t
        if cur is not None:
            out.append([round(cur[0], 2), round(cur[1] + step / 2, 2)])
        return out

    def heard(self, kind: str, value: str | None = None, full_only: bool = False) -> list[Item]:
        return [s for s in self.sounds if _match(s, kind, value) and (s.full or not full_only)]

    def background_changes(self) -> int:
        """Changes of background colour between consecutive frames seen (covered frames skipped)."""
        hues = [i.value for t in sorted(self.frames) for i in self.frames[t] if i.kind == "background"]
        return sum(1 for a, b in zip(hues, hues[1:], strict=False) if a != b)

    def covered(self) -> float:
        """Seconds of audio heard (union of spans)."""
        total, end = 0.0, -1.0
        for s, e in sorted(self.spans):
            if e > end:
                total += e - max(s, end)
                end = e
        return total


def _match(item: Item, kind: str, value: str | None) -> bool:
    return item.kind == kind and (value is None or item.value == value)
