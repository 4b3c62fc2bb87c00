"""Warm-up loss curves on a common axis of turns seen, so that runs with different batch sizes can be read together.

    python -m recipes.testbed.loss_curves --run "settings s0=runs/testbed/copy_settings/settings_s0" \\
        --run "control s0=runs/testbed/copy_settings/control_s0" --window 6400 --figure curves.png

Each run's ``warmup_loss.json`` (written by ``span_copy train``) holds the loss before each step and the batch size the
warm-up ran with (curves from before the batch size was recorded ran at :data:`recipes.testbed.span_copy.WARMUP`'s).
:func:`curve` cuts the steps into windows of ``--window`` turns (a multiple of every run's batch size) and gives each
window's mean loss; :func:`first_below` gives the turns seen at the end of the first window whose mean is below a level
(where a run's loss drops, say). The figure draws each window's mean against the turns seen, one line per run, coloured
by the label's first word (the arm).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from recipes.testbed.cli_args import labelled
from recipes.testbed.span_copy import warmup_settings


def curve(run: Path, window: int) -> dict[str, Any]:
    """``run``'s batch size, and each whole window of ``window`` turns: the turns seen at its end and its mean loss."""
    record = json.loads((run / "warmup_loss.json").read_text())
    batch = int(warmup_settings(record, recorded=True)["batch_size"])
    if window <= 0 or window % batch:
        raise ValueError(f"{run}: a window of {window} turns is not a whole number of its {batch}-turn steps")
    steps, losses = window // batch, record["loss"]
    means = [sum(losses[i : i + steps]) / steps for i in range(0, len(losses) - steps + 1, steps)]
    return {"batch size": batch, "turns": [(k + 1) * window for k in range(len(means))], "loss": means}


def first_below(res: dict[str, Any], level: float) -> int | None:
    """The turns seen at the end of the first window of :func:`curve`'s result whose mean loss is below ``level``."""
    return next((t for t, loss in zip(res["turns"], res["loss"], strict=True) if loss < level), None)


def table(curves: dict[str, dict[str, Any]], level: float) -> str:
    """One line per run: its batch size, each window's mean loss and where it first fell below ``level``."""
    turns = max((c["turns"] for c in curves.values()), key=len)
    lines = ["| run | batch | " + " | ".join(f"{t:,}" for t in turns) + f" | first below {level} |"]
    lines.append("| --- " * (3 + len(turns)) + "|")
    for name, c in curves.items():
        cells = [f"{v:.3f}" for v in c["loss"]] + ["—"] * (len(turns) - len(c["loss"]))
        below = first_below(c, level)
        lines.append(f"| {name} | {c['batch size']} | " + " | ".join(cells) + f" | {below or '—'} |")
    return "\n".join(lines)


def figure(curves: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """Each run's window means against the turns seen; one colour per arm (the label's first word)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(dict.fromkeys(name.split()[0] for name in curves))
    fig, ax = plt.subplots(figsize=(6, 3.6))
    labelled: set[str] = set()  # each arm named once in the legend
    for name, c in curves.items():
        arm = name.split()[0]
        label = None if arm in labelled else arm
        labelled.add(arm)
        ax.plot(c["turns"], c["loss"], "-", color=f"C{arms.index(arm)}", lw=1.2, label=label)
    ax.set(xlabel="turns seen", ylabel="training loss (window mean)", yscale="log", title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.loss_curves", description=__doc__.split("\n")[0]
    )
    p.add_argument("--run", type=labelled, action="append", required=True, metavar="NAME=DIR")
    p.add_argument("--window", type=int, required=True, help="turns a window (a multiple of each batch size)")
    p.add_argument("--below", type=float, default=0.1, help="the level whose first crossing is reported")
    p.add_argument("--json", type=Path)
    p.add_argument("--figure", type=Path)
    p.add_argument("--title", default="warm-up loss against turns seen")
    args = p.parse_args(argv)
    curves = {name: curve(run, args.window) for name, run in args.run}
    print(table(curves, args.below))
    if args.json:
        write_atomic(args.json, json.dumps(curves, indent=1))
    if args.figure:
        figure(curves, args.figure, args.title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
