"""The read plan's choice between seeking and decoding forward (envs/decoders.py, PyAV): it takes the
path that decodes fewer frames, judged by where the keyframes are, and serves the same frames either
way. Decodes are counted at the decoder's frame generator; every served frame is checked by its
barcode (the frame index at 30 fps)."""

from __future__ import annotations

from pathlib import Path

import pytest
from media_factory import ffmpeg, make_video, read_barcode

from envs.decoders import PyAVDecoder, ReadPlan, make_decoder

FPS = 30


def counted(dec: PyAVDecoder) -> list[int]:
    """Count the frames ``dec`` decodes from now on (its frame generator, after every seek)."""
    count = [0]
    frames = dec._frames

    def counting():  # type: ignore[no-untyped-def]
        for frame in frames():
            count[0] += 1
            yield frame

    dec._frames = counting  # type: ignore[method-assign]
    return count


def read(path: Path, times: list[float]) -> tuple[list[float], int]:
    """(served times, frames decoded) for one look at ``times``, each served frame checked exact."""
    dec = make_decoder("pyav", str(path), (128, 72))
    try:
        count = counted(dec)  # type: ignore[arg-type]
        frames = dec.read(times, times[1] - times[0] if len(times) > 1 else 0.0, ReadPlan())
    finally:
        dec.close()
    for f in frames:
        assert read_barcode(f.image) == round(f.time * FPS), f"the frame served at {f.time}s is another"
    return [f.time for f in frames], count[0]


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """10 s at 30 fps with a keyframe every 2 s, 25 frames and 10 s."""
    work = tmp_path_factory.mktemp("plan")
    return {
        gop: make_video(work / f"gop{gop}.mp4", 10.0, fps=FPS, gop=gop, audio=False) for gop in (60, 25, 300)
    }


def test_frames_forward_gap_apart_seek_to_keyframes(videos: dict[int, Path]) -> None:
    """Frames exactly ``forward_gap_s`` apart, each on a keyframe: one decode each (decoding forward
    between them decoded all 181 frames)."""
    assert ReadPlan().forward_gap_s == 2.0
    times, decodes = read(videos[60], [0.0, 2.0, 4.0, 6.0])
    assert times == [0.0, 2.0, 4.0, 6.0] and decodes <= 6


def test_a_dense_window_seeks_past_keyframes_and_stays_exact(videos: dict[int, Path]) -> None:
    """One frame a second over 0.83 s keyframes: every nearest frame, fewer decodes than all 91 between."""
    times, decodes = read(videos[25], [0.0, 1.0, 2.0, 3.0])
    assert times == [0.0, 1.0, 2.0, 3.0] and decodes <= 45
    times, decodes = read(videos[60], [1.0, 2.9, 4.8])  # the seek lands at 2 s and 4 s: skips 1-2 s, 2.9-4 s
    assert times == [1.0, 2.9, 4.8] and decodes <= 90


def test_a_long_gop_decodes_forward_however_far(videos: dict[int, Path]) -> None:
    """One keyframe in 10 s: a seek would go back to it for every frame (90 + 180 + 270 decodes);
    decoding forward reads each frame once, far targets included."""
    times, decodes = read(videos[300], [0.0, 3.0, 6.0, 9.0])
    assert times == [0.0, 3.0, 6.0, 9.0] and decodes <= 9 * FPS + 5


def test_without_an_index_the_distance_decides(videos: dict[int, Path], tmp_path: Path) -> None:
    """MPEG-TS has no seek index to ask: targets forward_gap_s apart are decoded forward to, exactly."""
    ts = tmp_path / "gop60.ts"
    ffmpeg("-i", videos[60], "-c", "copy", ts)
    dec = make_decoder("pyav", str(ts), (128, 72))
    try:
        first = dec._first  # type: ignore[attr-defined]
        assert dec._landing(4.0) is None  # type: ignore[attr-defined]
        frames = dec.read([first, first + 2.0, first + 4.0], 2.0, ReadPlan())
    finally:
        dec.close()
    assert (
        [round((f.time - first) * FPS) for f in frames]
        == [read_barcode(f.image) for f in frames]
        == [0, 60, 120]
    )


def test_decoder_threads_follow_the_limits_and_serve_the_same_frames(videos: dict[int, Path]) -> None:
    """``decode_threads=1`` (an evaluation's default) decodes in the caller's thread; the frames are
    the same as with the decoder's own choice of threads."""
    from envs.limits import EnvLimits
    from envs.media import MediaConfig, MediaSource

    served = {}
    for threads in (0, 1):
        source = MediaSource(
            videos[25], MediaConfig.from_limits(EnvLimits(decode_threads=threads, max_side=128))
        )
        try:
            count = source._decoder._stream.codec_context.thread_count  # type: ignore[union-attr]
            assert (count == 1) == (threads == 1)  # 0: FFmpeg's choice, one per core and one more
            served[threads] = [(f.time, f.image.tobytes()) for f in source.frames(0.0, 9.9, 12)]
        finally:
            source.close()
    assert served[0] == served[1]
