"""Scores with error bars (omniagent/eval/summary.py): seeded bootstrap intervals, breakdowns, comparisons."""

from __future__ import annotations

from typing import Any

import pytest

from omniagent.eval.intervals import bootstrap_ci
from omniagent.eval.summary import compare, summarize


def test_bootstrap_on_known_data() -> None:
    ones = bootstrap_ci([1.0] * 50, n_boot=500, seed=0)
    assert ones == {"mean": 1.0, "lo": 1.0, "hi": 1.0, "n": 50}
    half = [1.0, 0.0] * 100  # mean 0.5, sd 0.5, n 200: normal 95% half-width 1.96 * 0.5 / sqrt(200) = 0.069
    ci = bootstrap_ci(half, n_boot=2000, seed=0)
    assert ci["mean"] == 0.5
    assert ci["lo"] == pytest.approx(0.5 - 0.069, abs=0.015) and ci["hi"] == pytest.approx(
        0.5 + 0.069, abs=0.015
    )
    assert bootstrap_ci(half, n_boot=2000, seed=0) == ci  # seeded
    assert bootstrap_ci([], n_boot=10)["mean"] is None
    assert bootstrap_ci([0.3], n_boot=10) == {"mean": 0.3, "lo": 0.3, "hi": 0.3, "n": 1}


def fake_rows(n: int, p: float, kind: str = "mcq") -> list[dict[str, Any]]:
    k = round(n * p)
    return [
        {"id": f"{kind}{i}", "task_type": kind, "status": "ok", "answered": True, "reward_available": True,
         "reward": float(i < k), "duration": 30.0 * (i + 1), "turns": 3, "frames_used": 16, "stop_reason": "answered",
         "action_counts": {"get_frames": 2, "answer": 1}, "turn_error_codes": {"format_not_json": 1} if i == 0 else {},
         "context_tokens": [100, 200], "model_seconds": 1.0, "env_seconds": 0.25}
        for i in range(n)
    ]  # fmt: skip


def test_summary_breakdowns_and_costs() -> None:
    s = summarize(fake_rows(40, 0.5), n_boot=200, duration_bins=[60, 600])
    assert s["score"]["mean"] == 0.5 and s["score"]["lo"] < 0.5 < s["score"]["hi"]
    assert set(s["by_duration"]) == {"<1m", "1m-10m", ">=10m"}
    assert sum(g["n"] for g in s["by_duration"].values()) == 40
    assert s["context_tokens_per_turn"]["mean"] == 150 and s["context_tokens_per_turn"]["max"] == 200
    assert s["time"]["model_share"] == pytest.approx(0.8)
    assert s["action_share"] == {
        "get_frames": pytest.approx(2 / 3, abs=1e-3),
        "answer": pytest.approx(1 / 3, abs=1e-3),
    }
    assert s["error_codes"] == {"format_not_json": 1}
    assert s["turns"]["mean"] == 3 and s["frames_used"]["mean"] == 16


def test_compare_says_whether_intervals_overlap() -> None:
    a = summarize(fake_rows(100, 0.9), n_boot=500, name="strong")
    b = summarize(fake_rows(100, 0.3), n_boot=500, name="weak")
    c = summarize(fake_rows(100, 0.85), n_boot=500, name="close")
    res = compare(a, b)
    assert res["overlap"] is False and "strong is better" in res["verdict"]
    assert res["diff"] == pytest.approx(0.6)
    assert compare(a, c)["overlap"] is True
    assert compare(a, c)["by_task_type"]["mcq"]["overlap"] is True
