"""Where the testbed agent's digit reading breaks: forced looks of 1, 2, 4 and 8 frames inside the cued field.

For each ``cue_digit_mcq`` question of a search-level set the search teacher (compact language) plays the first
turn (its look over the file) and writes the second turn's Observation and Thought; the second turn's action is
replaced by a **forced look** of ``n`` frames inside the cued field, one of them inside the digit's showing. The
agent then writes its third turn, and its Observation is read against the truth (docs/experiments/
testbed-digit-reading.md has the plan and the result). Conditions:

- ``episode``: as above, greedy and constrained, the recipe's caps and turn budget;
- ``blind``: the same contexts, the forced look served from the set's blanked copy;
- ``caption``: the forced look's frames alone as a caption prompt (the caption batches' format), unconstrained.

Rows are appended to ``OUT/rows.jsonl`` as they finish, so a stopped run resumes; ``--summary`` reads them back.

    python -m recipes.testbed.digit_probe --model runs/testbed/sft_s0/agent --set runs/testbed/data/probe5304 \\
        --out runs/testbed/digit_probe/attempt3
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omniagent.backends.synth_compact import parse_compact, sec
from recipes.testbed.probe_cli import interval_bars, new_axes, probe_main, probe_parser, save_figure

LOOK_SIZES = (1, 2, 4, 8)
CONDITIONS = ("episode", "blind", "caption")
N_BOOT = 10_000


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates per (condition, look size) with by-video 95% intervals, and the primary: 1-frame minus 8-frame read
    in the episode condition, paired by field, by-video bootstrap."""
    out: dict[str, Any] = {"rates": {}, "left_out": {}}
    for row in rows:
        if row.get("left_out"):
            out["left_out"][row["left_out"]] = out["left_out"].get(row["left_out"], 0) + 1
    scored = [r for r in rows if "read" in r]
    for cond in CONDITIONS:
        for n in LOOK_SIZES:
            sub = [r for r in scored if r["condition"] == cond and r["n"] == n]
            if sub:
                out["rates"][f"{cond} n={n}"] = {
                    m: video_interval({r["id"]: (r["media"], r[m]) for r in sub})
                    for m in ("read", "named", "at_frame", "colour")
                }
    out["copied"] = copied_times(scored)
    ep = {(r["id"], r["n"]): r for r in scored if r["condition"] == "episode"}
    pairs = {
        i: (ep[i, 1]["media"], ep[i, 1]["read"] - ep[i, 8]["read"]) for i, n in ep if n == 1 and (i, 8) in ep
    }
    out["primary"] = {"name": "episode read, 1-frame minus 8-frame looks", **video_interval(pairs)}
    return out


def copied_times(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (condition, look size): the share of the Observations' frame clauses whose first second is one of
    the look's frame seconds (a copied label), over every parsed clause (added after the plan: exploratory)."""
    out: dict[str, Any] = {}
    for row in rows:
        try:
            claims = [c for c in parse_compact(row["text"]) if c.kind == "frames"]
        except ValueError:
            claims = []
        look = row["look"]
        seconds = {sec(t) for t in np.linspace(look["start"], look["end"], look["num"])}
        acc = out.setdefault(f"{row['condition']} n={row['n']}", [0, 0])
        acc[0] += sum(c.first in seconds for c in claims)
        acc[1] += len(claims)
    return {k: {"clauses": n, "copied": round(c / n, 3) if n else None} for k, (c, n) in out.items()}


def video_totals(values: dict[str, tuple[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per video (in first-seen order): the sum of its items' values and their number."""
    by: dict[str, list[float]] = {}
    for video, value in values.values():
        by.setdefault(video, []).append(float(value))
    return np.array([sum(v) for v in by.values()]), np.array([len(v) for v in by.values()])


def resampled_means(sums: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """:data:`N_BOOT` item means, each over a resample of the videos (with replacement)."""
    picks = rng.integers(len(sums), size=(N_BOOT, len(sums)))
    return sums[picks].sum(axis=1) / counts[picks].sum(axis=1)


def video_interval(values: dict[str, tuple[str, float]], seed: int = 0) -> dict[str, Any]:
    """Mean of per-item values with a percentile 95% interval from resampling videos (items nested in them)."""
    sums, counts = video_totals(values)
    if not len(sums):
        return {"n": 0}
    lo, hi = np.percentile(resampled_means(sums, counts, np.random.default_rng(seed)), [2.5, 97.5])
    return {"n": int(counts.sum()), "videos": len(sums), "mean": round(float(sums.sum() / counts.sum()), 3),
            "lo": round(float(lo), 3), "hi": round(float(hi), 3)}  # fmt: skip


def table(res: dict[str, Any]) -> str:
    """The summary as a markdown table: per condition and look size, each measure's mean (read with its interval)."""
    lines = [
        "| condition | frames | fields | read [95% CI] | named | at the frame | colour | times copied |",
        "| --- " * 8 + "|",
    ]
    for key, m in res["rates"].items():
        cond, n = key.split(" n=")
        r = m["read"]
        lines.append(f"| {cond} | {n} | {r['n']} | {r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}] | "
                     f"{m['named']['mean']:.3f} | {m['at_frame']['mean']:.3f} | {m['colour']['mean']:.3f} | "
                     f"{res['copied'].get(key, {}).get('copied')} |")  # fmt: skip
    p = res["primary"]
    if p.get("n"):
        lines.append(f"\n{p['name']}: {p['mean']:+.3f} [{p['lo']:+.3f}, {p['hi']:+.3f}] ({p['n']} fields, "
                     f"{p['videos']} videos); left out: {res['left_out'] or 'none'}")  # fmt: skip
    return "\n".join(lines)


def figure(runs: dict[str, dict[str, Any]], path: Path) -> None:
    """Read rate (solid) and the right digit at the right second (dashed) by frames per look: each run's
    conditions (the first run's all, the others' episode condition)."""
    fig, ax = new_axes()
    colour = 0
    for k, (label, res) in enumerate(runs.items()):
        for cond in CONDITIONS if k == 0 else ("episode",):
            keys = [f"{cond} n={n}" for n in LOOK_SIZES if f"{cond} n={n}" in res["rates"]]
            if not keys:
                continue
            sizes = [int(key.split("=")[1]) for key in keys]
            read = [res["rates"][key]["read"] for key in keys]
            interval_bars(ax, sizes, read, color=f"C{colour}", label=f"{label} {cond}: read")
            at = [res["rates"][key]["at_frame"]["mean"] for key in keys]
            ax.plot(sizes, at, ls="--", marker="x", color=f"C{colour}", label=f"{label} {cond}: at the frame")
            colour += 1
    ax.set(xscale="log", xticks=list(LOOK_SIZES), xticklabels=[str(n) for n in LOOK_SIZES], ylim=(-0.02, 1.02),
           xlabel="frames in the forced look", ylabel="share of fields", title="The cued field's digit, forced looks")  # fmt: skip
    ax.minorticks_off()
    ax.legend(fontsize=6.5, loc="center right")
    save_figure(fig, path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = probe_parser(
        "python -m recipes.testbed.digit_probe",
        __doc__,
        48,
        "videos of a made set (4 cue_digit questions each)",
        CONDITIONS,
    )
    p.add_argument("--sizes", nargs="+", type=int, default=list(LOOK_SIZES), help="frames per forced look")
    p.add_argument(
        "--seed", type=int, default=0, help="the forced looks' draw and the teacher's strategy seed"
    )
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    from recipes.testbed.digit_probe_run import run_probe

    run_probe(args)


def main(argv: Sequence[str] | None = None) -> int:
    return probe_main(parse_args(argv), run, summary, table, figure)


if __name__ == "__main__":
    raise SystemExit(main())
