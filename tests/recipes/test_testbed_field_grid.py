"""The field grid probe (recipes/testbed/field_grid.py): the teacher's probes on grid videos name one of four
spans, written turns are scored on exact span and the search step's measures, and two arms on their own probe sets
are paired by seed with each arm's teacher and floor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import search_teacher_parquet

from recipes.testbed.field_grid import FIELD_MEASURES, SCORED, WRITTEN, main, written_spans
from recipes.testbed.search_step import span_match
from recipes.testbed.span_copy import load_probes, parse_reply


def _teacher(root: Path, fields: str) -> tuple[Path, Path]:
    """A two-video search-level set with ``fields`` and the compact teacher's kept episodes on it, as SFT rows."""
    from envs.synth import generate_benchmark

    config = {"level": "search", "search_fields": fields}
    generate_benchmark(root / "set", seed=14, n_videos=2, durations=[60.0], config=config, split="test")
    return root / "set", search_teacher_parquet(root / "set", root / "synth")


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("field_grid")
    return {fields: _teacher(root / fields, fields) for fields in ("grid", "random")}


def _write(run: Path, probes: list[dict], wrong: int) -> None:
    """Written turns: the teacher's, but the first ``wrong`` name the cue with the span of the next grid field."""
    rows = []
    for i, p in enumerate(probes):
        reply = json.loads(p["reply"])
        if i < wrong:
            m = span_match(reply["thought"])
            a, b = int(m.group(2)), int(m.group(3))
            a, b = (a + 15, b + 15) if b < 60 else (0, 15)
            reply["thought"] = f"{m.group(1)} {a}-{b}."
        rows.append(
            {"id": p["id"], "video": p["video"], "template": p["template"], "written": json.dumps(reply)}
        )
    run.mkdir(parents=True)
    (run / WRITTEN).write_text(json.dumps({"model": str(run), "seen": 0, "rows": rows}))


def test_grid_probes_name_one_of_four_spans_and_arms_pair_by_seed(sets: dict, tmp_path: Path, capsys) -> None:
    probes = {name: load_probes(parquet, tasks) for name, (tasks, parquet) in sets.items()}
    assert all(len(p) >= 4 for p in probes.values())
    grid_spans = {span_match(parse_reply(p["reply"])[0]).groups()[1:] for p in probes["grid"]}
    assert grid_spans <= {("0", "15"), ("15", "30"), ("30", "45"), ("45", "60")}
    random_spans = {span_match(parse_reply(p["reply"])[0]).groups()[1:] for p in probes["random"]}
    assert not random_spans <= grid_spans
    n = len(probes["grid"])
    for s, wrong in enumerate((0, 2)):
        _write(tmp_path / f"grid_s{s}", probes["grid"], wrong)
        _write(tmp_path / f"random_s{s}", probes["random"], len(probes["random"]))
    for name, (tasks, parquet) in sets.items():
        runs = [a for s in (0, 1) for a in ("--run", str(tmp_path / f"{name}_s{s}"))]
        assert main(["score", *runs, "--probes", str(parquet), "--tasks", str(tasks)]) == 0
    scored = json.loads((tmp_path / "grid_s1" / SCORED).read_text())
    assert set(scored["rates"]) == set(FIELD_MEASURES) and scored["teacher"]["exact span"]["mean"] == 1.0
    assert scored["rates"]["exact span"]["mean"] == pytest.approx((n - 2) / n)
    assert scored["rates"]["cue named"]["mean"] == 1.0
    capsys.readouterr()
    out = tmp_path / "analysis.json"
    assert main(["analyse", "--arm", f"grid={tmp_path / 'grid'}", "--arm", f"random={tmp_path / 'random'}",
                 "--seeds", "0", "1", "--primary", "grid-random", "--out", str(out)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    res = json.loads(out.read_text())
    d = res["grid - random: exact span"]
    assert d["per_seed"] == pytest.approx([1.0, (n - 2) / n])
    assert set(res["floors"]) == {"grid", "random"}
    for arm in ("grid", "random"):  # each arm's floor from its own teacher on its own probes
        teacher = json.loads((tmp_path / f"{arm}_s0" / SCORED).read_text())["teacher"]
        assert res["floors"][arm] == pytest.approx(0.25 * teacher["span holds"]["mean"])
    # exploratory: the spans each run writes, and the teacher's in training rows (here the grid set's own rows)
    assert (
        main(["spans", "--run", f"g1={tmp_path / 'grid_s1'}", "--train", f"teacher={sets['grid'][1]}"]) == 0
    )
    rows = {r.split(" | ")[0].strip("| "): r for r in capsys.readouterr().out.splitlines()[2:]}
    spans = written_spans(parse_reply(p["reply"])[0] for p in probes["grid"])
    assert sum(spans.values()) == n and set(spans) <= {"0-15", "15-30", "30-45", "45-60"}
    assert rows["g1"].startswith(f"| g1 | {n} | ") and rows["g1"].endswith(f" | {len(spans)} |")
    teacher = rows["teacher (training rows, turn 2)"]
    assert all(f"{span} (" in teacher for span in ("0-15", "15-30", "30-45", "45-60"))
    if res["teachers"]["grid"] != res["teachers"]["random"]:
        assert "| teacher (grid) |" in text and "| teacher (random) |" in text
