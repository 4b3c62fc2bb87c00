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
from typing import Any

import numpy as np
from pydantic import BaseModel

from envs.audio import AudioReader, AudioSpan
from envs.decoders import DecodedFrame, ReadPlan, is_unindexed, make_decoder
from envs.errors import MediaError, MediaReadError
from envs.limits import EnvLimits
from envs.media_access import MediaAccess, open_container
from envs.orientation import Orientation, orientation_of


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
    mirrored: bool = False  # the display mirrors the stored picture (left-right, before the rotation)
    video_declared_end: float | None = None  # where the video stream's header says it ends
    video_end: float | None = None  # where its last decodable frame ends (found at open)


@dataclass
class Clip:
    frames: list[DecodedFrame]
    audio: np.ndarray | None  # 16 kHz mono float32 of [start, end], None for a silent video
    start: float
    end: float
    fps: float
    audio_damaged: list[tuple[float, float]] = field(default_factory=list)  # see envs.audio.AudioSpan


TAIL_SLACK_S = 1e-3  # a request this close past the video's end gets no note (rounding of stored times)
_LIMITS = EnvLimits()  # backend and max_side are environment limits: their defaults live in envs/limits.py


@dataclass
class MediaConfig:
    backend: str = _LIMITS.backend  # video decoder: "pyav" (default, see README benchmark) or "decord"
    max_side: int = _LIMITS.max_side  # frames are resized so their longer side is at most this many pixels
    decode_threads: int = _LIMITS.decode_threads  # threads per video decoder (0: the library's choice)
    plan: ReadPlan = field(default_factory=ReadPlan)
    access: MediaAccess = field(default_factory=MediaAccess)  # protocols/demuxers allowed beyond a file

    @classmethod
    def from_limits(cls, limits: EnvLimits, **kw: Any) -> MediaConfig:
        """The media settings of an environment's limits (``kw``: the rest, e.g. ``plan``)."""
        access = MediaAccess(
            tuple(limits.allow_protocols),
            tuple(limits.allow_demuxers),
            media_root=limits.media_root,
            follow_links_outside_media_root=limits.follow_links_outside_media_root,
        )
        return cls(
            backend=limits.backend,
            max_side=limits.max_side,
            decode_threads=limits.decode_threads,
            access=access,
            **kw,
        )


def probe(path: str, access: MediaAccess | None = None) -> MediaInfo:
    """Read the container header; raise MediaError for anything that is not usable media."""
    return _probe(path, access or MediaAccess())[0]


def _probe(path: str, access: MediaAccess) -> tuple[MediaInfo, Orientation, bool]:
    """The header's facts, the video's display orientation and whether the container lacks a seek
    index. Opens through :func:`envs.media_access.open_container` (a name is a file)."""
    import av

    with open_container(path, access) as c:
        try:
            return _header(path, c)
        except av.error.FFmpegError as exc:
            raise MediaError(
                path, f"not readable as media ({exc.strerror or exc})", code="media_unreadable"
            ) from exc


def _header(path: str, c: Any) -> tuple[MediaInfo, Orientation, bool]:
    import av

    v = c.streams.video[0] if c.streams.video else None
    a = c.streams.audio[0] if c.streams.audio else None
    if v is not None and v.codec_context.codec.type != "video":
        v = None
    # Cover art in audio files shows up as a one-frame "video" stream: ignore it.
    if v is not None and (v.disposition & av.stream.Disposition.attached_pic):
        v = None
    if v is None and a is None:
        raise MediaError(path, "no video or audio stream", code="media_no_streams")
    durations = [float(s.duration * s.time_base) for s in (v, a) if s is not None and s.duration is not None]
    if c.duration is not None:
        durations.append(c.duration / av.time_base)
    duration = max(durations) if durations else 0.0
    if duration <= 0:
        raise MediaError(path, "duration is unknown or zero", code="media_no_duration")
    size, declared, turn = _video_header(c, v) if v is not None else ((None, None), None, Orientation())
    info = MediaInfo(
        path=path,
        duration=round(duration, 6),
        has_video=v is not None,
        has_audio=a is not None,
        fps=float(v.average_rate) if v is not None and v.average_rate else None,
        width=size[0],
        height=size[1],
        audio_channels=(a.codec_context.channels or 1) if a is not None else 0,
        rotation=turn.rotation,
        mirrored=turn.mirrored,
        video_declared_end=declared,
    )
    return info, turn, is_unindexed(c)


def _video_header(c: Any, v: Any) -> tuple[tuple[int, int], float | None, Orientation]:
    """Displayed (width, height), declared end on the container's timeline and display orientation.

    The display matrix reaches PyAV only on decoded frames, so the first frame is decoded here (a
    few ms). The declared end comes from the stream's duration, or from the ``DURATION`` tag
    Matroska writes per stream; None if neither exists.
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
    turn = Orientation()
    with contextlib.suppress(av.error.FFmpegError):
        for i, packet in enumerate(c.demux(v)):  # bounded: a stream that never decodes is not read to its end
            if (frames := packet.decode()) or i >= 300:
                turn = orientation_of(frames[0]) if frames else turn
                break
    w, h = turn.displayed(v.codec_context.width, v.codec_context.height)
    return (w, h), (round(declared, 6) if declared is not None else None), turn


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
        self.info, orientation, unindexed = _probe(os.fspath(path), self.config.access)
        self.path = self.info.path
        self._decoder = None
        self._last_frame = float("inf")
        self._audio: AudioReader | None = None
        if self.info.has_video:
            assert self.info.width and self.info.height
            self.frame_size = output_size(self.info.width, self.info.height, self.config.max_side)
            self._decoder = make_decoder(
                self.config.backend,
                self.path,
                self.frame_size,
                orientation,
                self.config.access,
                unindexed,
                threads=self.config.decode_threads,
            )
            self._check_video_ends()

    def _check_video_ends(self) -> None:
        """Decode the first and the last frame now: a file cut short fails here, not mid-episode.

        The video may end before the file does (a longer audio track): a time after its last frame
        gets that frame, at its own time, with a note (:meth:`video_tail_note`). The file is
        truncated only if the video stops well before the end its own header declares. Costs
        about two GOPs.
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
        wholly after it shrinks to the last frame's time."""
        vend = self.info.video_end
        if vend is None or end <= vend:
            return start, end
        if start > vend:
            return self._last_frame, self._last_frame
        return start, vend

    def video_tail_note(self, start: float, end: float) -> str | None:
        """A note for a request that reaches past the video's end, or None."""
        vend = self.info.video_end
        if self._decoder is None or vend is None or end <= vend + TAIL_SLACK_S:
            return None
        return (
            f"The video ends at {vend:.2f}s (the file runs to {self.info.duration:.2f}s): times after it "
            f"show its last frame, at {self._last_frame:.2f}s."
        )

    # ------------------------------------------------------------------ frames
    def frames(self, start: float, end: float, num: int) -> list[DecodedFrame]:
        """``num`` frames spread over [start, end], each with its true presentation time; one frame
        (the last) for a span wholly after the video's end."""
        if self._decoder is None:
            raise MediaReadError("this file has no video stream; only get_audio can be used", code="no_video")
        start, end = self._video_span(start, end)
        num = num if end > start else 1
        times = [min(t, self._last_frame) for t in spread(start, end, num)]
        spacing = (end - start) / (num - 1) if num > 1 else 0.0
        return self._decoder.read(times, spacing, self.config.plan)

    # ------------------------------------------------------------------- audio
    def _track(self) -> AudioReader:
        if not self.info.has_audio:
            raise MediaReadError("this file has no audio track; use get_frames instead", code="no_audio")
        if self._audio is None:  # decodes on demand: nothing to prepare at open
            self._audio = AudioReader(self.path, self.config.access)
        return self._audio

    def audio(self, start: float, end: float) -> np.ndarray:
        """Mono float32 samples at 16 kHz for [start, end), on the container's timeline (see
        envs/audio.py): gaps in the track are silence, a span past the audio's end is an error."""
        return self._track().read(start, end)

    def audio_span(self, start: float, end: float) -> AudioSpan:
        """:meth:`audio` with the parts that could not be decoded (:class:`envs.audio.AudioSpan`)."""
        return self._track().read_span(start, end)

    # -------------------------------------------------------------------- clip
    def clip(self, start: float, end: float, fps: float) -> Clip:
        """Frames at ``fps`` over [start, end] (up to the video's end; the last frame alone for a
        span after it) in one forward pass, plus that span's audio."""
        if self._decoder is None:
            raise MediaReadError("this file has no video stream; use get_audio instead", code="no_video")
        vstart, vend = self._video_span(start, end)
        num = max(1, int(np.floor((vend - vstart) * fps + 1e-9)) + 1)
        times = [min(vstart + i / fps, self._last_frame) for i in range(num)]
        frames = self._decoder.read(times, 0.0, self.config.plan)
        span = self.audio_span(start, end) if self.info.has_audio else None
        return Clip(
            frames=frames,
            audio=span.samples if span is not None else None,
            start=start,
            end=end,
            fps=fps,
            audio_damaged=span.damaged if span is not None else [],
        )

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
