"""The testbed's digit probe (recipes/testbed/digit_probe.py): forced looks that hold the digit at the planned
spacing, the read score against the truth, the paired summary, and a resumable run on a tiny random agent."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from envs.jsonl import read_jsonl
from omniagent.backends.synth_world import SynthWorld
from recipes.testbed.digit_looks import (
    GRID,
    cue_digit_items,
    digit_frame,
    forced_look,
    score_read,
    shows_digit,
)
from recipes.testbed.digit_probe import LOOK_SIZES, summary, table


@pytest.fixture(scope="module")
def search_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from envs.synth import generate_benchmark

    out = tmp_path_factory.mktemp("probe") / "set"
    generate_benchmark(out, seed=11, n_videos=1, durations=[60.0], config={"level": "search"}, split="test")
    return out


def test_forced_looks_hold_the_digit_inside_the_field_at_the_planned_spacing(search_set: Path) -> None:
    items = cue_digit_items(search_set / "tasks.jsonl")
    assert len(items) == 4 and sorted(i["digit"] for i in items) == ["2", "4", "7", "9"]
    made = 0
    for index, item in enumerate(items):
        world = SynthWorld.for_media(item["task"].media)
        lo, hi = item["field"]
        (showing,) = item["task"].evidence
        for n in LOOK_SIZES:
            look = forced_look(world, item["field"], n, np.random.default_rng([0, index, n]))
            if look is None:
                continue
            made += 1
            a, b = look["start"], look["end"]
            assert look["num"] == n and isinstance(a, int) and isinstance(b, int) and lo <= a <= b <= hi
            if n > 1:
                assert abs((b - a) / (n - 1) - (hi - lo) / GRID) <= 0.5
            t = digit_frame(world, look)
            assert showing[0] <= t <= showing[1] and shows_digit(world, t)
            assert {i.value for i in world.frame(t) if i.kind == "digit"} == {item["digit"]}
            assert {i.value for i in world.frame(t) if i.kind == "background"} == {item["hue"]}
    assert made >= 12


def test_a_read_is_exactly_the_shown_digit() -> None:
    assert score_read("30-33 red, 34 red 9, 36 red", "9", 34, "red") == {
        "read": 1, "named": 1, "at_frame": 1, "colour": 1
    }  # fmt: skip
    assert score_read("30-40 red, 41 red 4", "9", 34, "red") == {
        "read": 0,
        "named": 1,
        "at_frame": 0,
        "colour": 1,
    }
    two = score_read("34 red 9, 45 blue 7", "9", 34, "red")
    assert two["read"] == 0 and two["at_frame"] == 1  # two digits named is not a read
    assert score_read("audio 40-40: B. 18: B.", "9", 34, "red") == dict.fromkeys(
        ("read", "named", "at_frame", "colour"), 0
    )


def test_the_summary_pairs_one_and_eight_frame_looks_by_field() -> None:
    def look(n: int) -> dict:  # frames at 10, 12, 14, ... (one frame: 10)
        return {"type": "get_frames", "start": 10, "end": 10 + 2 * (n - 1), "num": n}

    rows = [{"id": "q1", "media": "v1", "left_out": "first look hit the digit"}]
    for i, (one, eight) in enumerate([(1, 0), (1, 0), (1, 1), (0, 0)]):
        for n, read in ((1, one), (8, eight)):
            rows.append({"id": f"q{i + 2}", "media": f"v{i % 2}", "condition": "episode", "n": n, "read": read,
                         "named": 1, "at_frame": read, "colour": 1, "look": look(n), "text": "10 red, 12-14 red 9"})  # fmt: skip
    unpaired = {
        "id": "q9",
        "media": "v1",
        "condition": "episode",
        "n": 1,
        "look": look(1),
        "text": "10 red 9",
    }
    rows.append(
        {**unpaired, "read": 1, "named": 1, "at_frame": 1, "colour": 1}
    )  # no 8-frame look: not paired
    res = summary(rows)
    assert res["left_out"] == {"first look hit the digit": 1}
    assert (
        res["rates"]["episode n=1"]["read"]["n"] == 5 and res["rates"]["episode n=1"]["read"]["mean"] == 0.8
    )
    primary = res["primary"]
    assert primary["n"] == 4 and primary["videos"] == 2 and primary["mean"] == 0.5
    assert primary["lo"] <= 0.5 <= primary["hi"]
    assert "| episode | 8 | 4 | 0.250" in table(res)
    # clauses starting at a served frame's second: "10 red" and "12-14 red 9" with 8 frames; "10 red" only with 1
    assert res["copied"]["episode n=8"] == {"clauses": 8, "copied": 1.0}
    assert res["copied"]["episode n=1"] == {"clauses": 9, "copied": round(5 / 9, 3)}


def test_the_probe_runs_every_condition_on_a_tiny_agent_and_resumes(search_set: Path, tmp_path: Path) -> None:
    from omniagent.tiny_model import build_tiny_thinker
    from recipes.testbed.digit_probe_run import run_probe
    from recipes.tiny_agent.sets import blank_media

    blank_media(search_set / "tasks.jsonl", search_set.parent / f"{search_set.name}_blind")
    build_tiny_thinker(seed=0, out_dir=tmp_path / "agent")
    args = argparse.Namespace(model=tmp_path / "agent", set=search_set, out=tmp_path / "out", seed=0,
                              conditions=["episode", "blind", "caption"], sizes=[1, 8])  # fmt: skip
    run_probe(args)
    rows = list(read_jsonl(tmp_path / "out" / "rows.jsonl"))
    scored = [r for r in rows if "read" in r]
    skipped = {r["id"] for r in rows if r.get("left_out") and r.get("condition") is None}
    no_look = {(r["id"], r["n"]) for r in rows if r.get("condition") == "none"}
    by_look: dict[tuple[str, int], set[str]] = {}
    for row in scored:
        assert row["look"]["num"] == row["n"] and isinstance(row["text"], str) and row["read"] in (0, 1)
        by_look.setdefault((row["id"], row["n"]), set()).add(row["condition"])
    assert scored and all(conds == set(args.conditions) for conds in by_look.values())
    expected = {(i["task"].id, n) for i in cue_digit_items(search_set / "tasks.jsonl") for n in args.sizes}
    assert set(by_look) | no_look | {(i, n) for i, n in expected if i in skipped} == expected
    run_probe(args)  # resumed: nothing is played again
    assert len(list(read_jsonl(tmp_path / "out" / "rows.jsonl"))) == len(rows)
