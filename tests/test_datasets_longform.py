"""MLVU, LongVideoBench and OmniVideoBench adapters: fixtures built from each release's published field
lists, OmniVideoBench's real QA file (skipped when ../shared is absent) and one of its questions run end
to end on a generated stand-in video; evidence times read from prose."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from media_factory import make_video

from omniagent.datasets import DatasetError, load_dataset
from omniagent.datasets.evidence_text import EvidenceCounts, evidence_intervals, time_tokens

ROOT = Path(__file__).resolve().parents[1]
# the shared folder beside the checkout (or beside the folder of worktrees holding it)
SHARED = next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared").is_dir()), None)
OVB = SHARED / "realdata" / "annotations" / "omnivideobench" / "data.json" if SHARED else None
needs_ovb = pytest.mark.skipif(
    OVB is None or not OVB.is_file(), reason="OmniVideoBench's data.json is absent"
)


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"stand-in")
    return path


# ------------------------------------------------------------------------------------------------ MLVU
def mlvu_row(video: str, question: str, candidates: list[str] | None, answer: str, qtype: str) -> dict:
    row = {"video": video, "duration": 246.5, "question": question, "answer": answer, "question_type": qtype}
    if candidates is not None:
        row["candidates"] = candidates
    return row


def test_mlvu_task_files_skip_open_ended_and_defective_records(tmp_path: Path) -> None:
    ann = tmp_path / "MLVU" / "json"
    ann.mkdir(parents=True)
    colours = ["Yellow", "Red", "Green", "Blue"]
    (ann / "1_plotQA.json").write_text(json.dumps([
        mlvu_row("movie_1.mp4", "What colour is the car?", colours, "Green", "plotQA"),
        mlvu_row("movie_1.mp4", "Who drives?", ["a cat", "a dog"], "a dog", "plotQA"),
    ]))  # fmt: skip
    (ann / "3_ego.json").write_text(json.dumps([
        mlvu_row("ego_7.mp4", "What did I drop?", ["pen", "cup"], "cup", "ego"),
        mlvu_row("ego_7.mp4", "What did I drop?", ["box", "key"], "key", "ego"),  # same question, other options
        mlvu_row("ego_8.mp4", "Where was it?", ["here", ""], "", "ego"),  # empty answer and candidate
        mlvu_row("ego_9.mp4", "What next?", ["run", "walk"], "swim", "ego"),  # answer among no candidate
    ]))  # fmt: skip
    (ann / "9_summary.json").write_text(
        json.dumps([mlvu_row("217.mp4", "Summarize.", None, "Waves...", "summary")])
    )
    video = touch(tmp_path / "MLVU" / "video" / "1_plotQA" / "movie_1.mp4")
    ds = load_dataset("mlvu", ann, tmp_path / "MLVU")
    assert [t.id for t in ds.tasks][:2] == [t.id for t in ds.tasks if t.media == str(video)]
    car, who = ds.tasks
    assert (car.answer, car.choices, car.duration, car.extra["category"]) == ("C", colours, 246.5, "plotQA")
    assert who.answer == "B" and car.id.startswith("mlvu-plotQA-movie_1-") and car.id != who.id
    assert len(ds.missing) == 2 and all(
        "ego_7.mp4" in m.media for m in ds.missing
    )  # both ego_7 questions load
    assert ds.missing[0].task_id != ds.missing[1].task_id
    assert ds.skipped == {
        "open-ended question (no candidates; MLVU scores it with a model judge)": 1,
        "empty question, answer or candidate in the published file": 1,
        "answer is not one of its candidates in the published file": 1,
    }
    assert "skipped 1 record(s): open-ended question" in ds.summary()


def test_mlvu_lmms_eval_flat_layout(tmp_path: Path) -> None:
    rows = [{"video_name": "needle_3.mp4", "question": "What falls?\n(A) a leaf\n(B) a coin\n(C) rain",
             "answer": "B", "task_type": "needle", "duration": 300}]  # fmt: skip
    ann = tmp_path / "mlvu_dev.jsonl"
    ann.write_text("".join(json.dumps(r) + "\n" for r in rows))
    touch(tmp_path / "needle_3.mp4")
    (t,) = load_dataset("mlvu", ann).tasks
    assert (t.question, t.choices, t.answer, t.extra["category"]) == (
        "What falls?",
        ["a leaf", "a coin", "rain"],
        "B",
        "needle",
    )


# -------------------------------------------------------------------------------------- LongVideoBench
def lvb_row(i: int, **over: object) -> dict:
    row = {
        "video_id": "86CxyhFV9MI", "question": "Which subtitle shows while the man in grey speaks?",
        "question_wo_referring_query": "Which subtitle shows?", "candidates": ["hello", "goodbye", "thanks", "sorry"],
        "correct_choice": 2, "position": [120, 200], "topic_category": "NP-News-Programs", "question_category": "S2E",
        "level": "L1-Perception", "id": f"86CxyhFV9MI_{i}", "video_path": "86CxyhFV9MI.mp4",
        "subtitle_path": "86CxyhFV9MI_en.json", "duration_group": 600, "starting_timestamp_for_subtitles": 0.0,
        "duration": 412.5, "view_count": 1000,
    }  # fmt: skip
    row.update(over)
    return row


def test_longvideobench_release_and_test_split(tmp_path: Path) -> None:
    ann = tmp_path / "lvb_val.json"
    rows = [lvb_row(0), lvb_row(1, candidates=["a", "b", "c", "d", "e"], correct_choice=4),
            lvb_row(2, correct_choice=None)]  # fmt: skip
    ann.write_text(json.dumps(rows))
    touch(tmp_path / "videos" / "86CxyhFV9MI.mp4")
    ds = load_dataset("longvideobench", ann)
    a, b = ds.tasks
    assert (a.id, a.answer, a.choices[2], a.duration) == (
        "longvideobench-86CxyhFV9MI_0",
        "C",
        "thanks",
        412.5,
    )
    assert b.answer == "E" and a.media == str(tmp_path / "videos" / "86CxyhFV9MI.mp4")
    assert (
        a.extra["duration_label"] == "3m-10m"
        and a.extra["category"] == "S2E"
        and a.extra["level"] == "L1-Perception"
    )
    assert ds.skipped == {"no correct_choice (the test split has no ground truth)": 1}
    ann.write_text(json.dumps([lvb_row(0, correct_choice=7), lvb_row(1, correct_choice=True)]))
    with pytest.raises(
        DatasetError, match=r"lvb_val\.json:1: correct_choice 7 is out of range.*\n.*:2: correct_choice True"
    ):
        load_dataset("longvideobench", ann)


def test_longvideobench_lmms_eval_flat_layout(tmp_path: Path) -> None:
    row = lvb_row(3, option0="red", option1="blue", option2="green", option3="N/A", option4="N/A", correct_choice=1,
                  duration_group=15, duration=12.0)  # fmt: skip
    del row["candidates"]
    ann = tmp_path / "validation.jsonl"
    ann.write_text(json.dumps(row) + "\n")
    touch(tmp_path / "86CxyhFV9MI.mp4")
    (t,) = load_dataset("longvideobench", ann).tasks
    assert (t.choices, t.answer, t.extra["duration_label"]) == (["red", "blue", "green"], "B", "8s-15s")
    assert t.media == str(tmp_path / "86CxyhFV9MI.mp4")


# ------------------------------------------------------------------------------- evidence in prose
def test_evidence_times_in_prose() -> None:
    assert time_tokens("At 1:39, the woman said 'ke nan'") == [(99.0, 100.0)]
    assert time_tokens("At 05:54, he said, 'All right, now it's 2:39. An hour.'") == [(354.0, 355.0)]
    assert time_tokens("from 1:02 to 1:10 he runs") == [(62.0, 70.0)]
    assert time_tokens("between 0:05 and 0:09, then at 0:20 and 0:30") == [
        (5.0, 9.0),
        (20.0, 21.0),
        (30.0, 31.0),
    ]
    assert time_tokens("1:02:03-1:02:10") == [(3723.0, 3730.0)]
    assert time_tokens("the score was 3.5:1 at no time; no timestamp here") == []
    counts = EvidenceCounts()
    spans = evidence_intervals(["At 1:39 x", "At 1:40 y", "At 9:59 z", "nothing timed"], 120.0, counts)
    assert spans == [[99.0, 101.0]]  # touching seconds joined; 9:59 lies beyond a 2-minute video
    assert (counts.steps, counts.timed, counts.parsed, counts.out_of_range) == (4, 3, 2, 1)


# ------------------------------------------------------------------------------------- OmniVideoBench
def test_omnivideobench_nested_fixture(tmp_path: Path) -> None:
    record = {"video": "video_9", "video_type": "Vlog", "duration": "00:40", "questions": [
        {"question": "What does she say first?", "question_type": "fine-grained perception", "audio_type": "Speech",
         "reasoning_steps": [{"modality": "audio", "evidence": "At 0:12, she says 'hello'.", "inference": "greeting"},
                             {"modality": "vision", "evidece": "She waves from 0:14 to 0:16.", "inference": "wave"}],
         "answer": "hello", "options": ["A.hello", "B.bye", "C.thanks", "D.sorry"], "correct_option": "A"}]}  # fmt: skip
    ann = tmp_path / "data.json"
    ann.write_text(json.dumps([record]))
    touch(tmp_path / "video_9.mp4")
    ds = load_dataset("omnivideobench", ann)
    (t,) = ds.tasks
    assert (t.id, t.answer, t.choices[0], t.evidence) == (
        "omnivideobench-video_9-q0",
        "A",
        "hello",
        [[12.0, 13.0], [14.0, 16.0]],
    )
    assert (
        t.extra["audio_type"] == "Speech"
        and t.extra["domain"] == "Vlog"
        and t.extra["duration_mmss"] == "00:40"
    )
    assert "evidence: 2 of 2 reasoning steps name a time; 2 parsed" in ds.summary()


@needs_ovb
def test_omnivideobench_real_file_loads_all_1000_questions() -> None:
    ds = load_dataset("omnivideobench", OVB, check=False)
    assert len(ds.tasks) == 1000 and len({t.id for t in ds.tasks}) == 1000 and not ds.skipped
    assert len({t.media for t in ds.tasks}) == 628
    assert {t.answer for t in ds.tasks} == {"A", "B", "C", "D"}
    assert len({t.extra["category"] for t in ds.tasks}) == 13
    assert {t.extra["audio_type"] for t in ds.tasks} == {"Speech", "Sound", "Music"}
    first = ds.tasks[0]
    assert first.id == "omnivideobench-video_1-q0" and first.evidence == [[99.0, 100.0], [102.0, 103.0]]
    steps = {k: sum(t.extra["evidence_steps"][k] for t in ds.tasks) for k in ("steps", "timed", "parsed")}
    assert steps == {"steps": 3581, "timed": 2684, "parsed": 2680}
    assert sum(1 for t in ds.tasks if t.evidence) == 907
    assert "907 of 1000 task(s) have evidence intervals" in ds.summary()


@needs_ovb
def test_omnivideobench_question_end_to_end_on_a_stand_in_video(tmp_path: Path) -> None:
    """scripts/eval.py with the preset on the real data.json; the 19-second video_441 is a generated
    stand-in (its three questions run; every other question is skipped for missing media)."""
    media = tmp_path / "media"
    media.mkdir()
    make_video(media / "video_441.mp4", duration=19.5, fps=5)
    out = tmp_path / "run"
    cmd = [
        sys.executable, str(ROOT / "scripts" / "eval.py"), "benchmarks=omnivideobench",
        f"benchmark.annotations={OVB}", f"benchmark.media_root={media}", f"out_dir={out}",
        "policy.name=oracle", "workers=1", "progress=false", "summary.n_boot=100",
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == [f"omnivideobench-video_441-q{i}" for i in range(3)]
    assert all(r["status"] == "ok" and r["reward"] == 1.0 for r in rows)
    assert len((out / "missing_media.jsonl").read_text().splitlines()) == 997
