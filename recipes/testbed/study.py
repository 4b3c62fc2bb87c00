"""The TAURA vs GRPO study on the testbed (docs/experiments/taura-testbed.md): its set, runs, evaluations and analysis.

    python -m recipes.testbed.study make-set --data runs/testbed/data --seed 5399 --videos 168 --blind-videos 42
    python -m recipes.testbed.study train --arm taura --seed 0 --sft runs/testbed/sft_s0 --out runs/testbed/study
    python -m recipes.testbed.study eval --run runs/testbed/study/taura_s0 --sft runs/testbed/sft_s0 \
        --set runs/testbed/data/study_5399
    python -m recipes.testbed.study floors --sft runs/testbed/sft_s0 --set runs/testbed/data/study_5399
    python -m recipes.testbed.study analyse --study runs/testbed/study --sft runs/testbed/sft_s0 \
        --set runs/testbed/data/study_5399 --figure docs/figures/taura_testbed.png

Every step skips what is done and resumes what is not: a run continues from its newest checkpoint, an evaluation
from the questions it has scored. The arms share everything but ``taura.mode``; seed ``s`` draws the same tasks
and episode seeds in both (the trainer seeds its draws by ``(local.seed, iteration)``), so they pair by seed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from envs.jsonl import read_jsonl, write_atomic

REPO = Path(__file__).resolve().parents[2]
CONF = Path(__file__).resolve().parent / "conf"
ARMS = ("taura", "grpo")


def make_study_set(data: Path, seed: int, videos: int, blind_videos: int, fields: str = "random") -> Path:
    """The study set (``data/study_<seed>``) and its blind subset: the first ``blind_videos`` videos' questions on
    copies with black frames and silence (``data/study_<seed>_blind``). ``fields``: the level's colour fields
    (the recipe's ``--search-fields``)."""
    from recipes.testbed.options import parse_args as recipe_args
    from recipes.testbed.recipe import make_set
    from recipes.tiny_agent.sets import blank_media

    out = data / f"study_{seed}"
    make_set(out, seed, videos, recipe_args(["--data", str(data), "--search-fields", fields]), "test")
    rows = read_jsonl(out / "tasks.jsonl")
    media = sorted({r["media"] for r in rows})[:blind_videos]
    subset = out.parent / f"{out.name}_subset"
    subset.mkdir(parents=True, exist_ok=True)
    picked = [{**r, "media": str((out / r["media"]).resolve())} for r in rows if r["media"] in media]
    write_atomic(subset / "tasks.jsonl", "".join(json.dumps(r) + "\n" for r in picked))
    blank_media(subset / "tasks.jsonl", out.parent / f"{out.name}_blind")
    return out


def run_dir(study: Path, arm: str, seed: int) -> Path:
    return study / f"{arm}_s{seed}"


def train(args: argparse.Namespace) -> Path:
    """One RL run of the study (resumes from its newest checkpoint; nothing to do once ``final/`` exists)."""
    out = run_dir(args.out, args.arm, args.seed)
    if (out / "final" / "config.json").exists():
        return out
    cmd = [sys.executable, str(REPO / "rl" / "train_local.py"), "--config-dir", str(CONF), "+exp=testbed",
           f"actor_rollout_ref.model.path={args.sft / 'agent'}", f"local.train_tasks={args.data / 'train' / 'tasks.jsonl'}",
           f"taura.mode={args.arm}", f"local.seed={args.seed}", f"local.run_dir={out}", *args.overrides]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=REPO)
    return out


def evaluate(args: argparse.Namespace) -> None:
    """A policy (a run's ``final/``, or the SFT agent) on the study set and on its blind subset."""
    from recipes.testbed.options import parse_args as recipe_args
    from recipes.testbed.recipe import agent_kwargs, eval_command
    from recipes.tiny_agent.recipe import run_parallel

    recipe = recipe_args(["--out", str(args.sft), "--data", str(args.data)])
    model = args.run / "final" if (args.run / "final").exists() else args.sft / "agent"
    blind = args.set.parent / f"{args.set.name}_blind" / "tasks.jsonl"
    out = args.run / "eval" / args.set.name
    jobs = {
        name: (eval_command(recipe, tasks, out / name, "transformers", agent_kwargs(recipe, model)),
               args.run / "logs" / f"eval_{args.set.name}_{name}.log")
        for name, tasks in (("agent", args.set / "tasks.jsonl"), ("agent_blind", blind))
    }  # fmt: skip
    run_parallel(jobs, 1)


def floors(args: argparse.Namespace) -> None:
    """``prior`` (fitted on the training set), ``uniform`` and ``random`` on the study set."""
    from recipes.testbed.options import parse_args as recipe_args
    from recipes.testbed.recipe import eval_command
    from recipes.tiny_agent.recipe import run_parallel

    recipe = recipe_args(["--out", str(args.sft), "--data", str(args.data)])
    out = args.study / "floors" / args.set.name
    prior = {"train_tasks": str(args.data / "train" / "tasks.jsonl")}
    jobs = {
        name: (eval_command(recipe, args.set / "tasks.jsonl", out / name, name, kwargs), out / f"{name}.log")
        for name, kwargs in (("prior", prior), ("uniform", {}), ("random", {}))
    }
    run_parallel(jobs, 1)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.testbed.study", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("make-set", help="the study set and its blind subset")
    s.add_argument("--data", type=Path, required=True)
    s.add_argument("--seed", type=int, default=5399)
    s.add_argument("--videos", type=int, default=168)
    s.add_argument("--blind-videos", type=int, default=42)
    s.add_argument("--search-fields", default="random", help="the level's colour fields: random or grid")
    t = sub.add_parser("train", help="one RL run")
    t.add_argument("--arm", choices=ARMS, required=True)
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--sft", type=Path, required=True, help="the SFT seed's folder (its agent/ is the start)")
    t.add_argument("--out", type=Path, required=True, help="the study's folder")
    t.add_argument("overrides", nargs="*", help="more rl/train_local.py overrides (the plan's amendments)")
    e = sub.add_parser(
        "eval", help="a run's final policy (or the SFT agent) on the study set and blind subset"
    )
    e.add_argument(
        "--run", type=Path, required=True, help="a run folder, or a folder for the SFT agent's rows"
    )
    f = sub.add_parser("floors", help="prior, uniform and random on the study set")
    f.add_argument("--study", type=Path, required=True)
    a = sub.add_parser("analyse", help="the primary, the secondaries, AUROC per seed, the figure")
    a.add_argument("--study", type=Path, required=True)
    a.add_argument("--figure", type=Path, default=None)
    a.add_argument("--seeds", type=int, default=10)
    for q in (e, f, a):
        q.add_argument("--sft", type=Path, required=True)
        q.add_argument("--set", type=Path, required=True, help="the study set's folder")
    args = p.parse_args(argv)
    for key in ("data", "sft", "out", "run", "study", "set"):
        if getattr(args, key, None) is not None:
            setattr(args, key, getattr(args, key).resolve())
    if args.command != "make-set":
        args.data = (
            (args.sft.parent / "data").resolve() if args.command != "train" else args.sft.parent / "data"
        )
    if args.command == "make-set":
        print(make_study_set(args.data, args.seed, args.videos, args.blind_videos, args.search_fields))
    elif args.command == "train":
        print(train(args))
    elif args.command == "eval":
        evaluate(args)
    elif args.command == "floors":
        floors(args)
    else:
        from recipes.testbed.analysis import analyse

        print(json.dumps(analyse(args)["primary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
