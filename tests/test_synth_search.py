"""Tests for the synthetic engine's ``search`` level (envs/synth/search.py) and for the promise that adding
levels left the default ``benchmark`` level's output unchanged, byte for byte.

The search level's promises: four colour fields, each digit and pitch once per video, every event inside its
field, every template asked once per field with fixed options (so each answer letter of a template occurs
once per video and no constant answer beats 1/4), and media whose pixels and samples show what the timeline
says.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from testkit import decode_audio, decode_frames, tone_level

import envs.synth.generate as generate_module
from envs import synth
from envs.media import open_media
from envs.synth import (
    SEARCH_COLORS,
    SEARCH_DIGITS,
    SEARCH_PITCHES,
    SEARCH_TEMPLATES,
    SynthConfig,
    build_timeline,
    config_hash,
    generate_benchmark,
    make_tasks,
    render_audio,
    render_frames,
    synthesize,
    text_bitmap,
)
from envs.synth.tasks import make_benchmark_tasks
from envs.synth.timeline import build_benchmark_timeline
from envs.tasks import load_tasks_jsonl
from omniagent.backends.prior import PriorTable
from omniagent.backends.synth_world import SynthWorld

SEARCH = SynthConfig(seed=3, duration=60.0, level="search")


# ---------------------------------------------------------------------------------- the default is unchanged
# Computed with the generator as it was before levels existed (git 6697492), by the procedure of
# _default_fingerprint: frames, audio as 16-bit PCM, config hashes and sidecars of three default configs.
DEFAULT_FINGERPRINT = "722311406d363a127357a23f3a9a9774279573adb4e625a8ab9b89678af49daa"
DEFAULT_HASHES = ["8ea231f6fab26837", "30262d7da114d38b", "1d7ecb787043e8f7"]
DEFAULT_CONFIGS = [
    SynthConfig(seed=5, duration=60.0),
    SynthConfig(seed=6, duration=40.0, mode="audio"),
    SynthConfig(seed=7, duration=30.0, width=128, height=72, audio=False),
]


def _default_fingerprint(tmp_path: Path) -> tuple[str, list[str]]:
    digest, hashes = hashlib.sha256(), []
    for i, cfg in enumerate(DEFAULT_CONFIGS):
        timeline = build_timeline(cfg)
        if cfg.mode == "video":
            digest.update(render_frames(timeline, 0, cfg.n_frames).tobytes())
        if cfg.has_audio:
            digest.update(np.round(render_audio(timeline) * 32767).astype("<i2").tobytes())
        hashes.append(config_hash(cfg))
        digest.update(hashes[-1].encode())
        result = synthesize(cfg, tmp_path / str(i) / f"m.{cfg.extension}", id_prefix="p")
        digest.update(Path(str(result.media) + ".meta.json").read_bytes())
    return digest.hexdigest(), hashes


def test_default_level_output_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synth, "speech_backend", lambda cfg: "tone")  # espeak-ng versions differ
    monkeypatch.setattr(generate_module, "video_encoder", lambda cfg: "ffmpeg")  # part of the hash
    fingerprint, hashes = _default_fingerprint(tmp_path)
    assert hashes == DEFAULT_HASHES
    assert fingerprint == DEFAULT_FINGERPRINT
    dumped = SynthConfig().model_dump(mode="json")
    assert "level" not in dumped and "search_digit_seconds" not in dumped
    assert SynthConfig.model_validate(dumped) == SynthConfig()  # a sidecar's config reads back as before


def test_level_builders_refuse_the_other_level() -> None:
    with pytest.raises(ValueError, match="level='benchmark'"):
        build_benchmark_timeline(SEARCH)
    with pytest.raises(ValueError, match="level='benchmark'"):
        make_benchmark_tasks(build_timeline(SEARCH), "m.mp4", "x")
    with pytest.raises(ValueError, match="level='search'"):
        synth.build_search_timeline(SynthConfig(seed=1))


# ------------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "audio"}, "needs mode='video'"),
        ({"audio": False}, "needs mode='video'"),
        ({"n_events": 8}, "places its own events"),
        ({"event_kinds": ("digit",)}, "places its own events"),
        ({"duration": 30.0}, "duration >= 40"),
        ({"search_digit_seconds": (0.1, 1.0)}, "search_digit_seconds"),
        ({"search_digit_seconds": (0.4, 1.0)}, "search_digit_seconds"),  # shorter than its beep
        ({"search_digit_seconds": (2.0, 1.0)}, "search_digit_seconds"),
        ({"search_digit_seconds": (2.0, 7.0)}, "search_digit_seconds"),
        ({"width": 161}, "even"),
        ({"level": "maze"}, "level"),
    ],
)
def test_search_config_rejects(kwargs: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        SynthConfig(**({"duration": 60.0, "level": "search"} | kwargs))


def test_search_config_is_recorded_and_hashed() -> None:
    dumped = SEARCH.model_dump(mode="json")
    assert dumped["level"] == "search" and dumped["search_digit_seconds"] == [1.0, 2.0]
    assert SynthConfig.model_validate(dumped) == SEARCH
    other = SEARCH.model_copy(update={"search_digit_seconds": (2.0, 3.0)})
    assert config_hash(SEARCH) != config_hash(other)
    assert config_hash(SEARCH) != config_hash(SynthConfig(seed=3, duration=60.0))


# ---------------------------------------------------------------------------------------------- timeline
@pytest.mark.parametrize("seed", range(12))
def test_search_timeline_one_of_each_inside_its_field(seed: int) -> None:
    cfg = SynthConfig(seed=seed, duration=40.0 + 20.0 * (seed % 5), level="search")
    timeline = build_timeline(cfg)
    fields = timeline.segments
    assert [f.color_a for f in fields] != [] and sorted(f.color_a for f in fields) == sorted(
        SEARCH_COLORS.values()
    )
    assert fields[0].start == 0.0 and fields[-1].end == cfg.duration
    assert all(a.end == b.start for a, b in zip(fields, fields[1:], strict=False))
    assert min(f.end - f.start for f in fields) >= 0.15 * cfg.duration - 1.0 / cfg.fps
    digits, tones = timeline.of_kind("digit"), timeline.of_kind("tone")
    assert sorted(e.attrs["text"] for e in digits) == sorted(SEARCH_DIGITS)
    assert sorted(e.attrs["freq"] for e in tones) == sorted(SEARCH_PITCHES)
    assert {e.group for e in digits} == {e.group for e in tones} == {0, 1, 2, 3}
    lo, hi = cfg.search_digit_seconds
    for ev in digits + tones:
        field = fields[ev.group]
        assert field.start < ev.start < ev.end < field.end, ev
    for ev in tones:  # each beep sounds while its field's digit is shown
        digit = next(d for d in digits if d.group == ev.group)
        assert digit.start <= ev.start < ev.end <= digit.end + 1e-6, (ev, digit)
    for ev in digits:
        assert lo - 1e-6 <= ev.end - ev.start <= hi + 1e-6
        assert ev.attrs["end_frame"] - ev.attrs["start_frame"] == round((ev.end - ev.start) * cfg.fps)
    assert timeline.to_dict() == build_timeline(cfg).to_dict()
    assert timeline.to_dict() != build_timeline(cfg.model_copy(update={"seed": seed + 100})).to_dict()


# ------------------------------------------------------------------------------------------------- tasks
def _search_tasks(seed: int, n: int) -> list:
    tasks = []
    for i in range(n):
        cfg = SynthConfig(seed=1000 * seed + i, duration=60.0, level="search")
        tasks += make_tasks(build_timeline(cfg), "m.mp4", f"v{i}")
    return tasks


def test_search_tasks_every_letter_once_per_video_and_template() -> None:
    timeline = build_timeline(SEARCH)
    tasks = make_tasks(timeline, "m.mp4", "x", config_hash="c0ffee")
    assert [t.id for t in tasks] == [f"x-{tm}-{k:02d}" for tm in SEARCH_TEMPLATES for k in range(4)]
    options = {
        "cue_digit_mcq": list(SEARCH_DIGITS),
        "cue_pitch_mcq": [f"{p:g} Hz" for p in SEARCH_PITCHES],
        "pitch_color_mcq": list(SEARCH_COLORS),
    }
    for template in SEARCH_TEMPLATES:
        mine = [t for t in tasks if t.extra["template"] == template]
        assert sorted(t.answer for t in mine) == ["A", "B", "C", "D"]
        assert all(t.choices == options[template] and t.task_type == "mcq" for t in mine)
        assert len({t.question for t in mine}) == 4  # each field (or pitch) asked once
    for task in tasks:
        (ev_id,) = task.extra["event_ids"]
        ev = next(e for e in timeline.events if e.id == ev_id)
        assert task.evidence == [ev.interval]
        start, end = task.extra["field"]
        assert start <= ev.start < ev.end <= end
        assert task.extra["level"] == "search" and task.extra["config_hash"] == "c0ffee"


def _truth(task) -> str:
    return task.choices["ABCD".index(task.answer)]


def test_search_answers_follow_the_cue() -> None:
    timeline = build_timeline(SEARCH)
    color_of = {s.index: n for s in timeline.segments for n, rgb in SEARCH_COLORS.items() if rgb == s.color_a}
    for task in make_tasks(timeline, "m.mp4", "x"):
        ev = next(e for e in timeline.events if e.id == task.extra["event_ids"][0])
        color = color_of[ev.group]
        if task.extra["template"] == "cue_digit_mcq":
            assert color in task.question and _truth(task) == ev.attrs["text"]
        elif task.extra["template"] == "cue_pitch_mcq":
            assert color in task.question and _truth(task) == f"{ev.attrs['freq']:g} Hz"
        else:
            assert f"the {ev.attrs['freq']:g} Hz beep" in task.question and _truth(task) == color


def test_no_constant_answer_beats_a_quarter() -> None:
    """Any fixed answer per template scores exactly 1/4 on any set; the fitted prior only its luck."""
    train, fresh = _search_tasks(1, 20), _search_tasks(2, 20)
    for template in SEARCH_TEMPLATES:
        mine = [t for t in fresh if t.extra["template"] == template]
        for option in mine[0].choices:
            assert sum(_truth(t) == option for t in mine) == len(mine) // 4
        assert Counter(t.answer for t in mine) == Counter({k: len(mine) // 4 for k in "ABCD"})
    table = PriorTable(train)
    score = np.mean([table.score(t) for t in fresh])
    assert 0.15 < score < 0.35  # 240 questions: 1/4 +- 2.3 standard errors


# -------------------------------------------------------------------------------------------------- media
@pytest.fixture(scope="module")
def search_video(tmp_path_factory: pytest.TempPathFactory) -> tuple[synth.SynthResult, dict, np.ndarray, int]:
    cfg = SynthConfig(seed=5, duration=40.0, level="search")
    result = synthesize(cfg, tmp_path_factory.mktemp("search") / "s.mp4", id_prefix="s")
    return (result, decode_frames(result.media, cfg.fps), *decode_audio(result.media))


def test_search_media_show_fields_and_digits(search_video: tuple) -> None:
    result, frames, _, _ = search_video
    timeline = build_timeline(SynthConfig(seed=5, duration=40.0, level="search"))
    for ev in timeline.of_kind("digit"):
        field = timeline.segments[ev.group]
        inside = frames[(ev.attrs["start_frame"] + ev.attrs["end_frame"]) // 2]
        scale, x, y = ev.attrs["scale"], ev.attrs["x"], ev.attrs["y"]
        ink = np.kron(text_bitmap(ev.attrs["text"]), np.ones((scale, scale), dtype=bool))
        glyph = inside[y + scale : y + scale + ink.shape[0], x + scale : x + scale + ink.shape[1]].mean(
            axis=2
        )
        assert glyph[ink].mean() > 200 and glyph[~ink].mean() < 50, ev.attrs["text"]
        assert ink.shape[0] >= 0.7 * timeline.content_height  # as tall as the picture
        before = frames[ev.attrs["start_frame"] - 2]  # the field without its digit
        assert np.abs(before[:40].reshape(-1, 3).mean(axis=0) - np.array(field.color_a)).max() < 12


def test_search_media_tones_at_stated_times(search_video: tuple) -> None:
    result, _, audio, rate = search_video
    timeline = build_timeline(SynthConfig(seed=5, duration=40.0, level="search"))
    for ev in timeline.of_kind("tone"):
        level = tone_level(audio, rate, ev.start + 0.05, ev.end - 0.05, ev.attrs["freq"], band_hz=20)
        assert level > 0.05, ev  # a 0.35 amplitude tone (the AAC round trip keeps most of it)
        silent = tone_level(audio, rate, ev.end + 0.6, ev.end + 1.0, ev.attrs["freq"], band_hz=20)
        assert silent < 0.1 * level, ev
        for other in SEARCH_PITCHES:
            if other != ev.attrs["freq"]:
                assert (
                    tone_level(audio, rate, ev.start + 0.05, ev.end - 0.05, other, band_hz=20) < 0.1 * level
                )


def test_search_sidecar_reads_as_a_world(search_video: tuple) -> None:
    """The perceiving teacher's world model reads the level's sidecar: field hues by name, digits, tones."""
    result, _, _, _ = search_video
    world = SynthWorld.for_media(result.media)
    timeline = build_timeline(SynthConfig(seed=5, duration=40.0, level="search"))
    names = {rgb: name for name, rgb in SEARCH_COLORS.items()}
    for ev in timeline.of_kind("digit"):
        items = world.frame(0.5 * (ev.start + ev.end))
        assert items[0].kind == "background" and items[0].value == names[timeline.segments[ev.group].color_a]
        assert [(i.kind, i.value) for i in items[1:]] == [("digit", ev.attrs["text"])]
    for ev in timeline.of_kind("tone"):
        heard = world.sounds(ev.start - 1.0, ev.end + 1.0)
        assert [(i.kind, i.value, i.full) for i in heard] == [("tone", f"{ev.attrs['freq']:g}", True)]


def test_cli_search_level(tmp_path: Path) -> None:
    assert (
        synth.main(
            ["--out", str(tmp_path), "--seed", "4", "--n", "2", "--durations", "40", "--level", "search"]
        )
        == 0
    )
    tasks = load_tasks_jsonl(tmp_path / "tasks.jsonl")
    assert len(tasks) == 24 and {t.task_type for t in tasks} == {"mcq"}
    assert tasks[0].id.startswith("synth_search_s4_000_40s-cue_digit_mcq")
    meta = json.loads((tmp_path / "synth_search_s4_000_40s.mp4.meta.json").read_text())
    assert meta["config"]["level"] == "search"
    again = generate_benchmark(tmp_path, seed=4, n_videos=2, durations=[40.0], config={"level": "search"})
    assert [t.id for t in again] == [t.id for t in tasks]  # cached, same tasks


def test_search_video_serves_every_frame_exactly(search_video: tuple) -> None:
    """Every frame is a keyframe, so a wide look gets the frames it asks for (to a frame), not keyframes up
    to a second away (a digit shown for a second between two keyframes would otherwise never be served)."""
    result = search_video[0]
    assert SynthConfig(duration=60.0, level="search").keyframe_interval == 1
    assert SynthConfig(duration=60.0).keyframe_interval == 10  # the benchmark's 2 s at 5 fps, as before
    with open_media(str(result.media)) as src:
        served = [round(f.time, 2) for f in src.frames(1.2, 36.6, 8)]
    wanted = np.linspace(1.2, 36.6, 8)  # 5 s apart: a reader snaps such a look to keyframes up to 2.5 s away
    assert len(served) == 8 and np.abs(np.array(served) - wanted).max() <= 0.2 + 1e-6  # at most one frame off
