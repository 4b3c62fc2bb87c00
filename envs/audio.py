"""Audio spans decoded straight from the file, placed on the container's timeline.

Why no cache: decoding just the requested span (seek, decode, resample) costs tens of milliseconds
per 10 s span anywhere in an hour-long AAC file (numbers in the README, from
``scripts/bench/media.py``), while the former 16 kHz WAV cache paid a full extraction before the
first request, about 110 MB of disk per hour, and brought its own failures (full or unwritable
dirs, stale or foreign files, orphaned extractions). It also counted samples and ignored
timestamps, so audio with gaps drifted from the video.

Timeline: second 0 is the container's start (the earliest stream), as for frames. Each decoded
frame is placed at its presentation time: a gap (files joined with concat, ``-stream_loop``,
dropped or damaged packets) is filled with silence and an overlap is trimmed, which is what
ffmpeg's ``aresample=async=1:first_pts=0`` does. A sound at time t in the file is at t here.
Placement is sample-exact for MP4, WAV, FLAC, MP3, Ogg and MPEG-TS. Matroska/WebM store
milliseconds, so a frame's stored time is up to a millisecond off: it is put back on the track's
sample grid (the start of the track plus whole frames), which is where a decode from the start puts
it, whenever that lies within a millisecond of the stored time. Raw AC-3 files get parser-made
90 kHz timestamps that run slow by 0.7 ticks a frame; they are followed as they are.

Damage: a packet the decoder refuses is skipped (its time stays silent, as ffmpeg drops it) and
its span is reported (:attr:`AudioSpan.damaged`), so the model is told the audio there could not be
decoded instead of hearing silence as if it were the recording.

Downmix and rate: libswresample, the same code and matrix as ``ffmpeg -ac 1 -ar 16000 -f s16le``
(the way Whisper-style loaders read audio). For integer output swresample normalises the matrix so
the mix never clips: stereo becomes (L+R)/2; 5.1 weighs the centre 1, the front pair 1/sqrt(2),
the surround pair 1/2 and drops the LFE, all divided by their sum.

Threads: a PyAV container must not be shared between threads, so each thread gets its own.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.errors import MediaError, MediaReadError
from envs.media_access import MediaAccess, open_container
from envs.messages import SAMPLE_RATE

PREROLL_S = 0.5  # decode this much before a span so the codec and resampler have settled
POSTROLL_S = 0.05  # and this much after, so the resampler's filter sees past the span's last sample
CONTINUITY_S = 0.02  # a frame further than this from where its run predicts starts a new run
SHORT_END_S = 0.5  # a track may end this much before the file without it being called damaged


def _skip_to_grid(t: float, rate: int) -> tuple[int, float]:
    """Input samples to drop at a run's start so it begins on an instant both sample grids share
    (every 10 ms for 44.1 kHz): its output samples then fall where a decode from the file's start
    puts them, sample for sample."""
    grid = math.gcd(rate, SAMPLE_RATE)
    aligned = math.ceil(t * grid - 1e-6) / grid
    return int(round((aligned - t) * rate)), aligned


def _trim_front(frame: Any, skip: int) -> Any:
    """The frame without its first ``skip`` samples."""
    import av

    data = frame.to_ndarray()
    step = 1 if frame.format.is_planar else len(frame.layout.channels)
    out = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(data[:, skip * step :]), format=frame.format.name, layout=frame.layout.name
    )
    out.sample_rate = frame.sample_rate
    return out


@dataclass
class _Timeline:
    """Output buffer of samples [first, first + len(out)) at 16 kHz, filled run by run.

    A run is a stretch of decoded frames whose timestamps follow on from each other; each run is
    resampled on its own and written at its first frame's time, so gaps stay silent and samples
    that would overwrite earlier ones (an overlap) are dropped.
    """

    first: int
    out: np.ndarray
    filled: int = -(2**62)  # absolute index of the first sample not yet written
    end_seen: float = float("-inf")  # end time of the latest decoded frame
    _resampler: Any = None
    _pos: int = 0  # absolute index where the resampler's next output sample goes
    _run_t0: float = 0.0
    _run_in: int = 0  # input samples taken into the current run
    _run_fmt: tuple[int, str, str] = (0, "", "")

    def push(self, frame: Any, t: float) -> None:
        import av

        rate = frame.sample_rate
        fmt = (rate, frame.format.name, frame.layout.name)
        self.end_seen = max(self.end_seen, t + frame.samples / rate)
        expected = self._run_t0 + self._run_in / rate
        if self._resampler is None or fmt != self._run_fmt or abs(t - expected) > CONTINUITY_S:
            self.flush()
            skip, t = _skip_to_grid(t, rate)
            if skip >= frame.samples:
                return  # the frame ends before the next shared instant: the run starts later
            if skip > 0:
                frame = _trim_front(frame, skip)
            self._resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
            self._pos = int(round(t * SAMPLE_RATE))
            self._run_t0, self._run_in, self._run_fmt = t, 0, fmt
        self._run_in += frame.samples
        frame.pts = None  # the resampler only counts samples; placement is done here
        for out in self._resampler.resample(frame):
            self._write(out)

    def flush(self) -> None:
        if self._resampler is not None:
            for out in self._resampler.resample(None):
                self._write(out)
            self._resampler = None

    def _write(self, frame: Any) -> None:
        data = frame.to_ndarray().reshape(-1)
        lo, hi = self._pos, self._pos + len(data)
        self._pos = hi
        lo_keep = max(lo, self.filled, self.first)  # never overwrite: trim overlaps
        hi_keep = min(hi, self.first + len(self.out))
        if hi_keep > lo_keep:
            chunk = data[lo_keep - lo : hi_keep - lo].astype(np.float32) / 32768.0
            self.out[lo_keep - self.first : hi_keep - self.first] = chunk
        self.filled = max(self.filled, hi)


@dataclass
class AudioSpan:
    """Samples of one span and the parts of it whose packets could not be decoded (silent there)."""

    samples: np.ndarray
    damaged: list[tuple[float, float]] = field(default_factory=list)  # (start s, end s), merged


def _merge(spans: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """``spans`` cut to [start, end), overlapping or touching ones joined."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        a, b = max(a, start), min(b, end)
        if b <= a:
            continue
        if out and a <= out[-1][1] + 1e-3:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


class AudioReader:
    """16 kHz mono float32 spans of a file's first audio stream, decoded on demand."""

    def __init__(self, path: str, access: MediaAccess | None = None) -> None:
        self.path = path
        self.access = access or MediaAccess()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._containers: list[Any] = []
        container, stream = self._open()
        start = container.start_time
        self.origin = start / 1_000_000 if start is not None else 0.0  # av.time_base
        self.tb = float(stream.time_base)
        self.start, self.end = self._extent(container, stream)
        self.declared_end = stream.duration is not None  # else the container's end, learnt on EOF

    def _extent(self, container: Any, stream: Any) -> tuple[float, float]:
        """Where the audio stream starts and ends on the container's timeline (from the header)."""
        s0 = (
            float(stream.start_time * stream.time_base) - self.origin
            if stream.start_time is not None
            else 0.0
        )
        if stream.duration is not None:
            return s0, s0 + float(stream.duration * stream.time_base)
        total = container.duration / 1_000_000 if container.duration is not None else math.inf
        return s0, total  # unknown: learnt when decoding reaches the end

    def _open(self, fresh: bool = False) -> tuple[Any, Any]:
        """This thread's own container (PyAV containers must not cross threads); ``fresh``: a new
        one, read from the start."""

        held = getattr(self._local, "held", None)
        if held is not None and fresh:
            with self._lock:
                self._containers.remove(held[0])
            held[0].close()
            held = None
        if held is None:
            try:
                container = open_container(self.path, self.access)
            except MediaError as exc:
                raise MediaReadError(
                    f"the audio track cannot be opened: {exc.reason}", code="bad_audio"
                ) from exc
            if not container.streams.audio:
                container.close()
                raise MediaReadError("the file has no audio track any more", code="bad_audio")
            held = (container, container.streams.audio[0])
            self._local.held = held
            with self._lock:
                self._containers.append(container)
        return held

    def read(self, start: float, end: float) -> np.ndarray:
        """The samples of :meth:`read_span`."""
        return self.read_span(start, end).samples

    def read_span(self, start: float, end: float) -> AudioSpan:
        """Samples of [start, end): sample k is at time (round(start * 16000) + k) / 16000.

        Parts of the span with no audio (a gap, before the track starts, after it ends) are
        silence, as a player plays them; parts whose packets the decoder refused are silence too,
        and listed in ``damaged``. A span wholly past the track's end is an error
        (``audio_out_of_range``), and so is a track that stops more than ``SHORT_END_S`` before the
        end its header declares (``media_truncated``): never silence in place of missing data.
        """
        first, last = int(round(start * SAMPLE_RATE)), int(round(end * SAMPLE_RATE))
        self._check_start(start)
        line = _Timeline(first=first, out=np.zeros(max(last - first, 0), np.float32))
        damaged: list[tuple[float, float]] = []
        ran_out = self._decode_into(line, start, end, damaged)
        span = AudioSpan(line.out, _merge(damaged, start, end))
        if not ran_out:
            return span  # decoding reached the span's end
        seen = max(line.end_seen, self.start)
        if seen >= min(end, self.end) - SHORT_END_S:
            return span  # the track ends inside the span: the rest is silence
        if self.declared_end:
            raise MediaReadError(
                f"audio decoding stopped at {seen:.2f}s but the track is declared to run to "
                f"{self.end:.2f}s (file truncated or damaged)",
                code="media_truncated",
            )
        self.end = seen  # no stream duration in the header: the end is learnt from the data
        self._check_start(start)
        return span

    def _check_start(self, start: float) -> None:
        if start >= self.end:
            raise MediaReadError(
                f"audio requested from {start:.2f}s but the audio track ends at {self.end:.2f}s",
                code="audio_out_of_range",
            )

    def _decode_into(
        self, line: _Timeline, start: float, end: float, damaged: list[tuple[float, float]]
    ) -> bool:
        """Seek to at or before ``start`` (further back when the demuxer lands late or past the
        data), then decode a little past ``end``. True if the data ran out first. Spans of packets
        the decoder refused are appended to ``damaged``."""
        import av

        container, stream = self._open()
        back = PREROLL_S
        try:
            while True:
                target = max(start - back, self.start)
                try:
                    container.seek(int((target + self.origin) / self.tb), stream=stream, backward=True)
                except av.error.FFmpegError:  # an unseekable input: from the top
                    container, stream = self._open(fresh=True)
                    target = self.start
                damaged.clear()
                frames = self._frames(container, stream, damaged)
                head = next(frames, None)
                if (head is not None and head[1] <= start + 1e-3) or target <= self.start:
                    break
                back *= 4  # containers without an index (.ts, .mpg) may land after the target
            while head is not None and head[1] < end + POSTROLL_S:
                line.push(*head)
                head = next(frames, None)
        except (av.error.FFmpegError, OSError) as exc:
            self._open(fresh=True)  # the container's state is unknown: the next read starts anew
            raise MediaReadError(f"the audio track cannot be decoded: {exc}", code="bad_audio") from exc
        line.flush()
        return head is None

    def _on_grid(self, t: float, frame: Any) -> float:
        """A time stored coarser than one sample (Matroska's milliseconds) put back on the track's
        sample grid, the track's start plus whole frames, if that is within one tick of it (a
        muxer that shifted the track, e.g. past an encoder delay, rounds off the grid by up to 0.72
        ms, measured)."""
        rate, n = frame.sample_rate, frame.samples
        if self.tb * rate <= 1.0 or not n or not rate:
            return t
        exact = self.start + round((t - self.start) * rate / n) * n / rate
        return exact if abs(exact - t) <= self.tb + 1e-9 else t

    def _frames(self, container: Any, stream: Any, damaged: list[tuple[float, float]]):  # type: ignore[no-untyped-def]
        """(frame, time) pairs from the current position; packets the decoder refuses are skipped
        (a gap) and their spans appended to ``damaged``."""
        import av

        expected: float | None = None
        for packet in container.demux(stream):
            try:
                decoded = packet.decode()
            except (av.error.InvalidDataError, av.error.UndefinedError, av.error.PatchWelcomeError):
                if packet.pts is not None:
                    t = packet.pts * self.tb - self.origin
                    length = packet.duration * self.tb if packet.duration else 0.0
                    damaged.append((t, t + length))
                continue
            for frame in decoded:
                if frame.pts is not None:
                    t = self._on_grid(frame.pts * self.tb - self.origin, frame)
                elif expected is not None:
                    t = expected
                else:
                    continue
                expected = t + frame.samples / frame.sample_rate
                yield frame, t

    def close(self) -> None:
        """Close every thread's container; call when no read is in flight."""
        with self._lock:
            for container in self._containers:
                container.close()
            self._containers.clear()
        self._local = threading.local()
