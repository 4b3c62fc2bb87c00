"""Test media made on the spot: every frame carries its index as a barcode, and the audio carries
tone bursts at known seconds, so tests can check that what is served is what was asked for."""

from __future__ import annotations

import subprocess
from pathlib import Path

import av
import numpy as np
import soundfile as sf

BITS = 16  # barcode width in bits: frame indices up to 65535
SR_OUT = 16_000


def barcode_frame(index: int, width: int = 128, height: int = 72) -> np.ndarray:
    """A grey frame whose top band encodes ``index`` in BITS black/white blocks (MSB first)."""
    img = np.full((height, width, 3), 96, np.uint8)
    block = width // BITS
    for b in range(BITS):
        bit = (index >> (BITS - 1 - b)) & 1
        img[: height // 2, b * block : (b + 1) * block] = 255 if bit else 0
    return img


def read_barcode(img: np.ndarray) -> int:
    """Inverse of :func:`barcode_frame`, robust to resizing and compression noise."""
    h, w = img.shape[:2]
    band = img[: h // 2].mean(axis=(0, 2))
    block = w / BITS
    value = 0
    for b in range(BITS):
        centre = band[
            int(b * block + block * 0.25) : max(
                int(b * block + block * 0.75), int(b * block + block * 0.25) + 1
            )
        ]
        value = (value << 1) | int(centre.mean() > 128)
    return value


def tone_track(duration: float, bursts: list[tuple[float, float, float]], sr: int = 44_100) -> np.ndarray:
    """Silence with sine bursts (start_s, length_s, freq_hz)."""
    t = np.arange(int(duration * sr)) / sr
    out = np.zeros_like(t, dtype=np.float32)
    for start, length, freq in bursts:
        m = (t >= start) & (t < start + length)
        out[m] = 0.5 * np.sin(2 * np.pi * freq * t[m])
    return out


def make_video(
    path: str | Path,
    duration: float = 20.0,
    fps: int = 10,
    gop: int = 25,
    size: tuple[int, int] = (128, 72),
    bursts: list[tuple[float, float, float]] | None = None,
    audio: bool = True,
) -> Path:
    """An H.264 mp4 with barcoded frames (and AAC audio with tone ``bursts`` when ``audio``)."""
    path = Path(path)
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height = size
        vs.pix_fmt = "yuv420p"
        vs.options = {
            "g": str(gop),
            "keyint_min": str(gop),
            "sc_threshold": "0",
            "preset": "ultrafast",
            "crf": "18",
        }
        if audio:
            sr = 44_100
            as_ = out.add_stream("aac", rate=sr)
            as_.layout = "stereo"
        for i in range(int(duration * fps)):
            frame = av.VideoFrame.from_ndarray(barcode_frame(i, *size), format="rgb24")
            for pkt in vs.encode(frame):
                out.mux(pkt)
        for pkt in vs.encode():
            out.mux(pkt)
        if audio:
            track = tone_track(duration, bursts or [], sr)
            stereo = np.stack([track, track])
            step = 1024
            for k in range(0, stereo.shape[1], step):
                af = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(stereo[:, k : k + step]), format="fltp", layout="stereo"
                )
                af.sample_rate = sr
                af.pts = k
                for pkt in as_.encode(af):
                    out.mux(pkt)
            for pkt in as_.encode():
                out.mux(pkt)
    return path


def make_audio(
    path: str | Path, duration: float = 20.0, bursts: list[tuple[float, float, float]] | None = None
) -> Path:
    """An audio-only file (format from the suffix: .wav, .flac; .mp3/.m4a through ffmpeg)."""
    path = Path(path)
    track = tone_track(duration, bursts or [], 44_100)
    if path.suffix in (".wav", ".flac"):
        sf.write(str(path), track, 44_100)
    else:
        wav = path.with_suffix(".src.wav")
        sf.write(str(wav), track, 44_100)
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(wav), str(path)], check=True)
        wav.unlink()
    return path


def tone_energy(samples: np.ndarray, freq: float, sr: int = SR_OUT) -> float:
    """Magnitude of ``freq`` in ``samples`` relative to the whole spectrum (0..1)."""
    if len(samples) == 0:
        return 0.0
    spec = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    freqs = np.fft.rfftfreq(len(samples), 1 / sr)
    band = (freqs > freq - 20) & (freqs < freq + 20)
    return float(spec[band].sum() / (spec.sum() + 1e-9))


def make_vfr_video(path: str | Path, times: list[float], size: tuple[int, int] = (128, 72)) -> Path:
    """A variable-frame-rate mp4: frame i (barcode i) is shown at ``times[i]`` seconds."""
    from fractions import Fraction

    path = Path(path)
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=1000)
        vs.width, vs.height = size
        vs.pix_fmt = "yuv420p"
        vs.time_base = Fraction(1, 1000)
        vs.codec_context.time_base = Fraction(1, 1000)
        vs.options = {"g": "12", "preset": "ultrafast", "crf": "18", "bf": "0"}
        for i, t in enumerate(times):
            frame = av.VideoFrame.from_ndarray(barcode_frame(i, *size), format="rgb24")
            frame.pts = int(round(t * 1000))
            frame.time_base = Fraction(1, 1000)
            for pkt in vs.encode(frame):
                out.mux(pkt)
        for pkt in vs.encode():
            out.mux(pkt)
    return path
