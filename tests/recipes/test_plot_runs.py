"""recipes/tiny_agent/plot_runs.py: the reward curve and the applied turn weights are read from a run folder as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omniagent.trajectory import Trajectory, TurnRecord
from recipes.tiny_agent.plot_runs import (
    answer_letters,
    fixed_task_change,
    flat_groups,
    main,
    read_curve,
    rollouts,
    training_summary,
    weights_by_action,
)


def _run(root: Path, name: str, weights: list[list[float]], rewards: list[float] | None = None) -> Path:
    run = root / name
    run.mkdir()
    (run / "metrics.csv").write_text("iteration,reward_mean,eval_reward\n1,0.25,\n2,0.5,0.3\n")
    turns = [TurnRecord(turn=1, raw_text="x", action_type="get_frames"),
             TurnRecord(turn=2, raw_text="x", action_type="answer", error="bad_answer"),
             TurnRecord(turn=3, raw_text="x", action_type="answer")]  # fmt: skip
    rows = [
        Trajectory(
            id=f"g0-{k}",
            media="m.mp4",
            question="q?",
            task_type="mcq",
            max_turns=8,
            turns=turns,
            reward=(rewards or [0.0] * len(weights))[k],
            meta={"iteration": 1, "turn_weights": w},
        )  # fmt: skip
        for k, w in enumerate(weights)
    ]
    (run / "rollouts.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in rows))
    return run


def test_curve_and_weights_by_action(tmp_path: Path) -> None:
    taura = _run(tmp_path, "taura_s0", [[0.5, 1.5, 2.0], [0.25, 1.0, 1.0]])
    grpo = _run(tmp_path, "grpo_s0", [[1.0, 1.0, 1.0]])
    assert read_curve(taura) == {"reward": [(1, 0.25), (2, 0.5)], "eval": [(2, 0.3)]}
    # the refused turn counts as "rejected" whatever action it tried
    assert weights_by_action(rollouts(taura)) == {
        "get_frames": [0.5, 0.25],
        "answer": [2.0, 1.0],
        "rejected": [1.5, 1.0],
    }
    assert weights_by_action(rollouts(grpo)) == {}  # all weights 1: nothing was rescaled


def test_main_writes_the_figure_and_rejects_a_folder_without_metrics(tmp_path: Path, capsys) -> None:
    taura = _run(tmp_path, "taura_s0", [[0.5, 1.5, 2.0]])
    grpo = _run(tmp_path, "grpo_s0", [[1.0, 1.0, 1.0]])
    out = tmp_path / "fig" / "rl.png"
    assert main([str(taura), str(grpo), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = json.loads(capsys.readouterr().out)
    assert printed["training"]["taura_s0"] == {"reward_first_half": 0.25, "reward_second_half": 0.5}
    assert printed["flat_groups"] == {
        "taura_s0": {"all": [1, 1], "mcq": [1, 1]},
        "grpo_s0": {"all": [1, 1], "mcq": [1, 1]},
    }
    assert printed["mean_weight_by_action"] == {
        "taura_s0": {"get_frames": 0.5, "rejected": 1.5, "answer": 2.0}
    }
    with pytest.raises(SystemExit, match="no metrics.csv in: .*empty"):
        (tmp_path / "empty").mkdir()
        main([str(tmp_path / "empty"), "--out", str(out)])


def test_flat_groups_count_groups_whose_episodes_all_scored_alike(tmp_path: Path) -> None:
    flat = _run(tmp_path, "flat", [[1.0]] * 3, rewards=[0.0, 0.0, 0.0])
    split = _run(tmp_path, "split", [[1.0]] * 3, rewards=[0.0, 1.0, 0.0])
    assert flat_groups(rollouts(flat)) == {"all": [1, 1], "mcq": [1, 1]}
    assert flat_groups(rollouts(split)) == {"all": [0, 1], "mcq": [0, 1]}
    # one group per (iteration, g<k>): a second iteration's episodes form another group
    rows = (split / "rollouts.jsonl").read_text().splitlines()
    again = [json.loads(r) | {"meta": {"iteration": 2, "turn_weights": [1.0]}, "reward": 0.5} for r in rows]
    with open(split / "rollouts.jsonl", "a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in again))
    assert flat_groups(rollouts(split)) == {"all": [1, 2], "mcq": [1, 2]}


def test_training_summary_halves_the_iterations_and_sums_seconds(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text(
        "iteration,reward_mean,approx_kl,seconds\n1,0.1,0.002,10\n2,0.3,0.004,20\n3,0.5,0.001,30\n"
    )
    # three iterations: the first half holds two (0.1, 0.3), the second one (0.5)
    assert training_summary(run) == {
        "reward_first_half": 0.2,
        "reward_second_half": 0.5,
        "max_approx_kl": 0.004,
        "seconds": 60,
    }
    assert rollouts(run) == []  # no rollouts.jsonl: nothing to summarise
    (run / "metrics.csv").write_text(
        "iteration,reward_mean,approx_kl,kl_stop,seconds\n1,0.1,0.002,0.0,10\n2,0.3,0.03,1.0,20\n"
    )  # a run with local.target_kl: one update of two was cut short
    assert training_summary(run)["kl_stops"] == 1
    (run / "metrics.csv").write_text(
        "iteration,reward_mean,score_mean,evidence_seen,approx_kl,seconds\n"
        "1,0.0,0.25,0.5,0.002,10\n2,0.5,0.75,1.0,0.003,20\n"
    )  # a run with env.reward.evidence_gate: the score before shaping, the episodes that touched the evidence
    summary = training_summary(run)
    assert (summary["reward_first_half"], summary["score_first_half"], summary["evidence_seen_first_half"]) == (
        0.0, 0.25, 0.5,
    )  # fmt: skip
    assert (summary["reward_second_half"], summary["score_second_half"]) == (0.5, 0.75)
    assert "groups_played" not in summary  # a run logged before the group columns existed
    assert "reading_first_half" not in summary  # nor the reading column
    (run / "metrics.csv").write_text(
        "iteration,reward_mean,approx_kl,seconds,reading\n1,0.1,0.002,10,0.25\n2,0.3,0.004,20,0.5\n"
    )  # runs logged since the local trainer scores each Observation against its percept
    summary = training_summary(run)
    assert (summary["reading_first_half"], summary["reading_second_half"]) == (0.25, 0.5)
    assert "max_ref_kl" not in summary  # no ref_kl column: a run logged before the KL anchor existed
    (run / "metrics.csv").write_text(
        "iteration,reward_mean,approx_kl,seconds,ref_kl\n1,0.1,0.002,10,0.0\n2,0.3,0.004,20,0.0\n"
    )  # without actor.use_kl_loss the trainer logs 0.0: no anchor to report
    assert "max_ref_kl" not in training_summary(run)
    (run / "metrics.csv").write_text(
        "iteration,reward_mean,approx_kl,seconds,ref_kl\n1,0.1,0.002,10,0.01\n2,0.3,0.004,20,0.03\n"
        "3,0.2,0.003,30,0.02\n"
    )  # with it: the run drifted to 0.03 per token and ended at 0.02
    summary = training_summary(run)
    assert (summary["max_ref_kl"], summary["last_ref_kl"]) == (0.03, 0.02)
    (run / "metrics.csv").write_text(
        "iteration,reward_mean,approx_kl,seconds,ref_kl\n1,0.1,0.002,10,-0.002\n2,0.3,0.004,20,-0.001\n"
    )  # kl_loss_type=k1 (the plain log ratio) can average below 0: the anchor was on all the same
    assert (training_summary(run)["max_ref_kl"], training_summary(run)["last_ref_kl"]) == (-0.001, -0.001)
    (run / "metrics.csv").write_text(
        "iteration,reward_mean,approx_kl,seconds,groups_played,groups_flat,gen_batches\n"
        "1,0.1,0.002,10,8,0,1\n2,0.3,0.004,20,14,6,2\n"
    )  # a run with algorithm.filter_groups: the second iteration dropped 6 flat groups and drew a second batch
    summary = training_summary(run)
    assert (summary["groups_played"], summary["groups_flat"], summary["gen_batches"]) == (22, 6, 3)


def _pool_episodes(rewards_by_iteration: dict[int, dict[str, list[float]]]) -> list[Trajectory]:
    return [
        Trajectory(
            id=f"g{k}-{i}",
            media="m.mp4",
            question=task,
            task_type="mcq",
            max_turns=4,
            reward=r,
            meta={"iteration": it, "task_id": task, "shaped_reward": r},
        )  # fmt: skip
        for it, by_task in rewards_by_iteration.items()
        for k, (task, rs) in enumerate(by_task.items())
        for i, r in enumerate(rs)
    ]


def test_fixed_task_change_compares_the_same_tasks_first_and_last() -> None:
    # task a: 0.25 -> 0.75 in every iteration; task b: 0.5 throughout; task c only early (left out)
    early = {"a": [0.0, 0.0, 1.0, 0.0], "b": [0.5] * 4, "c": [1.0] * 4}
    late = {"a": [1.0, 1.0, 0.0, 1.0], "b": [0.5] * 4}
    trajs = _pool_episodes({1: early, 2: early, 3: late, 4: late})
    got = fixed_task_change(trajs, window=2, draws=500)
    assert got is not None
    assert (got["tasks"], got["first"], got["last"], got["change"]) == (2, 0.375, 0.625, 0.25)
    assert got["per_task"] == {"a": [0.25, 0.75], "b": [0.5, 0.5]}
    assert 0.0 < got["ci_low"] < 0.25 < got["ci_high"] <= 0.5  # only task a varies; b contributes 0
    assert fixed_task_change(trajs, window=3) is None  # four iterations cannot hold two windows of three
    same = fixed_task_change(_pool_episodes({1: early, 2: early}), window=1)
    assert same is not None and same["change"] == 0.0 and same["ci_low"] < 0.0 < same["ci_high"]
    steady = fixed_task_change(_pool_episodes({1: {"b": [0.5] * 4}, 2: {"b": [0.5] * 4}}), window=1)
    assert steady is not None and steady["change"] == steady["ci_low"] == steady["ci_high"] == 0.0
    no_ids = [t.model_copy(update={"meta": {"iteration": t.meta["iteration"]}}) for t in trajs]
    assert fixed_task_change(no_ids, window=2) is None  # runs logged before task ids: nothing to pair


def _mcq(it: int, answer: str | None, truth: str, n_choices: int = 4) -> Trajectory:
    choices = ["red", "blue", "green", "cyan"][:n_choices]
    return Trajectory(id=f"g0-{it}", media="m.mp4", question="q", task_type="mcq", choices=choices,
                      ground_truth=truth, max_turns=4, answer=answer, meta={"iteration": it})  # fmt: skip


def test_answer_letters_count_given_and_right_letters_in_the_first_and_last_iterations() -> None:
    # iterations 1-2 answer A and C; 3-4 drift to D (one unparsed answer); a free-form episode is not counted
    trajs = [_mcq(1, "A", "A"), _mcq(1, "C", "D"), _mcq(2, "a", "B"), _mcq(3, "D", "D"), _mcq(3, "D", "A"),
             _mcq(4, "D", "C"), _mcq(4, None, "D"), _mcq(4, "the answer is D", "D")]  # fmt: skip
    trajs.append(Trajectory(id="g1-0", media="m.mp4", question="q", task_type="num", max_turns=4, answer="A",
                            meta={"iteration": 4}))  # fmt: skip
    got = answer_letters(trajs, window=2)
    assert got is not None
    assert got["first"] == {
        "iterations": [1, 2],
        "episodes": 3,
        "answered": {"A": 2, "B": 0, "C": 1, "D": 0, "other": 0},
        "right": {"A": 1, "B": 1, "C": 0, "D": 1, "other": 0},
    }
    assert got["last"]["episodes"] == 5 and got["last"]["iterations"] == [3, 4]
    assert got["last"]["answered"] == {"A": 0, "B": 0, "C": 0, "D": 3, "other": 2}
    assert got["last"]["right"] == {"A": 1, "B": 0, "C": 1, "D": 3, "other": 0}
    assert answer_letters(trajs, window=3) is None  # four iterations cannot hold two windows of three
    three = answer_letters([_mcq(1, "C", "A", 3), _mcq(2, "D", "B", 3)], window=1)
    assert three is not None and three["last"]["answered"] == {
        "A": 0,
        "B": 0,
        "C": 0,
        "other": 1,
    }  # no D of 3
