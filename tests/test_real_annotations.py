"""The benchmark adapters on the published annotation files in ../shared/realdata (skipped when that
folder is absent), one real Daily-Omni run end to end, and lmms-eval layouts built from the field
lists in that folder's README."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omniagent.datasets import DatasetError, load_dataset

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "realdata"
ANN = REAL / "annotations"
needs_real = pytest.mark.skipif(not ANN.is_dir(), reason="../shared/realdata is not present")
CLIPS = ("bswbQtOPk6E", "G_VTkkb34gw")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not really a video")
    return path


# ------------------------------------------------------------------------------------------ Daily-Omni
@needs_real
def test_dailyomni_published_file_drops_the_exact_duplicate() -> None:
    ds = load_dataset("dailyomni", ANN / "dailyomni" / "qa.json", check=False)
    assert len(ds.tasks) == 1196  # 1197 published rows, one repeated exactly
    assert len({t.id for t in ds.tasks}) == 1196
    (warning,) = [w for w in ds.warnings if "duplicate" in w]
    assert "qa.json:373: exact duplicate of" in warning and "qa.json:366" in warning
    assert "qa.json:373" in ds.summary()
    domains = {t.extra["domain"] for t in ds.tasks}
    assert "Lifestyle" in domains and not any(d and d.startswith("No content") for d in domains)
    assert sum(t.extra["domain"] is None for t in ds.tasks) >= 550
    first = ds.tasks[0]
    assert (
        first.extra["video_category"] == "Howto & Style"
        and first.extra["fine_category"] == "Skincare Routines"
    )


def test_dailyomni_conflicting_duplicates_are_refused(tmp_path: Path) -> None:
    row = {"video_id": "abc", "Question": "Which sound?", "Choice": ["A. bark", "B. bell"], "Answer": "B"}
    ann = tmp_path / "qa.json"
    ann.write_text(json.dumps([row, dict(row), {**row, "Answer": "A"}]))
    with pytest.raises(
        DatasetError, match=r"qa\.json:3: duplicate task id .* other content \(first at .*qa\.json:1\)"
    ):
        load_dataset("dailyomni", ann, check=False)
    ann.write_text(json.dumps([row, dict(row)]))
    ds = load_dataset("dailyomni", ann, check=False)
    assert len(ds.tasks) == 1 and "qa.json:2: exact duplicate of" in ds.warnings[0]


@needs_real
@pytest.mark.parametrize("policy", ["oracle", "uniform"])
def test_dailyomni_real_clips_end_to_end(policy: str, tmp_path: Path) -> None:
    """scripts/eval.py on the published qa.json and the two real clips, laid out as the release does."""
    media = tmp_path / "media"
    for vid in CLIPS:
        (media / vid).mkdir(parents=True)
        (media / vid / f"{vid}_video.mp4").symlink_to(REAL / "media" / f"{vid}_video.mp4")
    out = tmp_path / "run"
    cmd = [
        sys.executable, str(ROOT / "scripts" / "eval.py"), "benchmarks=dailyomni",
        f"benchmark.annotations={ANN / 'dailyomni' / 'qa.json'}", f"benchmark.media_root={media}",
        f"out_dir={out}", f"policy.name={policy}", "workers=1", "progress=false", "summary.n_boot=200",
        "+benchmark.dataset_kwargs.follow_links_outside_media_root=true",  # the clips are links to ../shared
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 5 and {r["status"] for r in rows} == {"ok"}  # the 5 questions on those 2 clips
    assert {r["id"].split("-")[1] for r in rows} == set(CLIPS)
    assert all(29.9 < r["duration"] < 30.1 for r in rows)  # probed from the real 30 s clips
    summary = json.loads((out / "summary.json").read_text())
    if policy == "oracle":  # answers from the ground truth: checks the scoring of real questions
        assert summary["score"]["mean"] == 1.0 and summary["n"] == 5
    else:  # looks at frames first: decoded from the real H.264 clips
        assert all(r["frames_used"] > 0 and r["action_counts"].get("get_frames") for r in rows)
    missing = (out / "missing_media.jsonl").read_text().splitlines()
    assert len(missing) == 1191


# ------------------------------------------------------------------------------------------ Video-MME
@needs_real
def test_videomme_flat_export_and_same_text_options() -> None:
    ds = load_dataset("videomme", ANN / "videomme" / "video_mme.json", check=False)
    assert len(ds.tasks) == 30 and ds.tasks[0].id == "videomme-891-1"
    assert ds.tasks[0].media.endswith("uuCVnqV4cNc.mp4") and ds.tasks[0].extra["duration_label"] == "long"
    (warning,) = ds.warnings
    assert "videomme-894-1" in warning and "options B and D have the same text" in warning


@needs_real
def test_videomme_nested_layout_matches_the_flat_export() -> None:
    nested = load_dataset("videomme", ANN / "videomme" / "videomme_json_file.json", check=False)
    assert len(nested.tasks) == 2700
    by_id = {t.id: t for t in nested.tasks}
    first = by_id["videomme-001-1"]
    assert first.media.endswith("fFjv93ACGo8.mp4") and first.answer == "C"
    assert first.extra["duration_label"] == "short" and first.extra["category"] == "Counting Problem"
    flat = load_dataset("videomme", ANN / "videomme" / "video_mme.json", check=False)
    for t in flat.tasks:  # the two releases agree on every shared question
        n = by_id[t.id]
        assert (Path(n.media).name, n.choices, n.answer) == (Path(t.media).name, t.choices, t.answer)


@needs_real
def test_videomme_official_template_names_the_trailing_comma() -> None:
    with pytest.raises(DatasetError, match=r"output_test_template\.json:19: trailing comma before '}'"):
        load_dataset("videomme", ANN / "videomme" / "output_test_template.json", check=False)


def test_youtube_ids_from_urls() -> None:
    from omniagent.datasets.layouts import youtube_id

    assert youtube_id("https://www.youtube.com/watch?v=uuCVnqV4cNc") == "uuCVnqV4cNc"
    assert youtube_id("https://youtu.be/uuCVnqV4cNc") == "uuCVnqV4cNc"
    assert youtube_id("fFjv93ACGo8") == "fFjv93ACGo8"
    with pytest.raises(ValueError, match="no YouTube id"):
        youtube_id("https://example.com/a b/")


# ------------------------------------------------------------------------- lmms-eval layouts (fixtures)
def test_lvbench_lmms_eval_layout(tmp_path: Path) -> None:
    rows = [  # lmms-eval/LVBench: video_path, question, options (optional), answer
        {"video_path": "hFWRtNbCOqI.mp4", "question": "What year appears?", "options": ["(A) 1636", "(B) 1366"],
         "answer": "B"},
        {"video_path": "hFWRtNbCOqI.mp4", "question": "Who speaks first?\n(A) the cat\n(B) the dog\n(C) nobody",
         "answer": "(C)"},
    ]  # fmt: skip
    ann = write_jsonl(tmp_path / "lvbench.jsonl", rows)
    touch(tmp_path / "hFWRtNbCOqI.mp4")
    a, b = load_dataset("lvbench", ann).tasks
    assert a.choices == ["1636", "1366"] and a.answer == "B" and a.media == str(tmp_path / "hFWRtNbCOqI.mp4")
    assert (
        b.question == "Who speaks first?"
        and b.choices == ["the cat", "the dog", "nobody"]
        and b.answer == "C"
    )
    assert a.id != b.id and a.id.startswith("lvbench-hFWRtNbCOqI-")


def test_worldsense_lmms_eval_layout(tmp_path: Path) -> None:
    row = {  # lmms-lab/worldsense
        "video_path": "videos/AbCdEfGhIjK.mp4", "subtitle_path": "subs/AbCdEfGhIjK.srt", "question": "What plays?",
        "candidates": ["A. a drum", "B. a flute", "C. a bell", "D. nothing"], "answer": "B",
        "task_type": "Audio Recognition", "task_domain": "Recognition", "duration": "1min",
        "audio_class": ["music"], "index": 12,
    }  # fmt: skip
    ann = write_jsonl(tmp_path / "worldsense.jsonl", [row])
    touch(tmp_path / "videos" / "AbCdEfGhIjK.mp4")
    (t,) = load_dataset("worldsense", ann).tasks
    assert t.id == "worldsense-AbCdEfGhIjK-12" and t.answer == "B" and t.choices[1] == "a flute"
    assert t.media == str(tmp_path / "videos" / "AbCdEfGhIjK.mp4")
    assert t.extra["category"] == "Audio Recognition" and t.extra["task_domain"] == "Recognition"


def test_vsibench_lmms_eval_layout_without_ids(tmp_path: Path) -> None:
    rows = [  # nyu-visionx/VSI-Bench: dataset, scene_name, question_type, question, options, ground_truth
        {"dataset": "scannet", "scene_name": "scene0001_00", "question_type": "object_counting",
         "question": "How many chairs?", "options": None, "ground_truth": "4"},
        {"dataset": "scannet", "scene_name": "scene0001_00", "question_type": "object_rel_direction_easy",
         "question": "Which side?", "options": ["A. left", "B. right"], "ground_truth": "A"},
        {"dataset": "scannet", "scene_name": "scene0001_00", "question_type": "object_counting",
         "question": "How many tables?", "options": [], "ground_truth": "1"},
    ]  # fmt: skip
    ann = write_jsonl(tmp_path / "test.jsonl", rows)
    touch(tmp_path / "scannet" / "scene0001_00.mp4")
    a, b, c = load_dataset("vsibench", ann).tasks
    assert (a.task_type, a.answer, b.task_type, b.answer, c.answer) == ("num", 4.0, "mcq", "A", 1.0)
    assert len({a.id, b.id, c.id}) == 3 and a.id.startswith("vsibench-scannet-scene0001_00-")
    again = load_dataset("vsibench", ann).tasks
    assert [t.id for t in again] == [a.id, b.id, c.id]  # ids are stable across loads
