"""The output folder of teacher synthesis: its files, its shards, and the merge of shard folders.

A synthesis folder is a :class:`~omniagent.eval.batch.ResumableBatch` (one process at a time; a task
is done once its ``task_stats.jsonl`` row is written, after its trajectories). Over thousands of videos
the run is split like an evaluation (:mod:`omniagent.eval.shards`): ``shard=I/N`` (or ``shard=auto``
under torchrun, accelerate or SLURM) runs one part into ``{out_dir}/shard-I-of-N`` with a ``shard.json``
manifest, and ``python rl/synthesize.py merge DIR... --out DIR`` joins the parts
(:func:`omniagent.eval.merge.merge_batches` refuses shards of different runs, overlapping ones and
running ones) and recomputes the summary.

Two rules keep a merge equal to the unsharded run:

- **Shard by dedupe group.** The run keeps one trajectory per (media, question, answer) over its whole
  output, so tasks that share a media file and a question (duplicates under different ids) must meet
  in one shard: a task's shard is drawn from its media and question (:func:`shard_key`), not its id.
  Within a shard the tasks keep the file's order, so the dedupe sees them as the unsharded run does.
- **Same settings.** The manifest's digest covers every setting that changes a trajectory or a verdict
  (:func:`settings_digest`); where the servers are (teacher and judge endpoints, time-outs, retries),
  the output folder, the shard, the number of workers and the tasks file's path are left out, so
  shards run on other machines, against other servers, still merge. The task list itself is compared
  by its ids.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from envs.tasks import Task
from omniagent.eval.batch import FolderLockedError, ResumableBatch
from omniagent.eval.merge import BatchLayout, MergeError, MergeReport, merge_batches
from omniagent.eval.results import DEPLOYMENT_KWARGS
from omniagent.eval.shards import Shard, read_manifest, write_manifest
from rl.synthesis.stats import summarize

__all__ = [
    "KEPT",
    "KIND",
    "LAYOUT",
    "REJECTED",
    "SUMMARY",
    "TASK_STATS",
    "merge_main",
    "merge_synthesis",
    "open_batch",
    "settings_digest",
    "shard_key",
    "shard_tasks",
]

KEPT, REJECTED, TASK_STATS, SUMMARY = "kept.jsonl", "rejected.jsonl", "task_stats.jsonl", "summary.json"
KIND = "synthesis"  # the manifest's ``extra.kind``: what ``omniagent-merge-runs`` tells apart

LAYOUT = BatchLayout(
    marker=TASK_STATS,
    logs=(KEPT, REJECTED),
    key=lambda row: str(row["task_id"]),
    log_key=lambda rec: str(rec.get("meta", {}).get("task_id")),
)

# judge settings that say where the judge is and how to reach it, not how it judges
JUDGE_DEPLOYMENT = ("base_url", "api_key", "timeout", "max_retries", "retry_wait", "preflight")
# run settings that change no trajectory and no verdict
RUN_ONLY = ("out_dir", "shard", "workers")


def open_batch(out: Path) -> ResumableBatch:
    """The synthesis folder ``out`` as a resumable batch (enter it to take the folder's lock)."""
    return ResumableBatch(out, marker=LAYOUT.marker, logs=LAYOUT.logs, key=LAYOUT.key, log_key=LAYOUT.log_key)


def shard_key(task: Task) -> str:
    """What decides a task's shard: its media and question (the dedupe's group; see the module doc)."""
    return f"{task.media}\n{task.question.strip()}"


def settings_digest(cfg: dict[str, Any]) -> str:
    """A digest of the settings that shards of one synthesis must share (see the module docstring)."""
    plain = copy.deepcopy(cfg)
    for key in RUN_ONLY:
        plain.pop(key, None)
    plain.get("data", {}).pop("tasks", None)
    teacher = plain.get("teacher", {})
    teacher.pop("max_consecutive_policy_errors", None)  # when to give up, not what is made
    kwargs = teacher.get("kwargs") or {}
    for key in [*DEPLOYMENT_KWARGS, "api_key"]:
        kwargs.pop(key, None)
    for key in JUDGE_DEPLOYMENT:
        (plain.get("judge") or {}).pop(key, None)
    text = json.dumps(plain, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_tasks(
    cfg: dict[str, Any], all_tasks: list[Task], out: Path
) -> tuple[list[Task], Path, Shard | None]:
    """This process's tasks and folder under ``shard`` (null: every task, ``out`` itself).

    A shard's folder gets its manifest before any task runs."""
    shard = Shard.parse(cfg.get("shard"))
    if shard is None:
        return all_tasks, out, None
    tasks = shard.select(all_tasks, key=shard_key)
    folder = out / shard.name
    folder.mkdir(parents=True, exist_ok=True)
    write_manifest(
        folder,
        shard,
        expected=len(tasks),
        all_keys=[t.id for t in all_tasks],
        settings=settings_digest(cfg),
        extra={"kind": KIND},
    )
    return tasks, folder, shard


def merge_synthesis(folders: Sequence[str | Path], out: str | Path) -> tuple[MergeReport, dict[str, Any]]:
    """Merge synthesis shard folders into ``out``: kept and rejected trajectories, task stats, the summary.

    The summary is recomputed from every task's stats row; it does not depend on row order, so a
    complete merge gives what one unsharded run gives."""
    for folder in folders:
        manifest = read_manifest(folder)
        if manifest is not None and (manifest.get("extra") or {}).get("kind") != KIND:
            raise MergeError(
                f"{folder} is not a shard of a teacher synthesis (an evaluation's? merge those with "
                "omniagent-merge-runs)"
            )
    report, rows = merge_batches(folders, out, LAYOUT)
    summary = summarize(rows)
    write_atomic(Path(out) / SUMMARY, json.dumps(summary, indent=2))
    return report, summary


def merge_main(argv: list[str] | None = None) -> int:
    """``python rl/synthesize.py merge DIR... --out DIR``: 0 complete, 2 refused, 3 merged but incomplete."""
    ap = argparse.ArgumentParser(
        prog="python rl/synthesize.py merge",
        description="Merge the shard folders of one teacher synthesis into one folder.",
    )
    ap.add_argument("shards", nargs="+", help="shard folders, e.g. OUT/shard-*-of-4")
    ap.add_argument("--out", required=True, help="the merged folder (kept.jsonl, rejected.jsonl, ...)")
    args = ap.parse_args(argv)
    try:
        report, summary = merge_synthesis(args.shards, args.out)
    except (MergeError, FolderLockedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in summary.items() if k != "by_type"}, indent=2))
    print(report.describe())
    return 0 if report.complete else 3
