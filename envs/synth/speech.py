"""Spoken words: espeak-ng clips (trimmed, resampled, normalised) and the speech backend choice."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import wave
from functools import lru_cache

import numpy as np

from envs.synth.config import SynthConfig


@lru_cache(maxsize=1)
def _espeak_binary() -> str | None:
    return shutil.which("espeak-ng")


@lru_cache(maxsize=256)
def espeak_clip(word: str, sample_rate: int) -> np.ndarray | None:
    """``word`` spoken by espeak-ng (en-us) as mono float32 at ``sample_rate``, leading and trailing
    silence trimmed, at most 1.6 s long, peak 0.6; None when espeak-ng is missing or fails. Cached per
    ``(word, sample_rate)``: the array is shared, so callers must not modify it."""
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
    return "espeak-ng" if espeak_clip("test", cfg.sample_rate) is not None else "tone"


def package_speech_backend(cfg: SynthConfig) -> str:
    """:func:`speech_backend` as bound on the :mod:`envs.synth` package right now.

    The timeline and the config hash look it up there, so that replacing ``envs.synth.speech_backend``
    (as the tests do to simulate a missing espeak-ng) still reaches both.
    """
    from envs import synth  # noqa: PLC0415 - the package imports this module

    return synth.speech_backend(cfg)
