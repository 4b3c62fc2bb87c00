"""The calibration record: each recipe attempt's development-set evaluation beside its floors, as a table and a figure.

    python -m recipes.testbed.calibration --eval attempt2=runs/testbed/attempt2/sft_s0/eval/dev \\
        --eval attempt3=runs/testbed/sft_s0/eval/dev --figure docs/figures/taura_testbed_calibration.png

Each ``--eval LABEL=DIR`` names the folder the recipe's ``eval`` stage wrote (``results.json`` with one row per
policy: ``agent``, ``agent_blind``, ``prior``, ``uniform``, ``random``; each policy's ``results.jsonl`` and
``trajectories.jsonl``). The tables give every row's score with its 95% interval, the agent's score per question
template, and how well the agent's Observations read its frame looks (``--tasks``, the set's ``tasks.jsonl``, gives
the truth: each colour field from the ``cue_digit_mcq`` questions' ``extra.field``, each digit's showing from
their evidence): the share of the times its Observations name after a frame look whose colour is the field's at
that second, and of the digits it names, how many at a second a digit is shown and how many right. The figure
draws the rows of each attempt with their intervals over the plan's calibration band.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from envs.jsonl import read_jsonl
from recipes.testbed.analysis import correct
from recipes.testbed.cli_args import labelled

ROWS = ("agent", "agent_blind", "prior", "uniform", "random")
BAND = (0.40, 0.80)  # the plan's calibration band for SFT seed 0 on the development set


def load_attempt(folder: Path) -> dict[str, Any]:
    """One attempt's rows: ``{row: {"n", "mean", "lo", "hi"}}`` plus the agent's ``by_template`` means.

    Raises ``FileNotFoundError`` naming the folder when its ``results.json`` is missing."""
    path = folder / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not an evaluation of the recipe's eval stage (no results.json)")
    table = json.loads(path.read_text())["table"]
    rows = {
        name: {"n": table[name]["n"], **{k: table[name]["score"][k] for k in ("mean", "lo", "hi")}}
        for name in ROWS
        if name in table
    }
    by_template: dict[str, list[float]] = defaultdict(list)
    for reward, _, template in correct(folder / "agent").values():
        by_template[template].append(reward)
    return {
        "rows": rows,
        "by_template": {k: sum(v) / len(v) for k, v in sorted(by_template.items())},
    }


RUN = re.compile(r"(\d+)(?:-(\d+))? (red|yellow|green|blue)(?: ([2479])\b)?")  # "34-42 blue", "25 yellow 9"


def truth(tasks: Path) -> dict[str, dict[str, Any]]:
    """media file name -> {"fields": {colour: (start, end)}, "digits": [(start, end, digit)]} from a set's tasks."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"fields": {}, "digits": []})
    for task in read_jsonl(tasks):
        if task.get("extra", {}).get("template") != "cue_digit_mcq":
            continue
        colour = re.search(r"background is (\w+)", task["question"])
        if colour is None:
            raise ValueError(f"{tasks}: {task['id']}: a cue_digit_mcq question names no background colour")
        video = out[Path(task["media"]).name]
        video["fields"][colour.group(1)] = tuple(task["extra"]["field"])
        start, end = task["evidence"][0]
        video["digits"].append((start, end, task["choices"][ord(task["answer"]) - ord("A")]))
    return dict(out)


def reads(folder: Path, videos: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How the agent's Observations after its frame looks match the video (see the module docstring)."""
    times = colour_right = named = shown = right = 0
    for traj in read_jsonl(folder / "trajectories.jsonl"):
        video = videos[Path(traj["media"]).name]
        turns = traj["turns"]
        for look, after in zip(turns, turns[1:], strict=False):
            if (look.get("action") or {}).get("type") != "get_frames":
                continue
            for run in RUN.finditer(after.get("observation") or ""):
                for second in (run.group(1), run.group(2)):
                    if second is not None:
                        times += 1
                        t = int(second) + 0.5  # a written second is the whole part of the frame's time
                        a, b = video["fields"].get(run.group(3), (-1.0, -1.0))
                        colour_right += a <= t <= b
                if run.group(4):
                    named += 1
                    at = [d for a, b, d in video["digits"] if int(a) - 1 <= int(run.group(1)) <= b + 1]
                    shown += bool(at)
                    right += run.group(4) in at
    return {"times": times, "colour_right": colour_right, "digits_named": named, "digit_shown": shown,
            "digit_right": right}  # fmt: skip


def markdown(attempts: dict[str, dict[str, Any]]) -> str:
    """Every attempt's rows as one markdown table, then the agent's score by template."""
    lines = ["| attempt | row | n | score [95% CI] |", "| --- | --- | --- | --- |"]
    for label, att in attempts.items():
        for name, r in att["rows"].items():
            lines.append(f"| {label} | {name} | {r['n']} | {r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}] |")
    templates = sorted({t for att in attempts.values() for t in att["by_template"]})
    lines += ["", "| attempt | " + " | ".join(templates) + " |", "| --- |" + " --- |" * len(templates)]
    for label, att in attempts.items():
        cells = [f"{att['by_template'][t]:.3f}" if t in att["by_template"] else "" for t in templates]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if any("reads" in att for att in attempts.values()):
        lines += ["", "| attempt | row | colour right / times named | digits named | at a digit | right |",
                  "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for label, att in attempts.items():
            for row, r in att.get("reads", {}).items():
                share = r["colour_right"] / r["times"] if r["times"] else float("nan")
                lines.append(
                    f"| {label} | {row} | {r['colour_right']} / {r['times']} ({share:.2f}) | {r['digits_named']} "
                    f"| {r['digit_shown']} | {r['digit_right']} |"
                )
    return "\n".join(lines)


def figure(attempts: dict[str, dict[str, Any]], path: Path, set_name: str = "development set") -> str:
    """Each attempt's rows with their 95% intervals, the calibration band shaded; returns the y-axis label, which
    names the set the rows were scored on."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.axhspan(*BAND, color="tab:green", alpha=0.12, label="calibration band")
    width = 0.8 / len(ROWS)
    for j, name in enumerate(ROWS):
        xs, ys, err = [], [], [[], []]
        for i, att in enumerate(attempts.values()):
            r = att["rows"].get(name)
            if r is None:
                continue
            xs.append(i - 0.4 + width * (j + 0.5))
            ys.append(r["mean"])
            err[0].append(r["mean"] - r["lo"])
            err[1].append(r["hi"] - r["mean"])
        ax.errorbar(xs, ys, yerr=err, fmt="o", capsize=3, label=name)
    ax.set_xticks(range(len(attempts)), list(attempts))
    ax.set_ylim(0, 1)
    label = f"score on the {set_name}"
    ax.set_ylabel(label)
    ax.set_title("Testbed SFT agent against its floors, per recipe attempt (and seed)")
    ax.legend(fontsize=7, ncol=3, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return label


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m recipes.testbed.calibration", description=__doc__.split("\n")[0]
    )
    ap.add_argument(
        "--eval",
        type=labelled,
        action="append",
        required=True,
        metavar="LABEL=DIR",
        help="an attempt's eval folder",
    )
    ap.add_argument("--figure", type=Path, help="write the figure here (PNG)")
    ap.add_argument(
        "--set-name", default="development set", help="the set the rows were scored on (figure axis)"
    )
    ap.add_argument(
        "--tasks", type=Path, help="the set's tasks.jsonl: adds how the agent reads its frame looks"
    )
    args = ap.parse_args(argv)
    attempts = {}
    for label, folder in args.eval:
        attempts[label] = load_attempt(folder)
        if args.tasks:
            videos = truth(args.tasks)
            attempts[label]["reads"] = {
                row: reads(folder / row, videos) for row in ("agent", "agent_blind")
                if (folder / row / "trajectories.jsonl").is_file()
            }  # fmt: skip
    print(markdown(attempts))
    if args.figure:
        figure(attempts, args.figure, args.set_name)
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()
