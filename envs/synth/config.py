"""The engine's vocabulary (event kinds, colours, tones, words), :class:`SynthConfig` and its seeded
random streams."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from envs.synth.barcode import MAX_FRAME_INDEX, MIN_VIDEO_WIDTH

GENERATOR_VERSION = "omniagent-synth-1"
SOURCE_NAME = "omniagent-synth"

EventKind = Literal["shape", "digit", "word", "flash", "static", "tone", "speech", "beep_shape"]
VIDEO_KINDS: tuple[str, ...] = ("shape", "digit", "word", "flash", "static", "tone", "speech", "beep_shape")
AUDIO_KINDS: tuple[str, ...] = ("tone", "speech", "static")
VISUAL_ONLY_KINDS = frozenset({"shape", "digit", "word", "flash"})
NEEDS_AUDIO_KINDS = frozenset({"tone", "speech", "beep_shape"})
SEARCH_KINDS: tuple[str, ...] = ("digit", "tone")  # the only event kinds the search level places

MIN_SLOT_SECONDS = 4.0
SEARCH_MIN_SECONDS = 40.0  # search level: four colour fields of at least 6 s each
SEARCH_TONE_SECONDS = 0.5  # search level: each beep's length (it sounds while its field's digit is shown)
SEARCH_MAX_DIGIT_SHARE = 0.1  # search level: a digit fits inside the shortest colour field (0.15 x duration)
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

Level = Literal["benchmark", "search"]
# Settings that only the ``search`` level reads (envs/synth/search.py). A ``benchmark`` config leaves them and
# ``level`` out of its dump, so its sidecars and config hash are those of the generator before levels existed.
SEARCH_FIELDS = ("level", "search_digit_seconds", "search_fields")
SearchFields = Literal["random", "grid"]


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
    gop: int | None = Field(
        None,
        ge=1,
        description="keyframe interval in frames; default 2 s (search level: 1, every frame served exactly)",
    )
    threads: int = Field(2, ge=1, le=64)
    encoder: Literal["auto", "ffmpeg", "pyav"] = "auto"
    max_tasks_per_template: int = Field(3, ge=1)
    level: Level = Field(
        "benchmark",
        description="benchmark: the synthetic benchmark (every event kind and template); search: the RL "
        "testbed level of envs/synth/search.py (colour fields, large digits, pure tones; answers balanced)",
    )
    search_digit_seconds: tuple[float, float] = Field(
        (1.0, 2.0), description="search level: how long each digit stays on screen, (min, max) seconds"
    )
    search_fields: SearchFields = Field(
        "random",
        description="search level: random (each colour field lasts a random share of the video, at least 0.15) "
        "or grid (four equal fields, their bounds at a quarter, a half and three quarters of the video)",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if self.level == "benchmark":
            for key in SEARCH_FIELDS:
                data.pop(key, None)
        elif self.search_fields == "random":
            data.pop("search_fields", None)  # the sidecars and hashes of sets made before the grid existed
        return data

    @model_validator(mode="after")
    def _check(self) -> SynthConfig:
        if self.width % 2 or self.height % 2:
            raise ValueError("width and height must be even (yuv420p)")
        if self.level == "search":
            return self._check_search()
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

    def _check_search(self) -> SynthConfig:
        """The search level's own rules (its timeline has no slots, kinds or per-template caps)."""
        if self.mode != "video" or not self.audio:
            raise ValueError("level 'search' needs mode='video' with audio=True (its questions use both)")
        if self.n_events is not None or self.event_kinds is not None:
            raise ValueError("level 'search' places its own events: leave n_events and event_kinds unset")
        if self.duration < SEARCH_MIN_SECONDS:
            raise ValueError(f"level 'search' needs duration >= {SEARCH_MIN_SECONDS} s (four colour fields)")
        lo, hi = self.search_digit_seconds
        if not max(1.0 / self.fps, SEARCH_TONE_SECONDS) <= lo <= hi <= SEARCH_MAX_DIGIT_SHARE * self.duration:
            raise ValueError(
                f"search_digit_seconds must be (min, max) with max(one frame, {SEARCH_TONE_SECONDS} s) <= min <= max <= "
                f"{SEARCH_MAX_DIGIT_SHARE} x duration (a digit fits inside its colour field)"
            )
        if round(self.duration * self.fps) > MAX_FRAME_INDEX:
            raise ValueError("too many frames for the frame-index barcode")
        return self

    @property
    def kinds(self) -> tuple[str, ...]:
        if self.level == "search":
            return SEARCH_KINDS
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
    def keyframe_interval(self) -> int:
        """Frames between keyframes: ``gop``, else 2 s of frames, or 1 on the search level (a reader that snaps
        a wide look to nearby keyframes would otherwise never serve a digit shown between them)."""
        if self.gop is not None:
            return self.gop
        return 1 if self.level == "search" else 2 * self.fps

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


def stream_rng(cfg: SynthConfig, *stream: int) -> np.random.Generator:
    """Random stream number ``stream`` (one or more ints) of ``cfg``'s seed: the same ``(cfg.seed,
    *stream)`` always gives the same generator, and different streams are independent, so each part of the
    world (segments, events, noise block ``b``, tasks) draws from its own stream."""
    return np.random.default_rng(np.random.SeedSequence([cfg.seed & 0xFFFFFFFF, cfg.seed >> 32, *stream]))
