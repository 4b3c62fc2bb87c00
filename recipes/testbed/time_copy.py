"""Whole-look caption training alone: can the testbed agent learn to write each frame's content at the second its
label carries? (docs/experiments/testbed-time-copy.md has the plan and the result.)

Each step trains :data:`BATCH` captions of looks drawn fresh from a pool of search-level videos and served by the
environment (half forced looks around a field's digit as in :mod:`recipes.testbed.digit_probe`, half spans anywhere
in the file), captioned with :func:`~omniagent.backends.synth_compact.describe_compact`. The vision encoder stays
frozen, as in the recipe's SFT. At the steps of :data:`EVAL_AT` the agent captions the digit probe's 4- and 8-frame
forced looks of a fresh set (``OUT/curve.jsonl``); the final checkpoint is ``OUT/final``. Checkpoints every
:data:`SAVE_EVERY` steps make a stopped run resume where it was, with the same looks (drawn from the seed and step).

    python -m recipes.testbed.time_copy --model runs/testbed/sft_s0/agent --pool runs/testbed/data/pool \\
        --probe-set runs/testbed/data/probe5304 --probe-rows runs/testbed/digit_probe/attempt3/rows.jsonl \\
        --out runs/testbed/time_copy/s0 --seed 0
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from envs.jsonl import append_jsonl, read_jsonl, write_atomic
from omniagent.backends.synth_compact import describe_compact, sec
from omniagent.backends.synth_world import Percept, SynthWorld
from recipes.testbed.cli_args import labelled
from recipes.testbed.digit_looks import cue_digit_items, digit_frame, forced_look, score_read
from recipes.testbed.digit_probe import copied_times
from recipes.testbed.digit_probe_run import caption, served_percept
from recipes.tiny_agent.frame_captions import WorldCache, two_turn_chat
from rl.checkpoint import TRAINING_STATE, save_checkpoint

STEPS = 3000
BATCH = 4  # looks per step
LR = 1e-3  # peak; cosine decay to a tenth after the warm-up
WARMUP = 30
FORCED_SHARE = 0.5  # share of the looks forced around a field's digit
EVAL_AT = (500, 1000, 2000, 3000)
EVAL_SIZES = (4, 8)
SAVE_EVERY = 500


def served(env: Any, task: Any, look: dict[str, Any]) -> list[dict[str, Any]]:
    """The percept parts the environment serves for ``look`` as a first turn (turn notice removed)."""
    env.reset(options=task.env_options(max_turns=env.limits.max_turns))
    obs, *_ = env.step(json.dumps({"observation": "none", "thought": "look.", "action": look}))
    return served_percept(obs)


class PoolLooks:
    """Seeded caption chats of looks on a pool of search-level videos (its ``cue_digit_mcq`` questions give each
    field)."""

    def __init__(self, pool: Path, env: Any) -> None:  # noqa: D107
        self.items, self.env, self.worlds = cue_digit_items(pool / "tasks.jsonl"), env, WorldCache()
        if not self.items:
            raise SystemExit(f"time_copy: {pool} holds no search-level questions")

    def chat(self, rng: np.random.Generator) -> list[dict[str, Any]]:
        item = self.items[int(rng.integers(len(self.items)))]
        world, n = self.worlds(item["task"].media), int(rng.integers(2, 9))
        if world is None:
            raise SystemExit(f"time_copy: {item['task'].media} has no synthetic-world sidecar")
        look = forced_look(world, item["field"], n, rng) if rng.random() < FORCED_SHARE else None
        if look is None:
            a, b = sorted(int(x) for x in rng.choice(int(world.duration) + 1, size=2, replace=False))
            look = {"type": "get_frames", "start": a, "end": b, "num": n}
        parts = served(self.env, item["task"], look)
        times = [float(p["timestamp"]) for p in parts if p.get("type") == "image"]
        return two_turn_chat(parts, describe_compact(world, Percept("frames", times=times)))


def probe_looks(probe_set: Path, rows_file: Path, env: Any) -> list[dict[str, Any]]:
    """The digit probe's caption looks of :data:`EVAL_SIZES` frames, served once: parts and truth."""
    items = {i["task"].id: i for i in cue_digit_items(probe_set / "tasks.jsonl")}
    out = []
    for row in read_jsonl(rows_file):
        if row.get("condition") != "caption" or row.get("n") not in EVAL_SIZES:
            continue
        item, look = items[row["id"]], row["look"]
        world = SynthWorld.for_media(item["task"].media)
        out.append({"id": row["id"], "media": row["media"], "n": row["n"], "look": look, "digit": item["digit"],
                    "hue": item["hue"], "second": sec(digit_frame(world, look)),
                    "parts": served(env, item["task"], look)})  # fmt: skip
    return out


def evaluate(model: Any, processor: Any, looks: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    agent = SimpleNamespace(model=model, processor=processor)
    model.eval()
    rows = []
    for look in looks:
        text = caption(agent, look["parts"])
        rows.append({"step": step, "id": look["id"], "media": look["media"], "condition": "caption", "n": look["n"],
                     "look": look["look"], "text": text,
                     **score_read(text, look["digit"], look["second"], look["hue"])})  # fmt: skip
    model.train()
    return rows


def curve(rows: list[dict[str, Any]], before: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Per step and look size: at the frame, read, and times copied; with ``before`` (the digit probe's rows of the
    starting agent), those rows as step 0 and at the frame minus the starting agent's on the same looks, paired by
    field."""
    from recipes.testbed.digit_probe import video_interval

    start = {
        (r["id"], r["n"]): r for r in before or [] if r.get("condition") == "caption" and "at_frame" in r
    }
    rows = [{**r, "step": 0} for r in start.values() if r["n"] in EVAL_SIZES] + list(rows) if start else rows
    out: dict[str, Any] = {}
    for step in sorted({r["step"] for r in rows}):
        for n in EVAL_SIZES:
            sub = [r for r in rows if r["step"] == step and r["n"] == n]
            if not sub:
                continue
            out[f"step {step} n={n}"] = {
                "at_frame": video_interval({r["id"]: (r["media"], r["at_frame"]) for r in sub}),
                "read": video_interval({r["id"]: (r["media"], r["read"]) for r in sub}),
                "copied": copied_times(sub)[f"caption n={n}"]["copied"],
            }
            paired = {r["id"]: (r["media"], r["at_frame"] - start[r["id"], n]["at_frame"])
                      for r in sub if (r["id"], n) in start}  # fmt: skip
            if paired:
                out[f"step {step} n={n}"]["at_frame_minus_before"] = video_interval(paired)
    return out


def figure(curves: dict[str, dict[str, Any]], path: Path) -> None:
    """*At the frame* by training step, per run and look size, with the by-video intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for k, (label, res) in enumerate(curves.items()):
        for n, style in zip(EVAL_SIZES, ("--", "-"), strict=True):
            keys = [key for key in res if key.endswith(f" n={n}")]
            steps = [int(key.split()[1]) for key in keys]
            at = [res[key]["at_frame"] for key in keys]
            ax.errorbar(steps, [a["mean"] for a in at], yerr=[[a["mean"] - a["lo"] for a in at],
                        [a["hi"] - a["mean"] for a in at]], ls=style, marker="o", color=f"C{k}", capsize=3,
                        label=f"{label}, {n}-frame looks")  # fmt: skip
    ax.set(xlabel="whole-look caption steps", ylabel="right digit at the right second", ylim=(0, 1),
           title="Copying the frames' times (caption condition, probe set)")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def latest(out: Path) -> tuple[Path | None, int]:
    done = sorted((int(p.name.removeprefix("step")), p) for p in out.glob("step[0-9]*") if p.is_dir())
    return (done[-1][1], done[-1][0]) if done else (None, 0)


def train(args: argparse.Namespace) -> None:
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoProcessor

    from recipes.testbed.probe_cli import probe_env
    from rl.sft.dataset import OmniTurnSFTDataset
    from rl.sft.local import load_model, lr_at
    from rl.sft.step import collate, freeze_modules, optimizer_step

    env = probe_env()
    resume, start = latest(args.out)
    model = load_model(str(resume or args.model))
    processor = AutoProcessor.from_pretrained(args.model)
    encoder = OmniTurnSFTDataset(str(args.sft_data), processor.tokenizer, OmegaConf.create({"max_length": 1 << 20}),
                                 processor=processor)  # fmt: skip
    freeze_modules(model, ["visual"])
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR)
    if resume is not None:
        opt.load_state_dict(torch.load(resume / TRAINING_STATE)["optimizer"])
    pool = PoolLooks(args.pool, env)
    looks = probe_looks(args.probe_set, args.probe_rows, env) if args.probe_set and args.probe_rows else []
    evaluated = {int(r["step"]) for r in read_jsonl(args.out / "curve.jsonl", missing_ok=True)}
    model.train()
    steps = args.steps or STEPS
    for step in range(start, steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, LR, WARMUP, cosine=True)
        rng = np.random.default_rng([args.seed, step])
        batch = collate([encoder.encode(pool.chat(rng)) for _ in range(BATCH)], int(encoder.pad_id))
        loss = optimizer_step(model, opt, params, batch, 1.0)
        if (step + 1) % 100 == 0:
            append_jsonl(args.out / "loss.jsonl", {"step": step + 1, "loss": round(loss, 4)})
        if looks and step + 1 in EVAL_AT and step + 1 not in evaluated:
            for row in evaluate(model, processor, looks, step + 1):
                append_jsonl(args.out / "curve.jsonl", row)
        if (step + 1) % SAVE_EVERY == 0 or step + 1 == steps:
            state = {"optimizer": opt.state_dict(), "step": step + 1}
            save_checkpoint(model, processor, args.out / f"step{step + 1}", training_state=state)
    final = args.out / f"step{steps}"
    shutil.copytree(final, args.out / "final", dirs_exist_ok=True)
    env.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.time_copy", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--model", type=Path, required=True, help="the agent to train on from (a checkpoint folder)"
    )
    p.add_argument(
        "--sft-data", type=Path, help="its SFT parquet, for the turn encoder (default: next to --model)"
    )
    p.add_argument("--pool", type=Path, required=True, help="search-level videos the looks are drawn from")
    p.add_argument(
        "--probe-set", type=Path, help="the digit probe's set (with --probe-rows: the learning curve)"
    )
    p.add_argument("--probe-rows", type=Path, help="a digit probe's rows.jsonl (its forced looks)")
    p.add_argument("--steps", type=int, help=f"training steps (default {STEPS})")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0, help="the looks' draw")
    p.add_argument("--summary", action="store_true", help="only print the learning curve of OUT/curve.jsonl")
    p.add_argument("--figure", type=Path, help="plot the learning curve here (with the runs of --with)")
    p.add_argument(
        "--with",
        dest="others",
        type=labelled,
        nargs="*",
        default=[],
        metavar="LABEL=DIR",
        help="other runs to plot",
    )
    p.add_argument("--label", default="seed 0", help="this run's label in the figure")
    args = p.parse_args(argv)
    args.sft_data = args.sft_data or args.model.parent / "sft_data" / "train.parquet"
    if not args.summary:
        train(args)
    before = list(read_jsonl(args.probe_rows)) if args.probe_rows else None
    res = curve(list(read_jsonl(args.out / "curve.jsonl", missing_ok=True)), before)
    write_atomic(args.out / "curve.json", json.dumps(res, indent=2))
    if args.figure is not None:
        runs = {args.label: res}
        for label, folder in args.others:
            runs[label] = curve(list(read_jsonl(folder / "curve.jsonl")), before)
        figure(runs, args.figure)
    for key, m in res.items():
        a = m["at_frame"]
        print(f"{key}: at the frame {a['mean']:.3f} [{a['lo']:.3f}, {a['hi']:.3f}], read {m['read']['mean']:.3f}, "
              f"times copied {m['copied']}" + (f", minus before {d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"
              if (d := m.get("at_frame_minus_before")) else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
