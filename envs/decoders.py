"""Video frame decoders behind one small interface, chosen by name.

Why a plan rather than one seek per frame: an exact seek costs a decode from the previous keyframe
(up to a whole GOP). So requested times are read in one sorted sweep:

- seek or decode forward, whichever decodes less: a seek lands on the keyframe at or before the
  target, so it saves work only when that keyframe comes after the current frame. The demuxer's
  index says where that keyframe is (no I/O). Without an index to ask (MPEG-PS/TS, or past the end
  of a partial index) the distance decides: a target within ``forward_gap_s`` is decoded forward
  to, a further one sought. A dense window costs about one seek per keyframe it spans;
- a target within ``forward_gap_s`` of where the decoder already is gets its nearest frame;
- a target further ahead, when sought: if the keyframe lies within ``snap_tolerance`` x (spacing
  between requested frames) of the target, return the keyframe itself (a wide scan then decodes
  about one frame per request, the physical floor); otherwise decode forward to the frame nearest
  the target.

Every returned frame carries its true presentation time, never the requested one, and is shown
as players show it: turned and mirrored by the stream's display matrix (:mod:`envs.orientation`).
Files are opened through :mod:`envs.media_access` (a name is a file, never a protocol or playlist),
and every FFmpeg failure while reading becomes a :class:`~envs.errors.MediaReadError`.

MPEG program and transport streams (.mpg, .vob, .ts, .m2ts) have no seek index: a seek there is a
search over timestamps that lands mid-GOP, after its target or past the data near the end. PyAV
finds the keyframe at or before a target by demuxing (no decoding) from a little earlier, seeks to
it, and checks that the first decoded frame is at or before the target (else it aims earlier). decord
returns wrong frames on them and mishandles rotation (see :class:`DecordDecoder`), so
:func:`make_decoder` reads those files with PyAV instead.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from envs.errors import MediaError, MediaReadError
from envs.media_access import MediaAccess, input_url, open_container
from envs.orientation import Orientation
from envs.registry import Registry


@dataclass
class DecodedFrame:
    time: float  # presentation time in seconds from the start of the video stream
    image: np.ndarray  # (H, W, 3) uint8 RGB


@dataclass
class ReadPlan:
    """How to read a set of target times; see the module docstring."""

    snap_tolerance: float = 0.5  # fraction of the spacing between targets a keyframe may be off by
    forward_gap_s: float = 2.0  # a target this close: its nearest frame, no snap (no index: decode forward)
    max_miss_s: float = 1.0  # a frame further than this from its target means the data ended early


log = logging.getLogger(__name__)
T = TypeVar("T")

DECODERS: Registry[Callable[..., VideoDecoder]] = Registry("video decoder")
register_decoder = DECODERS.register


def is_unindexed(container) -> bool:  # type: ignore[no-untyped-def]
    """True for containers where a time is found by searching timestamps, not read from an index:
    MPEG program and transport streams, which FFmpeg flags as allowing timestamp discontinuities."""
    import av

    return bool(container.format.flags & av.format.Flags.ts_discont.value)


def make_decoder(
    name: str,
    path: str,
    size: tuple[int, int],
    orientation: Orientation | None = None,
    access: MediaAccess | None = None,
    unindexed: bool = False,
    threads: int = 0,
) -> VideoDecoder:
    """Open ``path`` with the decoder registered as ``name`` (unknown names raise, listing the known).

    A decoder class with ``seeks_unindexed = False`` is replaced by PyAV (with a warning) on
    containers without a seek index (``unindexed``), one with ``rotates = False`` on turned or
    mirrored videos, one with ``confines = False`` on URLs: decord returns frames 6 to 25 positions
    off on MPEG-PS/TS files, squashed or crashing rotated frames, and takes no FFmpeg whitelists.
    ``threads``: decoding threads per video (0: the library's choice; 1: none besides the caller's).
    """
    cls = DECODERS[name]
    orientation = orientation or Orientation()
    access = access or MediaAccess()
    why = ""
    if not getattr(cls, "rotates", True) and not orientation.identity:
        why = "turned or mirrored video"
    elif not getattr(cls, "seeks_unindexed", True) and unindexed:
        why = "container without a seek index"
    elif not getattr(cls, "confines", True) and access.scheme(path) is not None:
        why = "URL under FFmpeg's whitelists"
    if why:
        log.warning("%s: the %s decoder cannot read a %s correctly; using pyav", path, name, why)
        cls = DECODERS["pyav"]
    return cls(path, size, orientation, access, threads=threads)


class VideoDecoder(abc.ABC):
    """Reads RGB frames of one video stream at output size ``size`` = (width, height), as displayed.

    ``orientation`` is the stream's display matrix (:class:`~envs.orientation.Orientation`); frames
    are decoded in the stored orientation and then turned and mirrored for display.
    """

    seeks_unindexed = True  # False: cannot read containers without a seek index correctly
    rotates = True  # False: cannot serve turned or mirrored videos as displayed
    confines = True  # False: cannot open under FFmpeg's protocol and format whitelists

    def __init__(
        self,
        path: str,
        size: tuple[int, int],
        orientation: Orientation | None = None,
        access: MediaAccess | None = None,
        threads: int = 0,
    ) -> None:
        self.path = path
        self.size = size
        self.threads = threads  # decoding threads (0: the library's choice)
        self.orientation = orientation or Orientation()
        self.access = access or MediaAccess()
        self._open()

    @abc.abstractmethod
    def _open(self) -> None:
        """Open :attr:`path` with the decoding library (called once, by ``__init__``)."""

    @property
    def coded_size(self) -> tuple[int, int]:
        """(width, height) to decode at, before turning for display."""
        w, h = self.size
        return (h, w) if self.orientation.transpose else (w, h)

    def upright(self, image: np.ndarray) -> np.ndarray:
        return self.orientation.apply(image)

    def read(self, times: list[float], spacing: float, plan: ReadPlan) -> list[DecodedFrame]:
        """Frames for sorted ``times``; ``spacing`` is the gap between neighbouring requests.

        Raises :class:`MediaReadError` for anything the file cannot give (never a library error)."""
        return self._typed(lambda: self._read(times, spacing, plan))

    def last_frame(self, hint: float) -> tuple[float, float | None]:
        """(time, display end or None if unknown) of the last frame that decodes; ``hint`` is
        where the header says the video ends. Raises :class:`MediaReadError` like :meth:`read`."""
        return self._typed(lambda: self._last_frame(hint))

    def _typed(self, call: Callable[[], T]) -> T:
        """``call()`` with every failure of the decoding library turned into a MediaReadError; the
        decoder forgets where it was, so the next read starts with a fresh seek."""
        try:
            return call()
        except MediaReadError:
            self._forget()
            raise
        except self.library_errors() as exc:
            self._forget()
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise MediaReadError(f"reading {self.path} failed: {reason}", code="media_read_failed") from exc

    def library_errors(self) -> tuple[type[BaseException], ...]:
        """Exceptions the decoding library raises for a file it cannot read."""
        return (OSError,)

    def _forget(self) -> None:  # noqa: B027  (optional hook)
        """Drop any decoding position (after a failure)."""

    @abc.abstractmethod
    def _read(self, times: list[float], spacing: float, plan: ReadPlan) -> list[DecodedFrame]:
        """:meth:`read` without the error typing."""

    @abc.abstractmethod
    def _last_frame(self, hint: float) -> tuple[float, float | None]:
        """:meth:`last_frame` without the error typing."""

    def close(self) -> None:  # noqa: B027  (optional hook)
        pass


@register_decoder("pyav")
class PyAVDecoder(VideoDecoder):
    """FFmpeg through PyAV: fast open, flat memory, exact on variable frame rate (docs/benchmarks.md)."""

    def _open(self) -> None:
        path, threads = self.path, self.threads
        import av

        self._container = open_container(path, self.access)
        try:
            self._stream = self._container.streams.video[0]
        except IndexError as exc:
            self._container.close()
            raise MediaError(path, "no decodable video stream", code="media_no_streams") from exc
        self._stream.thread_type = "AUTO"
        # FFmpeg's frame threads cost CPU after every seek (the pipeline refills) and at open and
        # close; worth it for one long decode on idle cores, not when many videos decode at once
        self._stream.codec_context.thread_count = threads
        self._reformatter = av.video.reformatter.VideoReformatter()
        self._tb = float(self._stream.time_base)
        # Zero is the container's start (the earliest stream), so video and audio times agree.
        start = self._container.start_time
        self._offset = start / av.time_base if start is not None else 0.0
        first = self._stream.start_time
        self._first = float(first) * self._tb - self._offset if first is not None else 0.0
        # where a seek to the first frame aims: 0, or a second before a negative start (timestamps
        # unwrapped across the 33-bit MPEG-TS wrap count up from below zero)
        self._head_ts = int(first) - int(1.0 / self._tb) if first is not None and first < 0 else 0
        self._unindexed = is_unindexed(self._container)
        self._back = 0.0  # how far before its target a seek aims (grows on containers without index)
        self._iter = None
        self._prev = None  # the two most recent decoded frames: the window a target falls into
        self._cur = None

    def _time(self, frame) -> float:  # type: ignore[no-untyped-def]
        return float(frame.pts) * self._tb - self._offset

    def _convert(self, frame) -> DecodedFrame:  # type: ignore[no-untyped-def]
        w, h = self.coded_size
        # one scaler for the decoder's life: ``to_ndarray(width=...)`` builds a new one per frame, which
        # costs as much as the scaling itself; the pixels are the same
        rgb = self._reformatter.reformat(frame, width=w, height=h, format="rgb24")
        image = self.upright(rgb.to_ndarray())
        return DecodedFrame(time=round(self._time(frame), 6), image=image)

    def _packets(self):  # type: ignore[no-untyped-def]
        """(packet, trusted) from the current position: is the packet's timestamp to be believed?

        After a seek into an MPEG-PS/TS file the demuxer may start inside a frame, give that
        fragment the timestamp of the next frame header and guess the following timestamps from
        it, wrongly, until it reads the next real one (tiny P-frames share one timestamped packet).
        So there trust starts at a packet whose timestamp was read from the file (``pos`` set),
        and the first packet after a seek counts only if it is a keyframe. With an index: always.
        """
        trusted = not self._unindexed
        first = True
        for packet in self._container.demux(self._stream):
            if not trusted and packet.pos is not None and packet.pts is not None:
                trusted = packet.is_keyframe or not first
            first = False
            yield packet, trusted

    def _frames(self):  # type: ignore[no-untyped-def]
        """Decoded frames from the current position, in presentation order. In MPEG-PS/TS the
        decoder is fed from the first trusted keyframe on, and frames before it are dropped."""
        import av

        key_pts = None if self._unindexed else -1
        started = not self._unindexed
        try:
            for packet, trusted in self._packets():
                if key_pts is None:
                    if not (trusted and packet.is_keyframe and packet.pts is not None):
                        continue
                    key_pts = packet.pts
                for frame in packet.decode():
                    started = started or frame.pts == key_pts
                    if started and frame.pts is not None:
                        yield frame
        except av.error.FFmpegError as exc:
            raise MediaReadError(f"decoding failed in {self.path}: {exc}", code="decode_failed") from exc

    def _stream_ts(self, aim: float) -> int:
        # At the first frame aim at 0: the keyframe's dts precedes its pts (B-frames), and a
        # timestamp search in a .ts for the first pts lands one packet after that keyframe.
        if aim > self._first:
            return int((aim + self._offset) / self._tb)
        return self._head_ts

    def _start(self, target: int) -> None:
        """Seek to stream timestamp ``target`` (at or before) and decode the first frame there."""
        self._container.seek(target, stream=self._stream, backward=True, any_frame=False)
        self._iter = self._frames()
        self._prev = None
        self._cur = next(self._iter, None)

    def _key_before(self, t: float) -> int | None:
        """dts of the last keyframe at or before ``t`` in a container without an index, found by
        demuxing without decoding (cheap) from 1, 2, 4, ... (at most 64) s before ``t``. A seek to
        it then lands on it; a plain seek to ``t`` lands mid-GOP and the decoder waits for the next.
        """
        back = max(self._back, 1.0)
        while True:
            aim = max(t - back, self._first)
            self._container.seek(self._stream_ts(aim), stream=self._stream, backward=True, any_frame=False)
            key = None
            for packet, trusted in self._packets():
                slack = 0.0 if trusted else 5.0  # untrusted times may be a few frames off
                if packet.dts is not None and packet.dts * self._tb - self._offset > t + slack:
                    break  # a keyframe's pts is at or after its dts: none to come at or before t
                if trusted and packet.is_keyframe and packet.pts is not None and packet.dts is not None:
                    if packet.pts * self._tb - self._offset > t + 1e-6:
                        break
                    key = packet.dts
            if key is not None or aim <= self._first or back >= 64.0:
                self._back = back if key is not None else self._back
                return key
            back *= 2

    def _seek(self, t: float) -> None:
        """Put the decoder on a frame at or before ``t`` (or on the stream's first frame).

        With an index one seek does it. Without one (MPEG-PS/TS) seek to the keyframe that
        :meth:`_key_before` found; should that still land after ``t`` or past the data, aim
        1, 2, 4, ... s earlier until the first decoded frame is at or before ``t``.
        """
        if self._unindexed and (key := self._key_before(t)) is not None:
            self._start(key)
            if self._cur is not None and self._time(self._cur) <= t + 1e-6:
                return
        back = self._back
        while True:
            aim = max(t - back, self._first)
            self._start(self._stream_ts(aim))
            if (self._cur is not None and self._time(self._cur) <= t + 1e-6) or aim <= self._first:
                break
            back = max(1.0, 2 * back)
        if self._unindexed:
            self._back = back
        if self._cur is None:
            raise MediaReadError(
                f"no frame at or after {t:.2f}s in {self.path} (file truncated or damaged)",
                code="media_truncated",
            )

    def library_errors(self) -> tuple[type[BaseException], ...]:
        import av

        return (av.error.FFmpegError, OSError)

    def _forget(self) -> None:
        self._iter = self._prev = self._cur = None

    def _last_frame(self, hint: float) -> tuple[float, float | None]:
        """Seek to the keyframe before ``hint`` (earlier while that lands past the data) and decode
        to the end: about one GOP of work, not a full decode. The display end uses the frame's own
        duration (a slideshow's last picture may stay up for seconds)."""
        back = self._back  # a seek past the data says nothing about seeks inside it
        self._seek(max(hint, self._first))
        last = self._cur
        for frame in self._iter:
            last = frame
        self._iter = self._prev = self._cur = None
        self._back = back
        t = self._time(last)
        return t, (t + float(last.duration) * self._tb if last.duration else None)

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

    def _landing(self, t: float) -> float | None:
        """The time of the keyframe a seek to ``t`` lands on, read from the demuxer's index (no I/O),
        or None where the index cannot say: a container without one, or an index that ends before ``t``."""
        if self._unindexed:
            return None
        entries = self._stream.index_entries
        target = self._stream_ts(t)
        if not len(entries) or entries[len(entries) - 1].timestamp < target:
            return None
        i = entries.search_timestamp(target, backward=True, any_frame=False)
        return None if i < 0 else entries[i].timestamp * self._tb - self._offset

    def _read(self, times: list[float], spacing: float, plan: ReadPlan) -> list[DecodedFrame]:
        out: list[DecodedFrame] = []
        tol = plan.snap_tolerance * spacing if spacing > 0 else 0.0
        for t in times:
            here = None if self._cur is None else self._time(self._cur)
            floor = here if self._prev is None else self._time(self._prev)
            behind = here is None or t < floor  # no position yet, or the target lies behind it
            far = behind or t - here > plan.forward_gap_s
            landing = None if behind else self._landing(t)
            if behind or (far if landing is None else landing > here):
                self._seek(t)
                key_time = self._time(self._cur)
                if far and key_time <= t and t - key_time <= tol:
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
    read-ahead thread from decoding (and growing memory) while idle.

    Not used for MPEG-PS/TS (frames 6 to 25 positions off, measured) nor rotated videos (decord
    0.6 turns them but squashes them into the stored width x height, and asking for the upright
    size fails a buffer-size check or returns 4 channels): :func:`make_decoder` uses PyAV there."""

    seeks_unindexed = False
    rotates = False
    confines = False

    def _open(self) -> None:
        path, size, threads = self.path, self.size, self.threads
        try:
            import decord
        except ImportError as exc:
            raise ImportError("the decord backend needs `pip install omniagent[decord]`") from exc
        with open_container(path, self.access) as c:  # refuses what FFmpeg's whitelists refuse
            s = c.streams.video[0]
            # decord counts from the video stream's start; PyAV's zero is the container's
            stream_start = float(s.start_time * s.time_base) if s.start_time is not None else 0.0
            offset = (c.start_time / 1_000_000 if c.start_time is not None else 0.0) - stream_start
        try:  # a name is a file: the explicit file: protocol, as for PyAV
            url = input_url(path, self.access)
            self._vr = decord.VideoReader(
                url, ctx=decord.cpu(0), width=size[0], height=size[1], num_threads=threads
            )
        except decord.DECORDError as exc:
            raise MediaError(path, f"decord cannot open it ({exc})", code="media_unreadable") from exc
        stamps = self._vr.get_frame_timestamp(range(len(self._vr))) - offset  # (start, end) per frame
        self._times, self._ends = stamps[:, 0], stamps[:, 1]
        self._keys = np.asarray(self._vr.get_key_indices(), dtype=np.int64)

    def library_errors(self) -> tuple[type[BaseException], ...]:
        import decord

        return (decord.DECORDError, OSError)

    def _read(self, times: list[float], spacing: float, plan: ReadPlan) -> list[DecodedFrame]:
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

    def _last_frame(self, hint: float) -> tuple[float, float | None]:
        return float(self._times[-1]), float(self._ends[-1])  # decord indexed every packet at open
