"""A 16 kHz mono copy of a file's audio track, made once and then read by random access.

Measured on the 2-core machine: extracting an hour with the ffmpeg CLI takes ~3 s (110 MB as int16
WAV) and a 30 s span then reads in ~1-2 ms with soundfile, against ~80 ms for seek+decode+resample
per call. Downmix is the plain mean of the channels, (L+R)/2, chosen explicitly because FFmpeg's
own stereo-to-mono path scales by 1/sqrt(2) and can clip.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

from envs.errors import MediaError, MediaReadError
from envs.messages import SAMPLE_RATE


def default_cache_dir() -> Path:
    return Path(tempfile.gettempdir()) / "omniagent-audio-cache"


def cache_key(path: str) -> str:
    """Key on path, size and mtime so an edited file is extracted again."""
    st = os.stat(path)
    raw = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
    return hashlib.sha1(raw.encode()).hexdigest()[:20]


def _extract_ffmpeg(src: str, dst: str, channels: int) -> None:
    weights = "+".join(f"{1.0 / channels:.6f}*c{i}" for i in range(channels))
    cmd = [
        "ffmpeg", "-nostdin", "-v", "error", "-y", "-i", src, "-vn", "-map", "0:a:0",
        "-af", f"pan=mono|c0={weights}", "-ar", str(SAMPLE_RATE), "-c:a", "pcm_s16le", "-f", "wav", dst,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise MediaError(
            src, f"audio track cannot be decoded: {proc.stderr.strip()[-300:]}", code="bad_audio"
        )


def _extract_pyav(src: str, dst: str) -> None:
    import av

    chunks = []
    try:
        with av.open(src) as container:
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="fltp", rate=SAMPLE_RATE)  # keep channels, mean below
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().mean(axis=0))
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().mean(axis=0))
    except av.error.FFmpegError as exc:
        raise MediaError(src, f"audio track cannot be decoded: {exc}", code="bad_audio") from exc
    data = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    sf.write(dst, data, SAMPLE_RATE, subtype="PCM_16", format="WAV")


class AudioTrack:
    """Random access to a media file's audio as 16 kHz mono float32."""

    def __init__(self, path: str, channels: int, cache_dir: str | Path | None = None) -> None:
        self.path = path
        cache = Path(cache_dir) if cache_dir else default_cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        self.wav_path = cache / f"{cache_key(path)}.wav"
        if not self.wav_path.exists():
            fd, tmp = tempfile.mkstemp(suffix=".wav", dir=cache)
            os.close(fd)
            try:
                if shutil.which("ffmpeg"):
                    _extract_ffmpeg(path, tmp, max(channels, 1))
                else:
                    _extract_pyav(path, tmp)
                os.replace(tmp, self.wav_path)  # atomic: a crash never leaves a half-written cache
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        self.num_samples = sf.info(str(self.wav_path)).frames
        if self.num_samples == 0:
            raise MediaError(path, "the audio track holds no samples", code="bad_audio")

    @property
    def duration(self) -> float:
        return self.num_samples / SAMPLE_RATE

    def read(self, start: float, end: float, max_short_s: float = 0.5) -> np.ndarray:
        """Samples of [start, end). A track that ends up to ``max_short_s`` early is padded with
        silence (tracks are often a few ms shorter than their video); beyond that it is an error."""
        a = int(round(start * SAMPLE_RATE))
        b = int(round(end * SAMPLE_RATE))
        if a >= self.num_samples:
            raise MediaReadError(
                f"audio requested from {start:.2f}s but the audio track ends at {self.duration:.2f}s",
                code="audio_out_of_range",
            )
        data, _ = sf.read(str(self.wav_path), start=a, stop=min(b, self.num_samples), dtype="float32")
        missing = (b - a) - len(data)
        if missing > max_short_s * SAMPLE_RATE:
            raise MediaReadError(
                f"audio requested to {end:.2f}s but the audio track ends at {self.duration:.2f}s",
                code="audio_out_of_range",
            )
        if missing > 0:
            data = np.concatenate([data, np.zeros(missing, np.float32)])
        return data
