"""``omniagent-merge-runs DIR... --out DIR``: join the shard folders of one evaluation into one run.

The rows and trajectories are merged by :func:`omniagent.eval.merge.merge_batches` (which refuses
shards of different runs or overlapping ids); the merged folder then gets the shards' ``run.json``
(so a later unsharded run with the same settings resumes into it) and a summary recomputed from every
row with the shards' own summary settings. The summary does not depend on row order, so a complete
merge gives what one unsharded run gives: the same rows, score and intervals.

Exit codes: 0 merged and complete; 2 refused (not shards, shards of different runs, overlap, a shard
still running); 3 merged but incomplete (a shard missing, or tasks not run or to be retried: rerun
those shards, they resume, and merge again).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from omniagent.eval.batch import FolderLockedError
from omniagent.eval.merge import BatchLayout, MergeError, MergeReport, merge_batches
from omniagent.eval.results import RESULTS, RUN_META, TRAJECTORIES
from omniagent.eval.shards import read_manifest

__all__ = ["RUN_LAYOUT", "merge_main", "merge_runs"]

# an ``error`` row (an unexpected exception) is retried by the next run of its shard: not done
RUN_LAYOUT = BatchLayout(
    marker=RESULTS, logs=(TRAJECTORIES,), key=lambda r: str(r["id"]), done=lambda r: r["status"] != "error"
)


def merge_runs(folders: Sequence[str | Path], out: str | Path) -> tuple[MergeReport, dict[str, Any]]:
    """Merge evaluation shard folders into ``out``; returns the merge report and the merged summary."""
    from omniagent.eval.summary import summarize, write_summary

    kind = ((read_manifest(folders[0]) or {}).get("extra") or {}).get("kind") if folders else None
    if kind is not None:  # another batch job's shards (teacher synthesis: "synthesis")
        raise MergeError(
            f"{folders[0]} is a shard of a {kind} run, not an evaluation: merge it with its own command "
            "(synthesis: python rl/synthesize.py merge DIR... --out DIR)"
        )
    report, rows = merge_batches(folders, out, RUN_LAYOUT)
    out = Path(out)
    meta_path = Path(folders[0]) / RUN_META
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        meta.update(updated_at=time.time(), merged_from=[str(f) for f in folders])
        write_atomic(out / RUN_META, json.dumps(meta, indent=1, default=str))
    options = dict((read_manifest(folders[0]) or {}).get("extra", {}).get("summary") or {})
    summary = summarize(rows, **options)
    summary["run"] = {
        "out_dir": str(out),
        "merged_from": [str(f) for f in folders],
        "complete": report.complete,
        "total": sum(s.expected for s in report.shards),
        "failed": sum(r.get("status") == "failed" for r in rows),
        "errors": sum(r.get("status") == "error" for r in rows),
        "results": str(out / RESULTS),
        "trajectories": str(out / TRAJECTORIES),
    }
    write_summary(summary, out)
    return report, summary


def merge_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="omniagent-merge-runs", description="Merge the shard folders of one evaluation into one run."
    )
    ap.add_argument("shards", nargs="+", help="shard folders (shard-I-of-N), e.g. runs/eval/NAME/shard-*")
    ap.add_argument("--out", required=True, help="the merged run folder (e.g. runs/eval/NAME)")
    ap.add_argument("--quiet", action="store_true", help="print only the merge report and one summary line")
    args = ap.parse_args(argv)
    from omniagent.eval.headline import headline
    from omniagent.eval.summary import make_console, print_eval_summary

    console = make_console()
    try:
        report, summary = merge_runs(args.shards, args.out)
    except (MergeError, FolderLockedError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        return 2
    if not args.quiet:
        print_eval_summary(summary, console)
    console.print(report.describe(), highlight=False)
    console.print(headline(summary), highlight=False, soft_wrap=True)
    return 0 if report.complete else 3


if __name__ == "__main__":
    sys.exit(merge_main())
