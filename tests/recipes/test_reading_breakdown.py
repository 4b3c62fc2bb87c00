"""The recipe's reading-breakdown probe (recipes/tiny_agent/probes/reading_breakdown.py) on rollouts written
like the local trainer's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import teacher_trajectories

from omniagent.trajectory import Trajectory, TurnRecord
from rl.algo.reward import reading_rate


@pytest.fixture(scope="module")
def teacher_trajs(tmp_path_factory: pytest.TempPathFactory) -> list[Trajectory]:
    return teacher_trajectories(tmp_path_factory.mktemp("synth_reading"))


def test_reading_breakdown_splits_served_frames_by_content_and_centres_rewards_within_groups(
    teacher_trajs: list[Trajectory], tmp_path: Path
) -> None:
    """recipes.tiny_agent.probes.reading_breakdown on rollouts written like the local trainer's: the teacher reads every frame it served
    (empty or not), a copy with its Observations blanked reads none; centred rewards sum to 0 within a group."""
    from recipes.tiny_agent.probes.reading_breakdown import breakdown, load_rollouts, main

    rows = []
    for g, traj in enumerate(teacher_trajs):
        for i, blank in enumerate((False, True)):
            row = json.loads(traj.model_dump_json())
            if blank:
                for turn in row["turns"]:
                    turn["observation"] = "none"
            read = reading_rate(traj.media, [TurnRecord(**t) for t in row["turns"]])
            row["id"], row["reward"] = f"g{g}-{i}", 1.0
            row["meta"] = {
                "iteration": 1 + g % 2,
                "reading": read,
                "shaped_reward": 1.0 + 0.5 * (read or 0.0),
            }
            rows.append(row)
    (tmp_path / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    honest = breakdown(load_rollouts(tmp_path)[0::2])
    blank = breakdown(load_rollouts(tmp_path)[1::2])
    assert {"empty", "event"} <= set(honest["frames"])  # the teacher served frames of both kinds
    assert all(v["read"] == 1.0 for v in honest["frames"].values())
    assert all(v["read"] == 0.0 for v in blank["frames"].values())
    assert {k: v["served"] for k, v in blank["frames"].items()} == {
        k: v["served"] for k, v in honest["frames"].items()
    }
    both = breakdown(rows)["by_length"]
    assert sum(v["episodes"] for v in both.values()) == len(rows)
    assert sum(v["episodes"] * v["score"] for v in both.values()) == pytest.approx(0.0, abs=0.01)  # all right
    assert sum(v["episodes"] * v["shaped"] for v in both.values()) == pytest.approx(0.0, abs=0.01)  # centred
    assert main([str(tmp_path)]) == 0
