"""The paired analysis of probe runs (warm-ups measured by :mod:`recipes.testbed.span_copy` and scored by it or by
a study's own scorer): each seed's rates with intervals over videos, each arm's teacher and floor on its own probes,
and every measure's difference of two arms paired by seed, a t-interval over seeds (the seed is the unit) with a
two-level bootstrap (seeds, then videos) beside it; the table, the figure and the ``analyse`` command's options.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import write_atomic
from recipes.testbed.analysis import detectable, t_interval, two_level_bootstrap
from recipes.testbed.cli_args import labelled
from recipes.testbed.search_step import MEASURES

FLOOR_SHARE = 0.25  # a Thought naming one of the four colours at random, that colour's span as the teacher's


def by_video(result: dict[str, Any], key: str) -> dict[str, float]:
    per: dict[str, list[int]] = {}
    for row in result["rows"]:
        per.setdefault(row["video"], []).append(row[key])
    return {v: float(np.mean(x)) for v, x in per.items()}


def end_loss(run: Path, last: int = 100) -> float | None:
    """The warm-up's mean loss over its last ``last`` steps (None without its ``warmup_loss.json``)."""
    path = run / "warmup_loss.json"
    if not path.is_file():
        return None
    return float(np.mean(json.loads(path.read_text())["loss"][-last:]))


def analyse(
    arms: dict[str, Path],
    seeds: list[int],
    primary: tuple[str, str],
    measures: dict[str, str] = MEASURES,
    file: str = "probe.json",
) -> dict[str, Any]:
    """Each seed's rates per arm, and the differences of every measure paired by seed (the primary: span holds).
    ``measures`` (name: row key) and ``file`` (in each run's folder) name another scoring of the same runs."""
    results = {arm: {s: json.loads((Path(f"{prefix}_s{s}") / file).read_text()) for s in seeds}
               for arm, prefix in arms.items()}  # fmt: skip
    rows = {arm: {s: {**{name: r["rates"][name] for name in measures}, "loss": end_loss(Path(f"{arms[arm]}_s{s}"))}
                  for s, r in res.items()} for arm, res in results.items()}  # fmt: skip
    a, b = primary
    # each arm's teacher and floor on its own probes (the same when the arms share them; "teacher": arm a's)
    teachers = {arm: res[seeds[0]]["teacher"] for arm, res in results.items()}
    floors = {arm: FLOOR_SHARE * t["span holds"]["mean"] for arm, t in teachers.items()}
    seen = {arm: res[seeds[0]].get("seen") for arm, res in results.items()}
    out: dict[str, Any] = {"rows": rows, "teacher": teachers[a], "floor": floors[a], "teachers": teachers,
                           "floors": floors, "seen": seen}  # fmt: skip
    for arm in arms:
        out[f"{arm} - floor: span holds"] = t_interval(
            [rows[arm][s]["span holds"]["mean"] - floors[arm] for s in seeds]
        )
    for name, key in measures.items():
        diffs = [results[a][s]["rates"][name]["mean"] - results[b][s]["rates"][name]["mean"] for s in seeds]
        video_diffs = []
        for s in seeds:
            va, vb = by_video(results[a][s], key), by_video(results[b][s], key)
            video_diffs.append({v: va[v] - vb[v] for v in sorted(set(va) & set(vb))})
        t = t_interval(diffs)
        if t.get("sd"):
            t["detectable"] = detectable(t["sd"], len(seeds))
        out[f"{a} - {b}: {name}"] = {"per_seed": diffs, "t": t, "bootstrap": two_level_bootstrap(video_diffs)}
    return out


def figure(res: dict[str, Any], path: Path, measure: str = "span holds") -> None:
    """``measure`` per seed and arm, with the teacher's rate (and for span holds the floor)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.8))
    for i, (arm, seeds) in enumerate(res["rows"].items()):
        xs = [int(s) + (i - 0.5) * 0.15 for s in seeds]
        mean = [r[measure]["mean"] for r in seeds.values()]
        err = [[m - r[measure]["lo"] for m, r in zip(mean, seeds.values(), strict=True)],
               [r[measure]["hi"] - m for m, r in zip(mean, seeds.values(), strict=True)]]  # fmt: skip
        ax.errorbar(xs, mean, yerr=err, fmt="o", color=f"C{i}", capsize=3, label=arm)
    ax.axhline(res["teacher"][measure]["mean"], color="k", lw=1, label="teacher")
    if measure == "span holds":
        ax.axhline(res["floor"], color="k", ls=":", lw=1, label="floor (a colour at random)")
    ax.set(xlabel="warm-up seed", ylabel=f"{measure} (fresh probes)", ylim=(-0.02, 1.02),
           title="the second turn's span, the teacher's Observation given")  # fmt: skip
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(res: dict[str, Any], measures: Sequence[str] = tuple(MEASURES)) -> str:
    def cell(r: dict[str, Any]) -> str:
        return f"{r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"

    lines = ["| arm | seed | " + " | ".join(measures) + " | end loss |", "| --- " * (3 + len(measures)) + "|"]
    for arm, seeds in res["rows"].items():
        for s, rates in seeds.items():
            loss = "—" if rates.get("loss") is None else f"{rates['loss']:.3f}"
            lines.append(f"| {arm} | {s} | " + " | ".join(cell(rates[m]) for m in measures) + f" | {loss} |")
    shared = len({json.dumps(t, sort_keys=True) for t in res.get("teachers", {}).values()}) <= 1
    teachers = (
        {"teacher": res["teacher"]} if shared else {f"teacher ({k})": t for k, t in res["teachers"].items()}
    )
    for name, t in teachers.items():
        lines.append(f"| {name} | — | " + " | ".join(cell(t[m]) for m in measures) + " | — |")
    floor = f"{res['floor']:.3f}" if shared else ", ".join(f"{k} {v:.3f}" for k, v in res["floors"].items())
    lines.append(f"\nFloor (span holds, a colour at random): {floor}. Probes whose Observation the training "
                 f"rows hold verbatim: {res['seen']}.")  # fmt: skip
    lines += ["", "| difference | per seed | mean [t 95%] | two-level bootstrap | detectable (80%) |",
              "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for name, d in res.items():
        if " - " in name and "bootstrap" in d:
            t, bs = d["t"], d["bootstrap"]
            seeds = ", ".join(f"{x:+.3f}" for x in d["per_seed"])
            lines.append(f"| {name} | {seeds} | {t['mean']:+.3f} [{t.get('lo', float('nan')):+.3f}, "
                         f"{t.get('hi', float('nan')):+.3f}] | [{bs['lo']:+.3f}, {bs['hi']:+.3f}] | "
                         f"{t.get('detectable', float('nan')):.3f} |")  # fmt: skip
    for name, t in res.items():
        if name.endswith("- floor: span holds"):
            lines.append(f"\n{name}: {t['mean']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}] (t over seeds)")
    return "\n".join(lines)


def analyse_arguments(a: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """An ``analyse`` command's options, read by :func:`analyse_command`: ``--arm NAME=PREFIX`` (runs
    ``PREFIX_s<seed>``), ``--seeds``, ``--primary A-B``, ``--out`` (JSON) and ``--figure`` (PNG)."""
    a.add_argument("--arm", type=labelled, action="append", required=True, metavar="NAME=PREFIX")
    a.add_argument("--seeds", type=int, nargs="+", required=True)
    a.add_argument("--primary", required=True, metavar="A-B")
    a.add_argument("--out", type=Path, help="the analysis as JSON")
    a.add_argument("--figure", type=Path, help="the plotted measure per seed and arm (PNG)")
    return a


def analyse_command(
    args: argparse.Namespace,
    measures: dict[str, str] = MEASURES,
    file: str = "probe.json",
    plot: str = "span holds",
) -> str:
    """The ``analyse`` command (``--arm``, ``--seeds``, ``--primary``, ``--out``, ``--figure``) for runs scored in
    ``file`` on ``measures``, the figure showing ``plot``: the JSON and the figure written, the table returned."""
    arms = dict(args.arm)  # (name, prefix) pairs: --arm is read by cli_args.labelled
    a_arm, _, b_arm = args.primary.partition("-")
    if a_arm not in arms or b_arm not in arms:
        raise SystemExit(f"--primary {args.primary!r}: both arms must be given by --arm")
    res = analyse(arms, args.seeds, (a_arm, b_arm), measures, file)
    if args.out:
        write_atomic(args.out, json.dumps(res, indent=1))
    if args.figure:
        figure(res, args.figure, plot)
    return table(res, tuple(measures))
