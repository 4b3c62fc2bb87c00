"""The timeline: background segments and the events placed on them, a pure function of the config."""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
    _rng,
)
from envs.synth.glyphs import _text_box, shape_mask
from envs.synth.speech import _espeak_clip, _package_speech_backend


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
        cfg = self.config
        return cfg.height - barcode_height(cfg.height) if cfg.mode == "video" else cfg.height

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


def _snap(t: float, fps: int) -> float:
    return round(t * fps) / fps


def _hsv(h: float, s: float, v: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, s, v)
    return (int(round(r * 255)), int(round(g * 255)), int(round(b * 255)))


def _make_segments(cfg: SynthConfig) -> list[Segment]:
    rng = _rng(cfg, 1)
    lo, hi = cfg.segment_seconds
    bounds = [0.0]
    while True:
        nxt = _snap(bounds[-1] + rng.uniform(lo, hi), cfg.fps)
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


def build_timeline(cfg: SynthConfig) -> Timeline:
    """Place background segments and events for ``cfg`` (pure function of the config)."""
    backend = _package_speech_backend(cfg)
    rng = _rng(cfg, 2)
    segments = _make_segments(cfg)
    fps = cfg.fps
    width, height = cfg.width, cfg.height
    content_h = height - barcode_height(height) if cfg.mode == "video" else height
    slot = cfg.duration / cfg.groups
    kinds = _group_kinds(cfg, rng)
    words_pool = list(rng.permutation(SPOKEN_WORDS))
    spoken_vocab = words_pool[:MAX_DISTINCT_SPOKEN]
    events: list[Event] = []
    counter = 0

    def add(kind: str, start: float, end: float, group: int, **attrs: Any) -> Event:
        nonlocal counter
        ev = Event(f"e{counter:04d}", kind, round(start, 6), round(end, 6), group, attrs)
        counter += 1
        events.append(ev)
        return ev

    def shape_attrs() -> dict[str, Any]:
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

    for g, kind in enumerate(kinds):
        lo = g * slot + SLOT_MARGIN
        hi = (g + 1) * slot - SLOT_MARGIN
        room = hi - lo

        def place(length: float, lo: float = lo, hi: float = hi) -> float:
            start = lo + rng.uniform(0.0, max(0.0, hi - lo - length))
            return math.ceil(start * fps - 1e-9) / fps

        word, clip = "", None
        if kind == "speech" and backend == "espeak-ng":
            word = str(rng.choice(spoken_vocab))
            clip = _espeak_clip(word, cfg.sample_rate)
        if kind == "speech" and clip is None:
            kind = "tone"  # no speech synthesiser: a beep takes the word's place
        if kind == "shape":
            n = int(rng.integers(max(1, round(1.0 * fps)), max(2, round(min(3.0, room) * fps)) + 1))
            s = place(n / fps)
            add("shape", s, s + n / fps, g, **shape_attrs())
        elif kind in ("digit", "word"):
            n = int(rng.integers(max(2, math.ceil(1.6 * fps)), max(3, round(min(3.0, room) * fps)) + 1))
            s = place(n / fps)
            text = str(rng.integers(0, 10)) if kind == "digit" else str(rng.choice(SCREEN_WORDS))
            scale, box = _text_box(text, width, content_h, kind == "digit")
            x = int(rng.integers(1, max(2, width - box[0])))
            y = int(rng.integers(1, max(2, content_h - box[1])))
            add(kind, s, s + n / fps, g, text=text, scale=scale, x=x, y=y)
        elif kind == "flash":
            n = int(rng.integers(2, 4)) if fps >= 4 else 1
            s = place(n / fps)
            add("flash", s, s + n / fps, g)
        elif kind == "static":
            n = max(1, int(rng.integers(round(1.0 * fps), round(2.0 * fps) + 1)))
            s = place(n / fps)
            add("static", s, s + n / fps, g, noise_seed=int(rng.integers(0, 2**31)))
        elif kind == "tone":
            length = round(float(rng.uniform(0.3, 0.8)), 2)
            s = place(length)
            add("tone", s, s + length, g, freq=float(rng.choice(TONE_FREQS)))
        elif kind == "speech":
            assert clip is not None
            length = len(clip) / cfg.sample_rate
            s = place(length)
            add("speech", s, s + length, g, word=word)
        elif kind == "beep_shape":
            beep = round(float(rng.uniform(0.3, 0.5)), 2)
            gap = float(rng.uniform(0.3, 0.7))
            n = int(rng.integers(max(1, round(1.2 * fps)), max(2, round(1.8 * fps)) + 1))
            s = place(beep + gap + n / fps + 1.0 / fps)
            tone = add("tone", s, s + beep, g, freq=float(rng.choice(TONE_FREQS)), before_shape=True)
            shape_start = math.ceil((tone.end + gap) * fps - 1e-9) / fps
            add("shape", shape_start, shape_start + n / fps, g, after_beep=tone.id, **shape_attrs())
        else:  # pragma: no cover - guarded by the config validator
            raise ValueError(kind)
    events.sort(key=lambda e: (e.start, e.id))
    for ev in events:
        if ev.visual:
            ev.attrs["start_frame"] = int(round(ev.start * fps))
            ev.attrs["end_frame"] = int(round(ev.end * fps))
    return Timeline(cfg, segments, events, backend)
