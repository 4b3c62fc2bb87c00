"""Summarise one eval run, or compare two: do their 95% intervals overlap?

    python scripts/compare_runs.py runs/eval/synthetic-openai-active
    python scripts/compare_runs.py runs/eval/synthetic-openai-active runs/eval/synthetic-openai-passive

A run is a folder holding results.jsonl (the summary is recomputed from it, with the same seeded
bootstrap) or a summary.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from omniagent.evaluate import load_rows  # noqa: E402
from omniagent.summary import compare, load_summary, print_compare, print_summary, summarize  # noqa: E402


def _summary(path: str, n_boot: int, seed: int) -> dict:
    p = Path(path)
    if p.is_dir() and (p / "results.jsonl").exists():
        return summarize(load_rows(p / "results.jsonl"), n_boot=n_boot, seed=seed, name=p.name)
    if p.suffix == ".jsonl":
        return summarize(load_rows(p), n_boot=n_boot, seed=seed, name=p.parent.name)
    return load_summary(p)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="one or two run folders (or results.jsonl / summary.json)")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if len(args.runs) > 2:
        ap.error("give one run to summarise or two to compare")
    summaries = [_summary(r, args.n_boot, args.seed) for r in args.runs]
    for s in summaries:
        print_summary(s)
    if len(summaries) == 2:
        print_compare(compare(*summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
