"""A long text warm-up that keeps its model every so many steps, and the learning curve of its search step.

    python -m recipes.testbed.long_warmup train --init runs/testbed/sft_s0/init \\
        --data runs/testbed/long_warmup/teacher/sft_data/train.parquet --seed 0 --steps 9600 --keep-every 1200 \\
        --out runs/testbed/long_warmup/long_s0
    python -m recipes.testbed.long_warmup curve --prefix runs/testbed/long_warmup/long --seeds 0 1 2 3 4

``train`` is :func:`recipes.testbed.span_copy.train`'s warm-up (the same fresh weights, batches, optimizer and
settings) that saves the model after every ``--keep-every`` steps to ``OUT/step_<k>``, each with its loss curve so
far. The warm-up's constant learning rate makes the model kept at step ``k`` the one a warm-up of ``k`` steps ends
with. A run stopped and started again goes on from its saved state (``OUT/warmup_state.pt``, kept at the end so
that a run can be extended).

Each kept model is measured like any warm-up run (``span_copy measure --out STEP/quote_probe.json``, then
``span_quote score``). ``curve`` reads their scores and gives each seed's rates at each step, the table and a figure.
``seen`` (exploratory) splits a scored run's exact span and quote exact by whether the training rows hold the
probe's Observation verbatim.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from recipes.testbed import probe_analysis, span_copy
from recipes.testbed.cli_args import maybe_labelled
from recipes.testbed.span_quote import SCORED, WRITTEN

STATE = "warmup_state.pt"
CURVE_MEASURES = ("quote exact", "exact span", "cue named", "span holds")  # the curve's columns


def kept(out: Path, step: int) -> Path:
    """The folder of the model a run in ``out`` keeps at ``step``."""
    return out / f"step_{step}"


def train(
    init: Path,
    data: list[Path],
    seed: int,
    out: Path,
    steps: int,
    keep_every: int,
    save_every: int = 100,
    log_every: int = 100,
) -> list[Path]:
    """The text warm-up of :func:`span_copy.train` for ``steps`` steps, its model kept after every ``keep_every``
    (a divisor of ``steps``); the kept folders. Steps whose model is kept already are not taken again."""
    if keep_every <= 0 or steps % keep_every:
        raise ValueError(f"--keep-every {keep_every} must divide --steps {steps}")
    model, processor = span_copy.fresh_agent(init, seed)
    at = range(keep_every, steps + 1, keep_every)
    for step in at:
        if not (kept(out, step) / "warmup_loss.json").is_file():  # kept already: not taken again
            span_copy.warm_up(
                model, processor, data, seed, step, out / STATE, kept(out, step), save_every, log_every
            )
    return [kept(out, step) for step in at]


def kept_steps(run: Path) -> list[int]:
    """The steps at which ``run`` kept a model, in order."""
    found = (re.fullmatch(r"step_(\d+)", p.name) for p in run.iterdir() if p.is_dir())
    return sorted(int(m.group(1)) for m in found if m)


def curve(prefix: Path, seeds: Sequence[int]) -> dict[str, Any]:
    """Each seed's rates (:data:`CURVE_MEASURES`) and warm-up loss at each kept step, from the kept models'
    ``span_quote score`` files; the teacher's rates beside them. Every seed must have kept the same steps."""
    rows: dict[int, dict[int, dict[str, Any]]] = {}
    teacher = None
    for seed in seeds:
        run = Path(f"{prefix}_s{seed}")
        rows[seed] = {}
        for step in kept_steps(run):
            scored = json.loads((kept(run, step) / SCORED).read_text())
            teacher = teacher or scored["teacher"]
            rows[seed][step] = {**{m: scored["rates"][m] for m in CURVE_MEASURES},
                                "loss": probe_analysis.end_loss(kept(run, step))}  # fmt: skip
    steps = {tuple(r) for r in rows.values()}
    if len(steps) != 1:
        raise ValueError(f"{prefix}: the seeds kept different steps {sorted(steps)}")
    return {"steps": list(steps.pop()), "rows": rows, "teacher": teacher}


def seen_split(run: Path) -> dict[str, dict[str, Any]]:
    """Exploratory: ``run``'s exact span and quote exact on the probes whose Observation the training rows hold
    verbatim (``seen``, marked by ``span_copy measure --train``) and on the others (``unseen``)."""
    seen = {r["id"]: r["seen"] for r in json.loads((run / WRITTEN).read_text())["rows"]}
    scored = json.loads((run / SCORED).read_text())["rows"]
    out = {}
    for name, flag in (("seen", 1), ("unseen", 0)):
        rows = [r for r in scored if seen[r["id"]] == flag]
        out[name] = {"probes": len(rows), **{m: sum(r[k] for r in rows) / len(rows) if rows else None
                                            for m, k in (("exact span", "exact"), ("quote exact", "quote"))}}  # fmt: skip
    return out


def curve_table(res: dict[str, Any]) -> str:
    """One line per seed and kept step: each measure with its interval over videos, and the loss."""
    head = "| seed | step | " + " | ".join(CURVE_MEASURES) + " | loss (last 100 steps) |"
    lines = [head, "| --- " * (3 + len(CURVE_MEASURES)) + "|"]
    for seed, by_step in res["rows"].items():
        for step, r in by_step.items():
            cells = [f"{r[m]['mean']:.3f} [{r[m]['lo']:.3f}, {r[m]['hi']:.3f}]" for m in CURVE_MEASURES]
            loss = "—" if r["loss"] is None else f"{r['loss']:.3f}"
            lines.append(f"| {seed} | {step} | " + " | ".join(cells) + f" | {loss} |")
    teacher = [f"{res['teacher'][m]['mean']:.3f}" for m in CURVE_MEASURES]
    lines.append("| teacher | — | " + " | ".join(teacher) + " | — |")
    return "\n".join(lines)


def curve_figure(
    res: dict[str, Any], path: Path, measures: Sequence[str] = ("quote exact", "exact span")
) -> None:
    """One panel per measure: its rate against the kept step, a line per seed, and the teacher's rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(measures), figsize=(4.2 * len(measures), 3.6), squeeze=False)
    for ax, measure in zip(axes[0], measures, strict=True):
        for i, (seed, by_step) in enumerate(res["rows"].items()):
            steps = list(by_step)
            ax.plot(
                steps, [by_step[s][measure]["mean"] for s in steps], "o-", color=f"C{i}", label=f"seed {seed}"
            )
        ax.axhline(res["teacher"][measure]["mean"], color="k", lw=1, label="teacher")
        ax.set(xlabel="warm-up step", ylabel=f"{measure} (fresh probes)", ylim=(-0.02, 1.02), title=measure)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.long_warmup", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    help_train = "a text warm-up that keeps its model every --keep-every steps"
    t = span_copy.warmup_arguments(sub.add_parser("train", help=help_train))
    t.add_argument("--steps", type=int, required=True)
    t.add_argument(
        "--keep-every", type=int, required=True, help="steps between kept models (divides --steps)"
    )
    c = sub.add_parser("curve", help="each seed's rates at each kept step (after span_quote score)")
    c.add_argument("--prefix", type=Path, required=True, help="runs PREFIX_s<seed>")
    c.add_argument("--seeds", type=int, nargs="+", required=True)
    c.add_argument("--out", type=Path, help="the curve as JSON")
    c.add_argument("--figure", type=Path, help="quote exact and exact span against the step (PNG)")
    v = sub.add_parser(
        "seen", help="exploratory: the rates on probes whose Observation the training rows hold"
    )
    v.add_argument(
        "--run",
        type=maybe_labelled,
        action="append",
        required=True,
        metavar="[NAME=]DIR",
        help="a scored run",
    )
    args = p.parse_args(argv)
    if args.command == "seen":
        print("| run | probes seen / unseen | exact span: seen / unseen | quote exact: seen / unseen |")
        print("| --- | --- | --- | --- |")
        for name, run in args.run:
            r = seen_split(run)
            cells = [f"{r['seen']['probes']} / {r['unseen']['probes']}"]
            cells += [" / ".join("—" if r[k][m] is None else f"{r[k][m]:.3f}" for k in ("seen", "unseen"))
                      for m in ("exact span", "quote exact")]  # fmt: skip
            print(f"| {name} | " + " | ".join(cells) + " |")
        return 0
    if args.command == "train":
        folders = train(
            args.init, args.data, args.seed, args.out, args.steps, args.keep_every, args.save_every
        )
        print(json.dumps({"done": str(args.out), "kept": [f.name for f in folders]}))
        return 0
    res = curve(args.prefix, args.seeds)
    if args.out:
        write_atomic(args.out, json.dumps(res, indent=1))
    if args.figure:
        curve_figure(res, args.figure)
    print(curve_table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
