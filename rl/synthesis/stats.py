"""Per-task and run-level statistics of teacher-trajectory synthesis (:mod:`rl.synthesis.synthesize`):
what ``task_stats.jsonl`` and ``summary.json`` hold (pass@N, kept counts, turns, rejection reasons)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from envs.tasks import Task
from omniagent.trajectory import Trajectory
from rl.synthesis.filters import reason_code


def task_statistics(task: Task, trajs: list[Trajectory], seconds: float, error: str | None = None) -> dict:
    kept = [t for t in trajs if t.meta.get("qc", {}).get("kept")]
    reasons = Counter(reason_code(r) for t in trajs for r in t.meta.get("qc", {}).get("reasons", []))
    detailed = Counter(r for t in trajs for r in t.meta.get("qc", {}).get("reasons", []))
    n_outcome = sum(1 for t in trajs if t.meta.get("qc", {}).get("outcome_passed"))
    turns = [len(t.turns) for t in trajs]
    return {
        "task_id": task.id,
        "task_type": task.task_type,
        "media": task.media,
        "n_samples": len(trajs),
        "n_outcome_pass": n_outcome,
        "pass_at_n": float(n_outcome > 0),  # outcome verification only (the paper's pass@N)
        "pass_at_n_kept": float(bool(kept)),  # after all quality control
        "n_kept": len(kept),
        "mean_turns": float(np.mean(turns)) if turns else 0.0,
        "mean_turns_kept": float(np.mean([len(t.turns) for t in kept])) if kept else None,
        "budgets": [t.max_turns for t in trajs],
        "rejections": dict(reasons),
        "rejections_detailed": dict(detailed),
        # a teacher's scripted mistakes in the kept trajectories, by error code (its recovery is the target)
        "kept_scripted_errors": dict(Counter(u.error for t in kept for u in t.turns if u.scripted_error)),
        "seconds": round(seconds, 3),
        "error": error,
    }


def summarize(stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the finished tasks' rows, the same in any order (a merge of shards sorts them by id)."""
    stats = sorted(stats, key=lambda s: str(s["task_id"]))
    ok = [s for s in stats if not s.get("error")]
    by_type: dict[str, list[dict]] = {}
    for s in ok:
        by_type.setdefault(s["task_type"], []).append(s)

    def block(rows: list[dict]) -> dict[str, Any]:
        n = sum(r["n_samples"] for r in rows)
        rej: Counter = Counter()
        scripted: Counter = Counter()
        for r in rows:
            rej.update(r["rejections"])
            scripted.update(r.get("kept_scripted_errors") or {})
        return {
            "tasks": len(rows),
            "samples": n,
            "kept": sum(r["n_kept"] for r in rows),
            "pass_at_n": float(np.mean([r["pass_at_n"] for r in rows])) if rows else 0.0,
            "pass_at_n_kept": float(np.mean([r["pass_at_n_kept"] for r in rows])) if rows else 0.0,
            "outcome_pass_rate": sum(r["n_outcome_pass"] for r in rows) / n if n else 0.0,
            "mean_turns": float(np.mean([r["mean_turns"] for r in rows])) if rows else 0.0,
            "rejections": dict(rej),
            "kept_scripted_errors": dict(scripted),
        }

    return {
        **block(ok),
        "failed_tasks": [{"task_id": s["task_id"], "error": s["error"]} for s in stats if s.get("error")],
        "by_type": {k: block(v) for k, v in sorted(by_type.items())},
    }
