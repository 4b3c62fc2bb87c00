"""Real-world files read exactly: the tail after the last video frame, MPEG-TS and Matroska remuxes,
MPEG-PS ends, the 33-bit MPEG-TS timestamp wrap, mirrored and rotated display matrices, audio over
damaged data. Frames are checked against the ffmpeg CLI's sequential decode of the same file (with
their pts), audio against ffmpeg's decode of the whole track (see media_factory / audio_factory).

Why not ``ffmpeg -ss T -i file.ts -frames:v 1``: on MPEG-TS/PS the CLI's input seek lands on the next
keyframe or past the data (measured with ffmpeg 5.1: for a target of 21.62 s in a .ts remux it
returned the keyframe at 22.82 s), so it is no reference there; a decode from the start is.
"""

from __future__ import annotations

import functools
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from audio_factory import LSB, SR
from audio_factory import ffmpeg_decode as decode_audio
from media_factory import ffmpeg, ffmpeg_decode, make_audio, make_video, read_barcode

from envs.decoders import DecodedFrame, ReadPlan
from envs.env import OmniVideoEnv
from envs.media import MediaConfig, open_media

pytestmark = pytest.mark.skipif(not shutil.which("ffmpeg"), reason="the ffmpeg CLI is the reference")
EXACT = ReadPlan(snap_tolerance=0.0)


@functools.cache
def reference(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return ffmpeg_decode(path)


def assert_ffmpegs(frames: list[DecodedFrame], path: Path, targets: list[float]) -> None:
    """Each frame is ffmpeg's frame at that time (pixels, barcode), and the nearest to its target."""
    times, _, images = reference(path)
    for f, t in zip(frames, targets, strict=True):
        i = int(np.argmin(np.abs(times - f.time)))
        assert abs(times[i] - f.time) < 2e-3, f"{f.time}s is no frame time of ffmpeg's decode"
        assert f.image.shape == images[i].shape
        assert np.abs(f.image.astype(int) - images[i]).mean() < 3.0, f"the frame at {f.time}s differs"
        assert read_barcode(f.image) == read_barcode(images[i])
        assert abs(f.time - t) <= np.abs(times - t).min() + 2e-3, f"{f.time}s is not the nearest to {t}s"


def assert_audio_equal(path: Path, spans: list[tuple[float, float]], lsb: float = 4) -> None:
    full = decode_audio(path)
    with open_media(path) as m:
        for start, end in spans:
            got = m.audio(start, end)
            want = full[int(round(start * SR)) : int(round(start * SR)) + len(got)]
            assert len(want) == len(got)
            assert np.abs(got - want).max() <= lsb * LSB, (start, end)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("exact")


@pytest.fixture(scope="module")
def camera(work: Path) -> Path:
    """20 s H.264 with B-frames (GOP 2.5 s) + AAC with long tones: what a camera or phone writes."""
    plain = make_video(
        work / "plain.mp4", 20.0, fps=10, gop=25, bursts=[(1.0, 18.0, 1000.0), (6.0, 3.0, 2500.0)]
    )
    out = work / "camera.mp4"
    ffmpeg("-i", plain, "-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-g", "25", "-keyint_min", "25",
           "-sc_threshold", "0", "-crf", "18", "-c:a", "copy", out)  # fmt: skip
    return out


# ------------------------------------------------------------------------------ the tail
def test_frames_after_the_video_but_before_the_audio_ends_are_its_last_frame(work: Path) -> None:
    """5.28 s of video (132 frames at 25 fps) in a file whose audio runs to 5.31 s: a frame asked
    for at 5.29 s is the last one, at 5.24 s, with a note; the episode goes on."""
    video = make_video(work / "v528.mp4", 5.28, fps=25, gop=25, audio=False)
    audio = make_audio(work / "a531.wav", 5.31, bursts=[(1.0, 1.0, 1000.0)])
    path = work / "tail.mp4"
    ffmpeg("-i", video, "-i", audio, "-c:v", "copy", "-c:a", "aac", path)
    env = OmniVideoEnv(path, "What is shown at the end?", task_type="num")
    _, info = env.reset()
    assert info["media"]["duration"] > 5.29 and info["media"]["video_end"] == pytest.approx(5.28, abs=0.01)
    turn = '{"observation": "-", "thought": "-", "action": {"type": "get_frames", "start": %s, "end": %s, "num": %d}}'
    _, _, _, _, info = env.step(turn % (5.29, 5.29, 1))
    assert info["error"] is None and info["timestamps"] == [pytest.approx(5.24, abs=1e-3)]
    assert any("The video ends at 5.28s" in n and "last frame, at 5.24s" in n for n in info["notes"])
    assert "last frame, at 5.24s" in env.messages[-1]["content"][0]["text"]
    _, _, _, _, info = env.step(turn % (5.0, 5.3, 4))
    assert info["error"] is None and info["timestamps"][-1] == pytest.approx(5.24, abs=1e-3)
    with open_media(path, MediaConfig(plan=EXACT)) as m:
        frames = m.frames(5.29, 5.29, 1) + m.frames(5.2, 5.24, 2)
        assert_ffmpegs(frames, path, [5.24, 5.2, 5.24])
        assert read_barcode(frames[0].image) == 131
    env.close()


def test_a_last_frame_ending_at_the_duration_is_served_at_the_duration(work: Path) -> None:
    path = make_video(work / "exact_end.mp4", 3.0, fps=10, gop=10, audio=False)  # frames 0.0 .. 2.9
    with open_media(path, MediaConfig(plan=EXACT)) as m:
        assert m.info.duration == pytest.approx(3.0) and m.info.video_end == pytest.approx(3.0)
        frames = m.frames(3.0, 3.0, 1) + m.frames(2.0, 3.0, 11)
        assert_ffmpegs(frames, path, [2.9, *np.linspace(2.0, 2.9, 10), 2.9])
        assert m.video_tail_note(2.0, 3.0) is None  # nothing past the video: no note
        assert m.clip(2.5, 3.0, 2.0).frames[-1].time == pytest.approx(2.9)


# -------------------------------------------------------------------------- containers
def test_mpeg_ts_remux_serves_ffmpegs_frames(camera: Path, work: Path) -> None:
    path = work / "camera.ts"
    ffmpeg("-i", camera, "-c", "copy", path)
    times = [0.0, 1.37, 2.49, 2.51, 7.77, 11.62, 12.3, 16.04, 19.9]  # mid-GOP, just before keyframes, the end
    with open_media(path, MediaConfig(plan=EXACT)) as m:
        frames = [m.frames(t, t, 1)[0] for t in times]
        assert_ffmpegs(frames, path, times)
        assert_ffmpegs(m.frames(11.0, 12.0, 11), path, list(np.linspace(11.0, 12.0, 11)))
    # the picture the mp4 it was remuxed from has at that time (its barcode counts frames at 10 fps)
    first = float(reference(path)[0][0])
    assert [read_barcode(f.image) for f in frames] == [round((f.time - first) * 10) for f in frames]


def test_matroska_remux_audio_equals_ffmpegs_decode_of_every_span(camera: Path, work: Path) -> None:
    """Matroska stores milliseconds: a mid-file span used to start up to 0.5 ms (8 samples) off."""
    path = work / "camera.mkv"
    ffmpeg("-i", camera, "-c", "copy", path)
    assert_audio_equal(path, [(13.5, 15.5), (5.0, 7.0), (10.01, 10.5), (0.0, 2.0), (17.0, 19.9)])


def test_mpeg_ps_frames_near_the_end_are_ffmpegs(work: Path) -> None:
    plain = make_video(work / "ps_src.mp4", 8.0, fps=25, gop=25, bursts=[(1.0, 6.0, 700.0)])
    path = work / "clip.mpg"
    ffmpeg("-i", plain, "-c:v", "mpeg2video", "-q:v", "2", "-g", "15", "-bf", "2", "-c:a", "mp2", path)
    last = float(reference(path)[0][-1])
    with open_media(path, MediaConfig(plan=EXACT)) as m:
        targets = [float(t) for t in np.arange(last - 1.0, last + 0.005, 0.04)]
        assert_ffmpegs([m.frames(t, t, 1)[0] for t in targets], path, targets)
        assert_ffmpegs(m.frames(7.0, 7.28, 8), path, list(np.linspace(7.0, 7.28, 8)))
        (f,) = m.frames(7.28, 7.28, 1)
        assert_ffmpegs([f], path, [7.28])


@pytest.mark.parametrize(
    ("seconds", "offset"),
    [(8.0, "95440"), (70.0, "95377")],
    ids=["starts-3s-before-the-wrap", "wraps-65s-in"],
)
def test_mpeg_ts_33_bit_timestamp_wrap_reads_across_it(work: Path, seconds: float, offset: str) -> None:
    """A broadcast capture whose 90 kHz clock passes 2^33 (95443.7 s) mid-file; FFmpeg unwraps it
    (timestamps before the wrap negative when the file starts within 60 s of it, else the later
    ones moved up), and every time is still counted from the container's start."""
    src = make_video(
        work / f"w{seconds:g}.mp4", seconds, fps=5, gop=10, size=(64, 36), bursts=[(seconds - 7, 5.0, 1000.0)]
    )
    path = work / f"wrap{seconds:g}.ts"
    ffmpeg("-i", src, "-c", "copy", "-output_ts_offset", offset, path)
    times = [float(t) for t in np.linspace(0.0, seconds - 0.2, 25)]
    with open_media(path, MediaConfig(max_side=64, plan=EXACT)) as m:
        assert m.info.duration == pytest.approx(seconds, abs=0.05)
        assert_ffmpegs([m.frames(t, t, 1)[0] for t in times], path, times)
        assert [read_barcode(m.frames(t, t, 1)[0].image) for t in (0.0, seconds - 0.2)] == [
            0,
            round(seconds * 5) - 1,
        ]
    # the spans (2, 5) and (64, 67) cross the wrap, at about 2.3 s and 65.3 s
    assert_audio_equal(path, [(0.0, 2.0), (seconds - 6.0, seconds - 3.0), (seconds / 2 - 1, seconds / 2 + 1)])


def _display_matrix(src: Path, dst: Path, a: int, b: int, c: int, d: int) -> Path:
    """``src`` with its video track's display matrix (the mp4 ``tkhd`` box) set to (a b; c d): the
    installed ffmpeg (5.1) has no -display_rotation/-display_hflip, so the box is written here."""
    data = bytearray(src.read_bytes())
    at = data.find(b"tkhd")
    assert at > 0 and data[at + 4] == 0  # version 0: the matrix follows 36 bytes of fields
    fixed = [a << 16, b << 16, 0, c << 16, d << 16, 0, 0, 0, 1 << 30]
    struct.pack_into(">9i", data, at + 4 + 4 + 20 + 8 + 8, *fixed)
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("backend", ["pyav", "decord"])
@pytest.mark.parametrize(
    "matrix",
    [
        (-1, 0, 0, 1),
        (1, 0, 0, -1),
        (-1, 0, 0, -1),
        (0, 1, 1, 0),
        (0, -1, 1, 0),
        (0, 1, -1, 0),
        (0, -1, -1, 0),
    ],
    ids=["hflip", "vflip", "rot180", "transpose", "rot-a", "rot-b", "antitranspose"],
)
def test_display_matrices_are_applied_as_ffmpeg_applies_them(
    work: Path, matrix: tuple[int, int, int, int], backend: str
) -> None:
    if backend == "decord":
        pytest.importorskip("decord")
    src = work / "small.mp4"
    if not src.exists():
        make_video(src, 2.0, fps=10, gop=10, audio=False)
    path = _display_matrix(src, work / f"m{'_'.join(map(str, matrix))}.mp4", *matrix)
    with open_media(path, MediaConfig(backend=backend, plan=EXACT)) as m:
        turned = matrix[0] == 0
        assert (m.info.width, m.info.height) == ((72, 128) if turned else (128, 72))
        assert m.info.mirrored == (np.linalg.det(np.array(matrix).reshape(2, 2)) < 0)
        assert_ffmpegs(m.frames(0.5, 1.5, 3), path, [0.5, 1.0, 1.5])


# ---------------------------------------------------------------------------- damage
def test_audio_over_a_damaged_region_comes_with_a_note(work: Path) -> None:
    """The AAC packets of 4-6 s overwritten with noise: that span is silence and the percept says
    it could not be decoded; the rest of the track is ffmpeg's decode, unchanged."""
    import av

    src = make_video(work / "to_damage.mp4", 10.0, fps=10, gop=25, bursts=[(1.0, 8.0, 440.0)])
    data = bytearray(src.read_bytes())
    rng = np.random.default_rng(7)
    with av.open(str(src)) as c:
        stream = c.streams.audio[0]
        for packet in c.demux(stream):
            if packet.pts is not None and 4.0 <= float(packet.pts * stream.time_base) < 6.0:
                data[packet.pos : packet.pos + packet.size] = rng.integers(
                    0, 256, packet.size, np.uint8
                ).tobytes()
    path = work / "damaged.mp4"
    path.write_bytes(bytes(data))
    with open_media(path) as m:
        span = m.audio_span(3.0, 7.0)
        ((a, b),) = span.damaged
        assert 3.9 < a < 4.1 and 5.9 < b < 6.1
        silent = span.samples[int((a - 3.0 + 0.1) * SR) : int((b - 3.0 - 0.1) * SR)]
        assert np.abs(silent).max() == 0.0
        assert m.audio_span(0.0, 3.5).damaged == [] and m.audio_span(7.0, 9.0).damaged == []
    assert_audio_equal(path, [(0.5, 3.5)])
    env = OmniVideoEnv(path, "What is heard?", task_type="num")
    env.reset()
    turn = '{"observation": "-", "thought": "-", "action": {"type": "get_audio", "start": 3.0, "end": 7.0}}'
    _, _, _, _, info = env.step(turn)
    assert info["error"] is None
    assert any("could not be decoded at 4.0" in n and "silence there" in n for n in info["notes"])
    env.close()
