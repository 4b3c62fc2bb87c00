"""Media access: every frame is the one at its reported time, audio holds the right sound at the
right second, and broken files fail at open with one clear exception type."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import BURSTS
from media_factory import make_audio, make_vfr_video, read_barcode, tone_energy

from envs.errors import MediaError, MediaReadError
from envs.media import MediaConfig, open_media, output_size

FPS = 10
HAS_DECORD = importlib.util.find_spec("decord") is not None
BACKENDS = [
    "pyav",
    pytest.param("decord", marks=pytest.mark.skipif(not HAS_DECORD, reason="decord not installed")),
]


def assert_exact(frames, fps=FPS):
    for f in frames:
        assert read_barcode(f.image) == round(f.time * fps), (
            f"frame at {f.time}s shows index {read_barcode(f.image)}"
        )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("start", "end", "num"),
    [
        (0.0, 19.9, 32),
        (0.0, 19.9, 4),
        (3.0, 5.0, 16),
        (7.3, 7.3, 1),
        (0.0, 19.9, 1),
        (12.05, 12.95, 7),
        (0.0, 19.9, 200),
    ],
)
def test_frames_are_exact_at_reported_times(
    video_path: Path, backend: str, start: float, end: float, num: int
) -> None:
    with open_media(video_path, MediaConfig(backend=backend)) as m:
        frames = m.frames(start, end, num)
    assert len(frames) == num
    assert_exact(frames)
    assert [f.time for f in frames] == sorted(f.time for f in frames)
    assert all(start - 2.5 - 1e-6 <= f.time <= end + 0.1 for f in frames)


@pytest.mark.parametrize("backend", BACKENDS)
def test_narrow_window_is_exact_to_the_frame(video_path: Path, backend: str) -> None:
    with open_media(video_path, MediaConfig(backend=backend)) as m:
        frames = m.frames(3.0, 5.0, 21)
    assert [round(f.time, 3) for f in frames] == [round(3.0 + 0.1 * i, 3) for i in range(21)]
    assert_exact(frames)


@pytest.mark.parametrize("backend", BACKENDS)
def test_wide_scan_snaps_to_keyframes_and_reports_their_times(video_path: Path, backend: str) -> None:
    # GOP 25 at 10 fps: keyframes every 2.5 s. Spacing 6.63 s > GOP, so each frame is a keyframe.
    with open_media(video_path, MediaConfig(backend=backend)) as m:
        frames = m.frames(0.0, 19.9, 4)
    times = [f.time for f in frames]
    assert all(abs(t / 2.5 - round(t / 2.5)) < 1e-6 for t in times), times
    assert times != [0.0, 6.633333, 13.266667, 19.9]  # the true times, not the requested ones
    assert_exact(frames)


def test_variable_frame_rate_frames_are_exact(tmp_path: Path) -> None:
    times = np.cumsum(np.random.default_rng(3).uniform(0.03, 0.4, 120))
    path = make_vfr_video(tmp_path / "vfr.mp4", list(times))
    rel = times - times[0]
    with open_media(path) as m:
        for start, end, num in [(0, rel[-1], 9), (5.0, 7.0, 12), (rel[40], rel[41], 2)]:
            for f in m.frames(start, end, num):
                assert abs(rel[read_barcode(f.image)] - f.time) < 2e-3


def test_frames_are_resized_to_the_cap(video_path: Path) -> None:
    with open_media(video_path, MediaConfig(max_side=64)) as m:
        (f,) = m.frames(1.0, 1.0, 1)
    assert f.image.shape == (36, 64, 3) and f.image.dtype == np.uint8
    assert output_size(1920, 1080, 448) == (448, 252)
    assert output_size(100, 50, 448) == (100, 50)


def test_audio_has_the_tone_at_the_right_second(video_path: Path) -> None:
    with open_media(video_path) as m:
        burst = m.audio(3.0, 4.0)
        quiet = m.audio(6.0, 7.0)
        high = m.audio(12.0, 12.5)
    assert burst.dtype == np.float32 and burst.ndim == 1 and len(burst) == 16_000
    assert tone_energy(burst, 1000) > 0.8
    assert np.abs(quiet).max() < 0.01
    assert tone_energy(high, 2000) > 0.8 and tone_energy(high, 1000) < 0.05
    # Downmix is swresample's normalised matrix, (L+R)/2: two equal 0.5-amplitude channels stay at 0.5.
    assert 0.45 < np.abs(burst).max() < 0.55


def test_clip_has_frames_at_fps_and_synced_audio(video_path: Path) -> None:
    with open_media(video_path) as m:
        clip = m.clip(2.0, 5.0, fps=2.0)
    assert [f.time for f in clip.frames] == [2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
    assert_exact(clip.frames)
    assert clip.audio is not None and len(clip.audio) == 48_000
    assert tone_energy(clip.audio[16_000:32_000], 1000) > 0.8  # the burst at 3-4 s sits in the middle second


@pytest.mark.parametrize("suffix", [".wav", ".flac", ".mp3", ".m4a"])
def test_audio_only_files(tmp_path: Path, suffix: str) -> None:
    if suffix in (".mp3", ".m4a") and not shutil.which("ffmpeg"):
        pytest.skip("ffmpeg CLI needed to encode mp3/m4a")
    path = make_audio(tmp_path / f"a{suffix}", duration=10.0, bursts=[BURSTS[0]])
    with open_media(path) as m:
        assert not m.info.has_video and m.info.has_audio
        assert 9.9 < m.info.duration < 10.2
        assert tone_energy(m.audio(3.1, 3.9), 1000) > 0.8
        with pytest.raises(MediaReadError) as err:
            m.frames(0, 1, 2)
        assert err.value.code == "no_video"
        with pytest.raises(MediaReadError):
            m.clip(0, 1, 2.0)


def test_silent_video_refuses_audio(silent_video_path: Path) -> None:
    with open_media(silent_video_path) as m:
        assert m.info.has_video and not m.info.has_audio
        with pytest.raises(MediaReadError) as err:
            m.audio(0, 1)
        assert err.value.code == "no_audio"
        clip = m.clip(1.0, 2.0, 2.0)
        assert clip.audio is None and len(clip.frames) == 3


def test_audio_past_the_track_end_is_an_error(audio_path: Path) -> None:
    with open_media(audio_path) as m:
        with pytest.raises(MediaReadError) as err:
            m.audio(25.0, 26.0)
        assert err.value.code == "audio_out_of_range"


# ------------------------------------------------------------------ broken files
def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _truncate(src: Path, dst: Path, keep: float) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * keep)])
    return dst


@pytest.mark.parametrize(
    ("name", "maker", "code"),
    [
        ("missing", lambda d, v: d / "nope.mp4", "media_not_found"),
        ("empty", lambda d, v: _write(d / "empty.mp4", b""), "media_empty"),
        ("text", lambda d, v: _write(d / "notes.mp4", b"not a video at all\n" * 50), "media_unreadable"),
        (
            "random",
            lambda d, v: _write(d / "noise.mkv", np.random.default_rng(0).bytes(40_000)),
            "media_unreadable",
        ),
        ("truncated_index_at_end", lambda d, v: _truncate(v, d / "cut.mp4", 0.6), "media_unreadable"),
        ("a_directory", lambda d, v: d, "media_not_found"),
    ],
)
def test_unusable_files_raise_media_error(
    tmp_path: Path, video_path: Path, name: str, maker, code: str
) -> None:
    path = maker(tmp_path, video_path)
    with pytest.raises(MediaError) as err:
        open_media(path)
    assert err.value.code == code, err.value
    assert str(path) in str(err.value)


def test_truncated_file_with_index_at_front_fails_at_open(tmp_path: Path, video_path: Path) -> None:
    if not shutil.which("ffmpeg"):
        pytest.skip("ffmpeg CLI needed")
    fast = tmp_path / "fast.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-i",
            str(video_path),
            "-c",
            "copy",
            "-movflags",
            "+faststart",
            str(fast),
        ],
        check=True,
    )
    cut = _truncate(fast, tmp_path / "fastcut.mp4", 0.5)
    with pytest.raises(MediaError) as err:
        open_media(cut)
    assert err.value.code == "media_truncated"
    assert "truncated" in str(err.value)


def test_garbage_in_the_middle_never_crashes(tmp_path: Path, video_path: Path) -> None:
    data = bytearray(video_path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 4000] = np.random.default_rng(1).bytes(4000)
    bad = tmp_path / "holes.mp4"
    bad.write_bytes(bytes(data))
    try:
        m = open_media(bad)
    except MediaError:
        return
    with m:
        for start, end, num in [(0, 19.9, 20), (8, 12, 41)]:
            try:
                frames = m.frames(start, end, num)
            except MediaReadError as exc:
                assert exc.code in ("decode_failed", "media_truncated")
                continue
            assert len(frames) == num
