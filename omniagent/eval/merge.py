"""Merge the folders of a sharded batch into one folder (evaluation runs and teacher synthesis alike).

A batch folder (:class:`omniagent.eval.batch.ResumableBatch`) has one *marker* file (a row per
finished task) and *log* files (detail records keyed by task). A :class:`BatchLayout` names them.
:func:`merge_batches` checks the shards' manifests (:mod:`omniagent.eval.shards`) and refuses:

- a folder that is not a shard (no ``shard.json``), or one still being written (its lock is held);
- shards of different runs: another shard count, another task list, other settings, or other
  caller facts (``extra``);
- the same shard twice, or a task id found in two shards (overlap).

It then writes every committed row, sorted by task id, and the log records of those tasks (records of
a task whose row is missing, a kill between the two writes, are left out), and reports each shard's
progress: tasks given, finished, to retry, missing, and the shards not given at all. An incomplete
merge is written and reported, so a partial result can be looked at; rerun the missing shards and
merge again. Shard folders are only read (their lock is held meanwhile, so a shard still running is
refused). ``out`` may hold an earlier merge (it is replaced) but not another run's rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.jsonl import read_jsonl, write_atomic, write_jsonl
from omniagent.eval.batch import RunLock
from omniagent.eval.shards import read_manifest

__all__ = ["MERGED", "BatchLayout", "MergeError", "MergeReport", "ShardStatus", "merge_batches"]

MERGED = "merged.json"
Row = dict[str, Any]


class MergeError(ValueError):
    """Folders that cannot be merged into one run (named in the message)."""


@dataclass(frozen=True)
class BatchLayout:
    """The files of a batch folder and how to read them.

    ``key(row)``: a marker row's task id; ``log_key(record)``: a log record's task id (default
    ``key``); ``done(row)``: whether a row finishes its task (an ``error`` row of an evaluation is
    retried by the next run, so it is not done).
    """

    marker: str
    logs: tuple[str, ...] = ()
    key: Callable[[Mapping[str, Any]], str] = lambda row: str(row["id"])
    log_key: Callable[[Mapping[str, Any]], str] | None = None
    done: Callable[[Mapping[str, Any]], bool] = lambda row: True


@dataclass
class ShardStatus:
    folder: str
    index: int
    expected: int
    done: int
    retry: int

    @property
    def missing(self) -> int:
        return max(self.expected - self.done - self.retry, 0)

    @property
    def complete(self) -> bool:
        return self.done >= self.expected and not self.retry


@dataclass
class MergeReport:
    out: str
    count: int
    rows: int
    shards: list[ShardStatus] = field(default_factory=list)
    absent: list[int] = field(default_factory=list)  # shard indices no folder was given for

    @property
    def complete(self) -> bool:
        return not self.absent and all(s.complete for s in self.shards)

    def describe(self) -> str:
        lines = [f"merged {len(self.shards)} of {self.count} shard(s), {self.rows} row(s) -> {self.out}"]
        for s in self.shards:
            state = "complete" if s.complete else f"INCOMPLETE: {s.missing} not run, {s.retry} to retry"
            lines.append(
                f"  shard {s.index}/{self.count} ({s.folder}): {s.done} of {s.expected} done; {state}"
            )
        if self.absent:
            lines.append(
                f"  MISSING shard(s) {', '.join(str(i) for i in self.absent)} of {self.count}: run them"
            )
        if not self.complete:
            lines.append(
                "  the merged run is partial: rerun the incomplete shards (they resume), then merge again"
            )
        return "\n".join(lines)


def _manifests(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Each folder's manifest, checked to belong to one run (see the module docstring)."""
    found = []
    for folder in folders:
        m = read_manifest(folder)
        if m is None:
            raise MergeError(f"{folder} is not a shard (no shard.json): run it with shard=I/N or shard=auto")
        found.append(m)
    first, where = found[0], folders[0]
    for folder, m in zip(folders[1:], found[1:], strict=True):
        for field_name, what in (("count", "shard count"), ("keys_digest", "task list"),
                                 ("settings", "settings"), ("extra", "summary settings")):  # fmt: skip
            if m[field_name] != first[field_name]:
                raise MergeError(
                    f"{folder} and {where} are shards of different runs (another {what}: "
                    f"{m[field_name]!r} vs {first[field_name]!r}); merge only shards of one run"
                )
    seen: dict[int, Path] = {}
    for folder, m in zip(folders, found, strict=True):
        if m["index"] in seen:
            raise MergeError(f"{folder} and {seen[m['index']]} are both shard {m['index']}/{m['count']}")
        seen[m["index"]] = folder
    return found


def _rows(folder: Path, layout: BatchLayout) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for row in read_jsonl(folder / layout.marker, torn_tail=True, missing_ok=True):
        rows[layout.key(row)] = row  # the last row of a task wins, as on resume
    return rows


def _check_overlap(by_shard: list[tuple[Path, dict[str, Row]]]) -> None:
    owner: dict[str, Path] = {}
    for folder, rows in by_shard:
        for key in rows:
            if key in owner:
                raise MergeError(
                    f"task {key!r} is in {owner[key]} and in {folder}: the shards overlap (were they made "
                    "with different shard counts, or one folder reused?); merge only disjoint shards"
                )
            owner[key] = folder


def merge_batches(
    folders: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], layout: BatchLayout
) -> tuple[MergeReport, list[Row]]:
    """Merge shard ``folders`` into ``out`` (see the module docstring); returns the report and the rows."""
    paths = [Path(f) for f in folders]
    if not paths:
        raise MergeError("give at least one shard folder")
    out_path = Path(out)
    if any(p.resolve() == out_path.resolve() for p in paths):
        raise MergeError(f"{out_path} is one of the shards: merge into another folder")
    if (out_path / layout.marker).exists() and not (out_path / MERGED).exists():
        raise MergeError(f"{out_path} holds a run of its own ({layout.marker}): merge into another folder")
    manifests = _manifests(paths)
    log_key = layout.log_key or layout.key
    with ExitStack() as locks:
        for p in paths:  # a shard still running holds its lock: refused (FolderLockedError names the PID)
            locks.enter_context(RunLock(p))
        locks.enter_context(RunLock(out_path))
        by_shard = [(p, _rows(p, layout)) for p in paths]
        _check_overlap(by_shard)
        rows = sorted((r for _, rs in by_shard for r in rs.values()), key=layout.key)
        logs: dict[str, list[Row]] = {name: [] for name in layout.logs}
        for p, rs in by_shard:
            for name in layout.logs:
                records = read_jsonl(p / name, torn_tail=True, missing_ok=True)
                logs[name].extend(r for r in records if log_key(r) in rs)
        for name, records in logs.items():
            records.sort(key=log_key)  # stable: a task's records keep their order
            write_jsonl(out_path / name, records)
        write_jsonl(out_path / layout.marker, rows)
    report = MergeReport(out=str(out_path), count=manifests[0]["count"], rows=len(rows))
    for (p, rs), m in sorted(zip(by_shard, manifests, strict=True), key=lambda pm: pm[1]["index"]):
        done = sum(1 for r in rs.values() if layout.done(r))
        report.shards.append(ShardStatus(str(p), m["index"], m["expected"], done, len(rs) - done))
    report.absent = sorted(set(range(report.count)) - {m["index"] for m in manifests})
    merged = {
        "from": [str(p) for p in paths],
        "count": report.count,
        "complete": report.complete,
        "settings": manifests[0]["settings"],
        "keys_digest": manifests[0]["keys_digest"],
        "extra": manifests[0]["extra"],
        "shards": [vars(s) | {"missing": s.missing} for s in report.shards],
        "absent": report.absent,
    }
    write_atomic(out_path / MERGED, json.dumps(merged, indent=1, default=str))
    return report, rows
