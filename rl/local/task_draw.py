"""Which training tasks the local trainer's rollouts draw from: the ``local.task_types`` filter, the seeded
``local.task_pool`` sample and the ``local.task_repeats`` weights, applied in that order to ``local.train_tasks``.
Kept apart from rl/train_local.py because it is set-up read from the config, not a step of the algorithm."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from envs.tasks import Task, load_tasks_jsonl


def tasks_from_config(local: Mapping[str, Any], seed: int) -> list[Task]:
    """:func:`training_tasks` with the ``local:`` block's keys."""
    return training_tasks(
        str(local["train_tasks"]),
        local.get("task_types"),
        local.get("task_pool"),
        seed,
        local.get("task_repeats"),
    )


def draw_keys(task: Task) -> set[str]:
    """The names ``local.task_repeats`` may use for a task: its type, and its generator template when it has one."""
    template = (task.extra or {}).get("template")
    return {task.task_type} | ({str(template)} if template is not None else set())


def repeat_tasks(tasks: list[Task], repeats: Mapping[str, int]) -> list[Task]:
    """Each task listed as many times as ``repeats`` says for its type or template (``extra["template"]``; the
    larger when both match), else once. A key that matches no task, or a count below 1, is an error (a typo would
    otherwise train on the plain draw)."""
    for key, n in repeats.items():
        if int(n) != n or int(n) < 1:
            raise ValueError(f"local.task_repeats.{key}={n}: a whole number of times, at least 1")
    keys = [draw_keys(t) for t in tasks]
    unknown = sorted(set(repeats) - set().union(*keys))
    if unknown:
        raise ValueError(
            f"local.task_repeats names no task type or template of the training tasks: {unknown}"
        )
    out: list[Task] = []
    for t, names in zip(tasks, keys, strict=True):
        out += [t] * max([int(repeats[k]) for k in names if k in repeats] or [1])
    return out


def training_tasks(
    path: str,
    task_types: list[str] | None,
    pool: int | None = None,
    seed: int = 0,
    repeats: Mapping[str, int] | None = None,
) -> list[Task]:
    """The tasks rollouts draw from: all of ``path``, or those of ``local.task_types`` (types whose groups can
    disagree; a type the policy never scores on gives groups of equal reward, hence zero advantage), cut to a
    seeded sample of ``local.task_pool`` tasks when set. A pool as large as ``data.train_batch_size`` replays the
    same tasks every iteration (new episode seeds each time), so the training reward becomes a learning curve on
    fixed tasks: the check that the trainer learns at all, apart from whether it generalises. ``local.task_repeats``
    ({type or template: n}) then lists each matching task n times, so draws (uniform over the list) meet it n times
    as often: a way to give a rare question more groups per iteration without dropping the others."""
    tasks = load_tasks_jsonl(path)
    if task_types:
        wanted = set(task_types)
        kept = [t for t in tasks if t.task_type in wanted]
        if not kept:
            found = sorted({t.task_type for t in tasks})
            raise ValueError(
                f"local.task_types={list(task_types)} keeps no task of {path} (its types: {found})"
            )
        tasks = kept
    if pool:
        if not 0 < int(pool) <= len(tasks):
            raise ValueError(
                f"local.task_pool={pool} must be between 1 and the {len(tasks)} tasks it draws from"
            )
        picks = np.random.default_rng([seed, len(tasks), int(pool)]).choice(
            len(tasks), int(pool), replace=False
        )
        tasks = [tasks[int(i)] for i in sorted(picks)]
    if repeats:
        tasks = repeat_tasks(tasks, repeats)
    return tasks
