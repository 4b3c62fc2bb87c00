"""Summarise one eval run, or compare two with a paired bootstrap over their shared task ids.

``python scripts/compare_runs.py RUN [RUN_B]`` (also installed as ``omniagent-compare-runs``; ``A1+A2``
pools runs, ``--average`` makes each task the mean of its runs (``,`` then pools such means over sets),
:func:`load_run`; ``--circular`` scores each
question of a ``circular=true`` run over all rotations of its choices, :func:`circular_rows`; ``--cluster media``
resamples videos, each with all its questions, instead of single questions). A run
is a folder holding results.jsonl (the summary is recomputed from it with the run's own duration
bins, bootstrap seed and resample count, read from its summary.json or run.json) or a summary.json
(then two runs can only be compared by whether their intervals overlap).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from envs.tasks import rotation_base
from omniagent.eval.results import load_rows
from omniagent.eval.summary import (
    DEFAULT_DURATION_BINS,
    compare,
    load_summary,
    paired_compare,
    print_compare,
    print_eval_summary,
    print_paired,
    scorable,
    summarize,
)


def run_settings(folder: Path) -> dict[str, Any]:
    """The run's own summary settings: ``duration_bins``, ``n_boot``, ``seed`` (defaults when unknown)."""
    out: dict[str, Any] = {"duration_bins": list(DEFAULT_DURATION_BINS), "n_boot": 1000, "seed": 0}
    meta = folder / "run.json"
    if meta.exists():
        bins = json.loads(meta.read_text()).get("config", {}).get("benchmark", {}).get("duration_bins")
        if bins is not None:
            out["duration_bins"] = bins
    old = folder / "summary.json"
    if old.exists():
        summary = json.loads(old.read_text())
        out.update({k: v for k, v in summary.get("bootstrap", {}).items() if k in ("n_boot", "seed")})
        if summary.get("duration_bins") is not None:
            out["duration_bins"] = summary["duration_bins"]
    return out


# the numbers of a row that --average replaces by their mean over the runs
AVERAGED = ("reward", "answered", "frames_used", "turns", "audio_seconds_used")


def average_by_task(parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per task id scored by every part: its first part's row with :data:`AVERAGED` fields replaced
    by their mean over the parts. Why: several training seeds of one method, each evaluated on the same
    tasks, are one measurement per task; pooling them as separate rows would treat seeds as more tasks and
    narrow the CI a paired bootstrap over tasks gives."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for rows in parts:
        for row in rows:
            by_id.setdefault(str(row["id"]), []).append(row)
    out = []
    for rows in by_id.values():
        if len(rows) != len(parts) or any(r.get("reward") is None or not scorable(r) for r in rows):
            continue  # a task not scored by every part has no mean over them
        mean = {k: sum(float(r.get(k) or 0) for r in rows) / len(rows) for k in AVERAGED}
        out.append(dict(rows[0], **mean, reward_available=True))  # every part scored it
    return out


def circular_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per question of a ``circular=true`` run: a multiple-choice question scores 1 only when every
    rotation of its choices was answered right (MMBench's CircularEval), so a policy that always names one
    letter scores 0 however often that letter is right in the set's own order; :data:`AVERAGED` counts other
    than the score are the mean over rotations. A question with an unscored or failed rotation is left out."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_id.setdefault(rotation_base(str(row["id"])), []).append(row)
    out = []
    for base, group in by_id.items():
        if any(r.get("reward") is None or not scorable(r) for r in group):
            continue
        mean = {k: sum(float(r.get(k) or 0) for r in group) / len(group) for k in AVERAGED if k != "reward"}
        first = next((r for r in group if str(r["id"]) == base), group[0])
        out.append(dict(first, **mean, id=base, reward=float(min(float(r["reward"]) for r in group))))
    return out


def load_run(
    path: str,
    n_boot: int | None = None,
    seed: int | None = None,
    average: bool = False,
    circular: bool = False,
) -> tuple[dict, list[dict] | None]:
    """(summary, rows) of a run folder or results.jsonl; rows is None for a bare summary.json.

    ``A1+A2`` pools several runs (say one agent on two held-out seeds): each row's task id is prefixed
    with its run's place (``0:``, ``1:``), so ``A1+A2`` pairs with ``B1+B2`` part by part. With
    ``average`` the parts are runs on the same tasks (say three training seeds) and each task gets the
    mean of its parts' rows (:func:`average_by_task`), so ``A1+A2+A3`` pairs with a single run ``B``.
    ``,`` pools at the outer level: ``A1+A2,C1+C2`` with ``average`` is the seed mean on one set pooled with the
    seed mean on another (paired with ``B,D``), since ``+`` cannot mean both at once."""
    for sep in (",", "+"):  # a comma splits sets (each may average its seeds); a plus splits runs
        if sep in str(path) and not Path(path).exists():
            inner = average if sep == "," else False
            parts = [load_run(part, n_boot, seed, inner, circular) for part in str(path).split(sep)]
            if any(rows is None for _, rows in parts):
                raise SystemExit(f"{path}: pooled runs need their results.jsonl")
            if sep == "+" and average:
                pooled = average_by_task([rows or [] for _, rows in parts])
            else:
                pooled = [
                    dict(row, id=f"{i}:{row['id']}")
                    for i, (_, rows) in enumerate(parts)
                    for row in rows or []
                ]
            head = parts[0][0]  # the first run's settings, overrides already applied
            settings = {"duration_bins": head["duration_bins"], "n_boot": head["bootstrap"]["n_boot"],
                        "seed": head["bootstrap"]["seed"]}  # fmt: skip
            return summarize(pooled, name=sep.join(str(s.get("name")) for s, _ in parts), **settings), pooled
    p = Path(path)
    rows_path = p / "results.jsonl" if p.is_dir() else p
    if rows_path.suffix != ".jsonl" or not rows_path.exists():
        return load_summary(p), None
    folder = rows_path.parent
    settings = run_settings(folder)
    settings.update({k: v for k, v in (("n_boot", n_boot), ("seed", seed)) if v is not None})
    rows = load_rows(rows_path)
    if circular:
        rows = circular_rows(rows)
    name = folder.name
    return summarize(rows, name=name, **settings), rows


def compare_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "runs",
        nargs="+",
        help="one or two run folders (or results.jsonl / summary.json); A1+A2 pools runs (averages them "
        "with --average); A1+A2,C1+C2 pools the two sets' means",
    )
    ap.add_argument("--n-boot", type=int, default=None, help="bootstrap resamples (default: the run's own)")
    ap.add_argument("--seed", type=int, default=None, help="bootstrap seed (default: the run's own)")
    ap.add_argument(
        "--average",
        action="store_true",
        help="A1+A2 are runs on the same tasks (training seeds): each task scores the mean of its runs",
    )
    ap.add_argument(
        "--circular",
        action="store_true",
        help="runs made with circular=true: a question scores only when every rotation of its choices is right",
    )
    ap.add_argument(
        "--cluster",
        default=None,
        metavar="FIELD",
        help="resample whole clusters of tasks that share this row field (media: one video's questions "
        "together), not single tasks; they are not independent, so the interval is more honest",
    )
    args = ap.parse_args(argv)
    if len(args.runs) > 2:
        ap.error("give one run to summarise or two to compare")
    loaded = [load_run(r, args.n_boot, args.seed, args.average, args.circular) for r in args.runs]
    for summary, _ in loaded:
        print_eval_summary(summary)
    if len(loaded) == 2:
        (sa, ra), (sb, rb) = loaded
        if ra is not None and rb is not None:
            n_boot = args.n_boot or sa["bootstrap"]["n_boot"]
            seed = sa["bootstrap"]["seed"] if args.seed is None else args.seed
            names = (sa.get("name") or "A", sb.get("name") or "B")
            print_paired(paired_compare(ra, rb, n_boot=n_boot, seed=seed, names=names, cluster=args.cluster))
        else:
            print_compare(compare(sa, sb))
    return 0
