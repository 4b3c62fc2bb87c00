"""Video frame decoders behind one small interface, chosen by name.

Why a plan rather than one seek per frame: an exact seek costs a decode from the previous keyframe
(up to a whole GOP). So requested times are read in one sorted sweep:

- a target within ``forward_gap_s`` of where the decoder already is: keep decoding forward
  (a dense window costs one seek in all);
- a target further ahead: seek to the keyframe at or before it; if that keyframe lies within
  ``snap_tolerance`` x (spacing between requested frames) of the target, return the keyframe itself
  (a wide scan then decodes about one frame per request, the physical floor); otherwise decode
  forward to the frame nearest the target.

Every returned frame carries its true presentation time, never the requested one.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from envs.errors import MediaError, MediaReadError


@dataclass
class DecodedFrame:
    time: float  # presentation time in seconds from the start of the video stream
    image: np.ndarray  # (H, W, 3) uint8 RGB


@dataclass
class ReadPlan:
    """How to read a set of target times; see the module docstring."""

    snap_tolerance: float = 0.5  # fraction of the spacing between targets a keyframe may be off by
    forward_gap_s: float = 2.0  # decode forward instead of seeking when the next target is this close
    max_miss_s: float = 1.0  # a frame further than this from its target means the data ended early


DECODERS: dict[str, Callable[..., VideoDecoder]] = {}


def register_decoder(name: str) -> Callable[[type[VideoDecoder]], type[VideoDecoder]]:
    def deco(cls: type[VideoDecoder]) -> type[VideoDecoder]:
        DECODERS[name] = cls
        return cls

    return deco


def make_decoder(name: str, path: str, size: tuple[int, int]) -> VideoDecoder:
    if name not in DECODERS:
        raise ValueError(f"unknown video decoder {name!r}; known: {', '.join(sorted(DECODERS))}")
    return DECODERS[name](path, size)


class VideoDecoder(abc.ABC):
    """Reads RGB frames of one video stream at output size ``size`` = (width, height)."""

    def __init__(self, path: str, size: tuple[int, int]) -> None:
        self.path = path
        self.size = size

    @abc.abstractmethod
    def read(self, times: list[float], spacing: float, plan: ReadPlan) -> list[DecodedFrame]:
        """Frames for sorted ``times``; ``spacing`` is the gap between neighbouring requests."""

    def close(self) -> None:  # noqa: B027  (optional hook)
        pass


@register_decoder("pyav")
class PyAVDecoder(VideoDecoder):
    """FFmpeg through PyAV: fast open, flat memory, exact on variable frame rate (see README numbers)."""

    def __init__(self, path: str, size: tuple[int, int]) -> None:
        super().__init__(path, size)
        import av

        try:
            self._container = av.open(path)
            self._stream = self._container.streams.video[0]
        except (av.error.FFmpegError, IndexError) as exc:
            raise MediaError(path, f"no decodable video stream ({exc})") from exc
        self._stream.thread_type = "AUTO"
        self._tb = float(self._stream.time_base)
        # Zero is the container's start (the earliest stream), so video and audio times agree.
        start = self._container.start_time
        self._offset = start / av.time_base if start is not None else 0.0
        self._iter = None
        self._prev = None  # the two most recent decoded frames: the window a target falls into
        self._cur = None

    def _time(self, frame) -> float:  # type: ignore[no-untyped-def]
        return float(frame.pts) * self._tb - self._offset

    def _convert(self, frame) -> DecodedFrame:  # type: ignore[no-untyped-def]
        w, h = self.size
        image = frame.to_ndarray(width=w, height=h, format="rgb24")
        return DecodedFrame(time=round(self._time(frame), 6), image=image)

    def _frames(self):  # type: ignore[no-untyped-def]
        import av

        try:
            for frame in self._container.decode(self._stream):
                if frame.pts is not None:
                    yield frame
        except av.error.FFmpegError as exc:
            raise MediaReadError(f"decoding failed in {self.path}: {exc}", code="decode_failed") from exc

    def _seek(self, t: float) -> None:
        target = int((t + self._offset) / self._tb)
        self._container.seek(max(target, 0), stream=self._stream, backward=True, any_frame=False)
        self._iter = self._frames()
        self._prev = None
        self._cur = next(self._iter, None)
        if self._cur is None:
            raise MediaReadError(
                f"no frame at or after {t:.2f}s in {self.path} (file truncated or damaged)",
                code="media_truncated",
            )

    def _forward_to(self, t: float, plan: ReadPlan):  # type: ignore[no-untyped-def]
        """Advance the two-frame window until it straddles ``t``; return the nearer raw frame."""
        while self._time(self._cur) < t:
            nxt = next(self._iter, None)
            if nxt is None:
                if t - self._time(self._cur) > plan.max_miss_s:
                    raise MediaReadError(
                        f"no frame near {t:.2f}s in {self.path}: decoding stopped at "
                        f"{self._time(self._cur):.2f}s (file truncated or damaged)",
                        code="media_truncated",
                    )
                return self._cur
            self._prev, self._cur = self._cur, nxt
        if self._prev is not None and t - self._time(self._prev) <= self._time(self._cur) - t:
            return self._prev
        return self._cur

    def read(self, times: list[float], spacing: float, plan: ReadPlan) -> list[DecodedFrame]:
        out: list[DecodedFrame] = []
        tol = plan.snap_tolerance * spacing if spacing > 0 else 0.0
        for t in times:
            here = None if self._cur is None else self._time(self._cur)
            floor = here if self._prev is None else self._time(self._prev)
            if here is None or t - here > plan.forward_gap_s or t < floor:
                self._seek(t)
                key_time = self._time(self._cur)
                if key_time <= t and t - key_time <= tol:
                    out.append(self._convert(self._cur))  # snapped to the keyframe
                    continue
            out.append(self._convert(self._forward_to(t, plan)))
        return out

    def close(self) -> None:
        self._iter = None
        self._container.close()


@register_decoder("decord")
class DecordDecoder(VideoDecoder):
    """decord's VideoReader; indexes every packet at open. ``seek(0)`` after each batch stops its
    read-ahead thread from decoding (and growing memory) while idle."""

    def __init__(self, path: str, size: tuple[int, int]) -> None:
        super().__init__(path, size)
        try:
            import decord
        except ImportError as exc:
            raise ImportError("the decord backend needs `pip install omniagent[decord]`") from exc
        try:
            self._vr = decord.VideoReader(path, ctx=decord.cpu(0), width=size[0], height=size[1])
        except decord.DECORDError as exc:
            raise MediaError(path, f"decord cannot open it ({exc})") from exc
        import av

        with av.open(
            path
        ) as c:  # decord counts from the video stream's start; PyAV's zero is the container's
            s = c.streams.video[0]
            stream_start = float(s.start_time * s.time_base) if s.start_time is not None else 0.0
            offset = (c.start_time / av.time_base if c.start_time is not None else 0.0) - stream_start
        self._times = self._vr.get_frame_timestamp(range(len(self._vr)))[:, 0] - offset
        self._keys = np.asarray(self._vr.get_key_indices(), dtype=np.int64)

    def read(self, times: list[float], spacing: float, plan: ReadPlan) -> list[DecodedFrame]:
        tol = plan.snap_tolerance * spacing if spacing > 0 else 0.0
        idx = []
        for t in times:
            i = int(np.clip(np.searchsorted(self._times, t), 0, len(self._times) - 1))
            if i > 0 and abs(self._times[i - 1] - t) <= abs(self._times[i] - t):
                i -= 1
            k = self._keys[self._keys <= i]
            if len(k) and t - self._times[k[-1]] <= tol:
                i = int(k[-1])
            if abs(self._times[i] - t) > max(plan.max_miss_s, tol):
                raise MediaReadError(f"no frame near {t:.2f}s in {self.path}", code="media_truncated")
            idx.append(i)
        batch = self._vr.get_batch(idx).asnumpy()
        self._vr.seek(0)
        return [DecodedFrame(time=round(float(self._times[i]), 6), image=batch[j]) for j, i in enumerate(idx)]
