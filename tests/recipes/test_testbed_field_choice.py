"""Which field a run copies (recipes/testbed/field_choice.py): the chosen colour of a written span, the fields' ranks
in time, neighbours in clause order and in time with their chance, and the command's tables over a run's turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import search_teacher_parquet

from recipes.testbed.field_choice import choices, cue_change, cue_lean, lean, leans, main, report, time_ranks
from recipes.testbed.field_clauses import chosen_field, field_spans
from recipes.testbed.field_grid import WRITTEN
from recipes.testbed.search_step import span_match
from recipes.testbed.span_copy import load_probes, parse_reply

OBSERVATION = "red 8-34, yellow 42-60, green 25-51, blue 0-17"


def _probe(cue: str, observation: str = OBSERVATION) -> dict:
    reply = {
        "observation": observation,
        "thought": "",
        "action": {"type": "get_frames", "start": 0, "end": 1},
    }
    return {"id": "p", "cue": cue, "reply": json.dumps(reply)}


def _written(probe: dict, thought: str) -> str:
    return json.dumps({**json.loads(probe["reply"]), "thought": thought})


def test_time_ranks_order_fields_by_start_then_end() -> None:
    fields = {"red": ("8", "34"), "yellow": ("42", "60"), "green": ("8", "20"), "blue": ("0", "17")}
    assert time_ranks(fields) == {"blue": 1, "green": 2, "red": 3, "yellow": 4}


def test_the_chosen_field_is_the_colour_whose_span_was_written() -> None:
    probe = _probe("blue")
    assert chosen_field(_written(probe, "blue 0-17."), probe) == "blue"
    assert chosen_field(_written(probe, "blue 25-51."), probe) == "green"
    assert chosen_field(_written(probe, "red 42-60."), probe) == "yellow"  # the span decides, not the name
    assert chosen_field(_written(probe, "blue 0-18."), probe) == "other numbers"
    assert chosen_field(_written(probe, "look for blue."), probe) == "no span"
    shared = _probe("blue", "red 0-17, yellow 42-60, green 25-51, blue 0-17")
    # a span two colours share is the cue's
    assert chosen_field(_written(shared, "blue 0-17."), shared) == "blue"


def test_neighbours_in_clause_order_and_in_time_with_their_chance() -> None:
    probe = _probe("blue")  # in time: blue 0-17, red 8-34, green 25-51, yellow 42-60
    green, red, own, off = (
        choices([(_written(probe, t), probe)])[0]
        for t in ("blue 25-51.", "blue 8-34.", "blue 0-17.", "blue 1-2.")
    )
    assert (green["chosen"], green["cue rank"], green["chosen rank"]) == ("green", 1, 3)
    assert green["clause neighbour"] and not green["time neighbour"]
    assert not red["clause neighbour"] and red["time neighbour"]
    assert green["clause chance"] == green["time chance"] == pytest.approx(1 / 3)  # blue is last, and first
    # only another colour's field counts
    assert "clause neighbour" not in own and "clause neighbour" not in off
    assert off["chosen rank"] == "not a field"
    middle = choices([(_written(_probe("yellow"), "yellow 25-51."), _probe("yellow"))])[0]
    # green follows yellow, and precedes it in time
    assert middle["clause neighbour"] and middle["time neighbour"]
    assert middle["clause chance"] == pytest.approx(2 / 3) and middle["time chance"] == pytest.approx(1 / 3)


def test_a_lean_is_the_mean_over_wrong_field_choices_of_neighbour_minus_chance() -> None:
    probe = _probe("blue")  # blue is last in clause order and first in time: one neighbour each, chance 1/3
    recs = choices(
        [
            (_written(probe, t), probe)
            for t in ("blue 25-51.", "blue 25-51.", "blue 8-34.", "blue 0-17.", "blue 1-2.")
        ]
    )
    # green twice (clause neighbour, not in time), red once (in time only); the cue's own field and other numbers
    # are not wrong-field choices
    assert lean(recs, "clause") == pytest.approx((2 / 3 + 2 / 3 - 1 / 3) / 3)
    assert lean(recs, "time") == pytest.approx((-1 / 3 - 1 / 3 + 2 / 3) / 3)
    assert lean(recs[3:], "clause") is None
    # of the four spans that are a field (other numbers is not), one is the cue's, and the cue's is the earliest
    picked = [line for line in report({"r": recs}, [probe]).splitlines() if line.startswith("| r |")][1]
    assert picked == "| r | 4 | 0.250 | 0.250 (chance 0.250) |"
    res = leans({"a": recs, "b": recs[2:3], "right": recs[3:]})
    assert res["clause"]["per_run"]["right"] is None
    # the t is over the names that have a lean
    assert res["clause"]["t"]["n"] == 2
    assert res["clause"]["t"]["mean"] == pytest.approx((1 / 3 - 1 / 3) / 2)


def test_the_command_counts_each_runs_choices(tmp_path: Path, capsys) -> None:
    from envs.synth import generate_benchmark

    generate_benchmark(
        tmp_path / "set", seed=14, n_videos=2, durations=[60.0], config={"level": "search"}, split="test"
    )
    fields = search_teacher_parquet(tmp_path / "set", tmp_path / "fields", field_clauses=True)
    probes = load_probes(fields, tmp_path / "set")
    rows, wrong = [], 0
    for i, p in enumerate(probes):
        spans = field_spans(p["reply"])
        other = next(c for c in spans if spans[c] != spans[p["cue"]])
        written = _written(p, f"{p['cue']} {'-'.join(spans[other])}.") if i % 2 else p["reply"]
        wrong += i % 2
        rows.append({"id": p["id"], "written": written})
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / WRITTEN).write_text(json.dumps({"rows": rows}))
    args = ["--run", f"half={tmp_path / 'r'}", "--probes", str(fields), "--tasks", str(tmp_path / "set")]
    assert main(args) == 0
    out = capsys.readouterr().out
    summary = next(line for line in out.splitlines() if line.startswith("| half |")).split(" | ")
    assert summary[1:3] == [str(len(probes)), str(wrong)] and wrong >= 2
    colour_rows = out.split("the cue's colour against the chosen field")[1].split("**")[0]
    cells = [[int(x) for x in r.strip("| ").split(" | ")[1:]] for r in colour_rows.strip().splitlines()[2:]]
    assert sum(map(sum, cells)) == len(probes)
    assert sum(r[i] for i, r in enumerate(cells)) == len(probes) - wrong  # the diagonal: the cue's own field
    # every written span is some field: the cue's in half, and the earliest in time whenever the written one is
    earliest = 0
    for r in rows:
        fields = field_spans(next(p for p in probes if p["id"] == r["id"])["reply"])
        first = min(fields.values(), key=lambda se: (float(se[0]), float(se[1])))
        earliest += span_match(parse_reply(r["written"])[0]).group(2, 3) == first
    picked = [line for line in out.splitlines() if line.startswith("| half |")][1].split(" | ")
    assert picked[1:3] == [str(len(probes)), f"{(len(probes) - wrong) / len(probes):.3f}"]
    assert picked[3].startswith(f"{earliest / len(probes):.3f} (chance 0.25")
    (tmp_path / "r" / WRITTEN).write_text(json.dumps({"rows": [{"id": "elsewhere", "written": ""}]}))
    with pytest.raises(ValueError, match="not these probes"):
        main(args)


def test_a_name_given_twice_pools_its_runs_and_two_names_get_a_t(tmp_path: Path, capsys) -> None:
    from envs.synth import generate_benchmark

    generate_benchmark(
        tmp_path / "set", seed=15, n_videos=2, durations=[60.0], config={"level": "search"}, split="test"
    )
    fields = search_teacher_parquet(tmp_path / "set", tmp_path / "fields", field_clauses=True)
    probes = load_probes(fields, tmp_path / "set")
    expected = []  # per probe of "a", the clause lean of writing the next clause's field (the previous for the last)
    for shift, name in ((1, "a"), (2, "b")):
        rows = []
        for p in probes:
            order = list(field_spans(p["reply"]))
            i = order.index(p["cue"])
            j = i + shift if i + shift < len(order) else i - shift
            j = j if j >= 0 else (i + 1) % len(order)
            span = field_spans(p["reply"])[
                order[j] if p is not probes[0] else p["cue"]
            ]  # the first one right
            rows.append({"id": p["id"], "written": _written(p, f"{p['cue']} {'-'.join(span)}.")})
            if name == "a" and span != field_spans(p["reply"])[p["cue"]]:
                n_near = (i > 0) + (i < len(order) - 1)
                expected.append((abs(i - j) == 1) - n_near / (len(order) - 1))
        (tmp_path / name).mkdir()
        (tmp_path / name / WRITTEN).write_text(json.dumps({"rows": rows}))
    common = ["--probes", str(fields), "--tasks", str(tmp_path / "set")]
    assert main(["--run", f"a={tmp_path / 'a'}", "--run", f"a={tmp_path / 'a'}", *common]) == 0
    out = capsys.readouterr().out
    summary = next(line for line in out.splitlines() if line.startswith("| a |")).split(" | ")
    assert summary[1:3] == [str(2 * len(probes)), str(2 * len(expected))] and expected
    assert "| lean" not in out  # one name: no t
    runs = ["--run", f"a={tmp_path / 'a'}", "--run", f"b={tmp_path / 'b'}"]
    assert (
        main([*runs, *common, "--json", str(tmp_path / "l.json"), "--figure", str(tmp_path / "l.png")]) == 0
    )
    got = json.loads((tmp_path / "l.json").read_text())
    assert got["clause"]["per_run"]["a"] == pytest.approx(sum(expected) / len(expected))
    assert got["clause"]["per_run"]["a"] > 0  # every wrong copy of "a" is a clause neighbour
    assert got["wrong-field choices"]["a"] == len(expected)
    assert "| clause neighbour − chance | a +" in capsys.readouterr().out
    assert (tmp_path / "l.png").read_bytes()[:4] == b"\x89PNG"


def test_the_cue_lean_is_the_cues_share_of_field_choices_over_chance() -> None:
    probe = _probe("blue")  # four fields: a field at random is the cue's a quarter of the time
    three = _probe("blue", "red 8-34, green 25-51, blue 0-17")  # three fields: a third
    recs = choices(
        [
            (_written(probe, t), probe)
            for t in ("blue 0-17.", "blue 0-17.", "blue 25-51.", "blue 1-2.", "look.")
        ]
        + [(_written(three, "blue 0-17."), three)]
    )
    # four field choices (other numbers and no span are not): three are the cue's
    assert cue_lean(recs) == pytest.approx((3 * 1 + 0) / 4 - (3 * 0.25 + 1 / 3) / 4)
    assert cue_lean(recs[3:5]) is None
    assert cue_lean(recs[2:3]) == pytest.approx(-0.25)
    res = leans(
        {"a": recs, "b": recs[2:3], "none": recs[3:5], "new": recs, "was none": recs, "lost": recs[3:5]}
    )
    assert res["cue"]["per_run"]["none"] is None and res["cue"]["t"]["n"] == 4
    base = leans({"a": recs[2:3], "b": recs[:1], "c": recs, "was none": recs[3:5], "lost": recs})
    change = cue_change(res, base)["per_run"]
    # a name the base lacks, or without a lean on either side, has no change
    assert change == {
        "a": pytest.approx(cue_lean(recs) + 0.25),
        "b": pytest.approx(-1.0),
        "none": None,
        "new": None,
        "was none": None,
        "lost": None,
    }
    assert cue_change(res, base)["t"]["mean"] == pytest.approx((cue_lean(recs) + 0.25 - 1.0) / 2)


def test_the_command_writes_the_cue_lean_and_its_change_from_a_base(tmp_path: Path, capsys) -> None:
    from envs.synth import generate_benchmark

    generate_benchmark(
        tmp_path / "set", seed=16, n_videos=2, durations=[60.0], config={"level": "search"}, split="test"
    )
    fields = search_teacher_parquet(tmp_path / "set", tmp_path / "fields", field_clauses=True)
    probes = load_probes(fields, tmp_path / "set")
    for name, right in (("a", 1), ("b", 0)):  # a: every span the cue's; b: every span another field's
        rows = []
        for p in probes:
            spans = field_spans(p["reply"])
            colour = p["cue"] if right else next(c for c in spans if spans[c] != spans[p["cue"]])
            rows.append({"id": p["id"], "written": _written(p, f"{p['cue']} {'-'.join(spans[colour])}.")})
        (tmp_path / name).mkdir()
        (tmp_path / name / WRITTEN).write_text(json.dumps({"rows": rows}))
    chance = sum(1 / len(field_spans(p["reply"])) for p in probes) / len(probes)
    common = ["--probes", str(fields), "--tasks", str(tmp_path / "set")]
    ab = ["--run", f"s0={tmp_path / 'a'}", "--run", f"s1={tmp_path / 'b'}"]
    assert main([*ab, *common, "--json", str(tmp_path / "then.json")]) == 0
    then = json.loads((tmp_path / "then.json").read_text())["cue"]
    assert then["per_run"] == {"s0": pytest.approx(1 - chance), "s1": pytest.approx(-chance)}
    capsys.readouterr()
    ba = ["--run", f"s0={tmp_path / 'b'}", "--run", f"s1={tmp_path / 'a'}"]
    out_json, png = tmp_path / "now.json", tmp_path / "cue.png"
    args = [
        *ba,
        *common,
        "--base",
        str(tmp_path / "then.json"),
        "--json",
        str(out_json),
        "--cue-figure",
        str(png),
    ]
    assert main(args) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "minus base" in line)
    assert row.startswith("| the cue's share, minus base | s0 -1.000, s1 +1.000 | +0.000 [")
    now = json.loads(out_json.read_text())
    assert now["cue change"]["per_run"] == {"s0": pytest.approx(-1.0), "s1": pytest.approx(1.0)}
    assert png.read_bytes()[:4] == b"\x89PNG"
