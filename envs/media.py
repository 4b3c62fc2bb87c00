"""One object per media file: what it holds, and fast access to frames, audio spans and clips.

``open_media(path)`` checks the file up front (exists, non-empty, demuxable, first and last frames
decode) and raises :class:`~envs.errors.MediaError` for anything unusable, so an evaluation fails
a task at ``reset`` with one clear line instead of mid-episode. Requests a usable file cannot serve
(frames of an audio-only file, audio of a silent video, a span past a damaged end) raise
:class:`~envs.errors.MediaReadError`, which the environment shows the model as an error percept.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from envs.audio_cache import AudioTrack
from envs.decoders import DecodedFrame, ReadPlan, make_decoder
from envs.errors import MediaError, MediaReadError


class MediaInfo(BaseModel):
    path: str
    duration: float
    has_video: bool
    has_audio: bool
    fps: float | None = None
    width: int | None = None
    height: int | None = None
    audio_channels: int = 0


@dataclass
class Clip:
    frames: list[DecodedFrame]
    audio: np.ndarray | None  # 16 kHz mono float32 of [start, end], None for a silent video
    start: float
    end: float
    fps: float


@dataclass
class MediaConfig:
    backend: str = "pyav"  # video decoder: "pyav" (default, see README benchmark) or "decord"
    max_side: int = 448  # frames are resized so their longer side is at most this many pixels
    audio_cache_dir: str | None = None  # None: a folder in the system temp dir
    plan: ReadPlan = field(default_factory=ReadPlan)


def probe(path: str) -> MediaInfo:
    """Read the container header; raise MediaError for anything that is not usable media."""
    import av

    p = Path(path)
    if not p.exists():
        raise MediaError(path, "file not found", code="media_not_found")
    if not p.is_file():
        raise MediaError(path, "not a regular file", code="media_not_found")
    if p.stat().st_size == 0:
        raise MediaError(path, "file is empty (0 bytes)", code="media_empty")
    try:
        with av.open(str(p)) as c:
            v = c.streams.video[0] if c.streams.video else None
            a = c.streams.audio[0] if c.streams.audio else None
            if v is not None and v.codec_context.codec.type != "video":
                v = None
            # Cover art in audio files shows up as a one-frame "video" stream: ignore it.
            if v is not None and (v.disposition & av.stream.Disposition.attached_pic):
                v = None
            if v is None and a is None:
                raise MediaError(path, "no video or audio stream", code="media_no_streams")
            durations = [
                float(s.duration * s.time_base) for s in (v, a) if s is not None and s.duration is not None
            ]
            if c.duration is not None:
                durations.append(c.duration / av.time_base)
            duration = max(durations) if durations else 0.0
            if duration <= 0:
                raise MediaError(path, "duration is unknown or zero", code="media_no_duration")
            return MediaInfo(
                path=str(p),
                duration=round(duration, 6),
                has_video=v is not None,
                has_audio=a is not None,
                fps=float(v.average_rate) if v is not None and v.average_rate else None,
                width=v.codec_context.width if v is not None else None,
                height=v.codec_context.height if v is not None else None,
                audio_channels=(a.codec_context.channels or 1) if a is not None else 0,
            )
    except av.error.FFmpegError as exc:
        raise MediaError(
            path, f"not readable as media ({exc.strerror or exc})", code="media_unreadable"
        ) from exc


def output_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """Size with the longer side capped at ``max_side``, aspect kept, both sides even."""
    scale = min(1.0, max_side / max(width, height))
    w = max(2, int(round(width * scale / 2)) * 2)
    h = max(2, int(round(height * scale / 2)) * 2)
    return w, h


def spread(start: float, end: float, num: int) -> list[float]:
    """``num`` times spread evenly over [start, end], both ends included when num > 1."""
    if num == 1:
        return [(start + end) / 2]
    return [float(x) for x in np.linspace(start, end, num)]


class MediaSource:
    """Frames, audio and clips of one file. Not thread-safe: use one per thread or process."""

    def __init__(self, path: str | os.PathLike[str], config: MediaConfig | None = None) -> None:
        self.config = config or MediaConfig()
        self.info = probe(str(path))
        self.path = self.info.path
        self._decoder = None
        self._audio: AudioTrack | None = None
        self._prefetch: ThreadPoolExecutor | None = None
        self._prefetch_job: Future[AudioTrack] | None = None
        if self.info.has_video:
            assert self.info.width and self.info.height
            self.frame_size = output_size(self.info.width, self.info.height, self.config.max_side)
            self._decoder = make_decoder(self.config.backend, self.path, self.frame_size)
            self._check_video_ends()

    def _check_video_ends(self) -> None:
        """Decode the first and the last frame now: a file cut short fails here, not mid-episode."""
        assert self._decoder is not None
        last = max(0.0, self.info.duration - 1.0 / (self.info.fps or 25.0) - 0.05)
        try:
            self._decoder.read([0.0], 0.0, self.config.plan)
            self._decoder.read([last], 0.0, self.config.plan)
        except MediaReadError as exc:
            self.close()
            raise MediaError(self.path, f"truncated or damaged: {exc}", code="media_truncated") from exc

    # ------------------------------------------------------------------ frames
    def frames(self, start: float, end: float, num: int) -> list[DecodedFrame]:
        """``num`` frames spread over [start, end], each with its true presentation time."""
        if self._decoder is None:
            raise MediaReadError("this file has no video stream; only get_audio can be used", code="no_video")
        times = spread(start, end, num)
        spacing = (end - start) / (num - 1) if num > 1 else 0.0
        return self._decoder.read(times, spacing, self.config.plan)

    # ------------------------------------------------------------------- audio
    def prefetch_audio(self) -> None:
        """Start making the audio cache in a background thread (a few seconds per hour of audio), so
        it overlaps with the model's first turn instead of stalling the first audio request."""
        if self.info.has_audio and self._audio is None and self._prefetch is None:
            self._prefetch = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audio-cache")
            self._prefetch_job = self._prefetch.submit(
                AudioTrack, self.path, self.info.audio_channels, self.config.audio_cache_dir
            )

    def _track(self) -> AudioTrack:
        if not self.info.has_audio:
            raise MediaReadError("this file has no audio track; use get_frames instead", code="no_audio")
        if self._audio is None:
            try:
                if self._prefetch_job is not None:
                    self._audio = self._prefetch_job.result()
                else:
                    self._audio = AudioTrack(self.path, self.info.audio_channels, self.config.audio_cache_dir)
            except MediaError as exc:
                raise MediaReadError(
                    f"the audio track cannot be decoded: {exc.reason}", code="bad_audio"
                ) from exc
            finally:
                self._stop_prefetch()
        return self._audio

    def _stop_prefetch(self, wait: bool = True) -> None:
        if self._prefetch is not None:
            self._prefetch.shutdown(wait=wait)  # not waiting: a started extraction still fills the cache
            self._prefetch = self._prefetch_job = None

    def audio(self, start: float, end: float) -> np.ndarray:
        """Mono float32 samples at 16 kHz for [start, end)."""
        return self._track().read(start, end)

    # -------------------------------------------------------------------- clip
    def clip(self, start: float, end: float, fps: float) -> Clip:
        """Frames at ``fps`` over [start, end] in one forward pass, plus that span's audio."""
        if self._decoder is None:
            raise MediaReadError("this file has no video stream; use get_audio instead", code="no_video")
        num = max(1, int(np.floor((end - start) * fps + 1e-9)) + 1)
        times = [start + i / fps for i in range(num)]
        frames = self._decoder.read(times, 0.0, self.config.plan)
        audio = self.audio(start, end) if self.info.has_audio else None
        return Clip(frames=frames, audio=audio, start=start, end=end, fps=fps)

    def close(self) -> None:
        self._stop_prefetch(wait=False)
        if self._decoder is not None:
            self._decoder.close()
            self._decoder = None

    def __enter__(self) -> MediaSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_media(path: str | os.PathLike[str], config: MediaConfig | None = None) -> MediaSource:
    return MediaSource(path, config)
