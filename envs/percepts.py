"""Message parts for served media, shared by the environment and by every harness that shows the
model media outside an episode (passive baseline, fidelity probes), so all speak the same format."""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.decoders import DecodedFrame
from envs.media import Clip
from envs.messages import SAMPLE_RATE, text_part
from envs.prompts import fmt_times


def frame_parts(frames: list[DecodedFrame]) -> list[dict[str, Any]]:
    """Each frame as a text label with its true time, then the image."""
    parts: list[dict[str, Any]] = []
    for f in frames:
        parts += [
            text_part(f"\nFrame at {f.time:.2f}s:"),
            {"type": "image", "image": f.image, "timestamp": f.time},
        ]
    return parts


def audio_parts(samples: np.ndarray, start: float, end: float) -> list[dict[str, Any]]:
    return [
        text_part(f"Audio {start:.2f}s-{end:.2f}s ({end - start:.2f} s):"),
        {"type": "audio", "audio": samples, "sampling_rate": SAMPLE_RATE, "start": start, "end": end},
    ]


def clip_parts(clip: Clip) -> list[dict[str, Any]]:
    times = [f.time for f in clip.frames]
    sound = "with its audio" if clip.audio is not None else "no audio track"
    return [
        text_part(
            f"Clip {clip.start:.2f}s-{clip.end:.2f}s, {len(times)} frames at {fmt_times(times)}, {sound}:"
        ),
        {
            "type": "video",
            "video": np.stack([f.image for f in clip.frames]),
            "timestamps": times,
            "fps": clip.fps,
            "audio": clip.audio,
            "sampling_rate": SAMPLE_RATE,
            "start": clip.start,
            "end": clip.end,
        },
    ]
