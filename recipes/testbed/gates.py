"""The testbed's four gates for one SFT seed (docs/experiments/taura-testbed.md), each on data the agent never saw:

    python -m recipes.testbed.gates --sft runs/testbed/sft_s0 --gate-seed 5311      # every step; resumes

1. ``set``: the seed's gate set (42 search-level videos, 504 questions) and its blind copy, made only now;
2. ``eval``: the agent, blind, ``prior``, ``uniform`` and ``random`` on it (``python -m recipes.testbed --stages eval``);
   gate 1 = agent - prior, gate 2 = agent - blind, paired by question, 95% CI by video, above 0;
3. ``flat``: 48 training tasks drawn by the seed, 8 sampled episodes each (temperature 1, constrained, K = 5):
   gate 3 = the share of groups whose episodes all scored alike below 0.20 (Wilson 95% interval reported);
4. ``grpo``: GRPO from the agent on a pool of 8 training tasks replayed every iteration (n = 8, 12 iterations, the
   study's settings): gate 4 = the per-task training reward from iterations 1-3 to 10-12 rises, bootstrap CI > 0;
5. ``auroc``: the entropy-vs-discovery AUROC of the agent's gate-set episodes (a measurement, not a gate);
6. ``report``: ``SFT/gates/gates.json``, every number above and whether each gate holds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import append_jsonl, read_jsonl, write_atomic

REPO = Path(__file__).resolve().parents[2]
CONF = Path(__file__).resolve().parent / "conf"
STEPS = ("set", "eval", "flat", "grpo", "auroc", "report")


def rl_overrides(sft: Path, data: Path) -> list[str]:
    """The study's RL settings for a testbed agent (recipes/testbed/conf/exp/testbed.yaml)."""
    return ["+exp=testbed", f"actor_rollout_ref.model.path={sft / 'agent'}",
            f"local.train_tasks={data / 'train' / 'tasks.jsonl'}"]  # fmt: skip


def make_gate_set(args: argparse.Namespace) -> Path:
    from recipes.testbed.probe_cli import make_probe_set

    out = args.data / f"gate_{args.gate_seed}"
    make_probe_set(out, args.gate_seed, args.videos)
    return out


def run_eval(args: argparse.Namespace, gate_set: Path) -> None:
    cmd = [sys.executable, "-m", "recipes.testbed", "--out", str(args.sft), "--data", str(args.data),
           "--stages", "eval", "--eval-set", str(gate_set), "--eval-jobs", str(args.jobs)]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=REPO)


def flat_groups(args: argparse.Namespace) -> dict[str, Any]:
    """Gate 3: groups of 8 sampled episodes of 48 training tasks; which scored alike. Resumes by group."""
    import numpy as np
    import torch

    from envs.env import OmniVideoEnv
    from envs.limits import EnvLimits
    from rl.local.args import Args
    from rl.local.bookkeeping import load_policy
    from rl.local.groups import play_group
    from rl.local.rollout import TurnEncoder, group_values, is_flat
    from rl.local.task_draw import tasks_from_config
    from rl.train_local import compose_config

    out = args.sft / "gates" / "flat_groups.jsonl"
    cfg = compose_config([*rl_overrides(args.sft, args.data), f"local.seed={args.seed}"], [CONF])
    rl_args = Args.from_config(cfg)
    torch.set_num_threads(1)
    tasks = tasks_from_config(rl_args.local, args.seed)
    picks = np.random.default_rng([args.seed, 53]).choice(len(tasks), size=args.groups, replace=False)
    done = {int(r["group"]): r for r in read_jsonl(out, missing_ok=True)}
    policy = load_policy(str(args.sft / "agent"), rl_args)
    encoder = TurnEncoder(policy.processor, policy.model.config, policy.use_audio_in_video)
    env = OmniVideoEnv(limits=EnvLimits(**rl_args.env["limits"]))
    for g, pick in enumerate(picks):
        if g in done:
            continue
        torch.manual_seed(args.seed * 1_000_003 + g)
        trajs, _ = play_group(policy, encoder, env, tasks[int(pick)], rl_args, g, seed=10_000 * args.seed + g)
        scores = group_values(trajs, "acc")
        row = {"group": g, "task": tasks[int(pick)].id, "scores": scores, "flat": is_flat(scores)}
        for traj in trajs:  # before the row: a group counted done always has its episodes on disk
            append_jsonl(args.sft / "gates" / "flat_rollouts.jsonl", traj)
        append_jsonl(out, row)
        done[g] = row
    env.close()
    return flat_summary(list(done.values()))


def flat_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from scipy.stats import binomtest

    n, flat = len(rows), sum(bool(r["flat"]) for r in rows)
    ci = binomtest(flat, n).proportion_ci(method="wilson") if n else None
    scores = [s for r in rows for s in r["scores"]]
    return {"groups": n, "flat": flat, "share": flat / max(n, 1), "wilson95": [ci.low, ci.high] if ci else None,
            "all_right": sum(min(r["scores"]) == 1 for r in rows), "all_wrong": sum(max(r["scores"]) == 0 for r in rows),
            "episode_score": sum(scores) / max(len(scores), 1)}  # fmt: skip


def grpo_run(args: argparse.Namespace) -> Path:
    """Gate 4's run (resumes from its newest checkpoint)."""
    run_dir = args.sft / "gates" / "grpo_pool"
    cmd = [sys.executable, str(REPO / "rl" / "train_local.py"), "--config-dir", str(CONF),
           *rl_overrides(args.sft, args.data), "taura.mode=grpo", "local.task_pool=8", "data.train_batch_size=8",
           "local.iterations=12", f"local.seed={args.seed}", f"local.run_dir={run_dir}", "local.save_every=1"]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=REPO)
    return run_dir


def grpo_summary(run_dir: Path) -> dict[str, Any] | None:
    from recipes.tiny_agent.plot_runs import fixed_task_change, rollouts, training_summary

    if not (run_dir / "final" / "config.json").exists():
        return None
    change = fixed_task_change(rollouts(run_dir), window=3)
    return {"fixed_task_change": change, "training": training_summary(run_dir)}


def auroc(args: argparse.Namespace, gate_set: Path) -> dict[str, Any]:
    from envs.tasks import load_tasks_jsonl
    from omniagent.trajectory import load_trajectories
    from recipes.tiny_agent.probes.turn_labels import entropy_auroc, task_key

    trajs = load_trajectories(args.sft / "eval" / gate_set.name / "agent" / "trajectories.jsonl")
    evidence = {task_key(t.media, t.question): t.evidence for t in load_tasks_jsonl(gate_set / "tasks.jsonl")}
    return entropy_auroc(trajs, evidence)


def report(args: argparse.Namespace, gate_set: Path) -> dict[str, Any]:
    """Every gate's number and verdict (None where a step has not run)."""
    gates = args.sft / "gates"
    results = json.loads((args.sft / "eval" / gate_set.name / "results.json").read_text())
    paired = results["paired"]
    flat = flat_summary(read_jsonl(gates / "flat_groups.jsonl", missing_ok=True))
    grpo = grpo_summary(gates / "grpo_pool")
    change = (grpo or {}).get("fixed_task_change")

    def above(p: dict[str, Any] | None) -> bool | None:
        return None if p is None else bool(p["diff"]["lo"] > 0)

    out = {
        "sft": str(args.sft), "gate_set": str(gate_set), "table": results["table"],
        "gate1_agent_minus_prior": paired.get("agent - prior", {}).get("diff"),
        "gate2_agent_minus_blind": paired.get("agent - agent_blind", {}).get("diff"),
        "gate3_flat": flat, "gate4_grpo": grpo,
        "auroc": json.loads((gates / "auroc.json").read_text()) if (gates / "auroc.json").exists() else None,
        "pass": {"gate1": above(paired.get("agent - prior")), "gate2": above(paired.get("agent - agent_blind")),
                 "gate3": flat["share"] < 0.20 if flat["groups"] == args.groups else None,
                 "gate4": None if change is None else bool(change["ci_low"] > 0)},
    }  # fmt: skip
    write_atomic(gates / "gates.json", json.dumps(out, indent=2))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.testbed.gates", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sft", type=Path, required=True, help="an SFT seed's folder (python -m recipes.testbed --out)"
    )
    p.add_argument("--data", type=Path, default=None, help="the shared sets (default: SFT/../data)")
    p.add_argument(
        "--gate-seed", type=int, required=True, help="the gate set's generator seed (5311 + SFT seed)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="draws of the flat pass and the GRPO pool (the SFT seed)"
    )
    p.add_argument("--videos", type=int, default=42)
    p.add_argument("--groups", type=int, default=48)
    p.add_argument("--jobs", type=int, default=1, help="eval rows at once")
    p.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    args = p.parse_args(argv)
    args.sft = args.sft.resolve()
    args.data = (args.data or args.sft.parent / "data").resolve()
    (args.sft / "gates").mkdir(parents=True, exist_ok=True)
    gate_set = args.data / f"gate_{args.gate_seed}"
    for step in args.steps:
        if step == "set":
            make_gate_set(args)
        elif step == "eval":
            run_eval(args, gate_set)
        elif step == "flat":
            print(json.dumps(flat_groups(args)), flush=True)
        elif step == "grpo":
            grpo_run(args)
        elif step == "auroc":
            write_atomic(args.sft / "gates" / "auroc.json", json.dumps(auroc(args, gate_set), indent=2))
        else:
            print(json.dumps(report(args, gate_set)["pass"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
