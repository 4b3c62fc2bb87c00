"""The single-process TAURA trainer (rl/train_local.py) on the tiny thinker: what a group's episodes are paid
(the evidence gate, the prior floor, the number credit and its flat scope, the reading credit), and
filter_groups, which trains on the groups whose episodes disagree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testkit import TRAIN_LOCAL_SMALL as SMALL

from envs.env import OmniVideoEnv
from envs.scoring import letters
from envs.tasks import load_tasks_jsonl, save_tasks_jsonl
from omniagent.backends.scripted import OraclePolicy
from omniagent.policy import make_policy
from rl.algo.reward import closeness
from rl.local.args import Args
from rl.local.groups import play_group, rollout
from rl.train_local import compose_config


@pytest.mark.parametrize(
    ("shaping", "expected"),
    [
        (["env.reward.evidence_gate=true"], {True: 1.0, False: 0.0}),
        (["env.reward.evidence_gate=true", "env.reward.evidence_bonus=0.25"], {True: 1.25, False: 0.0}),
        (["env.reward.evidence_bonus=0.25"], {True: 1.25, False: 1.0}),  # the bonus alone: guesses still pay
    ],
)
def test_evidence_gate_pays_only_the_episodes_that_looked_at_the_evidence(
    oracle_turns, cfg_tiny, train_tasks: Path, random_dir: Path, shaping: list[str], expected: dict
) -> None:
    _, encoder, task, _, _ = oracle_turns
    cfg = compose_config([*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
                          "actor_rollout_ref.rollout.n=1", "env.turns.min=4", "env.turns.max=4", *shaping])  # fmt: skip
    args = Args.from_config(cfg)
    reward_keys = args.fingerprint()["env"]["reward"]
    assert {k for k in ("evidence_gate", "evidence_bonus") if k in reward_keys} == {
        o.split("=")[0].rsplit(".", 1)[1] for o in shaping
    }  # a resumed run must match the shaping it was saved with
    plain = Args.from_config(cfg_tiny).fingerprint()["env"]["reward"]
    assert not {"evidence_gate", "evidence_bonus"} & set(plain)  # runs saved before these keys still resume
    assert task.evidence
    shaped = {}
    for look in (True, False):  # the oracle answers right either way; only the first fetches the evidence
        oracle = make_policy("oracle", look=look, evidence=task.evidence, frames_per_span=2)
        (traj,), rows = play_group(oracle, encoder, OmniVideoEnv(), task, args, group=0, seed=0)
        assert traj.reward == 1.0 and traj.meta["evidence_seen"] is look
        assert all(r.reward == traj.meta["shaped_reward"] for r in rows)
        shaped[look] = traj.meta["shaped_reward"]
    assert shaped == pytest.approx(expected)


@pytest.mark.parametrize(("prior_right", "expected"), [(True, 0.0), (False, 1.0)])
def test_prior_tasks_pays_a_right_answer_only_above_the_no_look_constant(
    oracle_turns, train_tasks: Path, random_dir: Path, tmp_path: Path, prior_right: bool, expected: float
) -> None:
    """The oracle answers right; the prior, fitted on three copies of the task, names the same option (its score
    is 1, so the right answer earns nothing above it) or, with the copies' answer moved, another option."""
    _, encoder, task, _, _ = oracle_turns
    letter = task.answer if prior_right else ("A" if task.answer != "A" else "B")
    copies = [task.model_copy(update={"id": f"copy{i}", "answer": letter}) for i in range(3)]
    prior_file = save_tasks_jsonl(copies, tmp_path / "prior.jsonl")
    base = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            "actor_rollout_ref.rollout.n=1", "env.turns.min=4", "env.turns.max=4"]  # fmt: skip
    args = Args.from_config(compose_config([*base, f"env.reward.prior_tasks={prior_file}"]))
    assert args.fingerprint()["env"]["reward"]["prior_tasks"] == str(prior_file)  # a resume must match it
    assert "prior_tasks" not in Args.from_config(compose_config(base)).fingerprint()["env"]["reward"]
    oracle = make_policy("oracle", look=True, evidence=task.evidence, frames_per_span=2)
    (traj,), rows = play_group(oracle, encoder, OmniVideoEnv(), task, args, group=0, seed=0)
    assert traj.reward == 1.0 and traj.meta["prior_score"] == (1.0 if prior_right else 0.0)
    assert traj.meta["shaped_reward"] == expected and all(r.reward == expected for r in rows)


def test_num_credit_pays_a_number_answer_its_closeness_to_the_truth(
    oracle_turns, train_tasks: Path, random_dir: Path
) -> None:
    """A count question (the training task recast, truth 20) answered by the uniform scan's fixed guess, 0: MRA
    pays nothing, the credit pays its closeness on a log scale."""
    _, encoder, task, _, _ = oracle_turns
    pitch = task.model_copy(update={"task_type": "num", "choices": None, "answer": 20.0})
    base = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            "actor_rollout_ref.rollout.n=1", "env.turns.min=4", "env.turns.max=4"]  # fmt: skip
    args = Args.from_config(compose_config([*base, "env.reward.num_credit=0.5"]))
    assert args.fingerprint()["env"]["reward"]["num_credit"] == 0.5  # a resume must match it
    (traj,), rows = play_group(make_policy("uniform"), encoder, OmniVideoEnv(), pitch, args, group=0, seed=0)
    expected = closeness(traj.answer, 20.0, 1000.0)
    assert traj.reward == 0.0 and expected is not None and 0.0 < expected < 1.0
    assert traj.meta["closeness"] == expected
    assert traj.meta["shaped_reward"] == pytest.approx(0.5 * expected) and all(
        r.reward == traj.meta["shaped_reward"] for r in rows
    )
    (plain,), _ = play_group(
        make_policy("uniform"),
        encoder,
        OmniVideoEnv(),
        pitch,
        Args.from_config(compose_config(base)),
        group=0,
        seed=0,
    )
    assert plain.meta["closeness"] is None and plain.meta["shaped_reward"] == 0.0  # off by default


def test_the_flat_scope_pays_the_closeness_only_to_a_group_that_scored_0_throughout(
    oracle_turns, train_tasks: Path, random_dir: Path
) -> None:
    """The uniform scan answers 0 to a number question: with truth 20 every episode scores 0 and the group is paid
    its closeness; with truth 0 every episode scores 1 and the score alone is paid."""
    _, encoder, task, _, _ = oracle_turns
    base = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            "actor_rollout_ref.rollout.n=2", "env.turns.min=4", "env.turns.max=4", "env.reward.num_credit=1.0",
            "env.reward.num_credit_scope=flat"]  # fmt: skip
    args = Args.from_config(compose_config(base))
    assert args.fingerprint()["env"]["reward"]["num_credit_scope"] == "flat"  # a resume must match it
    far = task.model_copy(update={"task_type": "num", "choices": None, "answer": 20.0})
    trajs, rows = play_group(make_policy("uniform"), encoder, OmniVideoEnv(), far, args, group=0, seed=0)
    expected = closeness(0.0, 20.0, 1000.0)
    assert expected is not None and 0.0 < expected < 1.0
    assert [t.reward for t in trajs] == [0.0, 0.0] and [t.answer for t in trajs] == [0.0, 0.0]
    assert all(t.meta["shaped_reward"] == pytest.approx(expected) for t in trajs)
    assert all(r.reward == pytest.approx(expected) for r in rows) and len(rows) == sum(
        len(t.turns) for t in trajs
    )
    right = task.model_copy(update={"task_type": "num", "choices": None, "answer": 0.0})
    trajs, rows = play_group(make_policy("uniform"), encoder, OmniVideoEnv(), right, args, group=0, seed=0)
    assert [t.reward for t in trajs] == [1.0, 1.0] and [t.meta["closeness"] for t in trajs] == [1.0, 1.0]
    assert all(t.meta["shaped_reward"] == 1.0 for t in trajs) and all(r.reward == 1.0 for r in rows)


def test_reading_credit_pays_the_share_of_percepts_the_observations_read_exactly(
    oracle_turns, train_tasks: Path, random_dir: Path
) -> None:
    _, encoder, task, _, _ = oracle_turns
    cfg_overrides = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
                     "actor_rollout_ref.rollout.n=1", "env.turns.min=6", "env.turns.max=6",
                     "env.reward.reading_credit=0.5"]  # fmt: skip
    args = Args.from_config(compose_config(cfg_overrides))
    assert args.fingerprint()["env"]["reward"]["reading_credit"] == 0.5  # a resumed run keeps its shaping
    # the perceiving teacher describes every percept exactly; the oracle looks and answers without describing
    teacher = make_policy("synth_teacher", seed=0)
    (traj,), rows = play_group(teacher, encoder, OmniVideoEnv(), task, args, group=0, seed=0)
    assert traj.meta["reading"] == 1.0
    assert traj.meta["shaped_reward"] == pytest.approx((traj.reward or 0.0) + 0.5)
    assert all(r.reward == traj.meta["shaped_reward"] for r in rows)
    oracle = make_policy("oracle", look=True, evidence=task.evidence, frames_per_span=2)
    (traj,), _ = play_group(oracle, encoder, OmniVideoEnv(), task, args, group=0, seed=0)
    assert traj.meta["reading"] == 0.0 and traj.meta["shaped_reward"] == traj.reward == 1.0
    # reading_scope=events counts only frames with an event (the evidence frames the oracle fetched have one)
    events = Args.from_config(compose_config([*cfg_overrides, "env.reward.reading_scope=events"]))
    assert events.fingerprint()["env"]["reward"]["reading_scope"] == "events"
    # runs saved before the key still resume
    assert "reading_scope" not in args.fingerprint()["env"]["reward"]
    (traj,), _ = play_group(oracle, encoder, OmniVideoEnv(), task, events, group=0, seed=0)
    assert traj.meta["reading"] == 0.0 and traj.meta["shaped_reward"] == 1.0
    (traj,), _ = play_group(teacher, encoder, OmniVideoEnv(), task, events, group=0, seed=0)
    assert traj.meta["reading"] == 1.0


class FlakyOracle(OraclePolicy):
    """Answers right, except on every other episode of the tasks whose question is in ``flaky``: their groups
    of two disagree, the others' are flat."""

    def __init__(self, flaky: set[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flaky, self.episodes = flaky, 0

    def reset(self, info: dict[str, Any]) -> None:
        self.episodes += 1
        super().reset(info)

    def answer(self) -> Any:
        truth = super().answer()
        if self.task["question"] in self.flaky and self.episodes % 2:
            return next(x for x in letters(len(self.task["choices"])) if x != truth)
        return truth


def test_filter_groups_trains_on_groups_whose_episodes_disagree(
    oracle_turns, train_tasks: Path, random_dir: Path
) -> None:
    _, encoder, _, _, _ = oracle_turns
    tasks = load_tasks_jsonl(train_tasks)
    flaky = {t.question for t in tasks[::2]}
    base = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            "data.train_batch_size=3"]  # fmt: skip
    with pytest.raises(ValueError, match="max_num_gen_batches"):  # verl's 0 means no limit: here, a hang
        Args.from_config(compose_config([*base, "algorithm.filter_groups.enable=true"]))
    off = Args.from_config(compose_config(base))
    on = Args.from_config(compose_config([*base, "algorithm.filter_groups.enable=true",
                                          "algorithm.filter_groups.max_num_gen_batches=4"]))  # fmt: skip
    assert "filter_metric" not in off.fingerprint() and on.fingerprint()["filter_metric"] == "reward"

    def play(args: Args) -> tuple[list[int], list[list[float | None]], dict[str, float]]:
        picks, trajs, rows, stats = rollout(
            FlakyOracle(flaky, look=False), encoder, OmniVideoEnv(), tasks, args, 0, 0
        )
        groups = [[t.reward for t in trajs[g * 2 : g * 2 + 2]] for g in range(len(picks))]
        for j, traj in enumerate(trajs):  # numbered 0.. in training order, as append_rollouts expects
            assert traj.id.startswith(f"g{j // 2}-") and {r.group for r in rows if r.traj == j} == {j // 2}
        return picks, groups, stats

    picks, groups, stats = play(off)  # off: the draws of a run without the knob, flat groups and all
    assert picks == np.random.default_rng([0, 0]).choice(len(tasks), size=3, replace=3 > len(tasks)).tolist()
    assert stats == {"groups_played": 3, "gen_batches": 1,
                     "groups_flat": sum(tasks[i].question not in flaky for i in picks)}  # fmt: skip
    assert all((len(set(g)) > 1) == (tasks[i].question in flaky) for i, g in zip(picks, groups, strict=True))

    picks, groups, stats = play(on)
    disagree = [len(set(g)) > 1 for g in groups]
    assert len(picks) == 3 and stats["groups_played"] > 3 and stats["gen_batches"] > 1
    assert disagree == sorted(disagree, reverse=True)  # kept groups first, then flat ones filling the batch
    assert sum(disagree) == 3 or stats["gen_batches"] == 4  # fewer kept only when the draws ran out
    assert stats["groups_flat"] == stats["groups_played"] - sum(disagree)
