"""Rendering a timeline: video frames (background, events, barcode) and the mono soundtrack."""

from __future__ import annotations

import math

import numpy as np

from envs.synth.barcode import draw_frame_index
from envs.synth.config import SynthConfig, stream_rng
from envs.synth.glyphs import shape_mask, text_bitmap
from envs.synth.speech import espeak_clip
from envs.synth.timeline import Event, Segment, Timeline


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


def render_audio_block(timeline: Timeline, block: int) -> np.ndarray:
    """Audio block ``block`` (``AUDIO_BLOCK_SECONDS`` long; the last one may be shorter) as mono float32 in
    [-1, 1] at ``timeline.config.sample_rate``: background hum, noise and every audible event overlapping it.
    A pure function of the timeline and the block index, so blocks can be rendered apart and concatenated."""
    cfg = timeline.config
    sr = cfg.sample_rate
    s0 = block * AUDIO_BLOCK_SECONDS * sr
    s1 = min(cfg.n_samples, s0 + AUDIO_BLOCK_SECONDS * sr)
    n = s1 - s0
    t = (np.arange(s0, s1, dtype=np.float64)) / sr
    noise_rng = stream_rng(cfg, 3, block)
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
            clip = espeak_clip(ev.attrs["word"], sr)
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
        render_audio_block(timeline, b) for b in range(s0 // block_len, (max(s1, 1) - 1) // block_len + 1)
    ]
    if not parts:
        return np.zeros(0, dtype=np.float32)
    audio = np.concatenate(parts)
    base = (s0 // block_len) * block_len
    return audio[s0 - base : s1 - base]


def n_audio_blocks(cfg: SynthConfig) -> int:
    """How many :func:`render_audio_block` blocks cover the whole soundtrack of ``cfg``."""
    return math.ceil(cfg.n_samples / (AUDIO_BLOCK_SECONDS * cfg.sample_rate))
