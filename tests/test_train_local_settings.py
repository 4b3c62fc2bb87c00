"""The single-process TAURA trainer (rl/train_local.py): its settings, read from the keys verl reads, and its
training draw (task types, a fixed task pool, repeated tasks, shuffled options) with the resume fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testkit import TRAIN_LOCAL_SMALL as SMALL
from testkit import read_csv_rows

from envs.tasks import letter_index, load_tasks_jsonl
from rl.local.args import Args
from rl.local.task_draw import training_tasks
from rl.train_local import compose_config, train


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
    (metrics,) = read_csv_rows(tmp_path / "metrics.csv")
    assert (metrics["groups_played"], metrics["gen_batches"]) == ("1", "1")  # no filter_groups: one draw
    assert metrics["groups_flat"] == str(int(len({p["reward"] for p in played}) == 1))
