"""Paired contrasts of span holds over warm-up seeds, from probe files (``python -m recipes.testbed.seed_contrast``).

A study's analysis (``field_clauses analyse``) tests the pair its plan names. This command gives the other pairs a page
reads beside it, from the same files, so that every figure on the page comes from a command:

- two lengths of one arm (``--a RUNS/wide3600 --b RUNS/wide1200``), or one arm on two probe sets (fresh against
  training-video probes: ``--a RUNS/wide3600 --b RUNS/seen_wide3600``);
- with ``--unseen-only``, the contrast on the probes whose Observation no run of either arm has in its training rows
  (each probe row's ``seen``, written by ``span_copy measure --train``); both arms must then hold the same probes.

Each run is the folder ``PREFIX_s<SEED>`` holding ``field_probe.json`` (``span_copy measure``); its span holds is the
mean of its rows' ``span``. The difference per seed, its mean and its t-interval over seeds (``analysis.t_interval``)
are printed as one Markdown table row, and written as JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from recipes.testbed.analysis import t_interval


def probe_rows(prefix: Path, seed: int) -> list[dict[str, Any]]:
    """The probe rows of the run ``PREFIX_s<SEED>``; a FileNotFoundError naming the run when it was not measured."""
    path = prefix.with_name(f"{prefix.name}_s{seed}") / "field_probe.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no probe file (run span_copy measure on that run first)")
    return json.loads(path.read_text())["rows"]


def span_holds(rows: list[dict[str, Any]], skip: set[str]) -> float:
    """The share of rows, those in ``skip`` left out, whose written span holds the evidence."""
    kept = [float(r["span"]) for r in rows if r["id"] not in skip]
    if not kept:
        raise ValueError("no probe is left to score")
    return sum(kept) / len(kept)


def contrast(a: Path, b: Path, seeds: Sequence[int], unseen_only: bool = False) -> dict[str, Any]:
    """Span holds of ``a`` − ``b`` per seed, with the t-interval over seeds; with ``unseen_only``, on the probes that
    no run of either arm has seen (both arms must hold the same probes)."""
    rows = {(arm, s): probe_rows(arm, s) for arm in (a, b) for s in seeds}
    skip: set[str] = set()
    if unseen_only:
        ids = {frozenset(r["id"] for r in got) for got in rows.values()}
        if len(ids) != 1:
            raise ValueError(f"{a} and {b} do not hold the same probes: --unseen-only compares one probe set")
        skip = {r["id"] for got in rows.values() for r in got if r.get("seen")}
    per_seed = [span_holds(rows[a, s], skip) - span_holds(rows[b, s], skip) for s in seeds]
    probes = sum(r["id"] not in skip for r in rows[a, seeds[0]])
    return {"a": str(a), "b": str(b), "seeds": list(seeds), "unseen_only": unseen_only, "probes": probes,
            "per_seed": per_seed, "t": t_interval(per_seed)}  # fmt: skip


def table_row(res: dict[str, Any]) -> str:
    """The contrast as a Markdown row: the pair, the differences per seed, the mean [t 95%]."""
    name = f"{Path(res['a']).name} − {Path(res['b']).name}: span holds"
    if res["unseen_only"]:
        name += f" ({res['probes']} probes no run has seen)"
    t = res["t"]
    seeds = ", ".join(f"{d:+.3f}" for d in res["per_seed"])
    return f"| {name} | {seeds} | {t['mean']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}] |"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m recipes.testbed.seed_contrast", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--a", type=Path, required=True, help="the first arm's runs, PREFIX of PREFIX_s<SEED>")
    ap.add_argument("--b", type=Path, required=True, help="the second arm's runs, subtracted")
    ap.add_argument("--seeds", type=int, nargs="+", required=True, help="the warm-up seeds (at least two)")
    ap.add_argument("--unseen-only", action="store_true", help="only the probes no run's training rows hold")
    ap.add_argument("--out", type=Path, help="also write the contrast as JSON")
    args = ap.parse_args(argv)
    if len(args.seeds) < 2:
        ap.error("--seeds: a t-interval over seeds needs at least two")
    try:
        res = contrast(args.a, args.b, args.seeds, args.unseen_only)
    except (FileNotFoundError, ValueError) as err:
        ap.error(str(err))
    if args.out:
        write_atomic(args.out, json.dumps(res, indent=2) + "\n")
    print(table_row(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
