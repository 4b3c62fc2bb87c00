"""``samples=k``: k sampled runs of every question, reported as a mean with an interval and as pass@k.

Each question becomes k tasks ``{id}#s0`` ... ``{id}#s{k-1}`` (:func:`sample_tasks`), each with its own
episode seed (:func:`episode_seed`, a hash of the run seed, the question and the sample), passed to the
policy so a server or a local model draws differently per sample and the same on a rerun. Their rows
are ordinary rows plus ``base_id`` and ``sample``.

:func:`samples_summary` reports, over questions:

- the mean reward per question, averaged, with a bootstrap interval over questions (the k samples of
  one question are not independent draws, so questions are what is resampled);
- pass@j for j = 1, 2, 4, ... and k: the chance that at least one of j samples drawn from the question's
  k is correct, by the unbiased estimator ``1 - C(n - c, j) / C(n, j)`` (n samples, c correct; Chen et
  al. 2021), averaged over questions with its interval. A sample is correct when its reward is at least
  ``threshold`` (0.5: a right letter, an IoU or MRA of one half).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from math import comb
from typing import Any

from envs.tasks import Task
from omniagent.eval.intervals import bootstrap_ci

__all__ = ["base_id", "episode_seed", "pass_at_k", "sample_tasks", "samples_summary"]

SEP = "#s"


def sample_tasks(tasks: list[Task], k: int) -> list[Task]:
    """Each task k times as ``{id}#s{i}`` (``extra``: ``base_id``, ``sample``); k = 1 returns ``tasks``."""
    if k <= 1:
        return tasks
    return [
        t.model_copy(update={"id": f"{t.id}{SEP}{i}", "extra": {**t.extra, "base_id": t.id, "sample": i}})
        for t in tasks
        for i in range(k)
    ]


def base_id(row: dict[str, Any]) -> str:
    return str(row.get("base_id") or row["id"])


def episode_seed(run_seed: int | None, task: Task) -> int | None:
    """The run seed for an ordinary task; for sample i of a question, a seed of its own."""
    if "sample" not in task.extra or run_seed is None:
        return run_seed
    text = f"{run_seed}\x00{task.extra['base_id']}\x00{task.extra['sample']}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one question with ``c`` correct out of ``n`` samples (``k <= n``)."""
    if not 0 < k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n = {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def _ks(n: int) -> list[int]:
    ks, j = [], 1
    while j < n:
        ks.append(j)
        j *= 2
    return [*ks, n]


def samples_summary(
    rows: list[dict[str, Any]], *, n_boot: int = 1000, seed: int = 0, threshold: float = 0.5
) -> dict[str, Any] | None:
    """The samples block of a summary (see the module docstring); None when the rows hold no samples."""
    by_q: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r.get("sample") is not None:
            by_q[base_id(r)].append(float(r["reward"]))
    if not by_q:
        return None
    questions = sorted(by_q)  # sorted ids: any row order gives the same intervals
    k = max(len(v) for v in by_q.values())
    n_min = min(len(v) for v in by_q.values())
    means = [sum(by_q[q]) / len(by_q[q]) for q in questions]
    pass_at = {}
    for j in _ks(n_min):
        values = [pass_at_k(len(by_q[q]), sum(x >= threshold for x in by_q[q]), j) for q in questions]
        pass_at[str(j)] = bootstrap_ci(values, n_boot, seed)
    return {
        "k": k,
        "questions": len(questions),
        "incomplete": sum(len(by_q[q]) < k for q in questions),  # questions with fewer samples so far
        "mean": bootstrap_ci(means, n_boot, seed),
        "pass_at": pass_at,
        "correct_if": f"reward >= {threshold:g}",
    }
