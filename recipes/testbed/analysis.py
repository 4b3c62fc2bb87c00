"""The study's analysis (``python -m recipes.testbed.study analyse``), with the training seed as the unit.

- **primary**: ``d_s = score(TAURA_s) - score(GRPO_s)`` on the study set's questions both scored; a two-sided paired
  t-test over the seeds (mean of ``d_s`` with its t-interval), and a two-level bootstrap (resample the seeds, then
  the videos, the same videos for both arms within a replicate; 10,000 replicates; percentile interval);
- **secondaries**: ``TAURA_s - SFT`` and ``GRPO_s - SFT``, one-sample t-tests over the seeds, Holm-corrected
  (family alpha 0.05), with the same bootstrap;
- every seed's rows (score, blind score, media - blind, by template, frames and turns, answer rate), ``SD(d_s)``
  and the difference the design could then detect (80% power, two-sided alpha 0.05);
- per run: training reward by iteration, the share of flat groups; the entropy-vs-discovery AUROC on each TAURA
  run's training rollouts and on each final policy's study-set episodes (with the position-only control), and
  TAURA's mean turn weight on discovery turns against the other percept turns;
- the figure: ``d_s`` per seed with its mean and interval, beside each arm's score per seed against SFT's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import read_jsonl, write_atomic

N_BOOT = 10_000


def correct(run: Path) -> dict[str, tuple[float, str, str]]:
    """task id -> (reward, media, template) of a finished eval folder's scorable rows."""
    out = {}
    for row in read_jsonl(run / "results.jsonl", missing_ok=True):
        if row.get("reward") is not None and not row.get("failure"):
            out[str(row["id"])] = (float(row["reward"]), str(row.get("media")), str(row["id"]).split("-")[1])
    return out


def t_interval(values: list[float]) -> dict[str, Any]:
    from scipy import stats

    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2:
        return {"n": n, "mean": float(x.mean()) if n else None}
    res = stats.ttest_1samp(x, 0.0)
    ci = res.confidence_interval(0.95)
    return {"n": n, "mean": float(x.mean()), "sd": float(x.std(ddof=1)), "lo": float(ci.low), "hi": float(ci.high),
            "t": float(res.statistic), "p": float(res.pvalue)}  # fmt: skip


def t_over_runs(each: dict[str, float | None]) -> dict[str, Any]:
    """Each run's value (None: the run has none) beside the :func:`t_interval` over the runs that have one."""
    return {"per_run": each, "t": t_interval([v for v in each.values() if v is not None])}


def per_video_diff(a: dict, b: dict) -> dict[str, float]:
    """video -> mean over its questions of a - b (questions both scored)."""
    by: dict[str, list[float]] = {}
    for tid in sorted(set(a) & set(b)):
        by.setdefault(a[tid][1], []).append(a[tid][0] - b[tid][0])
    return {v: float(np.mean(d)) for v, d in by.items()}


def two_level_bootstrap(diffs: list[dict[str, float]], seed: int = 0) -> dict[str, float]:
    """Resample seeds, then videos (shared by the arms within a replicate); percentile 95% interval."""
    videos = sorted(set.intersection(*(set(d) for d in diffs)))
    table = np.asarray([[d[v] for v in videos] for d in diffs])  # (seeds, videos)
    rng = np.random.default_rng(seed)
    stats = np.empty(N_BOOT)
    for i in range(N_BOOT):
        rows = table[rng.integers(len(diffs), size=len(diffs))]
        stats[i] = rows[:, rng.integers(len(videos), size=len(videos))].mean()
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return {"mean": float(table.mean()), "lo": float(lo), "hi": float(hi), "videos": len(videos)}


def holm(pvalues: dict[str, float], alpha: float = 0.05) -> dict[str, bool]:
    """Holm's step-down: the k-th smallest p is tested at alpha / (m - k + 1), stopping at the first failure."""
    order = sorted(pvalues, key=pvalues.get)  # type: ignore[arg-type]
    out, going = {}, True
    for k, name in enumerate(order):
        going = going and pvalues[name] <= alpha / (len(order) - k)
        out[name] = going
    return out


def detectable(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The true mean difference a two-sided one-sample t-test over ``n`` seeds detects with ``power``."""
    from scipy import optimize, stats

    crit = stats.t.ppf(1 - alpha / 2, n - 1)

    def gap(delta: float) -> float:
        nc = delta / sd * np.sqrt(n)
        lower = float(np.nan_to_num(stats.nct.cdf(-crit, n - 1, nc)))  # ~0 (scipy gives nan far in the tail)
        return float(stats.nct.sf(crit, n - 1, nc)) + lower - power

    hi = 4 * sd
    while gap(hi) < 0:  # few seeds need a difference of many standard deviations (two: about 10)
        hi *= 2
    return float(optimize.brentq(gap, 1e-6 * sd, hi))


def policy_row(folder: Path) -> dict[str, Any]:
    """A policy's study-set and blind-subset rows (the recipe's results table format)."""
    from recipes.tiny_agent.results import summarise

    res = summarise({"agent": folder / "agent", "agent_blind": folder / "agent_blind"})
    media = correct(folder / "agent")
    by_template: dict[str, list[float]] = {}
    for reward, _, template in media.values():
        by_template.setdefault(template, []).append(reward)
    table = res["table"]
    return {"n": len(media), "score": table.get("agent", {}).get("score"),
            "blind": table.get("agent_blind", {}).get("score"),
            "media_minus_blind": res["paired"].get("agent - agent_blind", {}).get("diff"),
            "by_template": {k: round(float(np.mean(v)), 3) for k, v in sorted(by_template.items())},
            "frames": table.get("agent", {}).get("frames_used"), "turns": table.get("agent", {}).get("turns"),
            "answer_rate": table.get("agent", {}).get("answer_rate"),
            "well_formed": table.get("agent", {}).get("well_formed_rate")}  # fmt: skip


def run_training(run: Path, tasks_file: Path) -> dict[str, Any]:
    """Reward by iteration, flat groups, and the AUROC and weights of the run's training rollouts."""
    from envs.tasks import load_tasks_jsonl
    from omniagent.trajectory import load_trajectories
    from recipes.tiny_agent.plot_runs import metrics_rows
    from recipes.tiny_agent.probes.turn_labels import entropy_auroc, task_key, weights_by_discovery

    rows = metrics_rows(run) if (run / "metrics.csv").exists() else []
    trajs = load_trajectories(run / "rollouts.jsonl") if (run / "rollouts.jsonl").exists() else []
    evidence = {task_key(t.media, t.question): t.evidence for t in load_tasks_jsonl(tasks_file)}
    played = sum(float(r.get("groups_played") or 0) for r in rows)
    return {"reward": [round(float(r["reward_mean"]), 3) for r in rows],
            "flat_share": sum(float(r.get("groups_flat") or 0) for r in rows) / max(played, 1),
            "auroc_training": entropy_auroc(trajs, evidence, n_boot=500) if trajs else None,
            "weights": weights_by_discovery(trajs, evidence, n_boot=500) if trajs else None,
            "max_approx_kl": max((float(r["approx_kl"]) for r in rows), default=None)}  # fmt: skip


def eval_auroc(folder: Path, tasks_file: Path) -> dict[str, Any] | None:
    from envs.tasks import load_tasks_jsonl
    from omniagent.trajectory import load_trajectories
    from recipes.tiny_agent.probes.turn_labels import entropy_auroc, task_key

    path = folder / "agent" / "trajectories.jsonl"
    if not path.exists():
        return None
    evidence = {task_key(t.media, t.question): t.evidence for t in load_tasks_jsonl(tasks_file)}
    return entropy_auroc(load_trajectories(path), evidence, n_boot=500)


def compare(arms: dict[str, dict[int, dict]], a: str, b: str | None, sft: dict | None) -> dict[str, Any]:
    """Per seed, arm ``a`` minus arm ``b`` (or minus the SFT agent) on the questions both scored; the t-test over
    seeds and the two-level bootstrap."""
    seeds = sorted(s for s in arms[a] if (b is None and sft) or (b is not None and s in arms[b]))
    per_seed, videos = {}, []
    for s in seeds:
        other = sft if b is None else arms[b][s]
        shared = sorted(set(arms[a][s]) & set(other))
        per_seed[s] = float(np.mean([arms[a][s][t][0] - other[t][0] for t in shared])) if shared else None
        videos.append(per_video_diff(arms[a][s], other))
    values = [v for v in per_seed.values() if v is not None]
    out = {"per_seed": per_seed, "t": t_interval(values)}
    if len(values) >= 2:
        out["bootstrap"] = two_level_bootstrap(videos)
        out["detectable_80"] = detectable(out["t"]["sd"], len(values)) if out["t"]["sd"] > 0 else None
    return out


def analyse(args: argparse.Namespace) -> dict[str, Any]:
    tasks_file = args.set / "tasks.jsonl"
    train_tasks = args.sft.parent / "data" / "train" / "tasks.jsonl"
    arms: dict[str, dict[int, dict]] = {"taura": {}, "grpo": {}}
    rows: dict[str, Any] = {}
    for arm in arms:
        for s in range(args.seeds):
            run = args.study / f"{arm}_s{s}"
            folder = run / "eval" / args.set.name
            scored = correct(folder / "agent")
            if scored:
                arms[arm][s] = scored
            rows[f"{arm}_s{s}"] = {**(policy_row(folder) if scored else {}), "training": run_training(run, train_tasks)
                                   if run.exists() else None, "auroc_eval": eval_auroc(folder, tasks_file)}  # fmt: skip
    sft_folder = args.study / "sft" / "eval" / args.set.name
    sft = correct(sft_folder / "agent") or None
    rows["sft"] = {
        **(policy_row(sft_folder) if sft else {}),
        "auroc_eval": eval_auroc(sft_folder, tasks_file),
    }
    for name in ("prior", "uniform", "random"):
        floor = correct(args.study / "floors" / args.set.name / name)
        rows[name] = {
            "n": len(floor),
            "score": float(np.mean([r for r, _, _ in floor.values()])) if floor else None,
        }
    primary = compare(arms, "taura", "grpo", None)
    secondary = {f"{a} - sft": compare(arms, a, None, sft) for a in arms} if sft else {}
    pvals = {k: v["t"]["p"] for k, v in secondary.items() if "p" in v["t"]}
    verdict = None
    if "lo" in primary["t"]:
        lo, hi = primary["t"]["lo"], primary["t"]["hi"]
        verdict = "TAURA better" if lo > 0 else "TAURA worse" if hi < 0 else "unresolved"
    out = {"primary": {**primary, "verdict": verdict}, "secondary": secondary, "holm": holm(pvals) if pvals else {},
           "rows": rows}  # fmt: skip
    write_atomic(args.study / "analysis.json", json.dumps(out, indent=2, default=str))
    if args.figure is not None:
        figure(out, args.figure)
    return out


def figure(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    d = {int(k): v for k, v in res["primary"]["per_seed"].items() if v is not None}
    left.axhline(0, color="grey", lw=0.8)
    left.plot(list(d), list(d.values()), "o", color="C0", label="d_s = TAURA_s - GRPO_s")
    t = res["primary"]["t"]
    if "lo" in t:
        left.axhspan(
            t["lo"],
            t["hi"],
            color="C0",
            alpha=0.15,
            label=f"mean {t['mean']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}]",
        )
        left.axhline(t["mean"], color="C0")
    left.set(xlabel="RL seed", ylabel="score difference", title="TAURA - GRPO per seed (study set)")
    left.legend(fontsize=8)
    rows = res["rows"]
    for i, arm in enumerate(("taura", "grpo")):
        pts = [(s, rows[f"{arm}_s{s}"]["score"]["mean"]) for s in range(len(d) or 10)
               if isinstance((rows.get(f"{arm}_s{s}") or {}).get("score"), dict)]  # fmt: skip
        right.plot(
            [p[0] + (i - 0.5) * 0.15 for p in pts], [p[1] for p in pts], "o", color=f"C{i}", label=arm.upper()
        )
    for name, style in (("sft", "-"), ("prior", ":")):
        score = (rows.get(name) or {}).get("score")
        value = score["mean"] if isinstance(score, dict) else score
        if value is not None:
            right.axhline(value, color="k", ls=style, lw=1, label=f"{name} {value:.3f}")
    right.set(xlabel="RL seed", ylabel="score (study set)", title="each arm per seed")
    right.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
