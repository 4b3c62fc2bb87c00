"""Exploratory: which field a run copies when its search step writes the span of a colour other than the cue's.

    python -m recipes.testbed.field_choice --run s4=runs/testbed/wide_long/at7200_s4 \\
        --probes runs/testbed/wide_long/fresh_teacher/sft_data/train.parquet --tasks runs/testbed/data/study_5325

The probes are the field-clause teacher's second turns (:func:`recipes.testbed.span_copy.load_probes`): its
Observation gives each colour's span in a fixed clause order (``red 8-34, yellow 42-60, green 25-51, blue 0-17``),
and the cue is the colour the question asks about. A run's written turn (``RUN/field_probe.json``, written by
``span_copy measure``) leads its Thought with a colour and a span. Its *choice* is the colour whose field that span
is, or ``other numbers`` / ``no span`` (:func:`recipes.testbed.field_clauses.chosen_field`).

For each run the command prints, over its probes:

- the cue's colour against the chosen colour (clause order is fixed, so a colour is also a clause position);
- the cue field's rank in time (by start, then end; 1 is the earliest) against the chosen field's rank;
- a summary row: how many choices are another colour's field, and of those the share whose field is the cue's
  neighbour in clause order and in time, each beside the share a choice among the other three fields at random
  would give on the same probes;
- of the choices that are some field of the look, the share that are the cue's and the share that are the earliest
  field in time, beside the share a field at random would give.

A NAME given twice pools its runs' turns (one seed at two lengths, say). With two names or more, a last row gives each
name's *lean* (the mean over its wrong-field choices of neighbour − chance, in clause order and in time) and its mean
with the t-interval over names (``analysis.t_interval``); a name with no wrong-field choice has no lean and is left out
of the t, and the row says so. A third row gives each name's *cue lean*: over its choices of a field, the share that
are the cue's minus the share a field at random would give (``1 / fields`` per probe), with the same t. ``--json``
writes the leans, ``--figure`` draws the two neighbour leans and ``--cue-figure`` the cue lean. ``--base JSON``, an
earlier ``--json`` of the same names (the same seeds at fewer steps, say), adds each name's cue lean minus its base
one, with the t over the names both hold.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from recipes.testbed import span_copy
from recipes.testbed.analysis import t_over_runs
from recipes.testbed.cli_args import labelled
from recipes.testbed.field_clauses import chosen_field, field_spans
from recipes.testbed.field_grid import written_pairs

NOT_A_FIELD = ("other numbers", "no span")
KINDS = ("clause", "time")


def time_ranks(fields: dict[str, tuple[str, str]]) -> dict[str, int]:
    """Each colour's rank in time among ``fields`` (colour → span), by start then end, 1 for the earliest."""
    order = sorted(fields, key=lambda c: (float(fields[c][0]), float(fields[c][1])))
    return {c: i + 1 for i, c in enumerate(order)}


def _neighbours(order: Sequence[str], colour: str) -> set[str]:
    i = order.index(colour)
    return {order[j] for j in (i - 1, i + 1) if 0 <= j < len(order)}


def choices(written: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One record per (written turn, probe): the cue, the chosen colour, both fields' ranks in time (``not a field``
    for a choice that is not one), and for a choice of another colour's field whether it neighbours the cue's in clause
    order and in time, with the chance of that for a pick among the other fields at random."""
    out = []
    for text, probe in written:
        fields = field_spans(probe["reply"])
        cue, chosen = str(probe["cue"]), chosen_field(text, probe)
        ranks = time_ranks(fields)
        rec: dict[str, Any] = {
            "cue": cue,
            "chosen": chosen,
            "cue rank": ranks.get(cue),
            "fields": len(fields),
        }
        rec["chosen rank"] = ranks.get(chosen, "not a field")
        if chosen in fields and chosen != cue and cue in fields:
            by_time = sorted(fields, key=ranks.__getitem__)
            near = (_neighbours(list(fields), cue), _neighbours(by_time, cue))
            rec["clause neighbour"], rec["time neighbour"] = chosen in near[0], chosen in near[1]
            rec["clause chance"] = len(near[0]) / (len(fields) - 1)
            rec["time chance"] = len(near[1]) / (len(fields) - 1)
        out.append(rec)
    return out


def _table(records: list[dict[str, Any]], row: str, col: str, cols: Sequence[Any]) -> list[str]:
    present = {r[row] for r in records}
    keys = [c for c in cols if c in present] + sorted(present.difference(cols), key=str)
    counts = Counter((r[row], r[col]) for r in records)
    lines = [f"| {row} \\ {col} | " + " | ".join(map(str, cols)) + " |", "| --- " * (1 + len(cols)) + "|"]
    lines += [f"| {k} | " + " | ".join(str(counts[(k, c)]) for c in cols) + " |" for k in keys]
    return lines


def lean(records: list[dict[str, Any]], kind: str) -> float | None:
    """The mean over ``records``' wrong-field choices of (``kind`` neighbour − its chance); None when there is none."""
    wrong = [r for r in records if "clause neighbour" in r]
    if not wrong:
        return None
    return sum(r[f"{kind} neighbour"] - r[f"{kind} chance"] for r in wrong) / len(wrong)


def field_picks(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records whose choice is a field of the look (not ``other numbers`` or ``no span``)."""
    return [r for r in records if isinstance(r["chosen rank"], int)]


def cue_lean(records: list[dict[str, Any]]) -> float | None:
    """The mean over ``records``' choices of a field of (the cue's field chosen − 1 / the probe's fields): how far the
    cue's share of the field choices stands above a field at random; None when no choice is a field."""
    picked = field_picks(records)
    if not picked:
        return None
    return sum((r["chosen"] == r["cue"]) - 1 / r["fields"] for r in picked) / len(picked)


def leans(per_run: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per kind (the two neighbour leans and ``cue``): each name's lean, and the t-interval over the names that have
    one."""
    out = {kind: t_over_runs({name: lean(recs, kind) for name, recs in per_run.items()}) for kind in KINDS}
    out["cue"] = t_over_runs({name: cue_lean(recs) for name, recs in per_run.items()})
    return out


def cue_change(res: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Each name's cue lean in ``res`` minus its cue lean in ``base`` (two :func:`leans` results), with the t over the
    names that have both; a name ``base`` lacks has no change."""
    now, then = res["cue"]["per_run"], base["cue"]["per_run"]
    each = {n: None if v is None or then.get(n) is None else v - then[n] for n, v in now.items()}
    return t_over_runs(each)


def _summary(name: str, records: list[dict[str, Any]]) -> str:
    wrong = [r for r in records if "clause neighbour" in r]
    cells = [name, str(len(records)), str(len(wrong))]
    for kind in KINDS:
        if wrong:
            seen = sum(r[f"{kind} neighbour"] for r in wrong) / len(wrong)
            chance = sum(r[f"{kind} chance"] for r in wrong) / len(wrong)
            cells.append(f"{seen:.3f} (chance {chance:.3f})")
        else:
            cells.append("—")
    return "| " + " | ".join(cells) + " |"


def _field_row(name: str, records: list[dict[str, Any]]) -> str:
    picked = field_picks(records)
    if not picked:
        return f"| {name} | 0 | — | — |"
    own = sum(r["chosen"] == r["cue"] for r in picked) / len(picked)
    first = sum(r["chosen rank"] == 1 for r in picked) / len(picked)
    chance = sum(1 / r["fields"] for r in picked) / len(picked)
    return f"| {name} | {len(picked)} | {own:.3f} | {first:.3f} (chance {chance:.3f}) |"


LEAN_LABELS = {
    "clause": "clause neighbour − chance",
    "time": "time neighbour − chance",
    "cue": "the cue's share − chance",
    "cue change": "the cue's share, minus base",
}


def _lean_rows(res: dict[str, Any]) -> list[str]:
    lines = ["| lean | per run | mean [t 95%] | p |", "| --- " * 4 + "|"]
    for kind in [k for k in LEAN_LABELS if k in res]:
        each, t = res[kind]["per_run"], res[kind]["t"]
        values = ", ".join(f"{n} {'—' if v is None else f'{v:+.3f}'}" for n, v in each.items())
        if t["n"] < 2:
            lines.append(f"| {LEAN_LABELS[kind]} | {values} | — (fewer than two runs with a lean) | — |")
            continue
        lines.append(
            f"| {LEAN_LABELS[kind]} | {values} | {t['mean']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}] | {t['p']:.3f} |"
        )
    return lines


def figure(res: dict[str, Any], path: Path, title: str, kinds: Sequence[str] = KINDS) -> None:
    """Each name's leans of ``kinds``, with the mean over names and its t-interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, kind in enumerate(kinds):
        each, t = res[kind]["per_run"], res[kind]["t"]
        shift = (i - (len(kinds) - 1) / 2) * 0.2
        xs = [j + shift for j in range(len(each))]
        ax.plot(xs, [float("nan") if v is None else v for v in each.values()], "o", color=f"C{i}",
                label=LEAN_LABELS[kind])  # fmt: skip
        if t["n"] >= 2:
            ax.errorbar([len(each) + shift], [t["mean"]], fmt="s", color=f"C{i}", capsize=3,
                        yerr=[[t["mean"] - t["lo"]], [t["hi"] - t["mean"]]])  # fmt: skip
    names = list(res[kinds[0]]["per_run"])
    ax.set_xticks(range(len(names) + 1), [*names, "mean [t 95%]"])
    ax.axhline(0, color="k", lw=1)
    ylabel = "share of field choices − chance" if "cue" in kinds else "share of wrong-field choices"
    ax.set(ylabel=ylabel, title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_runs(
    runs: Sequence[tuple[str, Path]], probes: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Each name's choices (:func:`choices`) over its runs' written turns; a run holding rows of other probes is
    refused."""
    by_id = {p["id"]: p for p in probes}
    per_run: dict[str, list[dict[str, Any]]] = {}
    for name, run in runs:
        per_run.setdefault(name, []).extend(choices(written_pairs(run, by_id)))
    return per_run


def report(
    per_run: dict[str, list[dict[str, Any]]], probes: list[dict[str, Any]], res: dict[str, Any] | None = None
) -> str:
    """The markdown the command prints: the summary over names, their leans (``res``, :func:`leans`, when there are
    two names or more), then each name's two tables."""
    spans = [field_spans(p["reply"]) for p in probes]
    colours = list(dict.fromkeys(c for fields in spans for c in fields))
    head = "| run | turns | another colour's field | its clause neighbour | its time neighbour |"
    lines = [head, "| --- " * 5 + "|"] + [_summary(n, recs) for n, recs in per_run.items()]
    if len(per_run) >= 2:
        lines += ["", *_lean_rows(res if res is not None else leans(per_run))]
    lines += ["", "| run | choices of a field | the cue's | the earliest in time |", "| --- " * 4 + "|"]
    lines += [_field_row(n, recs) for n, recs in per_run.items()]
    n_ranks = max(map(len, spans), default=0)
    for name, recs in per_run.items():
        lines += ["", f"**{name}**: the cue's colour against the chosen field", ""]
        lines += _table(recs, "cue", "chosen", [*colours, *NOT_A_FIELD])
        lines += ["", f"**{name}**: the cue field's rank in time against the chosen field's", ""]
        lines += _table(recs, "cue rank", "chosen rank", [*range(1, n_ranks + 1), "not a field"])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.field_choice", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--run", type=labelled, action="append", required=True, metavar="NAME=DIR")
    p.add_argument(
        "--probes", type=Path, required=True, help="the field-clause teacher's SFT parquet on the set"
    )
    p.add_argument("--tasks", type=Path, required=True, help="the set's folder (its tasks.jsonl)")
    p.add_argument("--json", type=Path, help="write each name's leans and their t-interval here")
    p.add_argument("--figure", type=Path, help="draw each name's neighbour leans here (PNG)")
    p.add_argument("--title", default="wrong-field choices: the cue's neighbour, minus chance")
    p.add_argument("--cue-figure", type=Path, help="draw each name's cue lean here (PNG)")
    p.add_argument("--cue-title", default="field choices: the cue's share, minus chance")
    p.add_argument("--base", type=Path, help="an earlier --json of the same names: add the cue lean's change")
    args = p.parse_args(argv)
    probes = span_copy.load_probes(args.probes, args.tasks)
    per_run = read_runs(args.run, probes)
    res = leans(per_run)
    if args.base:
        res["cue change"] = cue_change(res, json.loads(args.base.read_text()))
    print(report(per_run, probes, res))
    if args.json:
        counts = {n: sum("clause neighbour" in r for r in recs) for n, recs in per_run.items()}
        write_atomic(args.json, json.dumps({"wrong-field choices": counts, **res}, indent=1))
    if args.figure:
        figure(res, args.figure, args.title)
    if args.cue_figure:
        figure(res, args.cue_figure, args.cue_title, kinds=("cue",))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
