"""One object per media file: what it holds, and fast access to frames, audio spans and clips.

``open_media(path)`` checks the file up front (exists, non-empty, demuxable, first and last frames
decode) and raises :class:`~envs.errors.MediaError` for anything unusable, so an evaluation fails
a task at ``reset`` with one clear line instead of mid-episode. Requests a usable file cannot serve
(frames of an audio-only file, audio of a silent video, a span past a damaged end) raise
:class:`~envs.errors.MediaReadError`, which the environment shows the model as an error percept.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from envs.audio import AudioReader
from envs.decoders import DecodedFrame, ReadPlan, make_decoder
from envs.errors import MediaError, MediaReadError
from envs.limits import EnvLimits


class MediaInfo(BaseModel):
    path: str
    duration: float
    has_video: bool
    has_audio: bool
    fps: float | None = None
    width: int | None = None  # as displayed: after the stream's rotation (portrait phone videos)
    height: int | None = None
    audio_channels: int = 0
    rotation: int = 0  # display rotation of the video stream, degrees counterclockwise
    video_declared_end: float | None = None  # where the video stream's header says it ends
    video_end: float | None = None  # where its last decodable frame ends (found at open)


@dataclass
class Clip:
    frames: list[DecodedFrame]
    audio: np.ndarray | None  # 16 kHz mono float32 of [start, end], None for a silent video
    start: float
    end: float
    fps: float


_LIMITS = EnvLimits()  # backend and max_side are environment limits: their defaults live in envs/limits.py


@dataclass
class MediaConfig:
    backend: str = _LIMITS.backend  # video decoder: "pyav" (default, see README benchmark) or "decord"
    max_side: int = _LIMITS.max_side  # frames are resized so their longer side is at most this many pixels
    plan: ReadPlan = field(default_factory=ReadPlan)

    @classmethod
    def from_limits(cls, limits: EnvLimits, **kw: Any) -> MediaConfig:
        """The media settings of an environment's limits (``kw``: the rest, e.g. ``plan``)."""
        return cls(backend=limits.backend, max_side=limits.max_side, **kw)


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
            size, declared, rotation = _video_header(c, v) if v is not None else ((None, None), None, 0)
            return MediaInfo(
                path=str(p),
                duration=round(duration, 6),
                has_video=v is not None,
                has_audio=a is not None,
                fps=float(v.average_rate) if v is not None and v.average_rate else None,
                width=size[0],
                height=size[1],
                audio_channels=(a.codec_context.channels or 1) if a is not None else 0,
                rotation=rotation,
                video_declared_end=declared,
            )
    except av.error.FFmpegError as exc:
        raise MediaError(
            path, f"not readable as media ({exc.strerror or exc})", code="media_unreadable"
        ) from exc


def _video_header(c: Any, v: Any) -> tuple[tuple[int, int], float | None, int]:
    """Displayed (width, height), declared end on the container's timeline and display rotation.

    The rotation (display matrix side data) reaches PyAV only on decoded frames, so the first frame
    is decoded here (a few ms). The declared end comes from the stream's duration, or from the
    ``DURATION`` tag Matroska writes per stream; None if neither exists.
    """
    import av

    origin = c.start_time / av.time_base if c.start_time is not None else 0.0
    start = float(v.start_time * v.time_base) - origin if v.start_time is not None else 0.0
    declared = None
    if v.duration is not None:
        declared = start + float(v.duration * v.time_base)
    elif (tag := v.metadata.get("DURATION")) and (parts := tag.split(":")) and len(parts) == 3:
        with contextlib.suppress(ValueError):
            declared = start + int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])
    rotation = 0
    with contextlib.suppress(av.error.FFmpegError):
        for i, packet in enumerate(c.demux(v)):  # bounded: a stream that never decodes is not read to its end
            if (frames := packet.decode()) or i >= 300:
                rotation = int(round(frames[0].rotation)) if frames else 0
                break
    w, h = v.codec_context.width, v.codec_context.height
    if round(rotation / 90) % 2:
        w, h = h, w
    return (w, h), (round(declared, 6) if declared is not None else None), rotation


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
        self._last_frame = float("inf")
        self._audio: AudioReader | None = None
        if self.info.has_video:
            assert self.info.width and self.info.height
            self.frame_size = output_size(self.info.width, self.info.height, self.config.max_side)
            self._decoder = make_decoder(self.config.backend, self.path, self.frame_size, self.info.rotation)
            self._check_video_ends()

    def _check_video_ends(self) -> None:
        """Decode the first and the last frame now: a file cut short fails here, not mid-episode.

        The video may end before the file does (a longer audio track): frames are then served up to
        its last frame and a request past that is a per-action error. The file is truncated only
        if the video stops well before the end its own header declares. Costs about two GOPs.
        """
        assert self._decoder is not None
        declared = self.info.video_declared_end
        try:
            self._decoder.read([0.0], 0.0, self.config.plan)
            last, end = self._decoder.last_frame(declared if declared is not None else self.info.duration)
        except MediaReadError as exc:
            self.close()
            raise MediaError(self.path, f"truncated or damaged: {exc}", code="media_truncated") from exc
        end = end if end is not None and end > last else last + 1.0 / (self.info.fps or 25.0)
        if declared is not None and end < declared - self.config.plan.max_miss_s:
            self.close()
            raise MediaError(
                self.path,
                f"truncated or damaged: the video stops at {last:.2f}s but its header says {declared:.2f}s",
                code="media_truncated",
            )
        self.info.video_end = round(max(last, min(end, self.info.duration)), 6)
        self._last_frame = last  # targets after it get it: it stays on screen to video_end

    def _video_span(self, start: float, end: float) -> tuple[float, float]:
        """[start, end] cut at the video's end, which a longer audio track can outlast; a span
        wholly past it is an error the model sees."""
        vend = self.info.video_end
        if vend is None or end <= vend:
            return start, end
        if start > vend + 1e-6:
            raise MediaReadError(
                f"frames requested from {start:.2f}s but the video ends at {vend:.2f}s "
                f"(the file runs to {self.info.duration:.2f}s with audio only)",
                code="video_out_of_range",
            )
        return start, vend

    # ------------------------------------------------------------------ frames
    def frames(self, start: float, end: float, num: int) -> list[DecodedFrame]:
        """``num`` frames spread over [start, end], each with its true presentation time."""
        if self._decoder is None:
            raise MediaReadError("this file has no video stream; only get_audio can be used", code="no_video")
        start, end = self._video_span(start, end)
        times = [min(t, self._last_frame) for t in spread(start, end, num)]
        spacing = (end - start) / (num - 1) if num > 1 else 0.0
        return self._decoder.read(times, spacing, self.config.plan)

    # ------------------------------------------------------------------- audio
    def _track(self) -> AudioReader:
        if not self.info.has_audio:
            raise MediaReadError("this file has no audio track; use get_frames instead", code="no_audio")
        if self._audio is None:
            self._audio = AudioReader(self.path)  # decodes on demand: nothing to prepare at open
        return self._audio

    def audio(self, start: float, end: float) -> np.ndarray:
        """Mono float32 samples at 16 kHz for [start, end), on the container's timeline (see
        envs/audio.py): gaps in the track are silence, a span past the audio's end is an error."""
        return self._track().read(start, end)

    # -------------------------------------------------------------------- clip
    def clip(self, start: float, end: float, fps: float) -> Clip:
        """Frames at ``fps`` over [start, end] (up to the video's end) in one forward pass, plus
        that span's audio."""
        if self._decoder is None:
            raise MediaReadError("this file has no video stream; use get_audio instead", code="no_video")
        vstart, vend = self._video_span(start, end)
        num = max(1, int(np.floor((vend - vstart) * fps + 1e-9)) + 1)
        times = [min(vstart + i / fps, self._last_frame) for i in range(num)]
        frames = self._decoder.read(times, 0.0, self.config.plan)
        audio = self.audio(start, end) if self.info.has_audio else None
        return Clip(frames=frames, audio=audio, start=start, end=end, fps=fps)

    def close(self) -> None:
        if self._audio is not None:
            self._audio.close()
            self._audio = None
        if self._decoder is not None:
            self._decoder.close()
            self._decoder = None

    def __enter__(self) -> MediaSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_media(path: str | os.PathLike[str], config: MediaConfig | None = None) -> MediaSource:
    return MediaSource(path, config)
