"""Audio test media with known timelines, and ffmpeg's own decode of them as the reference.

Gaps are made the ways real files get them: segments joined with the concat demuxer or looped with
``-stream_loop`` whose audio is shorter than their video, audio started late with ``-itsoffset``, and
packets dropped in a remux. Each segment carries a tone at a known second.
"""

from __future__ import annotations

import subprocess
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

SR = 16_000
LSB = 1 / 32768  # one step of 16-bit audio


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def ffmpeg_decode(path: str | Path, timeline: bool = False) -> np.ndarray:
    """ffmpeg's 16 kHz mono decode (``-ac 1 -ar 16000 -f s16le``). ``timeline``: place samples by
    their timestamps with ``aresample=async=1:first_pts=0`` (gaps filled, overlaps trimmed)."""
    af = ["-af", "aresample=async=1:first_pts=0"] if timeline else []
    cmd = ["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-vn", *af, "-ac", "1", "-ar", str(SR),
           "-f", "s16le", "-"]  # fmt: skip
    raw = subprocess.run(cmd, capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.int16).astype(np.float32) / 32768


def segment(
    path: Path, video_s: float, audio_s: float, tone_at: float, freq: float, ext_audio: str = "aac"
) -> Path:
    """A small H.264 + stereo audio file: grey video of ``video_s``, audio of ``audio_s`` holding a
    0.5 s tone of ``freq`` Hz from ``tone_at`` seconds."""
    tone = f"if(between(t,{tone_at},{tone_at + 0.5}),0.5*sin(2*PI*{freq}*t),0)"
    ffmpeg(
        "-f", "lavfi", "-i", f"color=gray:size=64x36:rate=10:duration={video_s}",
        "-f", "lavfi", "-i", f"aevalsrc='{tone}|{tone}':s=44100:d={audio_s}",
        "-c:v", "libx264", "-preset", "ultrafast", "-g", "10", "-c:a", ext_audio, str(path),
    )  # fmt: skip
    return path


def concat(parts: list[Path], out: Path) -> Path:
    """Join with the concat demuxer, streams copied: each part starts where the previous one's
    longest stream ended, so audio shorter than its video leaves a gap."""
    listing = out.with_suffix(".txt")
    listing.write_text("".join(f"file '{p.resolve()}'\n" for p in parts))
    ffmpeg("-f", "concat", "-safe", "0", "-i", str(listing), "-c", "copy", str(out))
    return out


def overlapping_list(parts: list[Path], out: Path, step: float) -> Path:
    """An ffconcat list that starts each part ``step`` seconds after the previous one: parts longer
    than ``step`` overlap the next. Read by the concat demuxer, which cannot seek."""
    lines = ["ffconcat version 1.0"] + [f"file {p.name}\nduration {step}" for p in parts[:-1]]
    out.write_text("\n".join([*lines, f"file {parts[-1].name}"]) + "\n")
    return out


def tones(path: Path, duration: float, spans: list[tuple[float, float]], freq: float) -> Path:
    """An AAC audio file of ``duration`` with a 0.5-amplitude ``freq`` tone in each (start, end)."""
    on = "+".join(f"between(t,{a},{b})" for a, b in spans)
    ffmpeg("-f", "lavfi", "-i", f"aevalsrc='({on})*0.5*sin(2*PI*{freq}*t)':s=48000:d={duration}", "-c:a", "aac",
           str(path))  # fmt: skip
    return path


def loop(src: Path, out: Path, extra_loops: int) -> Path:
    ffmpeg("-stream_loop", str(extra_loops), "-i", str(src), "-c", "copy", str(out))
    return out


def delayed_audio(src: Path, out: Path, offset: float) -> Path:
    """``src``'s video from 0 and its audio starting ``offset`` seconds later."""
    ffmpeg("-i", str(src), "-itsoffset", str(offset), "-i", str(src), "-map", "0:v", "-map", "1:a",
           "-c", "copy", str(out))  # fmt: skip
    return out


def drop_audio_packets(src: Path, out: Path, t0: float, t1: float) -> Path:
    """Remux ``src`` without the audio packets whose time falls in [t0, t1): a hole in the stream."""
    with av.open(str(src)) as inp, av.open(str(out), "w") as dst:
        streams = {
            s.index: dst.add_stream_from_template(s) for s in inp.streams if s.type in ("audio", "video")
        }
        for packet in inp.demux(*[s for s in inp.streams if s.index in streams]):
            if packet.dts is None:
                continue
            if packet.stream.type == "audio" and t0 <= float(packet.pts * packet.time_base) < t1:
                continue
            packet.stream = streams[packet.stream.index]
            dst.mux(packet)
    return out


SURROUND_FREQS = {"FL": 300.0, "FR": 500.0, "FC": 700.0, "LFE": 60.0, "BL": 900.0, "BR": 1100.0}


def surround(path: Path, duration: float = 3.0, amplitude: float = 0.5) -> Path:
    """A 5.1 PCM WAV (channel mask written) with one tone per channel, see ``SURROUND_FREQS``."""
    sr = 48_000
    t = np.arange(int(duration * sr)) / sr
    planes = np.stack([amplitude * np.sin(2 * np.pi * f * t) for f in SURROUND_FREQS.values()])
    pcm = (planes * 32767).astype(np.int16)
    with av.open(str(path), "w", format="wav") as out:
        stream = out.add_stream("pcm_s16le", rate=sr)
        stream.layout = "5.1"
        step = 1024
        for k in range(0, pcm.shape[1], step):
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(pcm[:, k : k + step]), format="s16p", layout="5.1"
            )
            frame.sample_rate = sr
            frame.pts = k
            frame.time_base = Fraction(1, sr)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def amplitude_at(samples: np.ndarray, freq: float, sr: int = SR) -> float:
    """Amplitude of the ``freq`` sine in ``samples`` (whole number of cycles assumed)."""
    spec = np.abs(np.fft.rfft(samples)) * 2 / len(samples)
    freqs = np.fft.rfftfreq(len(samples), 1 / sr)
    return float(spec[np.argmin(np.abs(freqs - freq))])


def onsets(samples: np.ndarray, threshold: float = 0.05, sr: int = SR) -> list[float]:
    """Start times (s) of sounds above ``threshold`` separated by at least 0.1 s of quiet."""
    loud = np.flatnonzero(np.abs(samples) > threshold)
    if len(loud) == 0:
        return []
    starts = [loud[0]] + [b for a, b in zip(loud[:-1], loud[1:], strict=True) if b - a > sr // 10]
    return [float(s) / sr for s in starts]


def best_lag(x: np.ndarray, y: np.ndarray, max_lag: int = 16) -> tuple[int, float]:
    """The shift of ``y`` (in samples, |lag| <= max_lag) that best matches ``x``, and the
    correlation there."""
    n = min(len(x), len(y)) - 2 * max_lag
    best = (0, -1.0)
    for lag in range(-max_lag, max_lag + 1):
        a = x[max_lag : max_lag + n]
        b = y[max_lag + lag : max_lag + lag + n]
        c = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))
        if c > best[1]:
            best = (lag, c)
    return best
