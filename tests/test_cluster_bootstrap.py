"""Intervals that resample videos, not questions (omniagent/eval/summary.py cluster_bootstrap_ci,
``paired_compare(cluster=)``, ``compare_runs.py --cluster media``): the questions of one video are not
independent draws, so a difference carried by a few videos must not look resolved."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from omniagent.eval.compare import compare_main
from omniagent.eval.intervals import bootstrap_ci, cluster_bootstrap_ci
from omniagent.eval.summary import paired_compare


def width(ci: dict) -> float:
    return ci["hi"] - ci["lo"]


def test_correlated_questions_widen_the_interval() -> None:
    # six videos of fifty questions; every question of a video scores the same (perfectly correlated)
    per_video = [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    values = [v for v in per_video for _ in range(50)]
    keys = [f"v{i}" for i, _ in enumerate(per_video) for _ in range(50)]
    tasks = bootstrap_ci(values, n_boot=2000, seed=0)
    videos = cluster_bootstrap_ci(values, keys, n_boot=2000, seed=0)
    assert videos["mean"] == pytest.approx(tasks["mean"]) == pytest.approx(4 / 6)
    assert videos["clusters"] == 6 and videos["n"] == 300
    assert width(videos) > 3 * width(tasks)  # 300 questions carry the information of six videos
    assert videos["lo"] < 0.5 < tasks["lo"]


def test_independent_questions_keep_about_the_same_interval() -> None:
    rng = np.random.default_rng(3)
    values = list(rng.random(400))
    keys = [f"v{i % 40}" for i in range(400)]  # 40 videos of 10 unrelated questions
    tasks = bootstrap_ci(values, n_boot=2000, seed=0)
    videos = cluster_bootstrap_ci(values, keys, n_boot=2000, seed=0)
    assert videos["mean"] == pytest.approx(tasks["mean"])
    assert 0.7 < width(videos) / width(tasks) < 1.4


def test_unequal_videos_weigh_by_their_questions_and_order_does_not_matter() -> None:
    values = [1.0] * 30 + [0.0] * 5 + [0.5] * 10 + [0.2, 0.4]
    keys = ["big"] * 30 + ["small"] * 5 + ["mid"] * 10 + ["pair"] * 2
    ci = cluster_bootstrap_ci(values, keys, n_boot=1000, seed=1)
    assert ci["mean"] == pytest.approx(np.mean(values))  # the mean over questions, not over videos
    pairs = list(zip(values, keys, strict=True))
    random.Random(5).shuffle(pairs)
    again = cluster_bootstrap_ci([v for v, _ in pairs], [k for _, k in pairs], n_boot=1000, seed=1)
    assert again == ci
    assert cluster_bootstrap_ci(values, keys, n_boot=1000, seed=2) != ci  # seeded, not fixed


def test_degenerate_and_malformed_input() -> None:
    one = cluster_bootstrap_ci([0.1, 0.9, 0.5], ["v"] * 3, n_boot=100)
    assert one == {"mean": pytest.approx(0.5), "lo": pytest.approx(0.5), "hi": pytest.approx(0.5), "n": 3,
                   "clusters": 1}  # fmt: skip
    assert cluster_bootstrap_ci([], [], n_boot=100)["mean"] is None
    with pytest.raises(ValueError, match="cluster keys"):
        cluster_bootstrap_ci([1.0, 0.0], ["a"], n_boot=100)


def video_rows(gain_videos: int, videos: int = 8, per_video: int = 40) -> tuple[list[dict], list[dict]]:
    """A scores 1 on every question of its first ``gain_videos`` videos where B scores 0; elsewhere equal."""
    a, b = [], []
    for v in range(videos):
        for q in range(per_video):
            row = {"id": f"v{v}-q{q}", "task_type": "mcq", "status": "ok", "media": f"/m/v{v}.mp4",
                   "reward": float(q % 2)}  # fmt: skip
            a.append(dict(row, reward=1.0) if v < gain_videos else row)
            b.append(dict(row, reward=0.0) if v < gain_videos else dict(row))
    return a, b


def test_a_gain_from_one_video_is_resolved_by_questions_but_not_by_videos() -> None:
    a, b = video_rows(gain_videos=1)
    by_task = paired_compare(a, b, n_boot=2000, seed=0, names=("A", "B"))
    by_video = paired_compare(a, b, n_boot=2000, seed=0, names=("A", "B"), cluster="media")
    assert by_task["diff"]["mean"] == pytest.approx(by_video["diff"]["mean"])
    assert by_task["diff"]["resolved"] is True  # 320 questions, 20 of them better
    assert by_video["diff"]["resolved"] is False and by_video["diff"]["clusters"] == 8
    assert by_video["cluster"] == "media" and by_task["cluster"] is None
    assert by_video["by_task_type"]["mcq"]["clusters"] == 8
    # a gain on every video is resolved either way
    a, b = video_rows(gain_videos=8)
    assert paired_compare(a, b, n_boot=500, seed=0, cluster="media")["diff"]["resolved"] is True


def test_a_row_without_the_field_is_its_own_cluster() -> None:
    a, b = video_rows(gain_videos=0, videos=2, per_video=3)
    for r in a[:3]:
        del r["media"]
    res = paired_compare(a, b, n_boot=100, seed=0, cluster="media")
    assert res["diff"]["clusters"] == 4  # three rows without media + one video


def test_compare_runs_cluster_flag(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = video_rows(gain_videos=1)
    for name, rows in (("A", a), ("B", b)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert compare_main([str(tmp_path / "A"), str(tmp_path / "B"), "--n-boot", "500"]) == 0
    plain = capsys.readouterr().out
    assert "A is better at 95%" in plain and "clusters" not in plain
    assert (
        compare_main([str(tmp_path / "A"), str(tmp_path / "B"), "--n-boot", "500", "--cluster", "media"]) == 0
    )
    out = capsys.readouterr().out
    assert "resampling 8 clusters by media" in out and "no resolved difference" in out
