"""Plot what single-machine RL runs did: reward by iteration and the turn weights they applied.

    python -m recipes.tiny_agent.plot_runs runs/rl_ship/taura_s0 runs/rl_ship/grpo_s0 --out docs/figures/rl.png

Why: ``metrics.csv`` holds one row of summaries per iteration, but whether TAURA's weights favoured the turns
that found the evidence, or just the answer turns, shows only in the per-turn weights ``rl/train_local.py``
writes into ``rollouts.jsonl`` (``meta.turn_weights``). Left panel: training reward per iteration (the mean of
that iteration's sampled episodes), with the trainer's greedy held-out eval as dots. Right panel: the
distribution of the applied turn weights by the turn's action (``rejected``: the environment refused the
turn), over every run whose weights are not all 1 (GRPO's are). It also prints, per run, the mean training
reward of the first and second half of its iterations, its largest approx. KL and its seconds, and, per task
type, how many groups were flat (every episode the same reward, so no advantage). For runs that replay the
same tasks every iteration (``local.task_pool``), it prints the change of training reward per task from the
first to the last iterations with a bootstrap CI: the learning curve on fixed tasks. For runs with
multiple-choice tasks, it prints which option letters the sampled episodes answered (and which were right) in
the first and the last iterations: a policy that learns to prefer a letter shows there.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omniagent.trajectory import Trajectory, load_trajectories
from recipes.tiny_agent.probes.turn_labels import turn_action

ACTIONS = ("get_frames", "get_audio", "get_clip", "answer", "rejected")


def metrics_rows(run_dir: Path) -> list[dict[str, str]]:
    """The rows of a run's ``metrics.csv`` (read here rather than with ``rl.local.rollout.read_metrics``, which
    would import torch into a plotting command)."""
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def read_curve(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """``reward`` and ``eval`` points ``(iteration, value)`` of a run's ``metrics.csv`` (eval where it ran)."""
    curve: dict[str, list[tuple[int, float]]] = {"reward": [], "eval": []}
    for row in metrics_rows(run_dir):
        it = int(row["iteration"])
        curve["reward"].append((it, float(row["reward_mean"])))
        if row.get("eval_reward"):
            curve["eval"].append((it, float(row["eval_reward"])))
    return curve


def training_summary(run_dir: Path) -> dict[str, float]:
    """Mean training reward of the first and the second half of the iterations (and, for runs logged since they
    exist, the environment's score before shaping, the share of episodes that touched the evidence and the share
    of served frames and audio the Observations read exactly, ``reading``), the
    largest approx. KL of an update, the largest and the last per-token KL to the starting model (runs with
    ``actor.use_kl_loss``), the run's seconds (the sums of ``metrics.csv``'s columns), how many updates
    ``local.target_kl`` stopped early (runs logged since it exists) and, for runs logged since they exist, the
    groups played, how many of them were flat and the task batches drawn (``algorithm.filter_groups`` plays
    more groups than it trains on; ``flat_groups`` counts only the trained ones)."""
    rows = metrics_rows(run_dir)
    half = (len(rows) + 1) // 2

    def halves(name: str, column: str) -> dict[str, float]:
        values = [float(r[column]) for r in rows]
        return {
            f"{name}_first_half": round(sum(values[:half]) / max(half, 1), 3),
            f"{name}_second_half": round(sum(values[half:]) / max(len(values) - half, 1), 3),
        }

    out = halves("reward", "reward_mean")
    for name, column in (("score", "score_mean"), ("evidence_seen", "evidence_seen"), ("reading", "reading")):
        if rows and all(r.get(column) for r in rows):  # runs logged before these columns existed have none
            out |= halves(name, column)
    if rows and rows[0].get("approx_kl") is not None:
        out["max_approx_kl"] = round(max(float(r["approx_kl"]) for r in rows), 4)
        out["seconds"] = round(sum(float(r["seconds"]) for r in rows))
    # runs with actor.use_kl_loss (the trainer logs 0.0 without it; the k1 estimate can be negative)
    if rows and any(float(r.get("ref_kl") or 0.0) != 0.0 for r in rows):
        out["max_ref_kl"] = round(max(float(r["ref_kl"]) for r in rows), 4)
        out["last_ref_kl"] = round(float(rows[-1]["ref_kl"]), 4)  # where the run ended up from its start
    if rows and rows[0].get("kl_stop"):  # runs with local.target_kl: updates cut short by it
        out["kl_stops"] = sum(float(r["kl_stop"]) > 0 for r in rows)
    if rows and all(r.get("groups_played") for r in rows):  # runs logged since these columns exist
        for column in ("groups_played", "groups_flat", "gen_batches"):  # groups_flat: flat among those played
            out[column] = round(sum(float(r[column]) for r in rows))
    return out


def rollouts(run_dir: Path) -> list[Trajectory]:
    """The run's sampled episodes (``rollouts.jsonl``), read once for every summary; none if it has none."""
    path = run_dir / "rollouts.jsonl"
    return load_trajectories(path) if path.exists() else []


def weights_by_action(trajs: Sequence[Trajectory]) -> dict[str, list[float]]:
    """Every turn weight of a run's rollouts, grouped by the turn's action; empty when all weights are 1."""
    out: dict[str, list[float]] = {a: [] for a in ACTIONS}
    for traj in trajs:
        weights = (traj.meta or {}).get("turn_weights") or []
        for turn, w in zip(traj.turns, weights, strict=False):
            out.setdefault(turn_action(turn), []).append(float(w))
    if all(w == 1.0 for ws in out.values() for w in ws):
        return {}
    return {a: ws for a, ws in out.items() if ws}


def flat_groups(trajs: Sequence[Trajectory]) -> dict[str, list[int]]:
    """``[flat, groups]`` by task type (and ``all``): a group is one task's episodes in one iteration (ids
    ``g<k>-<i>``); it is flat when every episode got the same reward, so its advantages are all 0."""
    rewards: dict[tuple[int, str], list[float]] = {}
    types: dict[tuple[int, str], str] = {}
    for traj in trajs:
        meta = traj.meta or {}
        key = (int(meta.get("iteration", 0)), traj.id.split("-")[0])
        rewards.setdefault(key, []).append(float(meta.get("shaped_reward", traj.reward or 0.0)))
        types[key] = traj.task_type or "?"
    out: dict[str, list[int]] = {}
    for key, rs in rewards.items():
        for name in ("all", types[key]):
            counts = out.setdefault(name, [0, 0])
            counts[0] += int(max(rs) == min(rs))
            counts[1] += 1
    return out


def fixed_task_change(
    trajs: Sequence[Trajectory], window: int = 4, draws: int = 2000, seed: int = 0
) -> dict[str, float] | None:
    """Mean training reward of the last ``window`` iterations minus the first ``window``, over the tasks played
    in both (``meta.task_id``, written since ``local.task_pool`` exists), with a 95% percentile bootstrap CI that
    resamples episodes within each (task, window). Each task weighs the same, so the change is the policy's on
    those tasks, not a change of which tasks were drawn. None when no task was played in both windows."""
    iterations = sorted({int((t.meta or {}).get("iteration", 0)) for t in trajs})
    if len(iterations) < 2 * window:
        return None
    first, last = set(iterations[:window]), set(iterations[-window:])
    cells: dict[tuple[str, bool], list[float]] = {}
    for traj in trajs:
        meta = traj.meta or {}
        it, task = int(meta.get("iteration", 0)), meta.get("task_id")
        if task is not None and (it in first or it in last):
            cells.setdefault((str(task), it in last), []).append(
                float(meta.get("shaped_reward", traj.reward))
            )
    tasks = sorted({t for t, late in cells if (t, not late) in cells})
    if not tasks:
        return None
    rng = np.random.default_rng(seed)
    per_task = {t: [round(float(np.mean(cells[(t, late)])), 3) for late in (False, True)] for t in tasks}

    def change(sample: Any) -> Any:  # sample(rewards) -> a mean per draw (or the plain mean)
        return np.mean([sample(cells[(t, True)]) - sample(cells[(t, False)]) for t in tasks], axis=0)

    point = float(change(np.mean))
    boot = change(lambda rs: rng.choice(np.asarray(rs), size=(draws, len(rs))).mean(axis=1))
    lo, hi = np.percentile(boot, [2.5, 97.5])
    early = float(np.mean([np.mean(cells[(t, False)]) for t in tasks]))
    return {"tasks": len(tasks), "first": round(early, 3), "last": round(early + point, 3),
            "change": round(point, 3), "ci_low": round(float(lo), 3), "ci_high": round(float(hi), 3),
            "per_task": per_task}  # fmt: skip


def answer_letters(trajs: Sequence[Trajectory], window: int = 4) -> dict[str, Any] | None:
    """Counts of the answers given (``answered``) and of the right answers (``right``) of the multiple-choice
    episodes in the first and the last ``window`` iterations that played one (with fresh draws a window can span
    more iterations: ``iterations`` names them), by option letter (``other``: no answer, or one that is not a
    letter of the episode's options). Letters are the episode's own (with ``local.shuffle_options`` each
    episode has its own order). None when fewer than ``2 * window`` iterations played a multiple-choice task."""
    mcq = [t for t in trajs if t.choices]
    iterations = sorted({int((t.meta or {}).get("iteration", 0)) for t in mcq})
    if len(iterations) < 2 * window:
        return None
    out: dict[str, Any] = {}
    for name, its in (("first", iterations[:window]), ("last", iterations[-window:])):
        chosen = [t for t in mcq if int((t.meta or {}).get("iteration", 0)) in its]
        letters = [chr(ord("A") + i) for i in range(max(len(t.choices or []) for t in chosen))]
        out[name] = {"iterations": [its[0], its[-1]], "episodes": len(chosen),
                     "answered": _letter_counts([t.answer for t in chosen], letters),
                     "right": _letter_counts([t.ground_truth for t in chosen], letters)}  # fmt: skip
    return out


def _letter_counts(values: Sequence[Any], letters: list[str]) -> dict[str, int]:
    """How many of ``values`` are each of ``letters`` (any case, spaces around ignored), the rest as ``other``."""
    keys = [str(v).strip().upper() for v in values]
    keys = [k if k in letters else "other" for k in keys]
    return {k: keys.count(k) for k in [*letters, "other"]}


def plot(
    run_dirs: Sequence[Path], out: Path, trajs: dict[Path, list[Trajectory]]
) -> dict[str, dict[str, list[float]]]:
    """Write the two-panel figure to ``out`` (``trajs``: each run's rollouts); returns the weights drawn, by run
    and action."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    pooled: dict[str, list[float]] = {}
    drawn: dict[str, dict[str, list[float]]] = {}
    for run_dir in run_dirs:
        curve = read_curve(run_dir)
        (line,) = left.plot(*zip(*curve["reward"], strict=True), label=run_dir.name, alpha=0.8)
        if curve["eval"]:
            left.plot(*zip(*curve["eval"], strict=True), "o", color=line.get_color(), markersize=4)
        weights = weights_by_action(trajs[run_dir])
        if weights:
            drawn[run_dir.name] = weights
            for action, ws in weights.items():
                pooled.setdefault(action, []).extend(ws)
    left.set(xlabel="iteration", ylabel="mean reward", title="training reward (line), 16-task eval (dots)")
    left.legend(fontsize=7)
    actions = [a for a in ACTIONS if pooled.get(a)]
    if actions:
        right.boxplot([pooled[a] for a in actions], showfliers=False)
        right.set_xticks(range(1, len(actions) + 1), [f"{a}\n(n={len(pooled[a])})" for a in actions])
        right.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    right.set(ylabel="turn weight", title="applied turn weights by action (" + ", ".join(drawn) + ")")
    right.title.set_fontsize(8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return drawn


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m recipes.tiny_agent.plot_runs", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("runs", nargs="+", type=Path, help="rl/train_local.py run folders")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / "metrics.csv").exists()]
    if missing:
        raise SystemExit(f"no metrics.csv in: {', '.join(missing)} (rl/train_local.py run folders expected)")
    trajs = {run: rollouts(run) for run in args.runs}
    drawn = plot(args.runs, args.out, trajs)
    summary = {run: {a: round(sum(ws) / len(ws), 3) for a, ws in by.items()} for run, by in drawn.items()}
    flat = {run.name: flat_groups(trajs[run]) for run in args.runs}
    training = {run.name: training_summary(run) for run in args.runs}
    for run in args.runs:
        change = fixed_task_change(trajs[run])
        if change is not None:
            training[run.name]["fixed_task_change"] = change  # type: ignore[assignment]
        letters = answer_letters(trajs[run])
        if letters is not None:
            training[run.name]["mcq_letters"] = letters  # type: ignore[assignment]
    printed = {
        "figure": str(args.out),
        "training": training,
        "mean_weight_by_action": summary,
        "flat_groups": flat,
    }
    print(json.dumps(printed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
