"""Audio on the container's timeline: what get_audio serves is what ffmpeg decodes at that time.

Every check compares against ffmpeg's own decode of the same file (``-ac 1 -ar 16000``, with
``aresample=async=1:first_pts=0`` where the file has timestamp gaps) or against how the file was
built (a tone at a known second).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from audio_factory import (
    LSB,
    SR,
    SURROUND_FREQS,
    amplitude_at,
    best_lag,
    concat,
    delayed_audio,
    drop_audio_packets,
    ffmpeg,
    ffmpeg_decode,
    loop,
    onsets,
    overlapping_list,
    segment,
    surround,
    tones,
)
from media_factory import make_audio

from envs.audio import AudioReader
from envs.env import OmniVideoEnv
from envs.errors import MediaReadError
from envs.media import open_media
from envs.media_access import MediaAccess

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="the ffmpeg CLI is the reference")

SPANS = [(0.0, 2.0), (2.71, 4.33), (3.2, 3.7), (3.55, 3.9), (5.123, 9.5), (1.0, 9.9)]  # some end mid-tone


def span_of(reference: np.ndarray, start: float, n: int) -> np.ndarray:
    a = int(round(start * SR))
    return reference[a : a + n]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audio_timeline")


@pytest.fixture(scope="module")
def joined(work: Path) -> dict[str, Path]:
    """Three 5 s segments whose audio is 4 s long, a tone at 1 s in each: joined, the tones sit at
    1, 6 and 11 s with 1 s gaps in the audio; counting samples would put them at 1, 5 and 9 s."""
    parts = [segment(work / f"seg{k}.mp4", 5.0, 4.0, 1.0, 500.0 + 500 * k) for k in range(3)]
    return {
        "concat_mp4": concat(parts, work / "joined.mp4"),
        "concat_mkv": concat(parts, work / "joined.mkv"),
        "stream_loop_mp4": loop(parts[0], work / "looped.mp4", 2),
    }


@pytest.mark.parametrize("suffix", [".wav", ".flac", ".mp3", ".m4a", ".aac", ".ogg", ".opus"])
def test_spans_equal_ffmpeg_decode(work: Path, suffix: str) -> None:
    path = make_audio(work / f"plain{suffix}", duration=10.0, bursts=[(3.0, 1.0, 1000.0)])
    reference = ffmpeg_decode(path)
    reader = AudioReader(str(path))
    for start, end in SPANS:
        got = reader.read(start, end)
        assert len(got) == int(round(end * SR)) - int(round(start * SR))
        assert np.abs(got - span_of(reference, start, len(got))).max() <= 4 * LSB, (start, end)
    reader.close()


def test_stereo_video_spans_equal_ffmpeg_decode(video_path: Path) -> None:
    reference = ffmpeg_decode(video_path)
    with open_media(video_path) as m:
        for start, end in [(0.0, 20.0), (2.5, 4.5), (11.7, 12.8), (10.0, 20.0)]:
            got = m.audio(start, end)
            assert np.abs(got - span_of(reference, start, len(got))).max() <= 4 * LSB


@pytest.mark.parametrize("name", ["concat_mp4", "concat_mkv", "stream_loop_mp4"])
def test_sounds_stay_at_their_time_across_gaps(joined: dict[str, Path], name: str) -> None:
    path = joined[name]
    timeline = ffmpeg_decode(path, timeline=True)
    counted = ffmpeg_decode(path)
    assert onsets(counted)[2] < 9.2  # the file really has gaps: counting samples drifts by 2 s
    with open_media(path) as m:
        whole = m.audio(0.0, 14.0)
        expected = onsets(timeline)
        assert len(expected) == 3 and np.allclose(expected, [1.0, 6.0, 11.0], atol=0.03)
        assert np.allclose(onsets(whole), expected, atol=0.001)
        assert np.abs(whole[int(4.2 * SR) : int(4.9 * SR)]).max() == 0.0  # the gap is silent
        clip = m.clip(5.5, 6.8, 2.0)
        assert clip.audio is not None and np.array_equal(clip.audio, m.audio(5.5, 6.8))
        assert np.allclose(onsets(clip.audio), [expected[1] - 5.5], atol=0.001)
        for start, end in [(5.7, 6.9), (10.2, 11.8), (3.9, 5.2), (0.4, 12.0)]:
            got = m.audio(start, end)
            ref = span_of(timeline, start, len(got))
            if name.endswith("mp4"):
                assert np.abs(got - ref).max() <= 4 * LSB, (start, end)
            elif np.abs(ref).max() < 0.01:
                assert np.abs(got).max() < 0.01, (start, end)
            else:  # Matroska stores milliseconds: a span decoded after a seek may sit 0.5 ms off
                lag, corr = best_lag(got, ref)
                assert abs(lag) <= 8 and corr > 0.99, (start, end, lag, corr)


def test_overlaps_keep_the_earlier_audio(work: Path) -> None:
    """Two 5 s files joined 4.5 s apart: the second's first 0.5 s is dropped, as ffmpeg does, and
    its later sounds stay at their time (counting samples would put them 0.5 s late)."""
    first = tones(work / "ov0.m4a", 5.0, [(2.0, 2.5), (4.7, 4.9)], 700.0)
    second = tones(work / "ov1.m4a", 5.0, [(2.0, 2.5), (4.7, 4.9)], 1300.0)
    path = overlapping_list([first, second], work / "overlap.ffconcat", 4.5)
    reference = ffmpeg_decode(path, timeline=True)
    reader = AudioReader(str(path), MediaAccess(allow_demuxers=("concat",)))  # a list: refused by default
    got = reader.read(0.0, 9.5)
    expected = onsets(reference)
    assert np.allclose(expected, [2.0, 4.7, 6.5, 9.2], atol=0.03)
    assert np.allclose(onsets(got), expected, atol=0.001)
    kept = got[int(4.75 * SR) : int(4.85 * SR)]  # the overlap holds the first file's tone
    assert amplitude_at(kept, 700.0) > 0.1 and amplitude_at(kept, 1300.0) < 0.01
    later = reader.read(6.0, 7.0)  # the list cannot seek: decoded from the top, same samples
    assert np.array_equal(later, got[6 * SR : 7 * SR])
    reader.close()


def test_late_audio_start_is_silence_then_sound(joined: dict[str, Path], work: Path) -> None:
    path = delayed_audio(work / "seg1.mp4", work / "delayed.mp4", 1.5)
    reference = ffmpeg_decode(path, timeline=True)
    with open_media(path) as m:
        got = m.audio(0.0, 5.0)
        assert np.abs(got[: int(1.5 * SR)]).max() == 0.0
        assert np.allclose(onsets(got), [2.5], atol=0.03)
        assert np.allclose(onsets(got), onsets(reference), atol=0.001)
        assert np.abs(m.audio(2.0, 3.5) - span_of(reference, 2.0, int(1.5 * SR))).max() <= 4 * LSB


def test_dropped_packets_leave_silence_not_a_shift(work: Path) -> None:
    src = segment(work / "long.mkv", 10.0, 10.0, 7.0, 1000.0)
    path = drop_audio_packets(src, work / "holed.mkv", 3.0, 4.0)
    with open_media(path) as m:
        got = m.audio(0.0, 10.0)
    assert np.abs(got[int(3.1 * SR) : int(3.9 * SR)]).max() == 0.0
    assert np.allclose(onsets(got), [7.0], atol=0.03)
    assert np.allclose(onsets(got), onsets(ffmpeg_decode(path, timeline=True)), atol=0.001)


def test_transport_stream_counts_from_the_container_start(video_path: Path, work: Path) -> None:
    """A .ts starts its clock at ~1.4 s and has no seek index: spans still match ffmpeg's decode."""
    path = work / "remuxed.ts"
    ffmpeg("-i", str(video_path), "-c", "copy", str(path))
    reference = ffmpeg_decode(path, timeline=True)
    reader = AudioReader(str(path))
    assert reader.origin > 1.0
    assert np.abs(reader.read(0.0, 2.0)).max() < 0.01
    for start, end in [(2.5, 4.5), (2.95, 3.2), (11.7, 12.8), (11.0, 12.3)]:
        got = reader.read(start, end)
        lag, corr = best_lag(got, span_of(reference, start, len(got)))
        assert lag == 0 and corr > 0.999, (start, end, lag, corr)
    assert np.allclose(onsets(reader.read(0.0, 19.0)), [3.0, 12.0], atol=0.03)
    reader.close()


def test_surround_uses_ffmpegs_downmix(work: Path) -> None:
    wav = surround(work / "surround.wav")
    m4a = work / "surround.m4a"
    ffmpeg("-i", str(wav), "-c:a", "aac", "-b:a", "384k", str(m4a))
    weights = {"FL": 0.5**0.5, "FR": 0.5**0.5, "FC": 1.0, "LFE": 0.0, "BL": 0.5, "BR": 0.5}
    total = sum(weights.values())  # 16-bit output: swresample scales the matrix so it cannot clip
    for path in (wav, m4a):
        got = AudioReader(str(path)).read(1.0, 2.0)
        assert np.abs(got - span_of(ffmpeg_decode(path), 1.0, len(got))).max() <= 4 * LSB
        for channel, freq in SURROUND_FREQS.items():
            want = 0.5 * weights[channel] / total
            assert amplitude_at(got, freq) == pytest.approx(want, abs=0.01), channel
    # The former channel mean put the centre at 0.5 / 6; ffmpeg's mix is 1.76x louder there.
    assert amplitude_at(got, SURROUND_FREQS["FC"]) > 1.5 * 0.5 / 6


@pytest.mark.parametrize("container", ["mp4", "mkv"])
def test_audio_shorter_than_video(work: Path, container: str) -> None:
    """Audio ends at 4 s, video at 8 s: audio serves to its end, then a clear per-action error."""
    path = segment(work / f"short_audio.{container}", 8.0, 4.0, 3.0, 1000.0)
    with open_media(path) as m:
        tail = m.audio(3.0, 5.0)  # the track ends inside the span: silence after, as a player plays it
        assert np.allclose(onsets(tail), [0.0], atol=0.03)
        assert np.abs(tail[int(1.1 * SR) :]).max() == 0.0
        with pytest.raises(MediaReadError) as err:
            m.audio(5.0, 6.0)
        assert err.value.code == "audio_out_of_range" and "ends at 4.0" in str(err.value)
    env = OmniVideoEnv(media=str(path), question="q", task_type="num", answer=1)
    env.reset()
    _, _, _, _, info = env.step('{"observation": "", "thought": "", "action": '
                                '{"type": "get_audio", "start": 6, "end": 7}}')  # fmt: skip
    assert info["error"] == "audio_out_of_range"
    env.close()


def test_audio_longer_than_video_serves_to_the_audio_end(work: Path) -> None:
    path = segment(work / "long_audio.mp4", 4.0, 8.0, 6.0, 1000.0)
    with open_media(path) as m:
        got = m.audio(5.0, 8.0)  # after the video's end
        assert np.allclose(onsets(got), [1.0], atol=0.03)
        assert np.abs(got - span_of(ffmpeg_decode(path), 5.0, len(got))).max() <= 4 * LSB
        with pytest.raises(MediaReadError) as err:
            m.audio(8.5, 9.0)
        assert err.value.code == "audio_out_of_range"


def test_truncated_track_is_an_error_not_silence(work: Path) -> None:
    src = make_audio(work / "whole.m4a", duration=10.0, bursts=[(0.0, 10.0, 1000.0)])  # even bitrate
    front = work / "front_index.m4a"
    ffmpeg("-i", str(src), "-c", "copy", "-movflags", "+faststart", str(front))
    cut = work / "cut.m4a"
    data = front.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    reader = AudioReader(str(cut))
    got = reader.read(1.0, 2.0)  # before the cut: served as ffmpeg decodes the whole file
    assert np.abs(got - span_of(ffmpeg_decode(src), 1.0, len(got))).max() <= 4 * LSB
    with pytest.raises(MediaReadError) as err:
        reader.read(8.0, 9.0)
    assert err.value.code == "media_truncated"


def test_threads_each_decode_with_their_own_container(video_path: Path) -> None:
    spans = [(0.5 + k, 2.5 + k) for k in range(12)]
    with open_media(video_path) as m:
        serial = [m.audio(*s) for s in spans]
        results: dict[int, list[np.ndarray]] = {}
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                results[i] = [m.audio(*s) for s in spans[i::2] * 3]
            except BaseException as exc:  # noqa: BLE001 - reported by the assert below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors
        for i in range(2):
            for got, want in zip(results[i], serial[i::2] * 3, strict=True):
                assert np.array_equal(got, want)
        assert m._audio is not None and len(m._audio._containers) == 3  # main thread + two workers
