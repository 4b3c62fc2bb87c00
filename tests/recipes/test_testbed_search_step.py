"""The search step measure (recipes/testbed/search_step.py): which second turns name the cue, hold the evidence in
their span and look at it, on a generated search-level set and hand-written episodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envs.jsonl import read_jsonl
from recipes.testbed.search_step import cue_named, episode_row, main, measure, span_holds


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    from envs.synth import generate_benchmark

    out = tmp_path_factory.mktemp("search_step") / "set"
    generate_benchmark(out, seed=12, n_videos=2, durations=[60.0], config={"level": "search"}, split="test")
    return out, list(read_jsonl(out / "tasks.jsonl"))


def cue_of(task: dict[str, Any]) -> str:
    return task["question"].split("background is ")[1].rstrip("?")


def other(colour: str) -> str:
    return next(c for c in ("red", "yellow", "green", "blue") if c != colour)


def episode(task: dict[str, Any], thought: str, look: tuple[float, float], first_end: float = 60.0) -> dict:
    turns = [
        {"thought": "look.", "action": {"type": "get_frames", "start": 0, "end": first_end, "num": 8}},
        {"thought": thought, "action": {"type": "get_frames", "start": look[0], "end": look[1], "num": 8}},
    ]
    return {"id": task["id"], "turns": turns}


def test_the_span_must_name_the_cue_and_contain_all_of_the_evidence() -> None:
    assert cue_named("green 26-43.", "green") == 1
    assert cue_named("yellow 26-43.", "green") == 0
    assert cue_named("look for green.", "green") == 0  # no span: not the search step's form
    assert span_holds("green 26-43, digit 2 at 38.", "green", [[30.0, 31.5]]) == 1
    assert span_holds("green 26-43.", "green", [[42.5, 44.0]]) == 0  # the evidence runs past the span's end
    assert span_holds("yellow 26-43.", "green", [[30.0, 31.5]]) == 0
    assert span_holds("", "green", [[30.0, 31.5]]) == 0


def test_episode_rows_keep_only_cue_searches_that_opened_over_the_file(tasks: tuple[Path, list]) -> None:
    _, rows = tasks
    digit = next(t for t in rows if t["extra"]["template"] == "cue_digit_mcq")
    lo, hi = digit["evidence"][0]
    cue = cue_of(digit)
    hit = episode_row(episode(digit, f"{cue} {int(lo)}-{int(hi) + 1}.", (lo - 1, hi + 1)), digit)
    assert hit is not None and (hit["cue"], hit["span"], hit["look"]) == (1, 1, 1)
    miss = episode_row(episode(digit, f"{other(cue)} {int(lo)}-{int(hi) + 1}.", (hi + 2, hi + 5)), digit)
    assert miss is not None and (miss["cue"], miss["span"], miss["look"]) == (0, 0, 0)
    assert episode_row(episode(digit, "x", (0, 1), first_end=10.0), digit) is None  # a narrow first look
    pitch_colour = next(t for t in rows if t["extra"]["template"] == "pitch_color_mcq")
    assert episode_row(episode(pitch_colour, "x", (0, 1)), pitch_colour) is None


def test_measure_and_cli_rate_each_eval_folder(tasks: tuple[Path, list], tmp_path: Path, capsys) -> None:
    set_dir, rows = tasks
    searches = [t for t in rows if t["extra"]["template"] in ("cue_digit_mcq", "cue_pitch_mcq")]
    trajs = []
    for i, task in enumerate(searches):
        lo, hi = task["evidence"][0]
        cue = (
            cue_of(task) if i % 2 == 0 else other(cue_of(task))
        )  # every other episode names the wrong colour
        trajs.append(episode(task, f"{cue} {int(lo)}-{int(hi) + 1}.", (lo, hi)))
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trajs))
    tasks_by_id = {t["id"]: t for t in rows}
    res = measure(tasks_by_id, tmp_path)
    assert res["opened"] == len(searches) == res["search questions"]
    assert res["all"]["cue named"]["mean"] == pytest.approx(
        sum(i % 2 == 0 for i in range(len(searches))) / len(searches)
    )
    assert res["all"]["span holds"]["mean"] == res["all"]["cue named"]["mean"]
    assert res["all"]["look meets"]["mean"] == 1.0
    assert res["all"]["look meets"]["lo"] == 1.0
    assert (
        0 <= res["all"]["cue named"]["lo"] <= res["all"]["cue named"]["mean"] <= res["all"]["cue named"]["hi"]
    )
    assert main(["--set", str(set_dir), "--eval", f"run={tmp_path}"]) == 0
    assert "| run | all |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--set", str(set_dir), "--eval", str(tmp_path)])
    assert "expected LABEL=DIR" in capsys.readouterr().err
    trajs.append({"id": "not-a-question", "turns": []})
    (tmp_path / "agent" / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trajs))
    with pytest.raises(ValueError, match="not a question of the set"):
        measure(tasks_by_id, tmp_path)
