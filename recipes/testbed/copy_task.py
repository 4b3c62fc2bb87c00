"""A minimal copy task for the testbed's text model: does it learn to copy the span that follows the cue's colour?

    python -m recipes.testbed.copy_task make --rows 3814 --seed 1 --out runs/testbed/copy_task/rows.parquet
    python -m recipes.testbed.copy_task make --rows 256 --seed 2 --out runs/testbed/copy_task/probes.parquet
    python -m recipes.testbed.span_copy train --init runs/testbed/sft_s0/init \\
        --data runs/testbed/copy_task/rows.parquet --seed 0 --steps 3600 --out runs/testbed/copy_task/min_s0
    python -m recipes.testbed.copy_task measure --model runs/testbed/copy_task/min_s0 \\
        --probes runs/testbed/copy_task/probes.parquet
    python -m recipes.testbed.copy_task analyse --run s0=runs/testbed/copy_task/min_s0 ... \\
        --probes runs/testbed/copy_task/probes.parquet

The search step of the testbed's field clauses teacher copies, into its Thought, the span of the clause whose colour
the question names: after ``red 8-34, yellow 42-60, green 25-51, blue 0-17`` and a question about green it writes
``green 25-51.``. The warm-up learns that step only by the clause's place when the clause order is fixed, and learns
no reading when the order varies. This task keeps only the copy. A row is one SFT turn in the exported parquet's form
(``messages``: the question, a frames header, the reply; :func:`recipes.tiny_agent.text_warmup.short_turns` reads
it): the question names a colour, the reply's Observation gives four colour fields with random spans in random order
(``--fixed-order``: always red, yellow, green, blue), and its Thought and action copy the cue's span. There are no
media, no options and no first turn. The testbed's tokenizer writes a colour at the start of a string (``red``) and
after a space (`` red``) as different tokens, so the Thought's colour is not the token of its clause in the
Observation; ``--spaced`` opens both with a space, so that it is.

``make`` writes the rows (their ``cue`` column beside ``messages``), ``span_copy train`` warms a model up on them as on
any SFT parquet, ``measure`` has a model write each probe's Thought greedily after its Observation
(:func:`recipes.testbed.span_copy.write_turn`) into ``MODEL/copy_probe.json``, and ``analyse`` gives, per run, the
share of its turns that copy the cue's span (**exact copy**) and, over its turns whose span is some field's, the
cue's share minus a field at random (the **cue lean**, :func:`recipes.testbed.field_choice.cue_lean`), each run's lean
with the t-interval over runs. ``contrast`` pairs two arms' ``analyse --json`` results by run name: each measure's
difference per run and its t-interval over runs, and (``--figure``) each run's exact copy in both arms, joined.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic, write_parquet
from envs.messages import message_text
from recipes.testbed.analysis import t_over_runs
from recipes.testbed.cli_args import labelled
from recipes.testbed.field_choice import choices, cue_lean, field_picks, figure
from recipes.testbed.probe_analysis import end_loss

COLOURS = ("red", "yellow", "green", "blue")
QUESTIONS = (
    "Which digit is shown on screen while the background is {}?",
    "What is the pitch of the beep heard while the background is {}?",
)
WRITTEN = "copy_probe.json"


def copy_row(rng: random.Random, fixed_order: bool, spaced: bool = False) -> dict[str, Any]:
    """One turn: a question naming a colour, four fields with random spans in a file of 30-120 s, in random order
    (or the fixed one), and the reply that copies the cue's span into its Thought and its look. With ``spaced`` the
    Observation and the Thought each open with a space, so that every colour word in them is the same token."""
    duration = rng.randint(30, 120)
    spans = {}
    for colour in COLOURS:
        start = rng.randint(0, duration - 6)
        spans[colour] = (start, rng.randint(start + 5, duration))
    order = list(COLOURS) if fixed_order else rng.sample(COLOURS, len(COLOURS))
    cue = rng.choice(COLOURS)
    start, end = spans[cue]
    lead = " " if spaced else ""
    reply = {
        "observation": lead + ", ".join(f"{c} {spans[c][0]}-{spans[c][1]}" for c in order),
        "thought": f"{lead}{cue} {start}-{end}.",
        "action": {"type": "get_frames", "start": start, "end": end, "num": 8},
    }
    task = f"Media: duration {duration}.00 s, 5 fps, 160x90, has audio.\nQuestion: {rng.choice(QUESTIONS).format(cue)}"
    messages = [
        {"role": "user", "content": [{"type": "text", "text": task}]},
        {"role": "user", "content": [{"type": "text", "text": f"Frames 0.00s-{duration}.00s (num=8):"}]},
        {"role": "assistant", "content": [{"type": "text", "text": json.dumps(reply)}]},
    ]
    return {"cue": cue, "messages": json.dumps(messages)}


def make(n_rows: int, seed: int, out: Path, fixed_order: bool = False, spaced: bool = False) -> Path:
    """``n_rows`` rows of :func:`copy_row` drawn from ``seed``, written to the parquet ``out`` whole or not at all;
    the same seed draws the same rows with or without ``spaced``."""
    import pandas as pd

    if n_rows < 1:
        raise ValueError("--rows must be at least 1")
    rng = random.Random(seed)
    rows = [{"id": f"copy_s{seed}_{i:05d}", **copy_row(rng, fixed_order, spaced)} for i in range(n_rows)]
    return write_parquet(out, pd.DataFrame(rows))


def load_probes(parquet: Path) -> list[dict[str, Any]]:
    """Each row of a :func:`make` parquet as a probe :func:`recipes.testbed.span_copy.write_turn` continues: its id,
    cue, question (``task_text``), frames header (``latest``) and the teacher's reply."""
    import pandas as pd

    probes = []
    for row in pd.read_parquet(parquet).to_dict("records"):
        task, latest, reply = (message_text(m) for m in json.loads(row["messages"]))
        probes.append(
            {"id": row["id"], "cue": row["cue"], "task_text": task, "latest": latest, "reply": reply}
        )
    return probes


def measure(model_dir: Path, probes: list[dict[str, Any]], max_new: int = 48) -> dict[str, Any]:
    """Every probe's turn as the model writes it greedily after the probe's Observation."""
    from recipes.testbed.span_copy import load_agent, write_turn

    model, processor = load_agent(model_dir)
    rows = [{"id": p["id"], "written": write_turn(model, processor.tokenizer, p, max_new)} for p in probes]
    return {"model": str(model_dir), "probes": len(rows), "rows": rows}


def run_turns(run: Path, probes: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each of the run's written turns (``RUN/copy_probe.json``) with its probe; a run that wrote turns for other
    probes, or not for all of them, is refused."""
    by_id = {p["id"]: p for p in probes}
    rows = json.loads((run / WRITTEN).read_text())["rows"]
    if sorted(r["id"] for r in rows) != sorted(by_id):
        raise ValueError(f"{run / WRITTEN}: its turns are not these probes' (measure it on them)")
    return [(r["written"], by_id[r["id"]]) for r in rows]


def run_choices(run: Path, probes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The field choice (:func:`recipes.testbed.field_choice.choices`) of each of the run's written turns."""
    return choices(run_turns(run, probes))


def analyse(runs: Sequence[tuple[str, Path]], probes: list[dict[str, Any]]) -> dict[str, Any]:
    """Per run: its turns, exact copies, field choices, cue lean and end loss (its warm-up's last 100 steps; None
    without a loss curve); the cue lean's t-interval over the runs."""
    per_run: dict[str, Any] = {}
    for name, run in runs:
        recs = run_choices(run, probes)
        per_run[name] = {
            "turns": len(recs),
            "exact copy": sum(r["chosen"] == r["cue"] for r in recs) / len(recs),
            "field choices": len(field_picks(recs)),
            "cue lean": cue_lean(recs),
            "end loss": end_loss(run),
        }
    leans = {n: r["cue lean"] for n, r in per_run.items()}
    return {
        "per_run": per_run,
        "cue": t_over_runs(leans),
    }


def report(res: dict[str, Any]) -> str:
    lines = ["| run | turns | exact copy | field choices | cue lean | end loss |", "| --- " * 6 + "|"]
    for name, r in res["per_run"].items():
        lean = "—" if r["cue lean"] is None else f"{r['cue lean']:+.3f}"
        loss = "—" if r.get("end loss") is None else f"{r['end loss']:.3f}"
        lines.append(
            f"| {name} | {r['turns']} | {r['exact copy']:.3f} | {r['field choices']} | {lean} | {loss} |"
        )
    t = res["cue"]["t"]
    if t["n"] >= 2:
        lines += [
            "",
            f"cue lean over runs: {t['mean']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}] (t, p = {t['p']:.3f})",
        ]
    return "\n".join(lines)


MEASURES = ("exact copy", "cue lean")


def contrast(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per measure, each run's ``a`` minus its ``b`` (two :func:`analyse` results, runs paired by name) and the
    t-interval over the runs both hold; a run in one only, or without a lean, is left out."""
    out = {}
    for key in MEASURES:
        each = {}
        for name, row in a["per_run"].items():
            other = b["per_run"].get(name)
            if other is not None and row[key] is not None and other[key] is not None:
                each[name] = row[key] - other[key]
        out[key] = t_over_runs(each)
    return out


def contrast_rows(res: dict[str, Any]) -> str:
    lines = ["| a − b | per run | mean [t 95%] | p |", "| --- " * 4 + "|"]
    for key, r in res.items():
        t, values = r["t"], ", ".join(f"{n} {v:+.3f}" for n, v in r["per_run"].items())
        interval = "—" if t["n"] < 2 else f"{t['mean']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}] | {t['p']:.3f}"
        lines.append(f"| {key} | {values} | {interval} |")
    return "\n".join(lines)


FLOOR = 0.25  # the exact copy of a field at random
BAR = 0.8  # the exact copy every seed must reach for the copy to count as learnt


def contrast_figure(
    a: dict[str, Any], b: dict[str, Any], path: Path, labels: Sequence[str] = ("a", "b")
) -> dict[str, tuple[float, float]]:
    """Each run's exact copy in ``a`` and in ``b`` (two :func:`analyse` results, paired by run name, joined by a
    line), with a field at random and the bar; returns the plotted pairs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = {
        n: (r["exact copy"], b["per_run"][n]["exact copy"])
        for n, r in a["per_run"].items()
        if n in b["per_run"]
    }
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, (va, vb) in enumerate(pairs.values()):
        ax.plot([i - 0.1, i + 0.1], [vb, va], "-", color="0.6", lw=1)
        ax.plot([i - 0.1], [vb], "o", color="C0", label=labels[1] if i == 0 else None)
        ax.plot([i + 0.1], [va], "s", color="C1", label=labels[0] if i == 0 else None)
    ax.axhline(FLOOR, color="k", ls="--", lw=1, label="a field at random")
    ax.axhline(BAR, color="k", ls=":", lw=1, label="the bar")
    ax.set_xticks(range(len(pairs)), list(pairs))
    ax.set(
        ylabel="exact copy (fresh probes)",
        ylim=(-0.02, 1.02),
        title=f"{labels[0]} against {labels[1]}, by seed",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.copy_task", description=__doc__.split("\n\n")[0]
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make", help="write copy-task rows (training rows or probes)")
    m.add_argument("--rows", type=int, required=True)
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument(
        "--fixed-order", action="store_true", help="the clauses always in red, yellow, green, blue order"
    )
    m.add_argument("--spaced", action="store_true", help="the Observation and the Thought open with a space")
    w = sub.add_parser("measure", help="a model's greedy turns on the probes, into MODEL/copy_probe.json")
    w.add_argument("--model", type=Path, required=True)
    w.add_argument("--probes", type=Path, required=True)
    a = sub.add_parser("analyse", help="exact copies and cue leans per run, the t over runs")
    a.add_argument("--run", type=labelled, action="append", required=True, metavar="NAME=DIR")
    a.add_argument("--probes", type=Path, required=True)
    a.add_argument("--json", type=Path)
    a.add_argument("--figure", type=Path)
    a.add_argument("--title", default="copy task: the cue's share of field choices − chance")
    c = sub.add_parser("contrast", help="two analyse --json results paired by run: a − b, the t over runs")
    c.add_argument("--a", type=Path, required=True)
    c.add_argument("--b", type=Path, required=True)
    c.add_argument("--json", type=Path)
    c.add_argument("--figure", type=Path, help="each run's exact copy in a and b, joined")
    c.add_argument(
        "--labels", nargs=2, default=("a", "b"), metavar=("A", "B"), help="the arms' names in the figure"
    )
    args = p.parse_args(argv)
    if args.cmd == "contrast":
        a, b = (json.loads(f.read_text()) for f in (args.a, args.b))
        res = contrast(a, b)
        print(contrast_rows(res))
        if args.json:
            write_atomic(args.json, json.dumps(res, indent=1))
        if args.figure:
            contrast_figure(a, b, args.figure, args.labels)
    elif args.cmd == "make":
        print(f"{make(args.rows, args.seed, args.out, args.fixed_order, args.spaced)}: {args.rows} rows")
    elif args.cmd == "measure":
        res = measure(args.model, load_probes(args.probes))
        write_atomic(args.model / WRITTEN, json.dumps(res, indent=1))
    else:
        res = analyse(args.run, load_probes(args.probes))
        print(report(res))
        if args.json:
            write_atomic(args.json, json.dumps(res, indent=1))
        if args.figure:
            figure(res, args.figure, args.title, kinds=("cue",))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
