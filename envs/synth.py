"""A deterministic synthetic long-media task engine: evidence known by construction.

The engine composes a long video (or audio file) from distinct background segments and inserts short
events at times it chooses, so every answer and every evidence interval follows from the construction
itself, with no annotation. This is the "temporal data engine" idea (compose segments, insert
anomalies into a known window) made fully synthetic, cheap and exactly reproducible from a seed.

Timeline (all times in seconds; visual events sit on the frame grid ``k / fps``):

- background segments: a solid colour or a gradient of dim, low-saturation colours, plus a quiet
  low-frequency hum (different per segment) and faint noise in the audio;
- visual events: a saturated coloured shape (square / circle / triangle), a large digit, a short word,
  a white flash, a burst of TV static (with a noise burst in the audio too);
- audio events: tone bursts ("beeps") of known frequency, spoken words (espeak-ng; when espeak-ng is
  missing the words are replaced by beeps and no speech questions are asked), and a beep followed
  shortly by a shape (for "what appears right after the beep" questions).

Events never overlap: the timeline is cut into equal slots and each slot holds one event group.

Every video frame carries its own index as a barcode in the bottom rows (see :func:`decode_frame_index`),
so consumers can check that the frame they got is the frame they asked for.

Media are written by piping raw frames to an ``ffmpeg`` subprocess (libx264 + AAC); PyAV is used when
the ``ffmpeg`` binary is missing. Audio-only mode writes wav, flac or mp3.

CLI: ``python -m envs.synth --out DIR --seed 0 --n 4 --durations 60,600``.
"""

from __future__ import annotations

import argparse
import colorsys
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from envs.tasks import Task, choice_letter, load_tasks_jsonl, save_tasks_jsonl

GENERATOR_VERSION = "omniagent-synth-1"
SOURCE_NAME = "omniagent-synth"

EventKind = Literal["shape", "digit", "word", "flash", "static", "tone", "speech", "beep_shape"]
VIDEO_KINDS: tuple[str, ...] = ("shape", "digit", "word", "flash", "static", "tone", "speech", "beep_shape")
AUDIO_KINDS: tuple[str, ...] = ("tone", "speech", "static")
VISUAL_ONLY_KINDS = frozenset({"shape", "digit", "word", "flash"})
NEEDS_AUDIO_KINDS = frozenset({"tone", "speech", "beep_shape"})

MIN_SLOT_SECONDS = 4.0
SLOT_MARGIN = 0.5

SHAPE_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (235, 30, 30),
    "green": (30, 200, 60),
    "blue": (40, 70, 235),
    "yellow": (240, 225, 30),
    "magenta": (225, 40, 225),
    "cyan": (30, 215, 225),
    "orange": (250, 140, 20),
}
SHAPES = ("square", "circle", "triangle")
TONE_FREQS = (500.0, 700.0, 1000.0, 1400.0, 2000.0, 2800.0)
HUM_FREQS = (110.0, 130.0, 150.0, 170.0, 190.0, 220.0, 250.0)
SCREEN_WORDS = (
    "SUN", "MOON", "STAR", "TREE", "BIRD", "FISH", "BOAT", "LAMP", "KING", "ROSE", "CAKE", "DOOR",
    "FROG", "GOLD", "HAT", "JAM", "KITE", "LION", "MILK", "NEST", "OWL", "PEN", "QUIZ", "RAIN",
    "SHIP", "TOY", "VASE", "WOLF", "YAK", "ZOO",
)  # fmt: skip
SPOKEN_WORDS = (
    "apple", "river", "orange", "mountain", "window", "pencil", "garden", "rocket", "purple",
    "candle", "tiger", "violin", "bottle", "planet", "dragon", "silver", "banana", "thunder",
    "castle", "penguin", "blanket", "coffee", "dolphin", "engine", "forest", "guitar", "harbor",
    "island", "jacket", "ladder", "marble", "ocean",
)  # fmt: skip
MAX_DISTINCT_SPOKEN = 16

# A 5x7 bitmap font (rows top to bottom, '#' = ink) for digits and capital letters.
_FONT_SRC = {
    "0": ".###./#...#/#..##/#.#.#/##..#/#...#/.###.",
    "1": "..#../.##../..#../..#../..#../..#../.###.",
    "2": ".###./#...#/....#/...#./..#../.#.../#####",
    "3": "#####/...#./..#../...#./....#/#...#/.###.",
    "4": "...#./..##./.#.#./#..#./#####/...#./...#.",
    "5": "#####/#..../####./....#/....#/#...#/.###.",
    "6": "..##./.#.../#..../####./#...#/#...#/.###.",
    "7": "#####/....#/...#./..#../.#.../.#.../.#...",
    "8": ".###./#...#/#...#/.###./#...#/#...#/.###.",
    "9": ".###./#...#/#...#/.####/....#/...#./.##..",
    "A": ".###./#...#/#...#/#####/#...#/#...#/#...#",
    "B": "####./#...#/#...#/####./#...#/#...#/####.",
    "C": ".###./#...#/#..../#..../#..../#...#/.###.",
    "D": "###../#..#./#...#/#...#/#...#/#..#./###..",
    "E": "#####/#..../#..../####./#..../#..../#####",
    "F": "#####/#..../#..../####./#..../#..../#....",
    "G": ".###./#...#/#..../#.###/#...#/#...#/.####",
    "H": "#...#/#...#/#...#/#####/#...#/#...#/#...#",
    "I": ".###./..#../..#../..#../..#../..#../.###.",
    "J": "..###/...#./...#./...#./...#./#..#./.##..",
    "K": "#...#/#..#./#.#../##.../#.#../#..#./#...#",
    "L": "#..../#..../#..../#..../#..../#..../#####",
    "M": "#...#/##.##/#.#.#/#.#.#/#...#/#...#/#...#",
    "N": "#...#/#...#/##..#/#.#.#/#..##/#...#/#...#",
    "O": ".###./#...#/#...#/#...#/#...#/#...#/.###.",
    "P": "####./#...#/#...#/####./#..../#..../#....",
    "Q": ".###./#...#/#...#/#...#/#.#.#/#..#./.##.#",
    "R": "####./#...#/#...#/####./#.#../#..#./#...#",
    "S": ".####/#..../#..../.###./....#/....#/####.",
    "T": "#####/..#../..#../..#../..#../..#../..#..",
    "U": "#...#/#...#/#...#/#...#/#...#/#...#/.###.",
    "V": "#...#/#...#/#...#/#...#/#...#/.#.#./..#..",
    "W": "#...#/#...#/#...#/#.#.#/#.#.#/#.#.#/.#.#.",
    "X": "#...#/#...#/.#.#./..#../.#.#./#...#/#...#",
    "Y": "#...#/#...#/.#.#./..#../..#../..#../..#..",
    "Z": "#####/....#/...#./..#../.#.../#..../#####",
}
FONT: dict[str, np.ndarray] = {
    ch: np.array([[c == "#" for c in row] for row in src.split("/")], dtype=bool)
    for ch, src in _FONT_SRC.items()
}

# ---------------------------------------------------------------------------------------------- barcode
# Layout: the bottom ``bar_h`` rows of a frame hold BARCODE_BLOCKS equal-width blocks across the full
# width: [white guard][23 index bits, most significant first][even parity bit][black guard].
# A 1 bit is white (255), a 0 bit black (0). Decoding samples the centre of each block, so it also works
# on a frame that was resized (not cropped).
BARCODE_BITS = 23
BARCODE_BLOCKS = BARCODE_BITS + 3
MAX_FRAME_INDEX = (1 << BARCODE_BITS) - 1
MIN_VIDEO_WIDTH = 4 * BARCODE_BLOCKS


class BarcodeError(ValueError):
    """The frame carries no readable frame-index barcode."""


def barcode_height(height: int) -> int:
    """Rows used by the barcode strip at the bottom of a ``height``-row frame (even, >= 4)."""
    rows = max(4, math.ceil(height / 12))
    return rows + (rows % 2)


def _barcode_bits(indices: np.ndarray) -> np.ndarray:
    """(T, BARCODE_BLOCKS) array of 0/1 block values for the given frame indices."""
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size and (indices.min() < 0 or indices.max() > MAX_FRAME_INDEX):
        raise ValueError(f"frame index out of range 0..{MAX_FRAME_INDEX}")
    shifts = np.arange(BARCODE_BITS - 1, -1, -1, dtype=np.int64)
    data = (indices[:, None] >> shifts[None, :]) & 1
    parity = data.sum(axis=1, keepdims=True) % 2
    ones = np.ones((len(indices), 1), dtype=np.int64)
    zeros = np.zeros((len(indices), 1), dtype=np.int64)
    return np.concatenate([ones, data, parity, zeros], axis=1)


def draw_frame_index(frames: np.ndarray, indices: np.ndarray | int) -> None:
    """Paint the frame-index barcode into ``frames`` ((H, W, 3) or (T, H, W, 3) uint8) in place."""
    single = frames.ndim == 3
    batch = frames[None] if single else frames
    idx = np.atleast_1d(np.asarray(indices))
    if len(idx) != batch.shape[0]:
        raise ValueError("one index per frame is needed")
    height, width = batch.shape[1:3]
    rows = barcode_height(height)
    edges = np.round(np.arange(BARCODE_BLOCKS + 1) * width / BARCODE_BLOCKS).astype(int)
    col_block = np.searchsorted(edges, np.arange(width), side="right") - 1
    values = (_barcode_bits(idx) * 255).astype(np.uint8)  # (T, blocks)
    strip = values[:, col_block]  # (T, W)
    batch[:, height - rows :, :, :] = strip[:, None, :, None]


def decode_frame_index(frame: np.ndarray) -> int:
    """Read the frame index from a frame's barcode strip.

    ``frame`` is an (H, W, 3) RGB or (H, W) grey uint8 array, at the resolution it was made at or
    resized (not cropped). Raises :class:`BarcodeError` when no clean barcode is found.
    """
    arr = np.asarray(frame)
    if arr.ndim == 3:
        luma = arr[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    elif arr.ndim == 2:
        luma = arr.astype(np.float32)
    else:
        raise BarcodeError(f"expected an (H, W[, 3]) frame, got shape {arr.shape}")
    height, width = luma.shape
    if width < BARCODE_BLOCKS or height < 8:
        raise BarcodeError(f"frame {width}x{height} too small for a barcode")
    unit = height / 12.0
    r0 = int(math.floor(height - 0.7 * unit))
    r1 = max(r0 + 1, int(math.ceil(height - 0.25 * unit)))
    band = luma[r0:r1].mean(axis=0)
    bw = width / BARCODE_BLOCKS
    values = np.empty(BARCODE_BLOCKS, dtype=np.float32)
    for k in range(BARCODE_BLOCKS):
        c0 = int(math.ceil((k + 0.3) * bw))
        c1 = max(c0 + 1, int(math.floor((k + 0.7) * bw)) + 1)
        values[k] = band[c0:c1].mean()
    white, black = float(values[0]), float(values[-1])
    if white - black < 100:
        raise BarcodeError(f"no barcode guards found (white {white:.0f}, black {black:.0f})")
    mid = 0.5 * (white + black)
    margin = np.abs(values[1:-1] - mid)
    if margin.min() < 0.2 * (white - black):
        raise BarcodeError("barcode block too close to the threshold")
    bits = (values[1:-1] > mid).astype(np.int64)
    if bits.sum() % 2:
        raise BarcodeError("barcode parity check failed")
    index = 0
    for bit in bits[:BARCODE_BITS]:
        index = (index << 1) | int(bit)
    return index


# ---------------------------------------------------------------------------------------------- config
class SynthConfig(BaseModel):
    """Everything that determines one synthetic media file and its tasks (with the seed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    duration: float = Field(60.0, ge=10.0, le=12 * 3600.0, description="seconds")
    mode: Literal["video", "audio"] = "video"
    width: int = Field(160, ge=MIN_VIDEO_WIDTH, le=3840)
    height: int = Field(90, ge=24, le=2160)
    fps: int = Field(5, ge=1, le=60)
    audio: bool = Field(True, description="video mode: mux an audio track")
    sample_rate: int = Field(16_000, ge=8_000, le=48_000)
    audio_format: Literal["wav", "flac", "mp3"] = "wav"
    n_events: int | None = Field(None, ge=1, description="event groups; default scales with duration")
    event_kinds: tuple[EventKind, ...] | None = Field(None, description="default: all kinds for the mode")
    segment_seconds: tuple[float, float] = (10.0, 40.0)
    speech: bool = Field(True, description="speak words with espeak-ng when it is installed")
    crf: int = Field(23, ge=0, le=51)
    preset: str = "veryfast"
    gop: int | None = Field(None, ge=1, description="keyframe interval in frames; default 2 s")
    threads: int = Field(2, ge=1, le=64)
    encoder: Literal["auto", "ffmpeg", "pyav"] = "auto"
    max_tasks_per_template: int = Field(3, ge=1)

    @model_validator(mode="after")
    def _check(self) -> SynthConfig:
        if self.width % 2 or self.height % 2:
            raise ValueError("width and height must be even (yuv420p)")
        lo, hi = self.segment_seconds
        if not 1.0 <= lo <= hi:
            raise ValueError("segment_seconds must be (min, max) with 1 <= min <= max")
        if self.mode == "video" and round(self.duration * self.fps) > MAX_FRAME_INDEX:
            raise ValueError("too many frames for the frame-index barcode")
        kinds = self.kinds
        allowed = VIDEO_KINDS if self.mode == "video" else AUDIO_KINDS
        bad = [k for k in kinds if k not in allowed]
        if bad:
            raise ValueError(f"event kinds {bad} not available in {self.mode} mode")
        if self.mode == "video" and not self.audio:
            needs = [k for k in kinds if k in NEEDS_AUDIO_KINDS]
            if needs and self.event_kinds is not None:
                raise ValueError(f"event kinds {needs} need audio=True")
        if not kinds:
            raise ValueError("no event kinds to place")
        if self.duration / self.groups < MIN_SLOT_SECONDS:
            raise ValueError(
                f"{self.groups} events do not fit in {self.duration} s (at most one per {MIN_SLOT_SECONDS} s)"
            )
        return self

    @property
    def kinds(self) -> tuple[str, ...]:
        if self.event_kinds is not None:
            return tuple(dict.fromkeys(self.event_kinds))
        if self.mode == "audio":
            return AUDIO_KINDS
        if not self.audio:
            return tuple(k for k in VIDEO_KINDS if k not in NEEDS_AUDIO_KINDS)
        return VIDEO_KINDS

    @property
    def groups(self) -> int:
        """Number of event groups (slots) on the timeline."""
        if self.n_events is not None:
            return self.n_events
        wanted = max(len(self.kinds), int(self.duration // 10))
        return max(1, min(wanted, int(self.duration // MIN_SLOT_SECONDS)))

    @property
    def n_frames(self) -> int:
        return int(round(self.duration * self.fps))

    @property
    def n_samples(self) -> int:
        return int(round(self.duration * self.sample_rate))

    @property
    def has_audio(self) -> bool:
        return self.mode == "audio" or self.audio

    @property
    def extension(self) -> str:
        return "mp4" if self.mode == "video" else self.audio_format


# ---------------------------------------------------------------------------------------------- speech
@lru_cache(maxsize=1)
def _espeak_binary() -> str | None:
    return shutil.which("espeak-ng")


@lru_cache(maxsize=256)
def _espeak_clip(word: str, sample_rate: int) -> np.ndarray | None:
    binary = _espeak_binary()
    if binary is None:
        return None
    with tempfile.TemporaryDirectory(prefix="synth-espeak-") as tmp:
        path = os.path.join(tmp, "word.wav")
        try:
            subprocess.run(
                [binary, "-v", "en-us", "-s", "150", "-w", path, word],
                check=True,
                capture_output=True,
                timeout=30,
            )
            with wave.open(path, "rb") as handle:
                rate = handle.getframerate()
                width = handle.getsampwidth()
                raw = handle.readframes(handle.getnframes())
                channels = handle.getnchannels()
        except (OSError, subprocess.SubprocessError, wave.Error, EOFError):
            return None
    if width != 2 or not raw:
        return None
    pcm = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    if channels > 1:
        pcm = pcm.reshape(-1, channels).mean(axis=1)
    # trim leading and trailing silence so the evidence interval is tight
    env = np.convolve(np.abs(pcm), np.ones(64) / 64, mode="same")
    loud = np.nonzero(env > 0.05 * env.max())[0] if env.max() > 0 else np.array([], dtype=int)
    if loud.size == 0:
        return None
    pad = int(0.01 * rate)
    pcm = pcm[max(0, loud[0] - pad) : loud[-1] + pad]
    if rate != sample_rate:
        n_out = int(round(len(pcm) * sample_rate / rate))
        pcm = np.interp(np.arange(n_out) * (rate / sample_rate), np.arange(len(pcm)), pcm).astype(np.float32)
    pcm = pcm[: int(1.6 * sample_rate)]
    return (0.6 * pcm / max(1e-6, float(np.abs(pcm).max()))).astype(np.float32)


def speech_backend(cfg: SynthConfig) -> str:
    """``"espeak-ng"`` when words can be spoken for this config, else ``"tone"``."""
    if not cfg.speech or "speech" not in cfg.kinds or not cfg.has_audio:
        return "tone"
    return "espeak-ng" if _espeak_clip("test", cfg.sample_rate) is not None else "tone"


# ---------------------------------------------------------------------------------------------- timeline
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


def _rng(cfg: SynthConfig, *stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([cfg.seed & 0xFFFFFFFF, cfg.seed >> 32, *stream]))


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
    backend = speech_backend(cfg)
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


# ---------------------------------------------------------------------------------------------- drawing
def shape_mask(shape: str, size: int) -> np.ndarray:
    """Boolean (size, size) mask of a square, circle or upward triangle."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
    half = size / 2.0
    if shape == "square":
        return np.ones((size, size), dtype=bool)
    if shape == "circle":
        return (xx - half) ** 2 + (yy - half) ** 2 <= half**2
    if shape == "triangle":
        return np.abs(xx - half) <= yy / 2.0
    raise ValueError(f"unknown shape {shape!r}")


def _text_box(text: str, width: int, content_h: int, big: bool) -> tuple[int, tuple[int, int]]:
    cols = 6 * len(text) - 1
    if big:
        scale = max(1, int(0.55 * content_h / 7))
    else:
        scale = max(1, min(int(0.85 * width / (cols + 2)), int(0.35 * content_h / 9)))
    return scale, ((cols + 2) * scale, 9 * scale)


def text_bitmap(text: str) -> np.ndarray:
    """Boolean (7, 6*len-1) bitmap of ``text`` in the built-in 5x7 font."""
    parts = []
    for i, ch in enumerate(text.upper()):
        if i:
            parts.append(np.zeros((7, 1), dtype=bool))
        parts.append(FONT[ch])
    return np.concatenate(parts, axis=1)


def _background(seg: Segment, width: int, height: int) -> np.ndarray:
    a = np.array(seg.color_a, dtype=np.float32)
    b = np.array(seg.color_b, dtype=np.float32)
    if seg.style == "solid":
        w = np.zeros((height, width), dtype=np.float32)
    elif seg.style == "hgrad":
        w = np.broadcast_to(np.linspace(0, 1, width, dtype=np.float32)[None, :], (height, width))
    elif seg.style == "vgrad":
        w = np.broadcast_to(np.linspace(0, 1, height, dtype=np.float32)[:, None], (height, width))
    else:
        yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
        w = (xx / max(1, width - 1) + yy / max(1, height - 1)) / 2
    img = a[None, None, :] * (1 - w[..., None]) + b[None, None, :] * w[..., None]
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def _paint(frames: np.ndarray, ev: Event, first: int, timeline: Timeline) -> None:
    """Draw ``ev`` into ``frames`` whose first frame is the event's ``first``-th frame."""
    content_h = timeline.content_height
    a = ev.attrs
    if ev.kind == "shape":
        size, x, y = a["size"], a["x"], a["y"]
        region = frames[:, y : y + size, x : x + size]
        region[:, shape_mask(a["shape"], size)] = np.array(a["rgb"], dtype=np.uint8)
    elif ev.kind in ("digit", "word"):
        scale = a["scale"]
        bitmap = np.kron(text_bitmap(a["text"]), np.ones((scale, scale), dtype=bool))
        h, w = bitmap.shape
        x, y = a["x"], a["y"]
        box = frames[:, y : y + h + 2 * scale, x : x + w + 2 * scale]
        box[:] = 0
        inner = box[:, scale : scale + h, scale : scale + w]
        inner[:, bitmap[: inner.shape[1], : inner.shape[2]]] = 255
    elif ev.kind == "flash":
        frames[:, :content_h] = 255
    elif ev.kind == "static":
        total = a["end_frame"] - a["start_frame"]
        noise_rng = np.random.default_rng(a["noise_seed"])
        noise = noise_rng.integers(0, 256, size=(total, content_h, frames.shape[2]), dtype=np.uint8)
        frames[:, :content_h] = noise[first : first + len(frames), :, :, None]


def render_frames(timeline: Timeline, start: int, stop: int) -> np.ndarray:
    """Frames ``start..stop-1`` as a (T, H, W, 3) uint8 array, barcode included."""
    cfg = timeline.config
    stop = min(stop, cfg.n_frames)
    idx = np.arange(start, stop)
    seg_starts = np.array([round(s.start * cfg.fps) for s in timeline.segments])
    seg_of = np.searchsorted(seg_starts, idx, side="right") - 1
    out = np.empty((len(idx), cfg.height, cfg.width, 3), dtype=np.uint8)
    for si in np.unique(seg_of):
        out[seg_of == si] = _background(timeline.segments[int(si)], cfg.width, cfg.height)
    for ev in timeline.events:
        if not ev.visual:
            continue
        f0, f1 = ev.attrs["start_frame"], ev.attrs["end_frame"]
        a, b = max(f0, start), min(f1, stop)
        if a < b:
            _paint(out[a - start : b - start], ev, a - f0, timeline)
    draw_frame_index(out, idx)
    return out


AUDIO_BLOCK_SECONDS = 10


def _render_audio_block(timeline: Timeline, block: int) -> np.ndarray:
    cfg = timeline.config
    sr = cfg.sample_rate
    s0 = block * AUDIO_BLOCK_SECONDS * sr
    s1 = min(cfg.n_samples, s0 + AUDIO_BLOCK_SECONDS * sr)
    n = s1 - s0
    t = (np.arange(s0, s1, dtype=np.float64)) / sr
    noise_rng = _rng(cfg, 3, block)
    out = (0.003 * noise_rng.standard_normal(n)).astype(np.float64)
    for seg in timeline.segments:
        a, b = max(s0, int(round(seg.start * sr))), min(s1, int(round(seg.end * sr)))
        if a < b:
            out[a - s0 : b - s0] += 0.02 * np.sin(2 * np.pi * seg.hum_hz * t[a - s0 : b - s0])
    for ev in timeline.events:
        if not ev.audible:
            continue
        e0 = int(round(ev.start * sr))
        if ev.kind == "speech":
            clip = _espeak_clip(ev.attrs["word"], sr)
            wave_ = clip.astype(np.float64) if clip is not None else np.zeros(0)
        else:
            e1 = int(round(ev.end * sr))
            if e1 <= s0 or e0 >= s1:
                continue
            length = e1 - e0
            if ev.kind == "tone":
                tt = np.arange(length) / sr
                env = np.ones(length)
                ramp = min(int(0.01 * sr), length // 2)
                if ramp:
                    env[:ramp] = np.linspace(0, 1, ramp)
                    env[-ramp:] = np.linspace(1, 0, ramp)
                wave_ = 0.35 * env * np.sin(2 * np.pi * ev.attrs["freq"] * tt)
            else:  # static noise burst
                wave_ = 0.2 * np.random.default_rng(ev.attrs["noise_seed"] + 1).standard_normal(length)
        e1 = e0 + len(wave_)
        a, b = max(s0, e0), min(s1, e1)
        if a < b:
            out[a - s0 : b - s0] += wave_[a - e0 : b - e0]
    return np.clip(out, -1.0, 1.0).astype(np.float32)


def render_audio(timeline: Timeline, start: float = 0.0, end: float | None = None) -> np.ndarray:
    """The mono float32 soundtrack between ``start`` and ``end`` seconds."""
    cfg = timeline.config
    sr = cfg.sample_rate
    s0 = max(0, int(round(start * sr)))
    s1 = cfg.n_samples if end is None else min(cfg.n_samples, int(round(end * sr)))
    block_len = AUDIO_BLOCK_SECONDS * sr
    parts = [
        _render_audio_block(timeline, b) for b in range(s0 // block_len, (max(s1, 1) - 1) // block_len + 1)
    ]
    if not parts:
        return np.zeros(0, dtype=np.float32)
    audio = np.concatenate(parts)
    base = (s0 // block_len) * block_len
    return audio[s0 - base : s1 - base]


def _n_audio_blocks(cfg: SynthConfig) -> int:
    return math.ceil(cfg.n_samples / (AUDIO_BLOCK_SECONDS * cfg.sample_rate))


def _to_pcm16(x: np.ndarray) -> bytes:
    return (np.clip(x, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def _write_wav(timeline: Timeline, path: Path) -> None:
    cfg = timeline.config
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(cfg.sample_rate)
        for block in range(_n_audio_blocks(cfg)):
            handle.writeframes(_to_pcm16(_render_audio_block(timeline, block)))


# ---------------------------------------------------------------------------------------------- encoding
FRAME_CHUNK = 256
_BITEXACT = ["-fflags", "+bitexact", "-flags:v", "+bitexact", "-flags:a", "+bitexact", "-map_metadata", "-1"]


def _ffmpeg() -> str | None:
    return shutil.which("ffmpeg")


def _run_ffmpeg(args: list[str], stdin_chunks: Any = None) -> None:
    binary = _ffmpeg()
    if binary is None:
        raise RuntimeError("ffmpeg not found")
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [
                binary,
                "-hide_banner",
                "-loglevel",
                "error",
                *([] if stdin_chunks is not None else ["-nostdin"]),
                "-y",
                *args,
            ],
            stdin=subprocess.PIPE if stdin_chunks is not None else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        broken = False
        try:
            if stdin_chunks is not None:
                assert proc.stdin is not None
                try:
                    for chunk in stdin_chunks:
                        proc.stdin.write(chunk)
                except BrokenPipeError:
                    broken = True
                finally:
                    try:
                        proc.stdin.close()
                    except BrokenPipeError:
                        broken = True
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        rc = proc.wait()
        if rc != 0 or broken:
            err.seek(0)
            message = err.read().decode("utf-8", "replace").strip()
            raise RuntimeError(f"ffmpeg failed (exit {rc}): {message[-2000:]}")


def _encode_video_ffmpeg(timeline: Timeline, out: Path, wav: Path | None) -> None:
    cfg = timeline.config
    gop = cfg.gop or 2 * cfg.fps
    args = [
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "-s",
        f"{cfg.width}x{cfg.height}",
        "-framerate",
        str(cfg.fps),
    ]
    args += ["-i", "pipe:0"]
    if wav is not None:
        args += ["-i", str(wav), "-map", "0:v", "-map", "1:a"]
    args += ["-c:v", "libx264", "-preset", cfg.preset, "-crf", str(cfg.crf), "-g", str(gop)]
    args += [
        "-keyint_min",
        str(gop),
        "-sc_threshold",
        "0",
        "-pix_fmt",
        "yuv420p",
        "-threads",
        str(cfg.threads),
    ]
    if wav is not None:
        args += ["-c:a", "aac", "-aac_coder", "fast", "-b:a", "48k", "-ac", "1", "-ar", str(cfg.sample_rate)]
    args += [*_BITEXACT, "-movflags", "+faststart", "-f", "mp4", str(out)]
    chunks = (
        render_frames(timeline, f, f + FRAME_CHUNK).tobytes() for f in range(0, cfg.n_frames, FRAME_CHUNK)
    )
    _run_ffmpeg(args, chunks)


def _encode_video_pyav(timeline: Timeline, out: Path) -> None:
    import av  # noqa: PLC0415 - optional path

    cfg = timeline.config
    sr = cfg.sample_rate
    with av.open(str(out), "w", format="mp4") as container:
        vstream = container.add_stream("libx264", rate=cfg.fps)
        vstream.width, vstream.height, vstream.pix_fmt = cfg.width, cfg.height, "yuv420p"
        gop = cfg.gop or 2 * cfg.fps
        vstream.options = {"crf": str(cfg.crf), "preset": cfg.preset, "g": str(gop), "sc_threshold": "0"}
        vstream.codec_context.thread_count = cfg.threads
        astream = None
        if cfg.audio:
            astream = container.add_stream("aac", rate=sr)
            astream.layout = "mono"
            astream.bit_rate = 48_000
            astream.options = {"aac_coder": "fast"}
        audio_done = 0
        for f in range(0, cfg.n_frames, FRAME_CHUNK):
            frames = render_frames(timeline, f, f + FRAME_CHUNK)
            for i, img in enumerate(frames):
                vf = av.VideoFrame.from_ndarray(img, format="rgb24")
                vf.pts = f + i
                container.mux(vstream.encode(vf))
            if astream is not None:
                until = min(cfg.n_samples, int(round((f + len(frames)) / cfg.fps * sr)))
                pcm = render_audio(timeline, audio_done / sr, until / sr)
                for k in range(0, len(pcm), 1024):
                    part = pcm[k : k + 1024]
                    af = av.AudioFrame.from_ndarray(part[None, :], format="fltp", layout="mono")
                    af.sample_rate = sr
                    af.time_base = Fraction(1, sr)
                    af.pts = audio_done + k
                    container.mux(astream.encode(af))
                audio_done = until
        container.mux(vstream.encode(None))
        if astream is not None:
            container.mux(astream.encode(None))


def _encode_audio(timeline: Timeline, out: Path, wav: Path) -> None:
    cfg = timeline.config
    fmt = cfg.audio_format
    if fmt == "wav":
        os.replace(wav, out)
        return
    if _ffmpeg() is not None and cfg.encoder != "pyav":
        codec = ["-c:a", "flac"] if fmt == "flac" else ["-c:a", "libmp3lame", "-b:a", "64k"]
        _run_ffmpeg(["-i", str(wav), *codec, *_BITEXACT, "-f", fmt, str(out)])
        return
    if fmt == "flac":
        import soundfile  # noqa: PLC0415 - optional path

        with soundfile.SoundFile(
            str(out), "w", cfg.sample_rate, 1, format="FLAC", subtype="PCM_16"
        ) as handle:
            for block in range(_n_audio_blocks(cfg)):
                handle.write(_render_audio_block(timeline, block))
        return
    raise RuntimeError("mp3 output needs the ffmpeg binary")


def _write_media(timeline: Timeline, out: Path) -> None:
    cfg = timeline.config
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=f".{cfg.extension}", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    wav: Path | None = None
    try:
        if cfg.has_audio and not (cfg.mode == "video" and _video_encoder(cfg) == "pyav"):
            fd, wav_name = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".wav", dir=out.parent)
            os.close(fd)
            wav = Path(wav_name)
            _write_wav(timeline, wav)
        if cfg.mode == "video":
            if _video_encoder(cfg) == "ffmpeg":
                _encode_video_ffmpeg(timeline, tmp, wav)
            else:
                _encode_video_pyav(timeline, tmp)
        else:
            assert wav is not None
            _encode_audio(timeline, tmp, wav)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        for p in (tmp, wav):
            if p is not None and p.exists():
                p.unlink()


def _video_encoder(cfg: SynthConfig) -> str:
    if cfg.encoder == "auto":
        return "ffmpeg" if _ffmpeg() is not None else "pyav"
    return cfg.encoder


# ---------------------------------------------------------------------------------------------- tasks
def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _at(ev: Event) -> str:
    """A time inside the event, for 'at about ...' in questions (whole seconds when they fit)."""
    mid = 0.5 * (ev.start + ev.end)
    whole = round(mid)
    if ev.start <= whole < ev.end:
        return f"{whole} s"
    return f"{round(mid, 1):.1f} s"


def _mcq(rng: np.random.Generator, correct: str, pool: list[str], n: int = 4) -> tuple[list[str], str]:
    others = [p for p in dict.fromkeys(pool) if p != correct]
    picked = [str(o) for o in rng.permutation(others)[: n - 1]]
    choices = [correct, *picked]
    order = rng.permutation(len(choices))
    choices = [choices[i] for i in order]
    return choices, choice_letter(choices.index(correct))


def make_tasks(
    timeline: Timeline, media: str, id_prefix: str, split: str = "test", config_hash: str = ""
) -> list[Task]:
    """Questions of every type the timeline supports, with answers and evidence by construction."""
    cfg = timeline.config
    rng = _rng(cfg, 4)
    cap = cfg.max_tasks_per_template
    video = cfg.mode == "video"
    tasks: list[Task] = []
    counts: dict[str, int] = {}

    def emit(
        template: str, task_type: str, question: str, answer: Any, evidence: list[list[float]], **kw: Any
    ):
        k = counts.get(template, 0)
        counts[template] = k + 1
        extra = {"template": template, "generator": GENERATOR_VERSION, "seed": cfg.seed, "mode": cfg.mode}
        if config_hash:
            extra["config_hash"] = config_hash
        extra.update(kw.pop("extra", {}))
        tasks.append(
            Task(
                id=f"{id_prefix}-{template}-{k:02d}",
                media=media,
                question=question,
                task_type=task_type,
                answer=answer,
                evidence=evidence,
                source=SOURCE_NAME,
                split=split,
                duration=cfg.duration,
                extra=extra,
                **kw,
            )
        )

    def sample(events: list[Event]) -> list[Event]:
        if len(events) <= cap:
            return events
        keep = sorted(rng.choice(len(events), size=cap, replace=False))
        return [events[i] for i in keep]

    shapes = timeline.of_kind("shape")
    tones = timeline.of_kind("tone")
    speech = timeline.of_kind("speech")
    by_id = {e.id: e for e in timeline.events}

    # --- visual questions
    if video:
        for ev in sample(timeline.of_kind("digit")):
            digits = [str(d) for d in range(10)]
            choices, letter = _mcq(rng, ev.attrs["text"], digits)
            emit(
                "digit_mcq",
                "mcq",
                f"Which digit is shown on screen at about {_at(ev)}?",
                letter,
                [ev.interval],
                choices=choices,
                extra={"event_ids": [ev.id]},
            )
        for ev in sample(timeline.of_kind("word")):
            emit(
                "screen_word_ff",
                "ff",
                f"What word is written on screen at about {_at(ev)}? Answer with the word only.",
                ev.attrs["text"],
                [ev.interval],
                extra={"event_ids": [ev.id], "match": "case_insensitive"},
            )
        for ev in sample(shapes):
            same = [
                s
                for s in shapes
                if (s.attrs["color"], s.attrs["shape"]) == (ev.attrs["color"], ev.attrs["shape"])
            ]
            if counts.get("shape_tr", 0) >= cap or any(
                t.extra.get("key") == [ev.attrs["color"], ev.attrs["shape"]] for t in tasks
            ):
                continue
            intervals = [s.interval for s in same]
            emit(
                "shape_tr",
                "tr",
                f"When does the {ev.attrs['color']} {ev.attrs['shape']} appear on screen? "
                "Give every interval in seconds.",
                intervals,
                intervals,
                extra={"event_ids": [s.id for s in same], "key": [ev.attrs["color"], ev.attrs["shape"]]},
            )
        for ev in sample(shapes):
            emit(
                "shape_width_size",
                "size",
                f"{_article(ev.attrs['color']).capitalize()} {ev.attrs['color']} {ev.attrs['shape']} is on screen at about {_at(ev)}. "
                f"How many pixels wide is it? The frame is {cfg.width}x{cfg.height} pixels.",
                float(ev.attrs["width_px"]),
                [ev.interval],
                extra={"event_ids": [ev.id], "area_px": ev.attrs["area_px"], "rel_tol": 0.1},
            )
        flashes = timeline.of_kind("flash")
        if "flash" in cfg.kinds:
            emit(
                "flash_count_num",
                "num",
                "How many times does the whole screen flash white?",
                float(len(flashes)),
                [f.interval for f in flashes],
                extra={"event_ids": [f.id for f in flashes]},
            )
        if flashes:
            emit(
                "flash_tr",
                "tr",
                "When does the screen flash white? Give every interval in seconds.",
                [f.interval for f in flashes],
                [f.interval for f in flashes],
                extra={"event_ids": [f.id for f in flashes]},
            )
        boundaries = [s.start for s in timeline.segments[1:]]
        half = 1.0 / cfg.fps
        emit(
            "scene_change_num",
            "num",
            "Ignoring the short inserted events (shapes, digits, words, flashes and static), how many times "
            "does the background of the video change?",
            float(len(boundaries)),
            [[round(max(0.0, b - half), 4), round(min(cfg.duration, b + half), 4)] for b in boundaries],
        )
        for tone_id in [e.id for e in tones if e.attrs.get("before_shape")][:cap]:
            tone = by_id[tone_id]
            shape = next(s for s in shapes if s.attrs.get("after_beep") == tone_id)
            nth = tones.index(tone) + 1
            choices, letter = _mcq(rng, shape.attrs["color"], list(SHAPE_COLORS))
            emit(
                "after_beep_color_mcq",
                "mcq",
                f"What colour is the shape that appears right after the {_ordinal(nth)} beep?",
                letter,
                [[tone.interval[0], shape.interval[1]]],
                choices=choices,
                extra={"event_ids": [tone.id, shape.id]},
            )

    # --- static noise (visual + audible in video mode, audible only in audio mode)
    statics = timeline.of_kind("static")
    if statics:
        q = (
            "When does the picture turn into static noise? Give every interval in seconds."
            if video
            else "When is there a burst of static noise? Give every interval in seconds."
        )
        emit("static_tr", "tr", q, [s.interval for s in statics], [s.interval for s in statics])

    # --- audio questions
    if cfg.has_audio and (tones or {"tone", "beep_shape"} & set(cfg.kinds)):
        emit(
            "beep_count_num",
            "num",
            "How many beeps (short pure tones) can be heard in total?",
            float(len(tones)),
            [t.interval for t in tones],
            extra={"event_ids": [t.id for t in tones]},
        )
        for ev in sample(tones):
            emit(
                "beep_pitch_num",
                "num",
                f"What is the frequency, in Hz, of the beep heard at about {_at(ev)}?",
                ev.attrs["freq"],
                [ev.interval],
                extra={"event_ids": [ev.id], "rel_tol": 0.05},
            )
        for ev in sample(tones):
            nth = tones.index(ev) + 1
            emit(
                "nth_beep_tr",
                "tr",
                f"When is the {_ordinal(nth)} beep heard? Give the interval in seconds.",
                [ev.interval],
                [ev.interval],
                extra={"event_ids": [ev.id]},
            )
        if not video:
            for ev in sample(tones):
                choices, letter = _mcq(rng, f"{ev.attrs['freq']:g} Hz", [f"{f:g} Hz" for f in TONE_FREQS])
                emit(
                    "beep_pitch_mcq",
                    "mcq",
                    f"What is the pitch of the beep heard at about {_at(ev)}?",
                    letter,
                    [ev.interval],
                    choices=choices,
                    extra={"event_ids": [ev.id]},
                )
    if speech:
        spoken = sorted({e.attrs["word"] for e in speech})
        unspoken = [w for w in SPOKEN_WORDS if w not in spoken]
        for word in [str(w) for w in rng.permutation(spoken)[:cap]]:
            hits = [e for e in speech if e.attrs["word"] == word]
            emit(
                "spoken_word_tr",
                "tr",
                f'When is the word "{word}" spoken? Give every interval in seconds.',
                [e.interval for e in hits],
                [e.interval for e in hits],
                extra={"event_ids": [e.id for e in hits]},
            )
        for ev in sample(speech):
            emit(
                "spoken_word_ff",
                "ff",
                f"Which word is spoken at about {_at(ev)}? Answer with the word only.",
                ev.attrs["word"],
                [ev.interval],
                extra={"event_ids": [ev.id], "match": "case_insensitive"},
            )
        if len(unspoken) >= 3:
            for word in [str(w) for w in rng.permutation(spoken)[: max(1, cap // 2)]]:
                hits = [e for e in speech if e.attrs["word"] == word]
                choices, letter = _mcq(rng, word, unspoken + [word])
                emit(
                    "spoken_word_mcq",
                    "mcq",
                    "Which of these words is spoken in the recording?",
                    letter,
                    [e.interval for e in hits],
                    choices=choices,
                    extra={"event_ids": [e.id for e in hits]},
                )
    return tasks


# ---------------------------------------------------------------------------------------------- driver
def config_hash(cfg: SynthConfig) -> str:
    """A short hash of everything that decides the media bytes and the tasks."""
    payload = {
        "version": GENERATOR_VERSION,
        "config": cfg.model_dump(mode="json"),
        "speech_backend": speech_backend(cfg),
        "video_encoder": _video_encoder(cfg) if cfg.mode == "video" else None,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class SynthResult:
    media: Path
    tasks: list[Task]
    config_hash: str
    cached: bool
    timeline: Timeline | None = None  # None when the files were reused from the cache
    seconds: float = 0.0


def _meta_path(media: Path) -> Path:
    return media.with_name(media.name + ".meta.json")


def synthesize(
    cfg: SynthConfig,
    media_path: str | os.PathLike[str],
    id_prefix: str | None = None,
    split: str = "test",
    force: bool = False,
) -> SynthResult:
    """Write one media file and its tasks (reusing them when a sidecar with the same hash exists).

    The sidecar ``<media>.meta.json`` holds the config, its hash, the timeline and the tasks; tasks
    in it name the media by file name, and the returned tasks carry the absolute media path.
    """
    t0 = time.perf_counter()
    media = Path(media_path).resolve()
    digest = config_hash(cfg)
    prefix = id_prefix or f"synth-{digest[:8]}"
    meta_path = _meta_path(media)
    if not force and media.exists() and meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError):
            meta = {}
        if (
            meta.get("config_hash") == digest
            and meta.get("id_prefix") == prefix
            and meta.get("split") == split
        ):
            tasks = [Task.model_validate(t | {"media": str(media)}) for t in meta["tasks"]]
            return SynthResult(media, tasks, digest, True, None, time.perf_counter() - t0)
    timeline = build_timeline(cfg)
    _write_media(timeline, media)
    tasks = make_tasks(timeline, str(media), prefix, split=split, config_hash=digest)
    meta = {
        "generator": GENERATOR_VERSION,
        "config_hash": digest,
        "id_prefix": prefix,
        "split": split,
        "config": cfg.model_dump(mode="json"),
        "timeline": timeline.to_dict(),
        "tasks": [t.model_dump(mode="json") | {"media": media.name} for t in tasks],
    }
    tmp = meta_path.with_name(meta_path.name + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, meta_path)
    return SynthResult(media, tasks, digest, False, timeline, time.perf_counter() - t0)


def video_seed(seed: int, index: int) -> int:
    """The seed of the ``index``-th file of a benchmark built from ``seed``."""
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, index]).generate_state(1, dtype=np.uint32)[0])


def generate_benchmark(
    out_dir: str | os.PathLike[str],
    seed: int = 0,
    n_videos: int = 4,
    durations: list[float] | tuple[float, ...] = (60.0, 600.0),
    *,
    mode: Literal["video", "audio"] = "video",
    config: SynthConfig | dict[str, Any] | None = None,
    split: str = "test",
    force: bool = False,
    tasks_file: str = "tasks.jsonl",
    verbose: bool = False,
) -> list[Task]:
    """Write ``n_videos`` media files and ``out_dir/tasks_file``; return the tasks (absolute media paths).

    File ``i`` lasts ``durations[i % len(durations)]`` seconds and uses seed ``video_seed(seed, i)``;
    ``config`` supplies every other setting. Files whose sidecar hash matches are not rebuilt.
    """
    if n_videos < 1 or not durations:
        raise ValueError("need n_videos >= 1 and at least one duration")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = config.model_dump() if isinstance(config, SynthConfig) else dict(config or {})
    tasks: list[Task] = []
    for i in range(n_videos):
        dur = float(durations[i % len(durations)])
        cfg = SynthConfig.model_validate(base | {"seed": video_seed(seed, i), "duration": dur, "mode": mode})
        stem = f"synth_{mode}_s{seed}_{i:03d}_{int(round(dur))}s"
        result = synthesize(cfg, out / f"{stem}.{cfg.extension}", id_prefix=stem, split=split, force=force)
        if verbose:
            state = "cached" if result.cached else "built"
            print(
                f"{result.media.name}: {state} in {result.seconds:.1f} s, {len(result.tasks)} tasks",
                flush=True,
            )
        tasks.extend(result.tasks)
    relative = [t.model_copy(update={"media": os.path.relpath(t.media, out)}) for t in tasks]
    target = out / tasks_file
    if not target.exists() or [t.model_dump() for t in load_tasks_jsonl(target, resolve_media=False)] != [
        t.model_dump() for t in relative
    ]:
        save_tasks_jsonl(relative, target)
    return tasks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envs.synth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=4, help="number of media files")
    parser.add_argument("--durations", default="60,600", help="comma-separated seconds, cycled over files")
    parser.add_argument("--mode", choices=["video", "audio"], default="video")
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--height", type=int, default=90)
    parser.add_argument("--fps", type=int, default=5)
    parser.add_argument("--no-audio", action="store_true", help="video without a soundtrack")
    parser.add_argument("--audio-format", choices=["wav", "flac", "mp3"], default="wav")
    parser.add_argument("--n-events", type=int, default=None)
    parser.add_argument("--split", default="test")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args(argv)
    durations = [float(d) for d in args.durations.split(",") if d.strip()]
    config = {
        "width": args.width,
        "height": args.height,
        "fps": args.fps,
        "audio": not args.no_audio,
        "audio_format": args.audio_format,
        "n_events": args.n_events,
    }
    t0 = time.perf_counter()
    tasks = generate_benchmark(
        args.out,
        seed=args.seed,
        n_videos=args.n,
        durations=durations,
        mode=args.mode,
        config=config,
        split=args.split,
        force=args.force,
        verbose=True,
    )
    by_type: dict[str, int] = {}
    for task in tasks:
        by_type[task.task_type] = by_type.get(task.task_type, 0) + 1
    print(
        f"{len(tasks)} tasks {by_type} -> {Path(args.out) / 'tasks.jsonl'} ({time.perf_counter() - t0:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
