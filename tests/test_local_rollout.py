"""rl/local/rollout.py's files and rl/algo/turn_budget.py: the local trainer's rollout log goes through envs/jsonl (a
resume cuts the redone iterations and a torn last line, then appends go on), its metrics CSV is rewritten
atomically, and both trainers give an episode the same turn budget."""

from __future__ import annotations

import csv
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from omniagent.trajectory import Trajectory, load_trajectories
from rl.algo.turn_budget import TurnBudgetConfig, turn_budget
from rl.local.rollout import append_rollouts, read_metrics, truncate_rollouts, write_metrics

ROOT = Path(__file__).resolve().parents[1]


def _traj(i: int) -> Trajectory:
    return Trajectory(id=f"t{i}", media="m.mp4", question="q?", task_type="mcq", max_turns=2)


def _log(path: Path, iterations: int, per_iteration: int = 2) -> None:
    for it in range(1, iterations + 1):
        trajs = [_traj(10 * it + j) for j in range(per_iteration)]
        rows = [SimpleNamespace(traj=j) for j in range(per_iteration) for _ in range(2)]  # two turns each
        weights = [0.5 + k for k in range(len(rows))]
        append_rollouts(path, trajs, rows, weights, it)  # type: ignore[arg-type]


def test_rollouts_are_appended_with_iteration_and_turn_weights(tmp_path: Path) -> None:
    log = tmp_path / "rollouts.jsonl"
    _log(log, iterations=2)
    trajs = load_trajectories(log)
    assert [t.id for t in trajs] == ["t10", "t11", "t20", "t21"]
    assert [t.meta["iteration"] for t in trajs] == [1, 1, 2, 2]
    assert trajs[0].meta["turn_weights"] == [0.5, 1.5] and trajs[1].meta["turn_weights"] == [2.5, 3.5]


def test_truncate_keeps_earlier_iterations_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    log = tmp_path / "rollouts.jsonl"
    _log(log, iterations=3)
    with open(log, "ab") as fh:  # a kill in the middle of iteration 4's first append
        fh.write(b'{"id": "t40", "media": "m.mp4", "quest')
    truncate_rollouts(log, 2)
    assert [t.id for t in load_trajectories(log)] == ["t10", "t11", "t20", "t21"]
    assert log.read_bytes().endswith(b"}\n")
    _log(log, iterations=1)  # appending works again after the repair
    assert [t.meta["iteration"] for t in load_trajectories(log)] == [1, 1, 2, 2, 1, 1]


def test_truncate_keeps_a_whole_unterminated_last_record_and_a_missing_file(tmp_path: Path) -> None:
    log = tmp_path / "rollouts.jsonl"
    truncate_rollouts(log, 0)
    assert not log.exists()
    _log(log, iterations=1)
    log.write_bytes(log.read_bytes().rstrip(b"\n"))  # killed after the record but before its newline
    truncate_rollouts(log, 1)
    _log(log, iterations=1)
    assert len(load_trajectories(log)) == 4


def test_a_bad_line_in_the_middle_is_an_error_not_silently_dropped(tmp_path: Path) -> None:
    log = tmp_path / "rollouts.jsonl"
    _log(log, iterations=1)
    log.write_text("not json\n" + log.read_text())
    with pytest.raises(ValueError, match=r"rollouts\.jsonl:1: not valid JSON"):
        truncate_rollouts(log, 1)


def test_metrics_csv_is_rewritten_whole_and_read_back_up_to_an_iteration(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    rows = [{"iteration": i, "reward": i / 10, "ignored": "x"} for i in (1, 2, 3)]
    write_metrics(path, rows, ["iteration", "reward", "loss"])
    assert [r["reward"] for r in read_metrics(path, 2)] == ["0.1", "0.2"]
    assert read_metrics(path, 3)[2] == {"iteration": "3", "reward": "0.3", "loss": ""}
    write_metrics(path, rows[:1], ["iteration", "reward", "loss"])
    with open(path, newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv"]  # no temp file left behind
    assert read_metrics(tmp_path / "absent.csv", 5) == []


def test_turn_budget_from_a_config_block_or_its_dataclass() -> None:
    block = {"min": 5, "max": 10, "dynamic_by_duration": True, "seconds_per_extra_turn": 60}
    assert [turn_budget(d, block) for d in (20, 60, 299, 3600, None, float("nan"))] == [5, 6, 9, 10, 5, 5]
    assert turn_budget(299, TurnBudgetConfig(**block)) == 9
    assert turn_budget(30, {}) == 5 and turn_budget(30, {"dynamic_by_duration": False}) == 10
    uniform = {"min": 2, "max": 9, "dynamic_by_duration": False, "sample_uniform": True}
    # no rng (the local trainer): no draw, so a resumed run replays the same episodes
    assert turn_budget(0, uniform) == 9
    draws = {turn_budget(0, uniform, random.Random(s)) for s in range(50)}
    assert draws <= set(range(2, 10)) and len(draws) > 3
    with pytest.raises(ValueError, match="1 <= min <= max"):
        turn_budget(10, {"min": 6, "max": 5})
    with pytest.raises(TypeError):
        turn_budget(10, {"mni": 6})  # a misspelt key is refused, not ignored


def test_the_turn_budget_module_does_not_import_verl() -> None:
    code = "import sys, rl.algo.turn_budget, rl.local.rollout; print('verl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
