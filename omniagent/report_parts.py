"""Parts of the trajectory report (:mod:`omniagent.report`) beyond thumbnails and waveforms: playable
audio, a timeline strip of where each turn looked, and the context as the model saw it.

- :func:`wav_data_url`: a served span as a WAV data URL for an ``<audio>`` element, so a reader
  hears what the model heard (the page stays one file, no scripts).
- :func:`timeline_svg`: one row per turn over the media's duration (frame ticks, audio bars, clip
  bars with their frame ticks) with the task's evidence interval as a band, to see at a glance
  whether the agent looked where the answer was.
- :func:`replay_contexts`: the messages the policy received before each turn, rebuilt by stepping
  the recorded raw outputs through the same environment (so purged media show as the very stubs
  the model read). A replay whose percepts differ from the recorded ones (the run used other
  limits) stops there and says so, rather than showing a context the model never saw.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np

from envs.limits import EnvLimits
from omniagent.trajectory import Trajectory, TurnRecord

__all__ = ["context_text", "replay_contexts", "timeline_svg", "wav_data_url"]

AUDIO_RATE = 16000  # envs.media serves mono 16 kHz
TL_LABEL, TL_ROW, TL_AXIS = 48, 16, 22
COLORS = {"get_frames": "#2f5a9e", "get_audio": "#d9822b", "get_clip": "#3c9d5d"}


def wav_data_url(samples: np.ndarray, rate: int = AUDIO_RATE) -> str:
    """16-bit PCM WAV of ``samples`` (float in [-1, 1]) as a ``data:audio/wav;base64`` URL."""
    import soundfile as sf

    buf = io.BytesIO()
    x = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
    sf.write(buf, x, rate, format="WAV", subtype="PCM_16")
    return "data:audio/wav;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def span_of(rec: TurnRecord, duration: float | None) -> tuple[float, float] | None:
    """The served [start, end] of an audio or clip turn (clamped to the media), else None."""
    times = list(rec.timestamps)
    if rec.error or not times:
        return None
    if rec.action_type == "get_audio":
        return (times[0], times[-1])
    if rec.action_type == "get_clip":
        a = rec.action or {}
        start, end = float(a.get("start", times[0])), float(a.get("end", times[-1]))
        end = min(end, duration) if duration else end
        return (max(0.0, start), max(start, end))
    return None


def _row(rec: TurnRecord, y: float, x: Any) -> list[str]:
    color = COLORS.get(rec.action_type or "", "#888")
    out = [f'<text x="2" y="{y + 11}" font-size="10" fill="#5a6475">turn {rec.turn}</text>']
    span = span_of(rec, None)
    if span is not None:
        a, b = x(span[0]), x(span[1])
        out.append(
            f'<rect class="tl-span" data-turn="{rec.turn}" data-kind="{rec.action_type}" x="{a:.1f}" '
            f'y="{y + 3}" width="{max(b - a, 1.5):.1f}" height="{TL_ROW - 6}" fill="{color}" '
            f'fill-opacity="0.45"><title>turn {rec.turn}: {rec.action_type} {span[0]:.2f}-{span[1]:.2f} s'
            "</title></rect>"
        )
    if rec.action_type in ("get_frames", "get_clip"):
        for t in rec.timestamps:
            out.append(
                f'<line class="tl-frame" data-turn="{rec.turn}" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{y + 1}" '
                f'y2="{y + TL_ROW - 1}" stroke="{color}" stroke-width="1.2"/>'
            )
    return out


def timeline_svg(
    turns: list[TurnRecord],
    duration: float | None,
    evidence: list[list[float]] | None = None,
    width: int = 900,
) -> str | None:
    """An SVG strip: one row per turn that was served media, positioned over ``[0, duration]``;
    ``evidence`` intervals as a yellow band across all rows. None when nothing was served."""
    served = [r for r in turns if not r.error and r.timestamps and r.action_type in COLORS]
    if not served:
        return None
    end = max([duration or 0.0] + [t for r in served for t in r.timestamps] + [1e-6])
    plot = width - TL_LABEL - 6

    def x(t: float) -> float:
        return TL_LABEL + plot * min(max(t, 0.0), end) / end

    height = TL_ROW * len(served) + TL_AXIS
    parts = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="where each turn looked over {end:.2f} s">',
        f'<rect x="{TL_LABEL}" y="0" width="{plot}" height="{height - TL_AXIS}" fill="#f0f3f8"/>',
    ]
    for a, b in evidence or []:
        parts.append(
            f'<rect class="tl-evidence" x="{x(a):.1f}" y="0" width="{max(x(b) - x(a), 1.5):.1f}" '
            f'height="{height - TL_AXIS}" fill="#ffd479" fill-opacity="0.55"><title>evidence {a:.2f}-{b:.2f} s'
            "</title></rect>"
        )
    for i, rec in enumerate(served):
        parts += _row(rec, i * TL_ROW, x)
    axis_y = height - TL_AXIS
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        t = end * frac
        anchor = "start" if frac == 0 else ("end" if frac == 1 else "middle")
        parts.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{axis_y}" y2="{axis_y + 4}" stroke="#5a6475"/>'
            f'<text x="{x(t):.1f}" y="{axis_y + 15}" font-size="10" fill="#5a6475" text-anchor="{anchor}">'
            f"{t:.1f} s</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def context_text(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages as ``{"role", "text"}`` with each media part named in brackets where it sat."""
    out = []
    for m in messages:
        pieces = []
        for p in m["content"]:
            kind = p.get("type")
            if kind == "text":
                pieces.append(p["text"])
            elif kind == "image":
                pieces.append(f" [image {p.get('timestamp', 0.0):.2f} s]")
            elif kind == "audio":
                pieces.append(f" [audio {p.get('start', 0.0):.2f}-{p.get('end', 0.0):.2f} s]")
            elif kind == "video":
                pieces.append(
                    f" [video clip, {len(p.get('timestamps', []))} frames, audio: {p.get('audio') is not None}]"
                )
        out.append({"role": str(m["role"]), "text": "".join(pieces)})
    return out


def replay_contexts(
    traj: Trajectory, media: str, limits: EnvLimits | None = None
) -> tuple[list[list[dict[str, str]]], str | None]:
    """(the context before each turn, a note when the replay stopped early or could not start)."""
    from envs.env import OmniVideoEnv

    env = OmniVideoEnv(limits=limits or EnvLimits())
    contexts: list[list[dict[str, str]]] = []
    try:
        obs, _ = env.reset(options=traj.env_options(media))
        for rec in traj.turns:
            contexts.append(context_text(obs))
            obs, _, terminated, truncated, info = env.step(rec.raw_text)
            got = list(info["timestamps"])
            same = len(got) == len(rec.timestamps) and np.allclose(got, rec.timestamps, atol=1e-3)
            if info["error"] != rec.error or not same:
                return contexts, (
                    f"the replay served other media than the run at turn {rec.turn} (the run used other "
                    "limits?); later contexts are not shown"
                )
            if terminated or truncated:
                break
    except Exception as exc:  # unreadable media, a task the env refuses: the page still renders
        return contexts, f"context not rebuilt: {getattr(exc, 'reason', None) or exc}"
    finally:
        env.close()
    return contexts, None
