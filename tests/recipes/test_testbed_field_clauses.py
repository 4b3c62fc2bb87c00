"""The field clauses probe (recipes/testbed/field_clauses.py): the teacher's episodes in the time order and in field
clauses are the same turns, Thoughts and actions; in field clauses every second Thought's span opens the cue's
clause; turns are scored and two arms are paired by seed on the same probes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from testkit import search_teacher_parquet

from recipes.testbed.field_clauses import field_spans, follows_the_name, main, same_episodes, span_source
from recipes.testbed.field_grid import SCORED, WRITTEN
from recipes.testbed.span_copy import load_probes, parse_reply


@pytest.fixture(scope="module")
def teachers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A two-video search-level set, and the compact teacher's kept episodes on it in the time order and in field
    clauses (SFT rows)."""
    from envs.synth import generate_benchmark

    root = tmp_path_factory.mktemp("field_clauses")
    generate_benchmark(
        root / "set", seed=14, n_videos=2, durations=[60.0], config={"level": "search"}, split="test"
    )
    time = search_teacher_parquet(root / "set", root / "time")
    fields = search_teacher_parquet(root / "set", root / "fields", field_clauses=True)
    return root / "set", time, fields


def test_the_two_forms_hold_the_same_episodes(teachers: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, time, fields = teachers
    out = same_episodes(time, fields)
    assert (
        out["turns"] == pq.read_metadata(str(time)).num_rows
        and out["observations changed"] > out["turns"] / 3
    )
    assert out["fields"]["second thoughts with a span"] == out["time"]["second thoughts with a span"] >= 4
    assert out["fields"]["span opens a clause"] == out["fields"]["second thoughts with a span"]
    assert out["time"]["span opens a clause"] < out["time"]["second thoughts with a span"]
    # a Thought or an action changed is caught, and so are other turns
    rows = pq.read_table(str(fields)).to_pylist()
    reply = json.loads(json.loads(rows[1]["messages"])[-1]["content"][0]["text"])
    reply["thought"] += " again"
    messages = json.loads(rows[1]["messages"])
    messages[-1]["content"][0]["text"] = json.dumps(reply)
    rows[1]["messages"] = json.dumps(messages)
    pq.write_table(pa.Table.from_pylist(rows), str(tmp_path / "changed.parquet"))
    with pytest.raises(ValueError, match="Thoughts or actions differ"):
        same_episodes(time, tmp_path / "changed.parquet")
    pq.write_table(pa.Table.from_pylist(rows[1:]), str(tmp_path / "fewer.parquet"))
    with pytest.raises(ValueError, match="different turns"):
        same_episodes(time, tmp_path / "fewer.parquet")


def test_follows_the_name_reads_the_clause_after_the_colour() -> None:
    obs = "red 0-25, yellow 17-34 digit 9 at 26, blue 25-51"
    assert follows_the_name(json.dumps({"observation": obs, "thought": "blue 25-51."})) is True
    assert follows_the_name(json.dumps({"observation": obs, "thought": "blue 25-34."})) is False
    assert follows_the_name(json.dumps({"observation": obs, "thought": "red 17-34."})) is False
    assert follows_the_name(json.dumps({"observation": obs, "thought": "look for red."})) is None


def _write(run: Path, probes: list[dict], wrong: int) -> None:
    """Written turns: the teacher's, but the first ``wrong`` name the cue with the span 0-1."""
    rows = []
    for i, p in enumerate(probes):
        reply = json.loads(p["reply"])
        if i < wrong:
            reply["thought"] = f"{p['cue']} 0-1."
        rows.append(
            {"id": p["id"], "video": p["video"], "template": p["template"], "written": json.dumps(reply)}
        )
    run.mkdir(parents=True)
    (run / WRITTEN).write_text(json.dumps({"model": str(run), "seen": 0, "rows": rows}))


def test_runs_are_scored_and_paired_on_the_same_probes(teachers: tuple, tmp_path: Path, capsys) -> None:
    tasks, time, fields = teachers
    probes = {"time": load_probes(time, tasks), "fields": load_probes(fields, tasks)}
    assert [p["id"] for p in probes["time"]] == [p["id"] for p in probes["fields"]]
    assert [parse_reply(p["reply"])[0] for p in probes["time"]] == [
        parse_reply(p["reply"])[0] for p in probes["fields"]
    ]
    n = len(probes["fields"])
    for s in (0, 1):
        _write(tmp_path / f"fields_s{s}", probes["fields"], s)
        _write(tmp_path / f"time_s{s}", probes["time"], n)
    for arm, parquet in (("time", time), ("fields", fields)):
        runs = [a for s in (0, 1) for a in ("--run", str(tmp_path / f"{arm}_s{s}"))]
        assert main(["score", *runs, "--probes", str(parquet), "--tasks", str(tasks)]) == 0
    assert json.loads((tmp_path / "fields_s1" / SCORED).read_text())["rates"]["exact span"][
        "mean"
    ] == pytest.approx((n - 1) / n)
    out = tmp_path / "analysis.json"
    assert main(["analyse", "--arm", f"fields={tmp_path / 'fields'}", "--arm", f"time={tmp_path / 'time'}",
                 "--seeds", "0", "1", "--primary", "fields-time", "--out", str(out)]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    assert res["fields - time: exact span"]["per_seed"] == pytest.approx([1.0, (n - 1) / n])
    assert res["floors"]["fields"] == pytest.approx(res["floors"]["time"])  # the same probes, the same floor
    assert "fields - time" in capsys.readouterr().out


def test_sources_say_which_colours_span_a_run_wrote(teachers: tuple, tmp_path: Path, capsys) -> None:
    tasks, _, fields = teachers
    probes = load_probes(fields, tasks)
    probe = probes[0]
    spans = field_spans(probe["reply"])
    other = next(c for c in spans if c != probe["cue"])
    reply = json.loads(probe["reply"])

    def written(thought: str) -> str:
        return json.dumps({**reply, "thought": thought})

    a, b = spans[probe["cue"]]
    assert span_source(probe["reply"], probe) == "the cue's field"
    assert (
        span_source(written(f"{other} {a}-{b}."), probe) == "the cue's field"
    )  # the span, whatever colour named
    assert (
        span_source(written(f"{probe['cue']} {'-'.join(spans[other])}."), probe) == "another colour's field"
    )
    assert span_source(written(f"{probe['cue']} 0-1."), probe) == "other numbers"
    assert span_source(written("look for red."), probe) == "no span"
    rows = [{"id": p["id"], "written": written(f"{p['cue']} 0-1.") if i % 2 else p["reply"]}
            for i, p in enumerate(probes)]  # fmt: skip
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / WRITTEN).write_text(json.dumps({"rows": rows}))
    assert (
        main(["sources", "--run", f"half={tmp_path / 'r'}", "--probes", str(fields), "--tasks", str(tasks)])
        == 0
    )
    table = {
        r.split(" | ")[0].strip("| "): r.split(" | ")[1:] for r in capsys.readouterr().out.splitlines()[2:]
    }
    n = len(probes)
    assert table["teacher"][:2] == [str(n), "1.000"]
    assert float(table["half"][1]) == pytest.approx(((n + 1) // 2) / n, abs=1e-3)
    assert float(table["half"][3]) == pytest.approx((n // 2) / n, abs=1e-3)
