"""Benchmark adapters on small hand-written annotation files (omniagent/datasets/)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omniagent.datasets import DATASETS, DatasetError, load_dataset, parse_timestamp, split_option


def touch(path: Path, data: bytes = b"not really a video") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_registry_has_every_adapter() -> None:
    for name in (
        "tasks",
        "generic",
        "videomme",
        "lvbench",
        "dailyomni",
        "worldsense",
        "longvale",
        "vsibench",
        "synthetic",
    ):
        assert name in DATASETS


def test_helpers() -> None:
    assert split_option("A. a red car", "A") == "a red car"
    assert split_option("(B) two", "B") == "two"
    assert split_option("no prefix here") == "no prefix here"
    assert parse_timestamp("01:02:03.5") == 3723.5
    assert parse_timestamp("02:03") == 123
    assert parse_timestamp("12.5") == 12.5


def videomme_rows() -> list[dict]:
    base = {"duration": "short", "domain": "Knowledge", "sub_category": "Humanity & History", "url": "u"}
    return [
        {**base, "video_id": "001", "videoID": "vidA", "question_id": "001-1", "task_type": "Counting Problem",
         "question": "How many?", "options": ["A. one", "B. two", "C. three", "D. four"], "answer": "C"},
        {**base, "video_id": "001", "videoID": "vidA", "question_id": "001-2", "task_type": "Object Recognition",
         "question": "What?", "options": ["A. cat", "B. dog", "C. cow", "D. hen"], "answer": "A"},
        {**base, "video_id": "002", "videoID": "vidB", "question_id": "002-1", "task_type": "OCR Problems",
         "question": "Which text?", "options": ["A. x", "B. y", "C. z", "D. w"], "answer": "D"},
    ]  # fmt: skip


def test_videomme_parquet_with_missing_media_reported(tmp_path: Path) -> None:
    ann = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(videomme_rows()), ann)
    media = tmp_path / "data"
    touch(media / "vidA.mp4")
    ds = load_dataset("videomme", ann, media)
    assert [t.id for t in ds.tasks] == ["videomme-001-1", "videomme-001-2"]
    t = ds.tasks[0]
    assert t.choices == ["one", "two", "three", "four"] and t.answer == "C" and t.task_type == "mcq"
    assert t.media == str(media / "vidA.mp4")
    assert t.extra["category"] == "Counting Problem" and t.extra["duration_label"] == "short"
    assert len(ds.missing) == 1
    assert ds.missing[0].task_id == "videomme-002-1" and ds.missing[0].reason == "file not found"
    assert "skipped for missing media" in ds.summary()


def test_limit_applies_before_the_media_check(tmp_path: Path) -> None:
    ann = write_jsonl(tmp_path / "v.jsonl", videomme_rows())
    touch(tmp_path / "vidB.mp4")
    ds = load_dataset("videomme", ann, limit=2)  # media root: the annotation folder
    assert ds.tasks == [] and len(ds.missing) == 2  # the first two ids, whose media is absent


def test_empty_media_file_is_reported(tmp_path: Path) -> None:
    ann = write_jsonl(tmp_path / "v.jsonl", videomme_rows()[:1])
    touch(tmp_path / "vidA.mp4", b"")
    ds = load_dataset("videomme", ann)
    assert not ds.tasks and "empty" in ds.missing[0].reason


def test_malformed_rows_name_file_and_row(tmp_path: Path) -> None:
    rows = videomme_rows()
    rows[1]["answer"] = "E"  # not an option
    del rows[2]["question"]
    ann = write_jsonl(tmp_path / "v.jsonl", rows)
    with pytest.raises(DatasetError) as err:
        load_dataset("videomme", ann)
    text = str(err.value)
    assert "2 bad annotation(s)" in text
    assert f"{ann}:2" in text and "not one of the options" in text
    assert f"{ann}:3" in text and "missing field 'question'" in text


def test_invalid_json_line(tmp_path: Path) -> None:
    ann = tmp_path / "v.jsonl"
    ann.write_text(json.dumps(videomme_rows()[0]) + "\n{not json\n")
    with pytest.raises(DatasetError, match=r"v\.jsonl:2: not valid JSON"):
        load_dataset("videomme", ann)


def test_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    rows = videomme_rows()
    rows[2]["question_id"] = "001-1"
    ann = write_jsonl(tmp_path / "v.jsonl", rows)
    with pytest.raises(DatasetError, match="duplicate task id 'videomme-001-1'"):
        load_dataset("videomme", ann)


def test_lvbench_embedded_options_and_time_reference(tmp_path: Path) -> None:
    rec = {
        "key": "hFWRtNbCOqI",
        "type": "cartoon",
        "video_info": {"duration_minutes": 60.5, "fps": 30},
        "qa": [
            {"uid": "1", "question": "What year appears?\n(A) 1636\n(B) 1366\n(C) 1363\n(D) 1633", "answer": "A",
             "question_type": ["entity recognition"], "time_reference": "00:15-00:19"},
            {"uid": "2", "question": "Who speaks first?\n(A) the cat\n(B) the dog", "answer": "(B)",
             "question_type": ["reasoning", "key information retrieval"], "time_reference": "1:02:03-1:02:10"},
        ],
    }  # fmt: skip
    ann = write_jsonl(tmp_path / "video_info.meta.jsonl", [rec])
    touch(tmp_path / "hFWRtNbCOqI.mp4")
    ds = load_dataset("lvbench", ann)
    a, b = ds.tasks
    assert a.id == "lvbench-1" and a.question == "What year appears?"
    assert a.choices == ["1636", "1366", "1363", "1633"] and a.answer == "A"
    assert a.evidence == [[15.0, 19.0]]
    assert b.answer == "B" and b.evidence == [[3723.0, 3730.0]]
    assert b.extra["category"] == "reasoning, key information retrieval"


def test_lvbench_without_option_lines_is_malformed(tmp_path: Path) -> None:
    rec = {"key": "k", "qa": [{"uid": "1", "question": "No options here", "answer": "A"}]}
    ann = write_jsonl(tmp_path / "lv.jsonl", [rec])
    with pytest.raises(DatasetError, match=r"lv\.jsonl:1 qa\[0\]: no '\(A\) \.\.\.' option lines"):
        load_dataset("lvbench", ann)


def test_dailyomni_json_list(tmp_path: Path) -> None:
    rows = [
        {"video_id": "abc", "Question": "What sound follows the door?", "Choice": ["A. bark", "B. bell", "C. none", "D. music"],
         "Answer": "B", "Type": "AV Event Alignment", "video_duration": "30s", "content_parent_category": "Daily"},
    ]  # fmt: skip
    ann = tmp_path / "qa.json"
    ann.write_text(json.dumps(rows))
    touch(tmp_path / "Videos" / "abc" / "abc_video.mp4")
    ds = load_dataset("dailyomni", ann)
    (t,) = ds.tasks
    assert t.id.startswith("dailyomni-abc-") and t.answer == "B" and t.choices[1] == "bell"
    assert t.media.endswith("Videos/abc/abc_video.mp4")
    assert t.extra["category"] == "AV Event Alignment" and t.extra["duration_label"] == "30s"


def test_worldsense_nested_and_flat(tmp_path: Path) -> None:
    nested = {
        "vid1": {
            "video_id": "vid1", "duration": "1min", "domain": "Sports",
            "task1": {"question": "Q1?", "answer": "C", "candidates": ["A. a", "B. b", "C. c", "D. d"],
                      "task_domain": "Recognition", "task_type": "Audio Recognition"},
            "task2": {"question": "Q2?", "answer": "A", "candidates": ["A. a", "B. b", "C. c", "D. d"],
                      "task_domain": "Reasoning", "task_type": "Causal Reasoning"},
        }
    }  # fmt: skip
    ann = tmp_path / "worldsense_qa.json"
    ann.write_text(json.dumps(nested))
    touch(tmp_path / "vid1.mp4")
    ds = load_dataset("worldsense", ann)
    assert [t.id for t in ds.tasks] == ["worldsense-vid1-task1", "worldsense-vid1-task2"]
    assert ds.tasks[0].answer == "C" and ds.tasks[1].extra["category"] == "Causal Reasoning"
    flat = tmp_path / "flat.jsonl"
    write_jsonl(
        flat,
        [{"video": "vid1.mp4", "index": 7, "question": "Q?", "candidates": ["A. x", "B. y"], "answer": "B"}],
    )
    (t,) = load_dataset("worldsense", flat).tasks
    assert t.id == "worldsense-vid1-7" and t.answer == "B"


def test_longvale_grounding_tasks(tmp_path: Path) -> None:
    ann = tmp_path / "longvale.json"
    ann.write_text(
        json.dumps(
            {"v_1": {"duration": 120.0, "timestamps": [[0.0, 12.5], [100.0, 121.0]],
                     "sentences": ["A man speaks while a bell rings.", "Music plays as the crowd cheers."]}}
        )
    )  # fmt: skip
    touch(tmp_path / "v_1.mp4")
    a, b = load_dataset("longvale", ann).tasks
    assert a.task_type == "tr" and a.answer == [[0.0, 12.5]] and "bell rings" in a.question
    assert b.answer == [[100.0, 120.0]] and b.extra["clipped"] is True and b.duration == 120.0


def test_longvale_mismatched_lists_are_malformed(tmp_path: Path) -> None:
    ann = tmp_path / "lv.json"
    ann.write_text(json.dumps({"v": {"duration": 10, "timestamps": [[0, 1]], "sentences": []}}))
    with pytest.raises(DatasetError, match=r"lv\.json:v: 'timestamps' and 'sentences'"):
        load_dataset("longvale", ann)


def test_vsibench_numeric_size_and_mcq(tmp_path: Path) -> None:
    rows = [
        {"id": 1, "dataset": "scannet", "scene_name": "scene0001_00", "question_type": "object_counting",
         "question": "How many chairs?", "options": None, "ground_truth": "4"},
        {"id": 2, "dataset": "scannet", "scene_name": "scene0001_00", "question_type": "room_size_estimation",
         "question": "Room size in square meters?", "options": None, "ground_truth": "23.5"},
        {"id": 3, "dataset": "arkitscenes", "scene_name": "41069025", "question_type": "object_rel_direction_easy",
         "question": "Which side?", "options": ["A. left", "B. right", "C. back"], "ground_truth": "B"},
    ]  # fmt: skip
    ann = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), ann)
    touch(tmp_path / "scannet" / "scene0001_00.mp4")
    touch(tmp_path / "arkitscenes" / "41069025.mp4")
    a, b, c = load_dataset("vsibench", ann).tasks
    assert (a.task_type, a.answer) == ("num", 4.0)
    assert (b.task_type, b.answer) == ("size", 23.5)
    assert (c.task_type, c.answer, c.choices) == ("mcq", "B", ["left", "right", "back"])
    assert load_dataset("vsibench", ann, task_types=["size"]).tasks[0].id == "vsibench-2"


def test_generic_field_mapping_and_media_template(tmp_path: Path) -> None:
    rows = [
        {"qid": "q1", "vid": "clip1", "q": "Which?", "opts": ["x", "y", "z"], "gt": 2, "kind": "mcq"},
        {"qid": "q2", "vid": "clip1", "q": "When?", "gt": "[[1, 2]]", "kind": "tr"},
        {"qid": "q3", "vid": "clip1", "q": "How many?", "gt": "3", "kind": "num"},
    ]
    ann = write_jsonl(tmp_path / "mine.jsonl", rows)
    touch(tmp_path / "clips" / "clip1.mp4")
    ds = load_dataset(
        "generic",
        ann,
        fields={"id": "qid", "question": "q", "choices": "opts", "answer": "gt", "task_type": "kind"},
        media_template="clips/{vid}.mp4",
        id_prefix="mine-",
    )
    a, b, c = ds.tasks
    assert a.id == "mine-q1" and a.answer == "C" and a.choices == ["x", "y", "z"]
    assert b.answer == [[1.0, 2.0]] and c.answer == 3.0
    assert a.media == str(tmp_path / "clips" / "clip1.mp4")


def test_generic_csv_with_fixed_task_type(tmp_path: Path) -> None:
    ann = tmp_path / "t.csv"
    ann.write_text("id,media,question,answer\nc1,a.mp4,How far?,2.5\nc2,a.mp4,How tall?,oops\n")
    touch(tmp_path / "a.mp4")
    with pytest.raises(DatasetError, match=r"t\.csv:3: a num answer must be a number"):
        load_dataset("generic", ann, task_type="num")


def test_native_tasks_resolve_media_against_the_root(tmp_path: Path) -> None:
    ann = write_jsonl(
        tmp_path / "tasks.jsonl",
        [{"id": "t1", "media": "m/a.mp4", "question": "Q?", "task_type": "ff", "answer": "yes"}],
    )
    touch(tmp_path / "m" / "a.mp4")
    (t,) = load_dataset("tasks", ann).tasks
    assert t.media == str(tmp_path / "m" / "a.mp4")


def test_unknown_dataset_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="unknown dataset"):
        load_dataset("nope", tmp_path / "x.jsonl")
    with pytest.raises(DatasetError, match="annotation file not found"):
        load_dataset("videomme", tmp_path / "absent.jsonl")
    with pytest.raises(DatasetError, match="unsupported annotation format"):
        load_dataset("videomme", touch(tmp_path / "x.txt"))


def test_a_field_of_the_wrong_shape_still_names_the_row(tmp_path: Path) -> None:
    rec = {"key": "k", "qa": [{"uid": "1", "question": 42, "answer": "A"}]}  # question is not text
    ann = write_jsonl(tmp_path / "lv.jsonl", [{"key": "ok", "qa": []}, rec])
    with pytest.raises(DatasetError, match=r"lv\.jsonl:2"):
        load_dataset("lvbench", ann)


def test_media_paths_must_stay_inside_the_media_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    touch(root / "m" / "a.mp4")
    outside = touch(tmp_path / "secret.mp4")
    rows = [
        {"id": "ok", "media": "m/../m/a.mp4", "question": "Q?", "task_type": "ff", "answer": "y"},
        {"id": "up", "media": "../secret.mp4", "question": "Q?", "task_type": "ff", "answer": "y"},
        {"id": "abs", "media": str(outside), "question": "Q?", "task_type": "ff", "answer": "y"},
    ]
    ann = write_jsonl(tmp_path / "tasks.jsonl", rows)
    with pytest.raises(DatasetError, match="outside media_root") as info:
        load_dataset("tasks", ann, root)
    text = str(info.value)
    assert "'up'" in text and "'abs'" in text and "'ok'" not in text and "allow_outside_media_root" in text
    loaded = load_dataset("tasks", ann, root, allow_outside_media_root=True)
    assert [t.id for t in loaded.tasks] == ["ok", "up", "abs"]
    (inside,) = load_dataset("tasks", write_jsonl(tmp_path / "one.jsonl", rows[:1]), root).tasks
    assert Path(inside.media).resolve() == (root / "m" / "a.mp4").resolve()
    with pytest.raises(DatasetError, match="outside media_root"):  # adapters with templates too
        load_dataset("generic", write_jsonl(tmp_path / "g.jsonl", [{"id": "g", "video": "../../x.mp4", "q": "Q?", "a": "y"}]),
                     root, fields={"media": "video", "question": "q", "answer": "a"}, task_type="ff")  # fmt: skip
