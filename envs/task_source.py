"""An endless stream of tasks for an environment, so ``reset()`` without options starts the next one.

Why: Gymnasium wrappers and vector environments call ``reset()`` with no options (autoreset), so an
environment that only learns its task from ``options`` cannot be vectorised. A task source is a
tasks JSONL file or a list of :class:`envs.tasks.Task` objects (or dicts in the Task schema),
served in order, or in a fresh random order each epoch drawn from the environment's seeded RNG.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from envs.tasks import Task, load_tasks_jsonl

TaskSpec = str | os.PathLike[str] | Sequence[Task | dict[str, Any]]


class TaskSource:
    """Tasks drawn one per ``next`` call, cycling through the list epoch after epoch."""

    def __init__(self, tasks: TaskSpec, shuffle: bool = False) -> None:
        if isinstance(tasks, str | os.PathLike):
            items = load_tasks_jsonl(tasks)
        else:
            items = [t if isinstance(t, Task) else Task.model_validate(t) for t in tasks]
        if not items:
            raise ValueError("the task source holds no tasks")
        self.tasks: list[Task] = items
        self.shuffle = shuffle
        self._order: list[int] = []
        self._pos = 0

    def __len__(self) -> int:
        return len(self.tasks)

    def restart(self) -> None:
        """Start again from the first task of a new epoch (``reset(seed=...)`` calls this)."""
        self._order, self._pos = [], 0

    def next(self, rng: np.random.Generator) -> Task:
        """The next task; a new epoch starts (reshuffled with ``rng`` if asked) when one ends."""
        if self._pos >= len(self._order):
            n = len(self.tasks)
            self._order = [int(i) for i in rng.permutation(n)] if self.shuffle else list(range(n))
            self._pos = 0
        task = self.tasks[self._order[self._pos]]
        self._pos += 1
        return task
