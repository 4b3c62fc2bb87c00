"""The turn-budget sweep (omniagent/eval/turn_scaling.py, run by scripts/turn_scaling.py): cells, resume,
CSV and plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from testkit import compose_conf, small_synth_overrides

ROOT = Path(__file__).resolve().parents[1]


def load_script() -> Any:
    from omniagent.eval import turn_scaling

    return turn_scaling


@pytest.fixture(scope="module")
def sweep_result(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, list[str], dict[str, Any]]:
    root = tmp_path_factory.mktemp("scaling")
    overrides = [
        *small_synth_overrides(root / "synth", root / "sweep"),
        "limit=4",
        "workers=1",
        "policy.name=random",
        "scaling.ks=[1,2,4]",
        "scaling.seeds=[0,1]",
        "summary.n_boot=100",
    ]
    mod = load_script()
    result = mod.sweep(compose_conf("turn_scaling", overrides), overrides=overrides)
    return mod, root / "sweep", overrides, result


def test_sweep_writes_cells_csv_and_plots(sweep_result: Any) -> None:
    _, out, _, result = sweep_result
    cells = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert cells == ["K001-s0", "K001-s1", "K002-s0", "K002-s1", "K004-s0", "K004-s1"]
    for cell in cells:
        rows = (out / cell / "results.jsonl").read_text().splitlines()
        assert len(rows) == 4
        k = int(cell[1:4])
        assert all(json.loads(r)["max_turns"] == k and json.loads(r)["turns"] <= k for r in rows)
    with open(out / "turn_scaling.csv") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 6 + 3  # one row per cell, one mean-over-seeds row per K
    assert {r["seed"] for r in table} == {"0", "1", "all"}
    k1 = [r for r in table if r["k"] == "1" and r["seed"] != "all"]
    assert all(float(r["turns"]) == 1.0 for r in k1)  # a one-turn budget is one executed turn
    for name in ("acc_vs_k.png", "acc_vs_turns.png", "acc_vs_frames.png"):
        png = out / name
        assert png.exists() and png.stat().st_size > 5000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert str(png) in result["plots"]


def test_sweep_resumes_finished_cells(sweep_result: Any) -> None:
    mod, out, overrides, _ = sweep_result
    before = {p: p.read_text() for p in out.glob("K*/results.jsonl")}
    result = mod.sweep(compose_conf("turn_scaling", overrides), overrides=overrides)
    assert {p: p.read_text() for p in out.glob("K*/results.jsonl")} == before  # nothing rerun or duplicated
    assert len(result["rows"]) == 9
    for cell in out.glob("K*"):
        summary = json.loads((cell / "summary.json").read_text())
        assert summary["run"]["ran"] == 0 and summary["run"]["skipped"] == 4


def test_aggregate_means_over_seeds() -> None:
    mod = load_script()
    rows = [
        {"k": 2, "seed": 0, "n": 4, "score": 0.5, "ci_lo": 0, "ci_hi": 1, "turns": 2, "frames_used": 8, "answer_rate": 1},
        {"k": 2, "seed": 1, "n": 4, "score": 0.25, "ci_lo": 0, "ci_hi": 1, "turns": 1, "frames_used": 4, "answer_rate": 1},
    ]  # fmt: skip
    (agg,) = mod.aggregate(rows)
    assert agg["score"] == 0.375 and agg["ci_lo"] == 0.25 and agg["ci_hi"] == 0.5 and agg["n"] == 8
    assert agg["turns"] == 1.5 and agg["frames_used"] == 6
