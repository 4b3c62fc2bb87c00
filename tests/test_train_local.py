"""The single-process TAURA trainer (rl/train_local.py) on the tiny thinker: shared settings, the PPO loss, the
per-turn samples, resume after SIGKILL, and a CI-sized run that learns from its rewards."""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from envs.env import OmniVideoEnv
from envs.scoring import letters
from envs.tasks import letter_index, load_tasks_jsonl, save_tasks_jsonl
from omniagent.backends.scripted import OraclePolicy
from omniagent.checkpoint import check_checkpoint
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from omniagent.trajectory import Trajectory
from rl.algo.reward import closeness
from rl.checkpoint import latest_checkpoint, load_training_state, save_checkpoint
from rl.local.args import Args
from rl.local.bookkeeping import evaluate, load_policy
from rl.local.groups import RecordingPolicy, play_group, rollout
from rl.local.info_gain import answer_entropy, information_gains
from rl.local.rollout import TurnEncoder, TurnRow
from rl.local.task_draw import training_tasks
from rl.local.update import advantages, kl_to_reference, ppo_clip_loss, score_rows, update
from rl.train_local import compose_config, train

ROOT = Path(__file__).resolve().parents[1]
# A tiny-scale run: 1-2 groups of 2-4 episodes, 2 turns each, short outputs.
SMALL = ["+exp=tiny", "data.train_batch_size=1", "actor_rollout_ref.rollout.n=2", "data.max_response_length=16",
         "actor_rollout_ref.actor.ppo_mini_batch_size=1", "env.turns.min=2", "env.turns.max=2",
         "local.progress=false"]  # fmt: skip


def _synth(out: Path, seed: int, n: int) -> Path:
    cmd = [sys.executable, "-m", "envs.synth", "--out", str(out), "--seed", str(seed), "--n", str(n),
           "--durations", "30"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=300)
    return out / "tasks.jsonl"


def _mcq(tasks: Path, out: Path) -> Path:
    save_tasks_jsonl([t for t in load_tasks_jsonl(tasks) if t.task_type == "mcq"], out)
    return out


@pytest.fixture(scope="module")
def train_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synth_train")
    return _mcq(_synth(root / "s1", seed=1, n=1), root / "mcq.jsonl")


@pytest.fixture(scope="module")
def random_dir(tiny_dir: Path) -> Path:
    """The random tiny thinker as a checkpoint folder (conftest's; by path: "tiny" names the shipped agent)."""
    return tiny_dir


@pytest.fixture(scope="module")
def cfg_tiny(train_tasks: Path, random_dir: Path):
    return compose_config(
        [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}"]
    )


def test_args_are_read_from_the_keys_verl_reads(cfg_tiny, train_tasks: Path) -> None:
    args = Args.from_config(cfg_tiny)
    actor = cfg_tiny.actor_rollout_ref.actor
    assert (args.clip_low, args.clip_high, args.clip_c) == (actor.clip_ratio_low, actor.clip_ratio_high,
                                                            actor.clip_ratio_c)  # fmt: skip
    assert args.lr == actor.optim.lr and args.group_size == cfg_tiny.actor_rollout_ref.rollout.n == 2
    assert args.mode == cfg_tiny.taura.mode == "taura" and args.max_new_tokens == 16
    assert args.norm_by_std is cfg_tiny.algorithm.norm_adv_by_std_in_grpo
    big = Args.from_config(compose_config(["+exp=7b", "taura.mode=grpo", f"local.train_tasks={train_tasks}"]))
    assert big.group_size == 8 and big.mode == "grpo" and big.clip_high == 0.3  # the 7B recipe's settings


def test_task_types_restrict_the_training_draw_and_belong_to_the_resume_fingerprint(
    train_tasks: Path, random_dir: Path
) -> None:
    every = train_tasks.parent / "s1" / "tasks.jsonl"
    types = {t.task_type for t in load_tasks_jsonl(every)}
    assert {"mcq", "tr"} <= types
    kept = training_tasks(str(every), ["mcq", "size"])
    assert kept and {t.task_type for t in kept} <= {"mcq", "size"}
    assert len(kept) == sum(t.task_type in ("mcq", "size") for t in load_tasks_jsonl(every))
    assert len(training_tasks(str(every), None)) == len(load_tasks_jsonl(every))
    with pytest.raises(ValueError, match=r"keeps no task.*its types: \['ff'"):
        training_tasks(str(every), ["counting"])
    base = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={every}"]
    plain = Args.from_config(compose_config(base)).fingerprint()
    narrow = Args.from_config(compose_config([*base, "local.task_types=[size,mcq]"])).fingerprint()
    assert "task_types" not in plain and narrow["task_types"] == [
        "mcq",
        "size",
    ]  # a filtered run resumes only so


def test_task_pool_fixes_a_seeded_sample_that_every_iteration_replays(
    train_tasks: Path, random_dir: Path, tmp_path: Path
) -> None:
    every = train_tasks.parent / "s1" / "tasks.jsonl"
    n_all = len(load_tasks_jsonl(every))
    pool = training_tasks(str(every), None, pool=4, seed=0)
    assert len(pool) == 4 == len({t.id for t in pool})
    assert [t.id for t in training_tasks(str(every), None, pool=4, seed=0)] == [t.id for t in pool]
    assert [t.id for t in training_tasks(str(every), None, pool=4, seed=1)] != [t.id for t in pool]
    narrow = training_tasks(str(every), ["mcq", "size"], pool=2, seed=0)
    assert len(narrow) == 2 and {t.task_type for t in narrow} <= {"mcq", "size"}
    with pytest.raises(ValueError, match=r"task_pool=999 must be between 1 and the \d+ tasks"):
        training_tasks(str(every), None, pool=999)
    assert len(training_tasks(str(every), None, pool=n_all)) == n_all
    base = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={every}"]
    args = Args.from_config(compose_config([*base, "local.task_pool=4", "data.train_batch_size=4"]))
    assert (
        args.fingerprint()["task_pool"] == 4
        and "task_pool" not in Args.from_config(compose_config(base)).fingerprint()
    )
    cfg = compose_config([*base, "local.task_pool=2", "data.train_batch_size=2", "local.iterations=2",
                          f"local.run_dir={tmp_path}"])  # fmt: skip
    train(cfg)
    ids = json.loads((tmp_path / "task_pool.json").read_text())
    assert ids == [t.id for t in training_tasks(str(every), None, pool=2, seed=0)]
    trajs = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    for it in (1, 2):  # a pool as large as the batch: every iteration plays every pool task, one group each
        assert sorted({t["meta"]["task_id"] for t in trajs if t["meta"]["iteration"] == it}) == sorted(ids)


def test_shuffle_options_gives_each_episode_its_own_letters_for_the_same_answer(
    train_tasks: Path, random_dir: Path, tmp_path: Path
) -> None:
    cfg = compose_config([*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
                          "actor_rollout_ref.rollout.n=6", "local.iterations=1", "local.shuffle_options=true",
                          "local.task_pool=1", f"local.run_dir={tmp_path}"])  # fmt: skip
    assert Args.from_config(cfg).fingerprint()["shuffle_options"] is True
    train(cfg)
    played = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    pooled = training_tasks(str(train_tasks), None, pool=1, seed=0)[0]
    assert len(played) == 6 and {p["meta"]["task_id"] for p in played} == {pooled.id}
    assert all(sorted(p["choices"]) == sorted(pooled.choices or []) for p in played)
    assert {p["choices"][letter_index(p["ground_truth"])] for p in played} == {pooled.answer_choice()}
    assert len({tuple(p["choices"]) for p in played}) > 1  # the orders differ between episodes
    (metrics,) = _read(tmp_path / "metrics.csv")
    assert (metrics["groups_played"], metrics["gen_batches"]) == ("1", "1")  # no filter_groups: one draw
    assert metrics["groups_flat"] == str(int(len({p["reward"] for p in played}) == 1))


def test_ppo_clip_loss_matches_verl_vanilla_hand_values(cfg_tiny) -> None:
    args = Args.from_config(cfg_tiny)  # clip 0.2 / 0.28, dual clip 3
    old = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1, 10.0]))
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    loss, clipped, _ = ppo_clip_loss(logp, old, adv, args)
    # ratio 1.5 with A>0 is cut to 1.28; ratio 0.5 with A>0 is not (min is taken over -A*r);
    # ratio 1.1 with A<0 is inside; ratio 10 with A<0 is capped by the dual clip at 3
    assert torch.allclose(loss, torch.tensor([-1.28, -0.5, 1.1, 3.0]), atol=1e-5)
    assert clipped.tolist() == [1.0, 0.0, 0.0, 0.0]  # verl's clipfrac counts the PPO clip, not the dual clip


@pytest.fixture(scope="module")
def oracle_turns(train_tasks: Path, random_dir: Path):
    """Contexts and outputs of a looking oracle (frames, then the answer) on one training task, with the
    tiny random policy and its encoder."""
    policy = make_policy("transformers", model=str(random_dir), dtype="float32", max_new_tokens=8)
    encoder = TurnEncoder(policy.processor, policy.model.config)
    task = load_tasks_jsonl(train_tasks)[0]
    recorder = RecordingPolicy(make_policy("oracle", look=True, evidence=task.evidence, frames_per_span=2))
    traj = run_episode(OmniVideoEnv(), recorder, task.env_options(4))
    rows = []
    for k, ((context, out), rec) in enumerate(zip(recorder.turns, traj.turns, strict=True)):
        item = encoder.encode(
            [*context, {"role": "assistant", "content": [{"type": "text", "text": out.text}]}]
        )
        rows.append(TurnRow(item, 0, 0, k, traj.reward, rec, context))
    return policy, encoder, task, traj, rows


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


def test_task_repeats_lists_a_type_or_template_more_often_and_belongs_to_the_resume_fingerprint(
    train_tasks: Path, random_dir: Path
) -> None:
    every = train_tasks.parent / "s1" / "tasks.jsonl"
    tasks = load_tasks_jsonl(every)
    template = str(tasks[0].extra["template"])
    n_tpl = sum(t.extra.get("template") == template for t in tasks)
    n_mcq = sum(t.task_type == "mcq" for t in tasks)
    more = training_tasks(str(every), None, repeats={template: 3})
    assert len(more) == len(tasks) + 2 * n_tpl
    assert sum(t.extra.get("template") == template for t in more) == 3 * n_tpl
    assert {t.id for t in more} == {t.id for t in tasks}  # every other task is kept, once
    by_type = training_tasks(str(every), None, repeats={"mcq": 2})
    assert len(by_type) == len(tasks) + n_mcq
    narrow = training_tasks(str(every), ["mcq"], repeats={"mcq": 2})  # after task_types
    assert len(narrow) == 2 * n_mcq
    with pytest.raises(ValueError, match=r"names no task type or template.*\['beep_pich'\]"):
        training_tasks(str(every), None, repeats={"beep_pich": 4})
    with pytest.raises(ValueError, match="at least 1"):
        training_tasks(str(every), None, repeats={"mcq": 0})
    base = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={every}"]
    plain = Args.from_config(compose_config(base)).fingerprint()
    more_args = Args.from_config(compose_config([*base, f"local.task_repeats={{{template}:3}}"]))
    assert "task_repeats" not in plain and more_args.fingerprint()["task_repeats"] == {template: 3}


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


def test_turn_samples_train_exactly_the_turns_output(oracle_turns) -> None:
    policy, encoder, _, traj, rows = oracle_turns
    assert traj.answered and len(rows) >= 2 and rows[0].record.action_type == "get_frames"
    for row, turn in zip(rows, traj.turns, strict=True):
        ids, mask = row.item["input_ids"], row.item["loss_mask"].bool()
        assert encoder.tokenizer.decode(ids[mask]) == turn.raw_text + "<|im_end|>"
        assert not mask[: int(torch.nonzero(mask).min())].any()  # the context itself is never trained
    assert "pixel_values" in rows[1].item.get("multi_modal_inputs", {}) or "pixel_values_videos" in rows[
        1
    ].item.get("multi_modal_inputs", {})  # the turn after the frames request sees the frames


def test_information_gain_is_an_answer_entropy_difference(oracle_turns) -> None:
    policy, encoder, task, _, rows = oracle_turns
    before = answer_entropy(policy.model, encoder, rows[0].context, task)
    after = answer_entropy(policy.model, encoder, rows[1].context, task)
    assert 0.0 <= min(before, after) and max(before, after) <= math.log(len(task.choices)) + 1e-6
    gains = information_gains(policy.model, encoder, rows, task)
    assert gains[0] == pytest.approx(before - after) and gains[-1] == 0.0  # the answer turn has no percept


def test_target_kl_stops_the_update_before_the_step_that_would_pass_it(oracle_turns, cfg_tiny) -> None:
    """``local.target_kl``: no step once a mini-batch measures the policy past the bound; None never stops."""
    policy, encoder, _, _, turns = oracle_turns
    base = dataclasses.replace(Args.from_config(cfg_tiny), lr=0.5, mini_batch_rows=1)  # one row a step
    assert len(turns) >= 2 and base.local["target_kl"] is None and "target_kl" not in base.fingerprint()
    bounded = dataclasses.replace(base, local={**base.local, "target_kl": 0.02})
    assert bounded.fingerprint()["target_kl"] == 0.02  # a bounded run resumes only with its bound

    def run(target_kl: float | None) -> tuple[dict, float]:
        model = copy.deepcopy(policy.model)
        rows = [copy.copy(r) for r in turns]
        score_rows(model, rows, encoder.pad_id)
        adv = -torch.ones(len(rows), max(r.mask.shape[0] for r in rows))  # every sampled token made rarer
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=base.lr)
        before = [p.detach().clone() for p in model.parameters()]
        args = dataclasses.replace(base, local={**base.local, "target_kl": target_kl})
        stats = update(model, opt, rows, adv, args, encoder.pad_id)
        moved = sum(
            float((p.detach() - b).abs().sum()) for p, b in zip(model.parameters(), before, strict=True)
        )
        return stats, moved

    free, moved = run(None)
    assert (free["opt_steps"], free["kl_stop"]) == (len(turns), 0.0) and moved > 0
    assert free["approx_kl"] > 1e-3  # a step of lr 0.5 against every token moves the next row's log-probs
    stopped, moved = run(-1.0)  # the first mini-batch, before any step, already measures KL ~0 > -1
    assert (stopped["opt_steps"], stopped["kl_stop"], moved) == (0.0, 1.0, 0.0)
    one, moved = run(1e-3)  # the rollout policy itself (KL ~0) steps once; the moved policy stops
    assert (one["opt_steps"], one["kl_stop"]) == (1.0, 1.0) and moved > 0


def test_hold_answer_turns_keeps_the_answer_at_grpo_weight(oracle_turns, cfg_tiny) -> None:
    """taura.hold_answer_turns: the answer rows of a group keep weight 1 and the perceiving rows are weighted by
    their entropy over the perceiving rows' mean; the knob belongs to the resume fingerprint only when on."""
    policy, encoder, _, _, turns = oracle_turns
    off = Args.from_config(cfg_tiny)
    assert off.hold_answer_turns is False and "hold_answer_turns" not in off.fingerprint()
    on = dataclasses.replace(off, hold_answer_turns=True)
    assert on.fingerprint()["hold_answer_turns"] is True
    # two episodes of one group (the oracle's turns once more with another reward), so the advantage is not 0
    rows = [copy.copy(r) for r in turns] + [dataclasses.replace(r, traj=1, reward=0.0) for r in turns]
    score_rows(policy.model, rows, encoder.pad_id)
    answers = [r.record.action_type == "answer" for r in rows]
    assert any(answers) and not all(answers)
    held, plain = advantages(rows, on, None), advantages(rows, off, None)
    entropy = plain.turn_entropy
    looked = [not a for a in answers]
    expected = torch.where(torch.tensor(answers), 1.0, entropy / entropy[looked].mean())
    torch.testing.assert_close(held.weights, expected)
    torch.testing.assert_close(held.outcome_advantage, plain.outcome_advantage)
    assert not torch.allclose(held.weights, plain.weights)  # the entropy of the answer turn counts otherwise


def test_kl_estimates_to_the_reference_match_their_definitions() -> None:
    """verl's kl_loss_type names: k1 is the log ratio, k2 half its square, k3 = r - log r - 1 (r = p_ref / p)."""
    logp = torch.tensor([-1.0, -2.0, -0.5, -3.0])
    ref = torch.tensor([-1.0, -1.0, -2.5, -2.0])
    d = logp - ref
    assert torch.allclose(kl_to_reference(logp, ref, "k1"), d)
    assert torch.allclose(kl_to_reference(logp, ref, "kl"), d)
    assert torch.allclose(kl_to_reference(logp, ref, "abs"), d.abs())
    assert torch.allclose(kl_to_reference(logp, ref, "mse"), 0.5 * d**2)
    k3 = kl_to_reference(logp, ref, "low_var_kl")
    assert torch.allclose(k3, torch.exp(-d) + d - 1.0) and torch.allclose(
        k3, kl_to_reference(logp, ref, "k3")
    )
    assert float(k3[0]) == 0.0 and bool((k3 >= 0).all())  # zero only where the policy equals the reference
    assert float(kl_to_reference(torch.tensor([0.0]), torch.tensor([-60.0]), "k3")) == 10.0  # bounded as verl
    with pytest.raises(ValueError, match="kl_loss_type"):
        kl_to_reference(logp, ref, "forward")


def test_kl_loss_settings_come_from_verls_actor_keys(cfg_tiny) -> None:
    off = Args.from_config(cfg_tiny)
    assert (
        off.kl_coef == 0.0 and "kl_coef" not in off.fingerprint()
    )  # runs saved before the knob still resume
    on = compose_config([*SMALL, "actor_rollout_ref.model.path=tiny-random", "local.train_tasks=x.jsonl",
                         "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_coef=0.05"])  # fmt: skip
    args = Args.from_config(on)
    assert (args.kl_coef, args.kl_type) == (0.05, "low_var_kl")  # verl's default estimate
    assert args.fingerprint()["kl_coef"] == 0.05  # a run with the anchor resumes only with it
    with pytest.raises(ValueError, match="kl_loss_type"):
        dataclasses.replace(args, kl_type="forward")


def test_kl_loss_pulls_the_policy_toward_the_reference(oracle_turns, cfg_tiny) -> None:
    """With no advantage to follow, the KL term alone moves the policy, and toward the reference: a policy
    nudged away from its reference drifts back, step by step; at the reference there is no gradient at all."""
    policy, encoder, _, _, turns = oracle_turns
    base = dataclasses.replace(Args.from_config(cfg_tiny), lr=0.1, mini_batch_rows=len(turns), kl_coef=1.0)
    zero = torch.zeros(len(turns), max(8, *(int(r.item["input_ids"].shape[-1]) for r in turns)))

    def run(noise: float, steps: int) -> tuple[list[float], float]:
        model = copy.deepcopy(policy.model)
        with torch.no_grad():  # the policy as some RL steps might have left it
            for k, param in enumerate(model.parameters()):
                param += noise * torch.randn(param.shape, generator=torch.Generator().manual_seed(k))
        rows = [copy.copy(r) for r in turns]
        score_rows(model, rows, encoder.pad_id, ref_model=policy.model)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=base.lr)  # plain descent
        before = [p.detach().clone() for p in model.parameters()]
        kls = [update(model, opt, rows, zero, base, encoder.pad_id)["ref_kl"] for _ in range(steps)]
        moved = sum(
            float((p.detach() - b).abs().sum()) for p, b in zip(model.parameters(), before, strict=True)
        )
        return kls, moved

    kls, moved = run(0.0, 1)
    assert kls == [pytest.approx(0.0, abs=1e-6)] and moved == 0.0  # k3 has zero gradient at the reference
    kls, moved = run(0.05, 5)
    assert kls[0] > 1e-3 and moved > 0
    assert all(b < a for a, b in zip(kls, kls[1:], strict=False))  # each step closer to the reference


def test_kl_anchor_is_the_starting_model_also_after_resume(
    train_tasks: Path, random_dir: Path, tmp_path: Path
) -> None:
    """metrics.csv `ref_kl`: ~0 in iteration 1 (the policy starts as the reference and takes one small step
    before its second mini-batch), large once it has moved (lr 0.01), and still measured against the starting
    model when a run resumes from a checkpoint."""
    over = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            "actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_coef=0.1",
            "actor_rollout_ref.actor.optim.lr=0.01", f"local.run_dir={tmp_path}"]  # fmt: skip
    rows = _read(train(compose_config([*over, "local.iterations=2"])))
    assert float(rows[0]["ref_kl"]) == pytest.approx(0.0, abs=1e-5) and float(rows[1]["ref_kl"]) > 0.5
    rows = _read(
        train(compose_config([*over, "local.iterations=3"]))
    )  # resumes from the iteration-2 checkpoint
    # from the start: ~5 (iteration 2: ~3.5); the iteration-2 checkpoint as anchor would give ~0.006 (one step)
    assert len(rows) == 3 and float(rows[2]["ref_kl"]) > 0.5


@pytest.fixture(scope="module")
def sft_parquet(oracle_turns, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The oracle's episode (frames, then the right answer) exported as SFT rows, as rl/sft_export writes them."""
    from rl.sft.export import export_parquet

    traj = oracle_turns[3]
    path = tmp_path_factory.mktemp("anchor") / "train.parquet"
    assert export_parquet([traj], path) == len(traj.turns) >= 2
    return path


def test_sft_anchor_alone_moves_the_policy_toward_the_sft_rows(
    oracle_turns, cfg_tiny, sft_parquet: Path
) -> None:
    """With zero advantages and no KL the PPO term has no gradient: the policy moves only with the anchor, and
    each step lowers the anchor rows' NLL (logged as sft_nll)."""
    from rl.local.sft_anchor import SFTAnchor

    policy, encoder, _, _, turns = oracle_turns
    base = dataclasses.replace(Args.from_config(cfg_tiny), lr=0.05, mini_batch_rows=len(turns), kl_coef=0.0)
    zero = torch.zeros(len(turns), max(8, *(int(r.item["input_ids"].shape[-1]) for r in turns)))
    anchor = SFTAnchor(str(sft_parquet), 1.0, 99, 0, encoder)  # every row, each step

    def run(with_anchor: SFTAnchor | None, steps: int) -> tuple[list[float], float]:
        model = copy.deepcopy(policy.model)
        rows = [copy.copy(r) for r in turns]
        score_rows(model, rows, encoder.pad_id)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=base.lr)
        before = [p.detach().clone() for p in model.parameters()]
        nll = [
            update(model, opt, rows, zero, base, encoder.pad_id, with_anchor, k)["sft_nll"]
            for k in range(steps)
        ]
        moved = sum(
            float((p.detach() - b).abs().sum()) for p, b in zip(model.parameters(), before, strict=True)
        )
        return nll, moved

    nll, moved = run(None, 1)
    assert nll == [0.0] and moved == 0.0  # no anchor, no advantage: nothing to follow
    nll, moved = run(anchor, 4)
    assert moved > 0 and nll[0] > 1.0  # random weights: the oracle's turns are unlikely
    assert all(b < a for a, b in zip(nll, nll[1:], strict=False))  # each step makes the SFT rows likelier


def test_sft_anchor_rows_are_seeded_and_its_settings_are_checked(oracle_turns, sft_parquet: Path) -> None:
    from rl.local.sft_anchor import SFTAnchor

    encoder = oracle_turns[1]
    one, two = (SFTAnchor(str(sft_parquet), 0.5, 1, 7, encoder) for _ in range(2))
    # an anchor row is the rollout row of the same turn, token for token
    for k, turn in enumerate(oracle_turns[4]):
        row = one.item(k)
        assert torch.equal(row["input_ids"], turn.item["input_ids"])
        assert torch.equal(row["loss_mask"], turn.item["loss_mask"])
        assert torch.equal(row["position_ids"], turn.item["position_ids"])
    draws = [one.indices(it, step) for it in range(3) for step in range(4)]
    # resume draws the same rows, and every row gets drawn
    assert draws == [two.indices(it, step) for it in range(3) for step in range(4)]
    assert len({tuple(d) for d in draws}) == len(one)
    # capped at the set's size, without replacement
    every = SFTAnchor(str(sft_parquet), 0.5, 99, 7, encoder).indices(0, 0)
    assert sorted(every) == list(range(len(one)))
    assert SFTAnchor.from_local({"seed": 0, "sft_anchor": {"data": None}}, encoder) is None
    with pytest.raises(ValueError, match=r"sft_anchor\.coef"):
        SFTAnchor(str(sft_parquet), 0.0, 2, 0, encoder)
    with pytest.raises(ValueError, match=r"sft_anchor\.rows"):
        SFTAnchor(str(sft_parquet), 0.5, 0, 0, encoder)
    with pytest.raises(FileNotFoundError, match=r"python -m rl\.sft\.export"):
        SFTAnchor(str(sft_parquet) + ".missing", 0.5, 2, 0, encoder)


def test_sft_anchor_run_logs_its_nll_and_belongs_to_the_resume_fingerprint(
    train_tasks: Path, random_dir: Path, sft_parquet: Path, tmp_path: Path
) -> None:
    over = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            f"local.run_dir={tmp_path}", f"local.sft_anchor.data={sft_parquet}", "local.iterations=1"]  # fmt: skip
    rows = _read(train(compose_config(over)))
    assert len(rows) == 1 and math.isfinite(float(rows[0]["sft_nll"])) and float(rows[0]["sft_nll"]) > 0
    plain = _read(train(compose_config([*SMALL, f"actor_rollout_ref.model.path={random_dir}",
                                        f"local.train_tasks={train_tasks}", f"local.run_dir={tmp_path / 'plain'}",
                                        "local.iterations=1"])))  # fmt: skip
    assert float(plain[0]["sft_nll"]) == 0.0  # off by default
    with pytest.raises(ValueError, match="other settings"):  # another anchor weight is another run
        train(compose_config([*over[:-1], "local.iterations=2", "local.sft_anchor.coef=0.25"]))


@pytest.mark.parametrize("mode", ["grpo", "oracle", "ig"])
def test_one_iteration_per_weight_mode_logs_its_turn_weights(
    train_tasks: Path, random_dir: Path, tmp_path: Path, mode: str
) -> None:
    cfg = compose_config([*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
                          f"taura.mode={mode}", "local.iterations=1", f"local.run_dir={tmp_path}"])  # fmt: skip
    (row,) = _read(train(cfg))
    assert row["adv_finite"] == "1.0" and float(row["weight_mean"]) == pytest.approx(1.0, abs=1e-5)
    trajs = [
        Trajectory.model_validate_json(line)
        for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()
    ]
    assert len(trajs) == 2 and all(len(t.meta["turn_weights"]) == t.num_turns == 2 for t in trajs)
    weights = [w for t in trajs for w in t.meta["turn_weights"]]
    if mode in ("grpo", "oracle"):  # the random model never fetches a percept: no overlap, every score 0
        assert weights == [1.0] * 4 and float(row["weight_std"]) == 0.0
    assert all(math.isfinite(w) and w >= 0 for w in weights)
    check_checkpoint(tmp_path / "final")


def test_the_progress_bar_moves_once_per_rollout_group_with_an_eta(
    train_tasks: Path, random_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two groups per iteration, two iterations: the bar (``local.progress``) counts 4 groups, and each group
    moves it as soon as it is played (before the next group starts), so a slow iteration still shows its pace;
    a resumed run's bar starts at the groups already done."""
    import rl.local.groups
    import rl.local.progress

    events: list[tuple[str, Any]] = []

    class Bar:  # records what the trainer asks of tqdm
        def __init__(self, **kwargs: Any) -> None:
            self.total, self.n = kwargs["total"], kwargs.get("initial", 0)
            events.append(("open", (self.total, self.n, kwargs.get("unit"), kwargs.get("disable"))))

        def update(self, n: int) -> None:
            self.n += n
            events.append(("update", self.n))

        def set_description(self, *args: Any, **kwargs: Any) -> None:
            events.append(("describe", args[0]))

        def set_postfix(self, **kwargs: Any) -> None:
            events.append(("postfix", sorted(kwargs)))

        def close(self) -> None:
            events.append(("close", self.n))

    played = rl.local.groups.play_group

    def play(*args: Any, **kwargs: Any) -> Any:
        events.append(("play", None))
        return played(*args, **kwargs)

    monkeypatch.setattr(rl.local.progress, "tqdm", Bar)
    monkeypatch.setattr(rl.local.groups, "play_group", play)
    over = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            "data.train_batch_size=2", "local.progress=true", f"local.run_dir={tmp_path}", "local.eval_every=0"]  # fmt: skip
    train(compose_config([*over, "local.iterations=1"]))
    assert events[0] == ("open", (2, 0, "group", False))
    kinds = [e[0] for e in events[1:]]
    assert kinds == ["play", "update", "play", "update", "postfix", "close"]  # per group, not per iteration
    assert [e[1] for e in events if e[0] == "update"] == [1, 2]
    events.clear()
    train(compose_config([*over, "local.iterations=2"]))  # resumes after iteration 1
    assert events[0] == ("open", (4, 2, "group", False))
    assert [e[1] for e in events if e[0] == "update"] == [3, 4]


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _train_cmd(tasks: Path, run_dir: Path, iterations: int, random_dir: Path) -> list[str]:
    return [sys.executable, "rl/train_local.py", *SMALL, f"actor_rollout_ref.model.path={random_dir}",
            f"local.train_tasks={tasks}", f"local.run_dir={run_dir}", f"local.iterations={iterations}",
            "local.threads=1"]  # fmt: skip


@pytest.mark.slow
def test_resumes_after_sigkill_exactly_like_an_uninterrupted_run(
    train_tasks: Path, random_dir: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    iterations = 4
    # local.threads=1 (in _train_cmd) instead of OMP_NUM_THREADS
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    ref_dir = tmp_path / "ref"
    ref = subprocess.run(_train_cmd(train_tasks, ref_dir, iterations, random_dir), capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=900)  # fmt: skip
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert '{"threads": 1}' in ref.stdout  # the config's thread count, not the environment's

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(_train_cmd(train_tasks, run_dir, iterations, random_dir), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=ROOT)  # fmt: skip
    deadline = time.monotonic() + 900
    while (
        time.monotonic() < deadline
        and proc.poll() is None
        and latest_checkpoint(run_dir / "checkpoints") is None
    ):
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = int(load_training_state(latest_checkpoint(run_dir / "checkpoints"))["iteration"])
    assert 1 <= killed_at < iterations and not (run_dir / "final").exists()

    again = subprocess.run(_train_cmd(train_tasks, run_dir, iterations, random_dir), capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=900)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert f'"iteration": {killed_at}' in again.stdout  # resumed from the checkpoint, not from scratch
    got, want = _read(run_dir / "metrics.csv"), _read(ref_dir / "metrics.csv")
    assert [r["iteration"] for r in got] == [str(i) for i in range(1, iterations + 1)]  # no iteration twice
    for a, b in zip(got, want, strict=True):  # the same episodes, entropies and updates
        for key in ("reward_mean", "turns", "entropy_turn_mean", "weight_std", "param_delta"):
            assert float(a[key]) == pytest.approx(float(b[key]), rel=1e-4, abs=1e-7), key
    a, b = (
        load_file(str(ref_dir / "final" / "model.safetensors")),
        load_file(str(run_dir / "final" / "model.safetensors")),
    )
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def _warm_start(policy, encoder: TurnEncoder, tasks: Path, steps: int) -> None:
    """Teach the random tiny thinker the answer format: a few SFT steps on an oracle's answer turns."""
    from rl.sft.step import collate, train_steps

    items = []
    for task in load_tasks_jsonl(tasks):
        recorder = RecordingPolicy(make_policy("oracle", look=False))
        run_episode(OmniVideoEnv(), recorder, task.env_options(2))
        for context, out in recorder.turns:
            items.append(
                encoder.encode(
                    [*context, {"role": "assistant", "content": [{"type": "text", "text": out.text}]}]
                )
            )
    losses = train_steps(
        policy.model, [collate([items[s % len(items)]], encoder.pad_id) for s in range(steps)], lr=3e-3
    )
    assert losses[-1] < 0.2 * losses[0]


@pytest.mark.slow
def test_ci_sized_taura_run_learns_from_its_rewards(
    train_tasks: Path, random_dir: Path, tmp_path: Path
) -> None:
    """A handful of updates on a fixed seed: advantages finite, weights moved by the advantages (no weight
    decay), the training tasks' greedy reward does not fall."""
    from safetensors.torch import load_file

    warm_tasks = _mcq(_synth(tmp_path / "s2", seed=2, n=2), tmp_path / "warm.jsonl")  # other videos
    cfg = compose_config([
        "+exp=tiny", "data.train_batch_size=2", "actor_rollout_ref.rollout.n=4", "data.max_response_length=64",
        "actor_rollout_ref.actor.ppo_mini_batch_size=1", "env.turns.min=2", "env.turns.max=2",
        "actor_rollout_ref.actor.optim.lr=1e-4", "actor_rollout_ref.actor.optim.weight_decay=0",
        f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}", f"local.eval_tasks={train_tasks}",
        "local.iterations=2", "local.eval_every=0", f"local.run_dir={tmp_path / 'run'}", "local.progress=false",
    ])  # fmt: skip
    args = Args.from_config(cfg)
    policy = load_policy(str(random_dir), args)
    encoder = TurnEncoder(policy.processor, policy.model.config)
    _warm_start(policy, encoder, warm_tasks, steps=50)
    save_checkpoint(policy.model, policy.processor, tmp_path / "warm")
    before = evaluate(policy, OmniVideoEnv(), load_tasks_jsonl(train_tasks), args)

    cfg.actor_rollout_ref.model.path = str(tmp_path / "warm")
    rows = _read(train(cfg))
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert all(r["adv_finite"] == "1.0" for r in rows)
    assert any(float(r["reward_std"]) > 0 for r in rows)  # the warm start answers, sometimes right
    assert all(float(r["valid_turns"]) > 0 for r in rows)
    moved = [float(r["param_delta"]) > 0 for r in rows]
    first = next(i for i, r in enumerate(rows) if float(r["adv_abs_mean"]) > 0)
    assert (
        not any(moved[:first]) and moved[first]
    )  # the weights move once, and because, advantages are non-zero
    a, b = (
        load_file(str(tmp_path / "warm" / "model.safetensors")),
        load_file(str(tmp_path / "run" / "final" / "model.safetensors")),
    )
    assert any(not torch.equal(a[k], b[k]) for k in a)
    assert float(rows[-1]["eval_reward"]) >= before
