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


def ffmpeg(*args: str | Path) -> None:
    """Run the ffmpeg CLI quietly; raise with its message if it fails."""
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()[-500:]}")


def ffmpeg_decode(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every video frame as the ffmpeg CLI decodes the whole file from its start (rotated upright,
    as players show it): (times in seconds from the container's start, keyframe flags, RGB images).

    This is the reference the decoders are checked against: a sequential decode needs no seeking,
    so its timestamps hold even where a seek into the same file would have to guess them. ffmpeg
    fills timestamps the container left out by frame rate (``showinfo`` prints them); ``-copyts``
    keeps them absolute, and ffprobe's container start time makes them relative.
    """
    import re

    start = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=start_time", "-of", "csv=p=0", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    proc = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "info", "-copyts", "-i", str(path), "-map", "0:v:0",
         "-fps_mode", "passthrough", "-vf", "showinfo", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True, check=True,
    )  # fmt: skip
    info = re.findall(
        r"n:\s*\d+ pts:\s*-?\d+ pts_time:(\S+).* s:(\d+)x(\d+) .*iskey:(\d)", proc.stderr.decode()
    )
    times = np.array([float(t) for t, *_ in info]) - float(start or 0.0)
    keys = np.array([k == "1" for *_, k in info], bool)
    w, h = int(info[0][1]), int(info[0][2])
    images = np.frombuffer(proc.stdout, np.uint8).reshape(len(info), h, w, 3)
    return times, keys, images


def make_held_video(path: str | Path, frames: int = 51, fps: int = 10, hold: float = 5.0) -> Path:
    """Barcoded frames at ``fps`` whose last one stays on screen for ``hold`` seconds (its packet
    duration), as slideshows and screen recordings end: the video lasts beyond its last frame."""
    from fractions import Fraction

    path = Path(path)
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height = 128, 72
        vs.pix_fmt = "yuv420p"
        vs.options = {"g": "25", "bf": "0", "preset": "ultrafast"}
        vs.codec_context.time_base = Fraction(1, fps)
        packets = []
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(barcode_frame(i), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            packets += vs.encode(frame)
        packets += vs.encode()
        for pkt in packets:
            if pkt.pts is not None and pkt.pts * pkt.time_base >= Fraction(frames - 1, fps):
                pkt.duration = int(hold / pkt.time_base)
            out.mux(pkt)
    return path
