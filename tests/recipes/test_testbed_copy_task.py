"""The minimal copy task (recipes/testbed/copy_task.py): its rows, how the warm-up reads them, a tiny agent trained and
measured on them end to end, and the analysis of exact copies and cue leans over runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.testbed.copy_task import WRITTEN, analyse, contrast, contrast_figure, load_probes, main, make
from recipes.testbed.field_clauses import field_spans
from recipes.testbed.span_copy import observation_of, parse_reply


def test_each_row_copies_the_cues_span_and_the_clause_order_is_drawn(tmp_path: Path) -> None:
    probes = load_probes(make(200, 3, tmp_path / "rows.parquet"))
    orders = set()
    for p in probes:
        fields = field_spans(p["reply"])
        assert sorted(fields) == ["blue", "green", "red", "yellow"]
        thought, action = parse_reply(p["reply"])
        start, end = fields[p["cue"]]
        assert thought == f"{p['cue']} {start}-{end}."
        assert (str(action["start"]), str(action["end"])) == (start, end) and action["type"] == "get_frames"
        assert f"background is {p['cue']}?" in p["task_text"]
        duration = int(p["task_text"].split("duration ")[1].split(".")[0])
        assert all(0 <= int(s) < int(e) <= duration for s, e in fields.values())
        orders.add(tuple(fields))
    assert len(orders) == 24  # every order of the four clauses is drawn
    assert {p["cue"] for p in probes} == {"blue", "green", "red", "yellow"}
    fixed = load_probes(make(50, 3, tmp_path / "fixed.parquet", fixed_order=True))
    assert {tuple(field_spans(p["reply"])) for p in fixed} == {("red", "yellow", "green", "blue")}
    again = load_probes(make(200, 3, tmp_path / "again.parquet"))
    assert again == probes and load_probes(make(200, 4, tmp_path / "other.parquet")) != probes
    with pytest.raises(ValueError, match="at least 1"):
        make(0, 3, tmp_path / "none.parquet")
    spaced = load_probes(make(200, 3, tmp_path / "spaced.parquet", spaced=True))
    for p, q in zip(
        probes, spaced, strict=True
    ):  # the same draws, the Observation and Thought led by a space
        assert json.loads(q["reply"])["observation"] == " " + json.loads(p["reply"])["observation"]
        assert parse_reply(q["reply"])[0] == " " + parse_reply(p["reply"])[0]
        assert field_spans(q["reply"]) == field_spans(p["reply"]) and q["cue"] == p["cue"]


def test_the_warm_up_is_given_the_observation_and_trained_on_the_copy(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from recipes.testbed.model import build_testbed_agent
    from recipes.tiny_agent.model import corpus_texts
    from recipes.tiny_agent.text_warmup import short_turns

    rows = make(20, 5, tmp_path / "rows.parquet")
    init = build_testbed_agent(tmp_path / "init", corpus_texts([rows]), seed=0, width=64, layers=1)
    tok = AutoTokenizer.from_pretrained(init)
    for (prompt, target, _), probe in zip(
        short_turns([rows], tok, observation_loss=False), load_probes(rows), strict=True
    ):
        given = tok.decode(prompt)
        # the probe's prompt (as span_copy.write_turn builds it) is the training row's, to the Observation
        head = f"<|im_start|>user\n{probe['task_text']}\n{probe['latest']}<|im_end|>\n<|im_start|>assistant\n"
        assert given == head + '{"observation": "' + observation_of(probe["reply"])
        assert probe["latest"].startswith("Frames 0.00s-")
        assert tok.decode(target).startswith('", "thought": "' + parse_reply(probe["reply"])[0] + '"')
    # the Thought's colour is a token of the Observation only with --spaced (or when the cue's clause comes first)
    spaced = make(20, 5, tmp_path / "spaced.parquet", spaced=True)
    for rows_of, matched in ((rows, False), (spaced, True)):
        for (prompt, target, _), probe in zip(
            short_turns([rows_of], tok, observation_loss=False), load_probes(rows_of), strict=True
        ):
            colour = next(i for i in target if tok.decode([i]).strip() == probe["cue"])
            first = next(iter(field_spans(probe["reply"]))) == probe["cue"]
            assert (colour in prompt[-40:]) == (matched or first)


def test_a_tiny_agent_is_trained_and_measured_on_the_task(tmp_path: Path, capsys) -> None:
    from recipes.testbed import span_copy
    from recipes.testbed.model import build_testbed_agent
    from recipes.tiny_agent.model import corpus_texts

    rows, probes = make(40, 6, tmp_path / "rows.parquet"), make(6, 7, tmp_path / "probes.parquet")
    init = build_testbed_agent(tmp_path / "init", corpus_texts([rows]), seed=0, width=64, layers=1)
    run = tmp_path / "min_s0"
    assert span_copy.main(["train", "--init", str(init), "--data", str(rows), "--seed", "0", "--steps", "2",
                           "--out", str(run)]) == 0  # fmt: skip
    assert main(["measure", "--model", str(run), "--probes", str(probes)]) == 0
    written = json.loads((run / WRITTEN).read_text())
    assert [r["id"] for r in written["rows"]] == [p["id"] for p in load_probes(probes)]
    for row, probe in zip(written["rows"], load_probes(probes), strict=True):
        assert row["written"].startswith(probe["reply"][: probe["reply"].index('", "thought":')])
    capsys.readouterr()
    assert main(["analyse", "--run", f"s0={run}", "--probes", str(probes)]) == 0
    assert capsys.readouterr().out.startswith("| run | turns | exact copy |")


def _written(probe: dict, colour: str | None) -> dict:
    """The probe's reply with its Thought leading with ``colour``'s span (the cue's name kept), or no span."""
    reply = json.loads(probe["reply"])
    fields = field_spans(probe["reply"])
    reply["thought"] = f"{probe['cue']} {'-'.join(fields[colour])}." if colour else "look again."
    return {"id": probe["id"], "written": json.dumps(reply)}


def test_the_analysis_counts_exact_copies_and_the_cue_lean_per_run(tmp_path: Path, capsys) -> None:
    probes = load_probes(make(8, 9, tmp_path / "probes.parquet"))
    other = {p["id"]: next(c for c, s in field_spans(p["reply"]).items() if s != field_spans(p["reply"])[p["cue"]])
             for p in probes}  # fmt: skip
    # a: every turn the cue's span; b: half the cue's, a quarter another field's, a quarter no span
    plans = {
        "a": [p["cue"] for p in probes],
        "b": [p["cue"] if i < 4 else other[p["id"]] if i < 6 else None for i, p in enumerate(probes)],
    }
    for name, colours in plans.items():
        (tmp_path / name).mkdir()
        rows = [_written(p, c) for p, c in zip(probes, colours, strict=True)]
        (tmp_path / name / WRITTEN).write_text(json.dumps({"rows": rows}))
    # b's warm-up left its loss curve: the end loss is the mean of its last 100 steps
    (tmp_path / "b" / "warmup_loss.json").write_text(
        json.dumps({"loss": [9.0] * 50 + [0.5] * 50 + [0.3] * 50})
    )
    res = analyse([("a", tmp_path / "a"), ("b", tmp_path / "b")], probes)
    assert res["per_run"]["a"] == {
        "turns": 8,
        "exact copy": 1.0,
        "field choices": 8,
        "cue lean": 0.75,
        "end loss": None,
    }
    assert res["per_run"]["b"] == {
        "turns": 8,
        "exact copy": 0.5,
        "field choices": 6,
        "cue lean": pytest.approx(4 / 6 - 0.25),
        "end loss": pytest.approx(0.4),
    }
    assert res["cue"]["t"]["n"] == 2
    assert res["cue"]["t"]["mean"] == pytest.approx((0.75 + 4 / 6 - 0.25) / 2)
    args = ["analyse", "--run", f"a={tmp_path / 'a'}", "--run", f"b={tmp_path / 'b'}", "--probes",
            str(tmp_path / "probes.parquet"), "--json", str(tmp_path / "r.json"), "--figure", str(tmp_path / "r.png")]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| a | 8 | 1.000 | 8 | +0.750 | — |" in out and "| b | 8 | 0.500 | 6 | +0.417 | 0.400 |" in out
    assert "cue lean over runs: +0.583" in out
    assert json.loads((tmp_path / "r.json").read_text())["per_run"]["b"]["field choices"] == 6
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    # a run measured on other probes, or on only some of these, is refused
    (tmp_path / "b" / WRITTEN).write_text(json.dumps({"rows": rows[:7]}))
    with pytest.raises(ValueError, match="not these probes"):
        analyse([("b", tmp_path / "b")], probes)


def test_two_arms_are_contrasted_run_by_run(tmp_path: Path, capsys) -> None:
    def arm(**runs: tuple[float, float | None]) -> dict:
        return {"per_run": {n: {"exact copy": e, "cue lean": c} for n, (e, c) in runs.items()}}

    a = arm(s0=(0.9, 0.6), s1=(0.5, 0.2), s2=(0.4, None), s3=(0.6, 0.3), only_a=(1.0, 0.75))
    b = arm(s0=(0.3, 0.1), s1=(0.4, 0.0), s2=(0.2, 0.0), s3=(0.6, None), only_b=(0.0, 0.0))
    res = contrast(a, b)
    assert res["exact copy"]["per_run"] == {
        "s0": pytest.approx(0.6),
        "s1": pytest.approx(0.1),
        "s2": pytest.approx(0.2),
        "s3": pytest.approx(0.0),
    }
    assert res["cue lean"]["per_run"] == {"s0": pytest.approx(0.5), "s1": pytest.approx(0.2)}
    assert res["exact copy"]["t"]["mean"] == pytest.approx(0.225) and res["cue lean"]["t"]["n"] == 2
    for name, value in (("a", a), ("b", b)):
        (tmp_path / f"{name}.json").write_text(json.dumps(value))
    assert main(["contrast", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "| exact copy | s0 +0.600, s1 +0.100, s2 +0.200, s3 +0.000 | +0.225 [" in out
    assert "| cue lean | s0 +0.500, s1 +0.200 | +0.350 [" in out
    # the record and the figure of each run's exact copy in both arms (runs in one arm only are left out)
    args = ["contrast", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "b.json"), "--json",
            str(tmp_path / "c.json"), "--figure", str(tmp_path / "c.png"), "--labels", "arm", "control"]  # fmt: skip
    assert main(args) == 0
    assert json.loads((tmp_path / "c.json").read_text())["exact copy"]["t"]["mean"] == pytest.approx(0.225)
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert contrast_figure(a, b, tmp_path / "d.png") == {
        "s0": (0.9, 0.3),
        "s1": (0.5, 0.4),
        "s2": (0.4, 0.2),
        "s3": (0.6, 0.6),
    }
