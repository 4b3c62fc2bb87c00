"""recipes/testbed/copy_parts.py: where each end of a copy-task Thought's span comes from, per turn and per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.testbed.copy_parts import main, parts, summary
from recipes.testbed.copy_task import WRITTEN, load_probes, make

LOOK = "blue 28-40, red 36-47, green 7-43, yellow 4-25"  # places: blue 1, red 2, green 3, yellow 4


def _turn(thought: str, observation: str = LOOK) -> str:
    return json.dumps({"observation": observation, "thought": thought, "action": {"type": "get_frames"}})


PROBE = {"id": "p0", "cue": "green", "reply": _turn("green 7-43.")}


@pytest.mark.parametrize(
    ("thought", "expected"),
    [
        ("green 7-43.", (True, "cue's", "cue's", True, False, 3)),
        ("green 28-40.", (True, "other field's", "other field's", True, False, 1)),  # blue's field
        (
            "green 36-25.",
            (True, "other field's", "other field's", False, True, 2),
        ),  # red's start, yellow's end
        ("green 4-43.", (True, "other field's", "cue's", False, True, 4)),  # yellow's start, the cue's end
        ("red 40-99.", (False, "other end", "not in look", False, False, None)),  # blue's end as a start
    ],
)
def test_each_end_of_the_span_is_traced_to_its_field(thought: str, expected: tuple) -> None:
    rec = parts(_turn(thought), PROBE)
    got = (
        rec["cue named"],
        rec["start"],
        rec["end"],
        rec["one field"],
        rec["two fields"],
        rec["start place"],
    )
    assert got == expected and rec["span"]


def test_a_turn_without_a_span_and_a_start_shared_with_the_cue() -> None:
    assert parts(_turn("look again."), PROBE) == {"cue named": False, "span": False}
    # red and green share the start 7: the start is the cue's, from the cue's place
    shared = {
        "id": "p1",
        "cue": "green",
        "reply": _turn("green 7-43.", "red 7-20, green 7-43, blue 1-2, yellow 3-4"),
    }
    rec = parts(_turn("green 7-20."), shared)
    assert (rec["start"], rec["end"], rec["start place"], rec["one field"]) == (
        "cue's",
        "other field's",
        2,
        True,
    )


def test_a_runs_summary_counts_turns_with_a_span_and_the_places_of_the_starts() -> None:
    thoughts = ["green 7-43.", "green 28-40.", "green 36-25.", "green 4-43.", "red 40-99.", "look again."]
    out = summary([parts(_turn(t), PROBE) for t in thoughts])
    assert (out["turns"], out["with a span"], out["one field"], out["two fields"]) == (6, 5, 2, 2)
    assert out["cue named"] == pytest.approx(4 / 6)
    assert out["start"] == {"cue's": 0.2, "other field's": 0.6, "other end": 0.2, "not in look": 0.0}
    assert out["end"] == {"cue's": 0.4, "other field's": 0.4, "other end": 0.0, "not in look": 0.2}
    assert out["start places"] == {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25}


def test_the_command_reports_the_teacher_and_each_run(tmp_path: Path, capsys) -> None:
    probes = load_probes(make(8, 9, tmp_path / "probes.parquet"))
    run = tmp_path / "a"
    run.mkdir()
    # run a writes every probe's Thought with the span of the clause in the first place
    rows = []
    for p in probes:
        first = json.loads(p["reply"])["observation"].split(", ")[0].split(" ")[1]
        rows.append(
            {"id": p["id"], "written": _turn(f"{p['cue']} {first}.", json.loads(p["reply"])["observation"])}
        )
    (run / WRITTEN).write_text(json.dumps({"rows": rows}))
    args = [
        "--run",
        f"a={run}",
        "--probes",
        str(tmp_path / "probes.parquet"),
        "--json",
        str(tmp_path / "r.json"),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| teacher | 8 | 1.000 | 8 | 1.000 | 0.000 | 0.000 | 0.000 | 1.000 |" in out
    assert "| a | 1.000 | 0.000 | 0.000 | 0.000 |" in out  # every start from place 1
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["a"]["one field"] == 8 and res["teacher"]["start places"]["1"] < 1.0
    # a run measured on other probes is refused
    (run / WRITTEN).write_text(json.dumps({"rows": rows[:5]}))
    with pytest.raises(ValueError, match="not these probes"):
        main(args)
