"""The timeline: background segments and the events placed on them, a pure function of the config."""

from __future__ import annotations

import colorsys
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.registry import Registry
from envs.synth.barcode import barcode_height
from envs.synth.config import (
    HUM_FREQS,
    MAX_DISTINCT_SPOKEN,
    SCREEN_WORDS,
    SHAPE_COLORS,
    SHAPES,
    SLOT_MARGIN,
    SPOKEN_WORDS,
    TONE_FREQS,
    SynthConfig,
    stream_rng,
)
from envs.synth.glyphs import shape_mask, text_box
from envs.synth.speech import espeak_clip, package_speech_backend


@dataclass
class Segment:
    index: int
    start: float
    end: float
    style: str  # solid | hgrad | vgrad | diag
    color_a: tuple[int, int, int]
    color_b: tuple[int, int, int]
    hum_hz: float


@dataclass
class Event:
    id: str
    kind: str  # shape | digit | word | flash | static | tone | speech
    start: float
    end: float
    group: int
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def visual(self) -> bool:
        return self.kind in ("shape", "digit", "word", "flash", "static")

    @property
    def audible(self) -> bool:
        return self.kind in ("tone", "speech", "static")

    @property
    def interval(self) -> list[float]:
        return [round(self.start, 4), round(self.end, 4)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "group": self.group,
        } | {k: v for k, v in self.attrs.items() if not k.startswith("_")}


@dataclass
class Timeline:
    config: SynthConfig
    segments: list[Segment]
    events: list[Event]
    speech_backend: str

    @property
    def content_height(self) -> int:
        return content_height_for(self.config)

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "speech_backend": self.speech_backend,
            "segments": [
                {"start": s.start, "end": s.end, "style": s.style, "color_a": s.color_a, "color_b": s.color_b}
                | ({"hum_hz": s.hum_hz} if self.config.has_audio else {})
                for s in self.segments
            ],
            "events": [e.to_dict() for e in self.events],
        }


def content_height_for(cfg: SynthConfig) -> int:
    """Rows above the frame-index barcode (the whole frame in audio mode)."""
    return cfg.height - barcode_height(cfg.height) if cfg.mode == "video" else cfg.height


def snap_to_frame(t: float, fps: int) -> float:
    """``t`` seconds rounded to the nearest frame boundary at ``fps`` frames per second."""
    return round(t * fps) / fps


def _hsv(h: float, s: float, v: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, s, v)
    return (int(round(r * 255)), int(round(g * 255)), int(round(b * 255)))


def _make_segments(cfg: SynthConfig) -> list[Segment]:
    rng = stream_rng(cfg, 1)
    lo, hi = cfg.segment_seconds
    bounds = [0.0]
    while True:
        nxt = snap_to_frame(bounds[-1] + rng.uniform(lo, hi), cfg.fps)
        if nxt >= cfg.duration - lo / 2:
            break
        bounds.append(nxt)
    bounds.append(cfg.duration)
    segments = []
    hue = rng.uniform(0, 1)
    hum = -1.0
    for i in range(len(bounds) - 1):
        hue = (hue + rng.uniform(0.2, 0.8)) % 1.0
        sat, val = rng.uniform(0.15, 0.4), rng.uniform(0.22, 0.5)
        style = str(rng.choice(["solid", "hgrad", "vgrad", "diag"]))
        color_a = _hsv(hue, sat, val)
        color_b = _hsv(
            hue + rng.uniform(-0.08, 0.08), sat, max(0.1, min(0.6, val + rng.choice([-0.15, 0.15])))
        )
        hum = float(rng.choice([f for f in HUM_FREQS if f != hum]))
        segments.append(Segment(i, bounds[i], bounds[i + 1], style, color_a, color_b, hum))
    return segments


def _group_kinds(cfg: SynthConfig, rng: np.random.Generator) -> list[str]:
    kinds = list(cfg.kinds)
    n = cfg.groups
    chosen = list(rng.permutation(kinds))[:n] if n < len(kinds) else list(kinds)
    while len(chosen) < n:
        chosen.append(str(rng.choice(kinds)))
    return [str(k) for k in rng.permutation(chosen)]


@dataclass(frozen=True)
class _Slot:
    """One event group's share of the timeline, ``[lo, hi]`` after the margins."""

    group: int
    lo: float
    hi: float

    @property
    def room(self) -> float:
        return self.hi - self.lo


class _Placer:
    """Places events slot by slot, drawing every choice from one random stream.

    Why a class: the draws must happen in exactly the order the generator always used (the timeline
    is a pure function of the seed), and each kind's placer shares the stream, the frame geometry and
    the growing event list.
    """

    def __init__(self, cfg: SynthConfig, backend: str) -> None:
        self.cfg = cfg
        self.backend = backend
        self.rng = stream_rng(cfg, 2)
        self.fps = cfg.fps
        self.width = cfg.width
        self.content_h = content_height_for(cfg)
        self.kinds = _group_kinds(cfg, self.rng)
        self.spoken_vocab = list(self.rng.permutation(SPOKEN_WORDS))[:MAX_DISTINCT_SPOKEN]
        self.events: list[Event] = []

    def slot(self, group: int) -> _Slot:
        size = self.cfg.duration / self.cfg.groups
        return _Slot(group, group * size + SLOT_MARGIN, (group + 1) * size - SLOT_MARGIN)

    def add(self, kind: str, start: float, end: float, group: int, **attrs: Any) -> Event:
        ev = Event(f"e{len(self.events):04d}", kind, round(start, 6), round(end, 6), group, attrs)
        self.events.append(ev)
        return ev

    def place(self, slot: _Slot, length: float) -> float:
        """A random start for ``length`` s inside the slot, rounded up to the frame grid."""
        start = slot.lo + self.rng.uniform(0.0, max(0.0, slot.hi - slot.lo - length))
        return self.ceil_frame(start)

    def ceil_frame(self, t: float) -> float:
        return math.ceil(t * self.fps - 1e-9) / self.fps

    def frames(self, low: int, high: int) -> int:
        """A random duration in frames, ``low..high`` inclusive."""
        return int(self.rng.integers(low, high + 1))

    def spoken_clip(self) -> tuple[str, np.ndarray] | None:
        """A word to speak and its clip, or None when no synthesiser can speak it."""
        if self.backend != "espeak-ng":
            return None
        word = str(self.rng.choice(self.spoken_vocab))
        clip = espeak_clip(word, self.cfg.sample_rate)
        return None if clip is None else (word, clip)

    def shape_attrs(self) -> dict[str, Any]:
        rng, width, content_h = self.rng, self.width, self.content_h
        size = int(rng.integers(max(6, int(0.18 * content_h)), max(7, int(0.42 * content_h)) + 1))
        size = min(size, content_h - 4, width - 4)
        x = int(rng.integers(2, width - size - 1))
        y = int(rng.integers(2, content_h - size - 1))
        shape = str(rng.choice(SHAPES))
        color = str(rng.choice(list(SHAPE_COLORS)))
        mask = shape_mask(shape, size)
        cols = np.nonzero(mask.any(axis=0))[0]
        ys, xs = np.nonzero(mask)
        return {
            "shape": shape,
            "color": color,
            "rgb": list(SHAPE_COLORS[color]),
            "x": x,
            "y": y,
            "size": size,
            "width_px": int(cols[-1] - cols[0] + 1),
            "area_px": int(mask.sum()),
            "center": [float(x + xs.mean()), float(y + ys.mean())],
        }


_PLACERS: Registry[Callable[[_Placer, _Slot], None]] = Registry("synth event kind")


@_PLACERS.register("shape")
def _place_shape(p: _Placer, slot: _Slot) -> None:
    fps = p.fps
    n = p.frames(max(1, round(1.0 * fps)), max(2, round(min(3.0, slot.room) * fps)))
    s = p.place(slot, n / fps)
    p.add("shape", s, s + n / fps, slot.group, **p.shape_attrs())


def _place_text(p: _Placer, slot: _Slot, kind: str) -> None:
    fps, rng = p.fps, p.rng
    n = p.frames(max(2, math.ceil(1.6 * fps)), max(3, round(min(3.0, slot.room) * fps)))
    s = p.place(slot, n / fps)
    text = str(rng.integers(0, 10)) if kind == "digit" else str(rng.choice(SCREEN_WORDS))
    scale, box = text_box(text, p.width, p.content_h, kind == "digit")
    x = int(rng.integers(1, max(2, p.width - box[0])))
    y = int(rng.integers(1, max(2, p.content_h - box[1])))
    p.add(kind, s, s + n / fps, slot.group, text=text, scale=scale, x=x, y=y)


@_PLACERS.register("digit")
def _place_digit(p: _Placer, slot: _Slot) -> None:
    _place_text(p, slot, "digit")


@_PLACERS.register("word")
def _place_word(p: _Placer, slot: _Slot) -> None:
    _place_text(p, slot, "word")


@_PLACERS.register("flash")
def _place_flash(p: _Placer, slot: _Slot) -> None:
    n = p.frames(2, 3) if p.fps >= 4 else 1
    s = p.place(slot, n / p.fps)
    p.add("flash", s, s + n / p.fps, slot.group)


@_PLACERS.register("static")
def _place_static(p: _Placer, slot: _Slot) -> None:
    n = max(1, p.frames(round(1.0 * p.fps), round(2.0 * p.fps)))
    s = p.place(slot, n / p.fps)
    p.add("static", s, s + n / p.fps, slot.group, noise_seed=int(p.rng.integers(0, 2**31)))


@_PLACERS.register("tone")
def _place_tone(p: _Placer, slot: _Slot) -> None:
    length = round(float(p.rng.uniform(0.3, 0.8)), 2)
    s = p.place(slot, length)
    p.add("tone", s, s + length, slot.group, freq=float(p.rng.choice(TONE_FREQS)))


@_PLACERS.register("speech")
def _place_speech(p: _Placer, slot: _Slot) -> None:
    spoken = p.spoken_clip()
    if spoken is None:  # no speech synthesiser: a beep takes the word's place
        _place_tone(p, slot)
        return
    word, clip = spoken
    length = len(clip) / p.cfg.sample_rate
    s = p.place(slot, length)
    p.add("speech", s, s + length, slot.group, word=word)


@_PLACERS.register("beep_shape")
def _place_beep_shape(p: _Placer, slot: _Slot) -> None:
    fps, rng = p.fps, p.rng
    beep = round(float(rng.uniform(0.3, 0.5)), 2)
    gap = float(rng.uniform(0.3, 0.7))
    n = p.frames(max(1, round(1.2 * fps)), max(2, round(1.8 * fps)))
    s = p.place(slot, beep + gap + n / fps + 1.0 / fps)
    tone = p.add("tone", s, s + beep, slot.group, freq=float(rng.choice(TONE_FREQS)), before_shape=True)
    shape_start = p.ceil_frame(tone.end + gap)
    p.add("shape", shape_start, shape_start + n / fps, slot.group, after_beep=tone.id, **p.shape_attrs())


def stamp_frames(events: list[Event], fps: int) -> None:
    """Give each visual event its first and past-the-end frame index (consumers check pixels there)."""
    for ev in events:
        if ev.visual:
            ev.attrs["start_frame"] = int(round(ev.start * fps))
            ev.attrs["end_frame"] = int(round(ev.end * fps))


def build_benchmark_timeline(cfg: SynthConfig) -> Timeline:
    """Place background segments and events for a ``benchmark``-level ``cfg`` (pure function of the config);
    :func:`envs.synth.build_timeline` picks the builder of any level."""
    if cfg.level != "benchmark":
        raise ValueError(f"build_benchmark_timeline needs level='benchmark', got {cfg.level!r}")
    backend = package_speech_backend(cfg)
    placer = _Placer(cfg, backend)
    segments = _make_segments(cfg)
    for group, kind in enumerate(placer.kinds):
        _PLACERS[kind](placer, placer.slot(group))  # an unknown kind raises (a ValueError)
    events = sorted(placer.events, key=lambda e: (e.start, e.id))
    stamp_frames(events, cfg.fps)
    return Timeline(cfg, segments, events, backend)
