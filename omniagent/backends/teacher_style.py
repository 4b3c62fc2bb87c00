"""The perceiving teacher's search strategy for one episode (:mod:`omniagent.backends.teacher`).

Drawn from the episode's seed, so best-of-N samples of one task search differently: scan or not,
frames or clips, spacing, window lengths, zooms, patience.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.limits import EnvLimits


@dataclass
class Style:
    """One episode's search strategy, drawn from the seed."""

    coarse: bool  # start with a uniform scan of the whole file
    coarse_num: int
    sweep: str  # frames | clips
    spacing: float  # seconds between sweep frames
    sweep_num: int  # frames per sweep call
    clip_len: float
    audio_len: float
    zoom: bool  # zoom into every find to pin its boundaries
    patience: float  # fraction of the planned sweep done before answering
    stop_at_first: bool  # a "when" question: answer once one occurrence is pinned
    half: float  # half-width of the window around a named time
    local_num: int
    local_clip: bool
    static_by_audio: bool
    scene_spacing: float

    @classmethod
    def draw(cls, rng: np.random.Generator, limits: EnvLimits, duration: float) -> Style:
        def pick(*xs: Any) -> Any:
            return xs[int(rng.integers(len(xs)))]

        cap = limits.max_frames
        return cls(
            coarse=bool(rng.random() < 0.7),
            coarse_num=min(cap, pick(8, 12, 16, 24, 32)),
            sweep=pick("frames", "clips"),
            spacing=pick(0.4, 0.5, 0.8, 1.0, 1.5),
            sweep_num=min(cap, pick(16, 24, 32)),
            clip_len=min(limits.max_clip_s, duration, pick(30.0, 45.0, 60.0)),
            audio_len=min(limits.max_audio_s, duration, pick(30.0, 60.0, 120.0, 300.0)),
            zoom=bool(rng.random() < 0.8),
            patience=1.0 if rng.random() < 0.8 else float(rng.uniform(0.3, 0.8)),
            stop_at_first=bool(rng.random() < 0.4),
            half=pick(0.5, 1.0, 1.5, 2.5),
            local_num=min(cap, int(rng.integers(1, 13))),
            local_clip=bool(rng.random() < 0.3),
            static_by_audio=bool(rng.random() < 0.5),
            scene_spacing=pick(2.5, 4.0, 5.0, 6.0, 8.0),
        )


def wrong_format(kind: str, rng: np.random.Generator, duration: float) -> Any:
    """An answer in the format of another task type than ``kind`` (``ff`` takes any text, so it has none): the
    teacher's scripted format mistake."""
    t = round(float(rng.uniform(0.0, duration)), 1)
    interval = [[t, round(min(duration, t + 1.0), 1)]]
    number = int(rng.integers(1, 40))
    options = {
        "mcq": [interval, number],
        "num": [interval, "B"],
        "size": [interval, "B"],
        "tr": [number, "B"],
    }
    choices = options.get(kind)
    return None if choices is None else choices[int(rng.integers(len(choices)))]
