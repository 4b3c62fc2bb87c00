"""Tests for the task schema (envs/tasks.py) and the synthetic long-media engine (envs/synth/).

The engine's promise is that answers and evidence intervals are true by construction, so these tests
decode the media it wrote and look for each event where the timeline says it is (and not elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from pydantic import ValidationError
from testkit import decode_audio, decode_frames, tone_level

from envs import synth
from envs.synth import (
    MAX_FRAME_INDEX,
    BarcodeError,
    SynthConfig,
    build_timeline,
    decode_frame_index,
    draw_frame_index,
    generate_benchmark,
    make_tasks,
    render_audio,
    render_frames,
    synthesize,
    text_bitmap,
)
from envs.tasks import Task, TaskFileError, load_tasks_jsonl, save_tasks_jsonl

HAS_ESPEAK = shutil.which("espeak-ng") is not None

SMALL = {"width": 128, "height": 72, "fps": 5}
VIDEO_CFG = SynthConfig(seed=7, duration=48.0, n_events=8, **SMALL)


# ---------------------------------------------------------------------------------------------- helpers
def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _rms(signal: np.ndarray, sr: int, start: float, end: float) -> float:
    seg = signal[int(start * sr) : int(end * sr)]
    return float(np.sqrt(np.mean(seg.astype(np.float64) ** 2)))


def _quiet_window(timeline: synth.Timeline, near: float, length: float = 0.5) -> tuple[float, float]:
    """A window of ``length`` s close to ``near`` that overlaps no event (with a 0.2 s guard)."""
    busy = [(e.start - 0.2, e.end + 0.2) for e in timeline.events]
    for offset in np.arange(0.0, 20.0, 0.1):
        for start in (near + offset, near - offset - length):
            end = start + length
            if (
                start >= 0
                and end <= timeline.config.duration
                and all(end <= a or start >= b for a, b in busy)
            ):
                return float(start), float(end)
    raise AssertionError("no quiet window")


def _close(pixel: np.ndarray, rgb: list[int], tol: int = 60) -> bool:
    return int(np.abs(pixel.astype(int) - np.array(rgb)).max()) <= tol


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> synth.SynthResult:
    out = tmp_path_factory.mktemp("synth-video")
    return synthesize(VIDEO_CFG, out / "v.mp4", id_prefix="v")


@pytest.fixture(scope="module")
def frames(video: synth.SynthResult) -> dict[int, np.ndarray]:
    return decode_frames(video.media, VIDEO_CFG.fps)


@pytest.fixture(scope="module")
def audio_only(tmp_path_factory: pytest.TempPathFactory) -> synth.SynthResult:
    out = tmp_path_factory.mktemp("synth-audio")
    cfg = SynthConfig(seed=11, duration=40.0, mode="audio", n_events=8)
    return synthesize(cfg, out / "a.wav", id_prefix="a")


# ---------------------------------------------------------------------------------------------- schema
def _task(**kw) -> dict:
    base = {"id": "t1", "media": "m.mp4", "question": "q?", "task_type": "num", "answer": 3}
    return base | kw


def test_task_valid_examples_normalise() -> None:
    mcq = Task(**_task(task_type="mcq", choices=["x", "y", "z"], answer=" b "))
    assert mcq.answer == "B" and mcq.answer_choice() == "y" and mcq.letters == ["A", "B", "C"]
    assert Task(**_task(answer="4.5")).answer == 4.5
    tr = Task(**_task(task_type="tr", answer=[[1, 2], [3, 3]], evidence=[[0.5, 2.5]], duration=10))
    assert tr.answer == [[1.0, 2.0], [3.0, 3.0]]
    assert Task(**_task(task_type="ff", answer="apple")).answer == "apple"
    assert Task(**_task(task_type="size", answer=None)).answer is None
    assert Task(**_task(task_type="mcq", choices=["x", "y"], answer=None)).answer is None


@pytest.mark.parametrize(
    "bad",
    [
        {"task_type": "mcq", "choices": ["only"], "answer": "A"},
        {"task_type": "mcq", "choices": None, "answer": "A"},
        {"task_type": "mcq", "choices": ["x", "y", "z"], "answer": "D"},
        {"task_type": "mcq", "choices": ["x", "y"], "answer": "x"},
        {"task_type": "mcq", "choices": ["x", "y"], "answer": 1},
        {"task_type": "tr", "answer": [[5.0, 2.0]]},
        {"task_type": "tr", "answer": [[1.0]]},
        {"task_type": "tr", "answer": []},
        {"task_type": "tr", "answer": "1-2"},
        {"task_type": "tr", "answer": [[1, 30]], "duration": 10},
        {"task_type": "num", "answer": "three"},
        {"task_type": "num", "answer": True},
        {"task_type": "size", "answer": [[1, 2]]},
        {"task_type": "num", "evidence": [[3, 1]]},
        {"task_type": "num", "evidence": [[-1, 1]]},
        {"task_type": "num", "choices": ["a", "b"]},
        {"task_type": "ff", "answer": 3},
        {"task_type": "yesno"},
        {"id": ""},
        {"unknown_field": 1},
    ],
)
def test_task_rejects_malformed(bad: dict) -> None:
    with pytest.raises(ValidationError):
        Task(**_task(**bad))


def test_jsonl_round_trip_and_media_resolution(tmp_path: Path) -> None:
    tasks = [Task(**_task(id=f"t{i}", media="clips/a.mp4")) for i in range(3)]
    path = save_tasks_jsonl(tasks, tmp_path / "sub" / "tasks.jsonl")
    loaded = load_tasks_jsonl(path)
    assert [t.id for t in loaded] == ["t0", "t1", "t2"]
    assert loaded[0].media == str((tmp_path / "sub" / "clips" / "a.mp4").resolve())
    assert load_tasks_jsonl(path, resolve_media=False)[0].media == "clips/a.mp4"


def test_jsonl_reports_bad_lines_with_location(tmp_path: Path) -> None:
    good = json.dumps(_task(id="ok"))
    path = tmp_path / "tasks.jsonl"
    lines = [good, "", "{not json", json.dumps(_task(id="x", task_type="tr", answer=[[3, 1]])), "[1, 2]"]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TaskFileError) as err:
        load_tasks_jsonl(path)
    message = str(err.value)
    assert f"{path}:3:" in message and f"{path}:4:" in message and f"{path}:5:" in message
    assert f"{path}:1:" not in message


def test_duplicate_ids_rejected(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(_task(id="same")) + "\n" + json.dumps(_task(id="same", answer=4)) + "\n")
    with pytest.raises(TaskFileError, match=r"dup\.jsonl:2: duplicate task id 'same' \(first at line 1\)"):
        load_tasks_jsonl(path)
    with pytest.raises(TaskFileError, match="duplicate task id"):
        save_tasks_jsonl([Task(**_task(id="a")), Task(**_task(id="a"))], tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


# ---------------------------------------------------------------------------------------------- config
def test_config_validation() -> None:
    with pytest.raises(ValidationError):
        SynthConfig(duration=20, n_events=10)  # 2 s per event is too tight
    with pytest.raises(ValidationError):
        SynthConfig(width=129)
    with pytest.raises(ValidationError):
        SynthConfig(mode="audio", event_kinds=("shape",))
    with pytest.raises(ValidationError):
        SynthConfig(audio=False, event_kinds=("tone",))
    assert "tone" not in SynthConfig(audio=False).kinds
    assert SynthConfig(duration=3600).groups == 360


# ---------------------------------------------------------------------------------------------- barcode
def test_barcode_round_trip_raw() -> None:
    indices = [0, 1, 2, 5, 255, 12345, 1 << 20, MAX_FRAME_INDEX]
    frames = np.random.default_rng(0).integers(0, 256, size=(len(indices), 90, 160, 3), dtype=np.uint8)
    draw_frame_index(frames, np.array(indices))
    for frame, index in zip(frames, indices, strict=True):
        assert decode_frame_index(frame) == index
        assert decode_frame_index(frame[::2, ::2]) == index  # resized (decimated) frames still decode
        assert decode_frame_index(frame.mean(axis=2).astype(np.uint8)) == index  # grey
    with pytest.raises(BarcodeError):
        decode_frame_index(np.full((90, 160, 3), 128, np.uint8))
    broken = frames[3].copy()
    broken[-4:, 160 // 26 * 13 : 160 // 26 * 13 + 6] ^= 255  # flip one data block: parity catches it
    with pytest.raises(BarcodeError):
        decode_frame_index(broken)
    with pytest.raises(ValueError):
        draw_frame_index(frames[:1].copy(), np.array([MAX_FRAME_INDEX + 1]))


def test_barcode_survives_encoding(video: synth.SynthResult, frames: dict[int, np.ndarray]) -> None:
    assert sorted(frames) == list(range(VIDEO_CFG.n_frames))
    for index, frame in frames.items():
        assert decode_frame_index(frame) == index
    # the decoded frames are close to what was rendered
    rendered = render_frames(build_timeline(VIDEO_CFG), 100, 104)
    for k in range(4):
        assert np.abs(rendered[k].astype(int) - frames[100 + k].astype(int)).mean() < 6


# ---------------------------------------------------------------------------------------------- determinism
def test_same_seed_same_media_and_tasks(tmp_path: Path) -> None:
    cfg = SynthConfig(seed=3, duration=24.0, n_events=5, **SMALL)
    a = synthesize(cfg, tmp_path / "a" / "x.mp4", id_prefix="x")
    b = synthesize(cfg, tmp_path / "b" / "x.mp4", id_prefix="x")
    assert _sha(a.media) == _sha(b.media)
    assert [t.model_dump(exclude={"media"}) for t in a.tasks] == [
        t.model_dump(exclude={"media"}) for t in b.tasks
    ]
    assert build_timeline(cfg).to_dict() == build_timeline(cfg).to_dict()
    other = build_timeline(cfg.model_copy(update={"seed": 4}))
    assert other.to_dict() != build_timeline(cfg).to_dict()


# Timelines and tasks, as written to the cache, for GOLDEN_CONFIGS (speech as beeps). The benchmark
# cache is keyed on GENERATOR_VERSION and the config, so output that changes under the same version
# would mix old cached tasks with new ones: bump GENERATOR_VERSION and add its hash here instead.
GOLDEN = {"omniagent-synth-1": "dba64b164a44a7c424d629661ae3f7a89599478c18db7c50eb4b3ec54da53b79"}
GOLDEN_CONFIGS = [
    SynthConfig(seed=7, duration=120.0, **SMALL),
    SynthConfig(seed=8, duration=90.0, audio=False),
    SynthConfig(seed=9, duration=300.0, mode="audio"),
]


def test_output_pinned_per_generator_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synth, "speech_backend", lambda cfg: "tone")  # espeak-ng clip lengths vary by version
    digest = hashlib.sha256()
    templates: list[list[str]] = []
    for cfg in GOLDEN_CONFIGS:
        timeline = build_timeline(cfg)
        tasks = make_tasks(timeline, "m.mp4", "g", config_hash="c0ffee")
        templates.append([t.id.removeprefix("g-") for t in tasks])
        dumped = [timeline.to_dict(), [t.model_dump(mode="json") for t in tasks]]
        digest.update(json.dumps(dumped).encode())  # key order included: it is what tasks.jsonl holds
    # readable part of the pin: which templates ran, in which order, how many times
    assert templates[1] == [
        "digit_mcq-00", "screen_word_ff-00", "screen_word_ff-01", "shape_tr-00", "shape_width_size-00",
        "flash_count_num-00", "flash_tr-00", "scene_change_num-00", "static_tr-00",
    ]  # fmt: skip
    assert templates[2][:2] == ["static_tr-00", "beep_count_num-00"] and len(templates[2]) == 11
    assert len(templates[0]) == 22 and "after_beep_color_mcq-01" in templates[0]
    assert digest.hexdigest() == GOLDEN.get(synth.GENERATOR_VERSION), "output changed: see GOLDEN"


# ---------------------------------------------------------------------------------------------- content
def test_all_task_types_and_consistent_ids(video: synth.SynthResult) -> None:
    types = {t.task_type for t in video.tasks}
    assert types == {"mcq", "tr", "num", "size", "ff"}
    assert len({t.id for t in video.tasks}) == len(video.tasks)
    for task in video.tasks:
        assert task.evidence, task.id
        assert all(0 <= s < e <= VIDEO_CFG.duration for s, e in task.evidence), task.id
        Task.model_validate(task.model_dump())


def test_visual_events_at_stated_times(video: synth.SynthResult, frames: dict[int, np.ndarray]) -> None:
    timeline = build_timeline(VIDEO_CFG)
    fps = VIDEO_CFG.fps
    content_h = timeline.content_height
    seen = set()
    for ev in timeline.events:
        if not ev.visual:
            continue
        seen.add(ev.kind)
        inside = frames[(ev.attrs["start_frame"] + ev.attrs["end_frame"]) // 2]
        first, last = frames[ev.attrs["start_frame"]], frames[ev.attrs["end_frame"] - 1]
        before = frames[ev.attrs["start_frame"] - 1]
        after = frames[ev.attrs["end_frame"]]
        if ev.kind == "shape":
            cx, cy = (int(round(v)) for v in ev.attrs["center"])
            for frame in (inside, first, last):
                assert _close(frame[cy, cx], ev.attrs["rgb"]), ev
            for frame in (before, after):
                assert not _close(frame[cy, cx], ev.attrs["rgb"], tol=90), ev
        elif ev.kind == "flash":
            assert inside[:content_h].mean() > 235 and first[:content_h].mean() > 235
            assert before[:content_h].mean() < 200 and after[:content_h].mean() < 200
        elif ev.kind == "static":
            assert inside[:content_h].std() > 50
            assert before[:content_h].std() < 40 and after[:content_h].std() < 40
        elif ev.kind in ("digit", "word"):
            scale, x, y = ev.attrs["scale"], ev.attrs["x"], ev.attrs["y"]
            glyphs = np.kron(text_bitmap(ev.attrs["text"]), np.ones((scale, scale), dtype=bool))
            h, w = glyphs.shape
            region = inside[y + scale : y + scale + h, x + scale : x + scale + w].mean(axis=2)
            assert ((region > 128) == glyphs).mean() > 0.95, ev
            region_before = before[y + scale : y + scale + h, x + scale : x + scale + w].mean(axis=2)
            assert ((region_before > 128) == glyphs).mean() < 0.9, ev
    assert seen == {"shape", "digit", "word", "flash", "static"}
    # a TR question's answer intervals are exactly where its shape is visible
    tr = next(t for t in video.tasks if t.extra["template"] == "shape_tr")
    ev = next(e for e in timeline.events if e.id == tr.extra["event_ids"][0])
    cx, cy = (int(round(v)) for v in ev.attrs["center"])
    visible = [i for i, f in sorted(frames.items()) if _close(f[cy, cx], ev.attrs["rgb"], tol=40)]
    expected = [i for s, e in tr.answer for i in range(round(s * fps), round(e * fps))]
    assert set(expected) <= set(visible)


def test_digit_mcq_matches_pixels(video: synth.SynthResult, frames: dict[int, np.ndarray]) -> None:
    timeline = build_timeline(VIDEO_CFG)
    task = next(t for t in video.tasks if t.extra["template"] == "digit_mcq")
    ev = next(e for e in timeline.events if e.id == task.extra["event_ids"][0])
    s, e = task.evidence[0]
    frame = frames[round((s + e) / 2 * VIDEO_CFG.fps)]
    scale, x, y = ev.attrs["scale"], ev.attrs["x"], ev.attrs["y"]
    region = frame[y + scale : y + 8 * scale, x + scale : x + 6 * scale].mean(axis=2) > 128

    def score(digit: str) -> float:
        return float((np.kron(text_bitmap(digit), np.ones((scale, scale), dtype=bool)) == region).mean())

    best = max(task.choices, key=score)
    assert best == task.answer_choice()


def test_mp4_tones_at_stated_times(video: synth.SynthResult) -> None:
    timeline = build_timeline(VIDEO_CFG)
    signal, sr = decode_audio(video.media)
    assert abs(len(signal) / sr - VIDEO_CFG.duration) < 0.2
    tones = timeline.of_kind("tone")
    assert tones
    for ev in tones:
        pad = 0.2 * (ev.end - ev.start)
        hit = tone_level(signal, sr, ev.start + pad, ev.end - pad, ev.attrs["freq"], band_hz=15)
        q0, q1 = _quiet_window(timeline, ev.end + 1.0, ev.end - ev.start - 2 * pad)
        miss = tone_level(signal, sr, q0, q1, ev.attrs["freq"], band_hz=15)
        assert hit > 10 * miss, (ev, hit, miss)
    beep_task = next(t for t in video.tasks if t.extra["template"] == "beep_pitch_num")
    (s, e) = beep_task.evidence[0]
    assert tone_level(signal, sr, s + 0.05, e - 0.05, beep_task.answer, band_hz=15) > 0.05


def test_audio_only_mode(audio_only: synth.SynthResult) -> None:
    cfg = SynthConfig(seed=11, duration=40.0, mode="audio", n_events=8)
    signal, sr = sf.read(str(audio_only.media), dtype="float32")
    assert sr == cfg.sample_rate and len(signal) == cfg.n_samples
    expected = render_audio(build_timeline(cfg))
    assert np.abs(signal - expected).max() < 1e-3  # wav is the rendered soundtrack, 16-bit
    assert not {"size"} & {t.task_type for t in audio_only.tasks}
    assert {"mcq", "tr", "num"} <= {t.task_type for t in audio_only.tasks}
    timeline = build_timeline(cfg)
    for ev in timeline.of_kind("tone"):
        hit = tone_level(signal, sr, ev.start + 0.05, ev.end - 0.05, ev.attrs["freq"], band_hz=15)
        q0, q1 = _quiet_window(timeline, ev.end + 1.0, ev.end - ev.start - 0.1)
        assert hit > 10 * tone_level(signal, sr, q0, q1, ev.attrs["freq"], band_hz=15)
    for ev in timeline.of_kind("static"):
        q0, q1 = _quiet_window(timeline, ev.end + 1.0)
        assert _rms(signal, sr, ev.start, ev.end) > 5 * _rms(signal, sr, q0, q1)


@pytest.mark.skipif(not HAS_ESPEAK, reason="espeak-ng is not installed")
def test_spoken_words_have_energy(audio_only: synth.SynthResult) -> None:
    cfg = SynthConfig(seed=11, duration=40.0, mode="audio", n_events=8)
    timeline = build_timeline(cfg)
    assert timeline.speech_backend == "espeak-ng"
    speech = timeline.of_kind("speech")
    assert speech
    signal, sr = sf.read(str(audio_only.media), dtype="float32")
    for ev in speech:
        q0, q1 = _quiet_window(timeline, ev.end + 1.0)
        assert _rms(signal, sr, ev.start, ev.end) > 4 * _rms(signal, sr, q0, q1), ev
        # the interval holds the whole word: just outside it there is only background
        quiet = _rms(signal, sr, q0, q1)
        assert _rms(signal, sr, ev.start - 0.25, ev.start - 0.01) < 1.5 * quiet, ev
        assert _rms(signal, sr, ev.end + 0.01, ev.end + 0.25) < 1.5 * quiet, ev
    tr = [t for t in audio_only.tasks if t.extra["template"] == "spoken_word_tr"]
    assert tr and all(t.answer == t.evidence for t in tr)


def test_speech_falls_back_to_tones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synth, "speech_backend", lambda cfg: "tone")
    cfg = SynthConfig(seed=11, duration=40.0, mode="audio", n_events=8, event_kinds=("speech", "tone"))
    timeline = build_timeline(cfg)
    assert timeline.speech_backend == "tone"
    assert not timeline.of_kind("speech") and len(timeline.of_kind("tone")) == 8
    tasks = make_tasks(timeline, "a.wav", "fb")
    assert tasks and not any(t.extra["template"].startswith("spoken") for t in tasks)
    audio = render_audio(timeline, 0.0, 40.0)
    assert len(audio) == cfg.n_samples and np.isfinite(audio).all()


# ---------------------------------------------------------------------------------------------- benchmark
def test_generate_benchmark_cache_and_cli(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    args = ["--out", str(out), "--seed", "5", "--n", "2", "--durations", "20,24", "--width", "112"]
    assert synth.main([*args, "--height", "64"]) == 0
    tasks = load_tasks_jsonl(out / "tasks.jsonl")
    media = sorted({t.media for t in tasks})
    assert len(media) == 2 and all(Path(m).exists() for m in media)
    assert {t.duration for t in tasks} == {20.0, 24.0}
    stamps = {m: Path(m).stat().st_mtime_ns for m in media}

    config = {"width": 112, "height": 64}
    again = generate_benchmark(out, seed=5, n_videos=2, durations=[20, 24], config=config)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in tasks]
    assert {m: Path(m).stat().st_mtime_ns for m in media} == stamps  # reused, not rebuilt

    changed = generate_benchmark(out, seed=5, n_videos=2, durations=[20, 24], config=config | {"crf": 30})
    assert [t.id for t in changed] == [t.id for t in tasks]
    assert all(Path(m).stat().st_mtime_ns != stamps[m] for m in media)  # config changed: rebuilt


def test_pyav_encoder_fallback(tmp_path: Path) -> None:
    cfg = SynthConfig(seed=2, duration=12.0, n_events=3, encoder="pyav", **SMALL)
    result = synthesize(cfg, tmp_path / "p.mp4")
    frames = decode_frames(result.media, cfg.fps)
    assert sorted(frames) == list(range(cfg.n_frames))
    assert all(decode_frame_index(f) == i for i, f in frames.items())
    signal, sr = decode_audio(result.media)
    assert abs(len(signal) / sr - cfg.duration) < 0.2


@pytest.mark.parametrize("fmt", ["flac", "mp3"])
def test_compressed_audio_formats(tmp_path: Path, fmt: str) -> None:
    cfg = SynthConfig(
        seed=9, duration=12.0, mode="audio", n_events=2, event_kinds=("tone",), audio_format=fmt
    )
    result = synthesize(cfg, tmp_path / f"a.{fmt}")
    assert result.media.suffix == f".{fmt}"
    signal, sr = decode_audio(result.media)
    assert sr == cfg.sample_rate and abs(len(signal) / sr - cfg.duration) < 0.1
    timeline = build_timeline(cfg)
    for ev in timeline.of_kind("tone"):
        hit = tone_level(signal, sr, ev.start + 0.05, ev.end - 0.05, ev.attrs["freq"], band_hz=15)
        q0, q1 = _quiet_window(timeline, ev.end + 1.0, ev.end - ev.start - 0.1)
        assert hit > 10 * tone_level(signal, sr, q0, q1, ev.attrs["freq"], band_hz=15)
