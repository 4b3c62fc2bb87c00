"""Numbers two users agree on: summaries independent of row order (workers, resumed runs), BCa
intervals, duration bins ordered by value, one metric per task type, and the paired comparison of
two runs over their shared task ids (omniagent/eval/summary.py, omniagent/eval/compare.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from omniagent.eval.compare import compare_main, load_run
from omniagent.eval.intervals import bootstrap_ci
from omniagent.eval.results import load_rows
from omniagent.eval.summary import duration_order, paired_compare, summarize


def make_rows(n: int = 60, seed: int = 1, shift: float = 0.0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        kind = ("mcq", "tr", "num")[i % 3]
        reward = float(rng.random() < 0.5 + shift) if kind == "mcq" else round(rng.random(), 3)
        rows.append(
            {
                "id": f"t{i:03d}", "task_type": kind, "status": "ok", "reward": reward, "answered": True,
                "duration": (20.0, 300.0, 2000.0, 5000.0)[i % 4], "category": f"c{i % 5}",
                "frames_used": 8 + i % 4, "turns": 2 + i % 3, "stop_reason": "answered",
            }
        )  # fmt: skip
    return rows


def write_results(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_same_rows_in_any_order_give_identical_summaries(tmp_path: Path) -> None:
    rows = make_rows()
    orders = [rows, rows[::-1], random.Random(7).sample(rows, len(rows))]  # e.g. workers=1, 2, 3
    # a resumed run: the first pass failed two tasks (error rows), the rerun appended them at the end
    failed = {"t005", "t042"}
    first = [r if r["id"] not in failed else {**r, "status": "error", "reward": 0.0} for r in rows]
    resumed = load_rows(
        write_results(tmp_path / "results.jsonl", first + [r for r in rows if r["id"] in failed])
    )
    assert len(resumed) == len(rows) and all(r["status"] == "ok" for r in resumed)  # last row per id kept
    orders.append(resumed)
    dumps = {json.dumps(summarize(o, n_boot=300, seed=3), sort_keys=True) for o in orders}
    assert len(dumps) == 1
    s = summarize(rows, n_boot=300, seed=3)
    assert s["bootstrap"]["method"] == "BCa" and s["score"]["method"] == "BCa"
    assert s["score"]["lo"] < s["score"]["mean"] < s["score"]["hi"]
    other_seed = summarize(rows, n_boot=300, seed=4)
    assert other_seed["score"]["mean"] == s["score"]["mean"] and other_seed["score"] != s["score"]


def test_bca_matches_a_known_interval_and_handles_degenerate_samples() -> None:
    x = np.random.default_rng(0).normal(10.0, 2.0, 400)
    ci = bootstrap_ci(x, n_boot=2000, seed=0)
    half = 1.96 * 2.0 / np.sqrt(400)  # the normal-theory half width, 0.196
    assert abs((ci["hi"] - ci["lo"]) / 2 - half) < 0.04 and ci["lo"] < 10.0 < ci["hi"]
    assert bootstrap_ci([1.0] * 12) == {"mean": 1.0, "lo": 1.0, "hi": 1.0, "n": 12}
    assert bootstrap_ci([0.0] * 5)["hi"] == 0.0 and bootstrap_ci([])["mean"] is None
    skewed = bootstrap_ci(
        [0.0, 0.0, 0.0, 0.0, 1.0], n_boot=500
    )  # scipy warns here; the interval stays finite
    assert skewed["method"] in ("BCa", "percentile") and 0.0 <= skewed["lo"] <= 0.2 <= skewed["hi"] <= 1.0


def test_duration_bins_are_ordered_by_value_and_types_name_their_metric() -> None:
    s = summarize(make_rows(), n_boot=50)
    assert list(s["by_duration"]) == ["<1m", "1m-10m", "30m-1h", ">=1h"]
    labels = ["long", "60s", "short", "30s", "medium", "unknown", "10m-30m", "<1m", "120s"]
    assert sorted(labels, key=duration_order) == [
        "short", "medium", "long", "30s", "<1m", "60s", "120s", "10m-30m", "unknown",
    ]  # fmt: skip
    assert {k: g["metric"] for k, g in s["by_task_type"].items()} == {
        "mcq": "accuracy",
        "num": "MRA",
        "tr": "IoU",
    }
    assert s["metric_by_task_type"]["tr"]["metric"] == "IoU"
    assert s["metric_by_task_type"]["mcq"]["mean"] == s["by_task_type"]["mcq"]["score"]["mean"]
    labelled = [{**r, "duration_label": ("60s", "30s")[i % 2]} for i, r in enumerate(make_rows(10))]
    assert list(summarize(labelled, n_boot=20)["by_duration"]) == ["30s", "60s"]


def test_paired_bootstrap_over_shared_ids() -> None:
    a = [{"id": f"t{i}", "task_type": "mcq", "reward": float(i % 2 == 0), "status": "ok"} for i in range(80)]
    b = [dict(r) for r in a]
    for r in b[:16:2]:  # B gets 8 of A's correct answers wrong, nothing else differs
        r["reward"] = 0.0
    b.append({"id": "extra", "task_type": "mcq", "reward": 1.0, "status": "ok"})
    res = paired_compare(a, b, n_boot=500, seed=0, names=("A", "B"))
    assert res["n_shared"] == 80 and res["only_a"] == 0 and res["only_b"] == 1
    assert res["diff"]["mean"] == pytest.approx(0.1) and res["diff"]["resolved"] is True
    assert "A is better" in res["verdict"]
    ua, ub = bootstrap_ci([r["reward"] for r in a], 500), bootstrap_ci([r["reward"] for r in b[:80]], 500)
    assert ua["lo"] <= ub["hi"]  # unpaired intervals overlap: only pairing resolves this difference
    shuffled = paired_compare(random.Random(2).sample(a, 80), b[::-1], n_boot=500, seed=0, names=("A", "B"))
    assert shuffled == res
    same = paired_compare(a, a, n_boot=100)
    assert same["diff"]["resolved"] is False and "no resolved difference" in same["verdict"]


def test_compare_runs_uses_the_runs_own_bins_and_pairs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for name, shift in (("runA", 0.3), ("runB", -0.3)):
        write_results(tmp_path / name / "results.jsonl", make_rows(90, seed=5, shift=shift))
        meta = {"config": {"benchmark": {"duration_bins": [100, 1000]}}}
        (tmp_path / name / "run.json").write_text(json.dumps(meta))
    summary, rows = load_run(str(tmp_path / "runA"))
    assert rows is not None and list(summary["by_duration"]) == ["<100s", "100s-1000s", ">=1000s"]
    assert summary["duration_bins"] == [100.0, 1000.0]
    assert compare_main([str(tmp_path / "runA"), str(tmp_path / "runB"), "--n-boot", "300"]) == 0
    out = capsys.readouterr().out
    assert "on 90 shared tasks" in out and "runA is better at 95% (paired bootstrap" in out
    assert "mcq (accuracy" in out and "100s-1000s" in out


def test_runs_joined_with_plus_pool_part_by_part(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``A1+A2`` against ``B1+B2``: rows of both parts, ids kept apart by part, paired part by part."""
    for name, seed, shift in (("a1", 5, 0.3), ("a2", 6, 0.3), ("b1", 5, -0.3), ("b2", 6, -0.3)):
        write_results(tmp_path / name / "results.jsonl", make_rows(30, seed=seed, shift=shift))
    a, b = (f"{tmp_path / (x + '1')}+{tmp_path / (x + '2')}" for x in "ab")
    summary, rows = load_run(a)
    assert rows is not None and len(rows) == 60 and len({r["id"] for r in rows}) == 60
    assert {r["id"].split(":", 1)[0] for r in rows} == {"0", "1"} and summary["name"] == "a1+a2"
    one = {r["id"]: r["reward"] for r in load_run(str(tmp_path / "a1"))[1] or []}
    assert all(one[r["id"][2:]] == r["reward"] for r in rows if r["id"].startswith("0:"))
    assert compare_main([a, b, "--n-boot", "300"]) == 0
    assert "on 60 shared tasks" in capsys.readouterr().out
    (tmp_path / "bare").mkdir()  # a run known only by its summary.json has no rows to pool
    (tmp_path / "bare" / "summary.json").write_text(json.dumps(load_run(str(tmp_path / "a1"))[0]))
    with pytest.raises(SystemExit, match="pooled runs need"):
        load_run(f"{tmp_path / 'a1'}+{tmp_path / 'bare' / 'summary.json'}")


def test_average_makes_each_task_the_mean_of_its_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``--average``: three seeds of one method on the same tasks are one row per task, paired with one run."""
    seeds = [make_rows(30, seed=s, shift=0.3) for s in (5, 6, 7)]
    seeds[2] = [r for r in seeds[2] if r["id"] != "t007"]  # a task one seed did not score is left out
    seeds[1][0]["answered"] = False
    seeds[0][0].update(answered=False, reward_available=False)  # unanswered: scored 0 all the same, stays
    seeds[0][1].update(answered=True, reward_available=False)  # an answer no judge scored: the task goes
    for k, rows in enumerate(seeds):
        write_results(tmp_path / f"s{k}" / "results.jsonl", rows)
    write_results(tmp_path / "base" / "results.jsonl", make_rows(30, seed=9, shift=-0.3))
    pooled = "+".join(str(tmp_path / f"s{k}") for k in range(3))
    summary, rows = load_run(pooled, average=True)
    assert rows is not None and len(rows) == 28 and not {"t007", "t001"} & {r["id"] for r in rows}
    by_id = {r["id"]: r for r in rows}
    for i in ("t000", "t013"):
        want = sum(next(x["reward"] for x in s if x["id"] == i) for s in seeds) / 3
        assert by_id[i]["reward"] == pytest.approx(want)
    assert by_id["t000"]["answered"] == pytest.approx(1 / 3)
    assert summary["answer_rate"]["mean"] == pytest.approx(1 - 2 / 3 / 28)
    assert compare_main([pooled, str(tmp_path / "base"), "--average", "--n-boot", "300"]) == 0
    assert "on 28 shared tasks" in capsys.readouterr().out
    assert len(load_run(pooled)[1] or []) == 89  # without --average: one row per run and task


def test_a_comma_pools_seed_means_over_sets(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``A1+A2,C1+C2 --average``: the mean of two seeds on one set, pooled with their mean on another set, paired
    with ``B,D`` set by set; without ``--average`` every run's rows are pooled."""
    for name, seed, shift in (("a1", 5, 0.3), ("a2", 6, 0.3), ("c1", 7, 0.3), ("c2", 8, 0.3)):
        write_results(tmp_path / name / "results.jsonl", make_rows(30, seed=seed, shift=shift))
    write_results(tmp_path / "b" / "results.jsonl", make_rows(30, seed=9, shift=-0.3))
    write_results(tmp_path / "d" / "results.jsonl", make_rows(20, seed=10, shift=-0.3))
    t = {k: str(tmp_path / k) for k in ("a1", "a2", "c1", "c2", "b", "d")}
    both = f"{t['a1']}+{t['a2']},{t['c1']}+{t['c2']}"
    summary, rows = load_run(both, average=True)
    assert rows is not None and len(rows) == 60 and summary["name"] == "a1+a2,c1+c2"
    first = {r["id"]: r["reward"] for r in load_run(f"{t['a1']}+{t['a2']}", average=True)[1] or []}
    assert all(first[r["id"][2:]] == r["reward"] for r in rows if r["id"].startswith("0:"))
    second = {r["id"]: r["reward"] for r in load_run(f"{t['c1']}+{t['c2']}", average=True)[1] or []}
    assert all(second[r["id"][2:]] == r["reward"] for r in rows if r["id"].startswith("1:"))
    assert compare_main([both, f"{t['b']},{t['d']}", "--average", "--n-boot", "300"]) == 0
    assert "on 50 shared tasks" in capsys.readouterr().out  # 30 of the first set, the 20 the second shares
    assert len(load_run(both)[1] or []) == 120  # without --average: every run's rows
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "summary.json").write_text(json.dumps(load_run(t["a1"])[0]))
    with pytest.raises(SystemExit, match="pooled runs need"):
        load_run(f"{t['a1']},{tmp_path / 'bare' / 'summary.json'}")


def test_runs_with_one_or_three_workers_give_the_same_intervals(tmp_path: Path) -> None:
    from envs.synth import generate_benchmark
    from omniagent.eval.config import EvalConfig
    from omniagent.eval.runner import run_eval

    tasks = generate_benchmark(tmp_path / "synth", n_videos=2, durations=[20.0, 30.0],
                               config={"width": 112, "height": 64, "fps": 2})[:12]  # fmt: skip
    scores = []
    for workers in (1, 3):
        out = tmp_path / f"w{workers}"
        run_eval(tasks, EvalConfig(out_dir=str(out), policy="random", workers=workers, progress=False))
        s = summarize(load_rows(out / "results.jsonl"), n_boot=300, seed=0)
        scores.append({k: s[k] for k in ("score", "score_ok", "answer_rate", "frames_used", "turns")})
        scores[-1]["groups"] = {
            g: {k: v["score"] for k, v in s[g].items()} for g in ("by_task_type", "by_duration")
        }
    assert scores[0] == scores[1]
    assert scores[0]["score"]["lo"] < scores[0]["score"]["hi"]  # a real interval, not a degenerate one
