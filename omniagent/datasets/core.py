"""What loading produces: annotation records (:class:`Row`), their errors, :class:`LoadedDataset` and
the missing-media check."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.tasks import Task


class DatasetError(ValueError):
    """Malformed annotations or duplicate task ids; the message names file and row of each problem."""


@dataclass
class MissingMedia:
    task_id: str
    media: str
    reason: str

    def __str__(self) -> str:
        return f"{self.task_id}: {self.media}: {self.reason}"


@dataclass
class LoadedDataset:
    name: str
    tasks: list[Task]
    missing: list[MissingMedia] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # exact duplicates dropped, same-text options
    skipped: Counter[str] = field(default_factory=Counter)  # records left out on purpose, by reason
    media_root: str | None = None  # the folder every task's media was held to; None: not confined
    follow_links_outside_media_root: bool = False  # links inside media_root may lead outside it

    def confinement(self) -> dict[str, Any]:
        """The environment limits that hold every open to this dataset's ``media_root`` (empty when
        the dataset is not confined): the env re-checks each file when it opens it."""
        if self.media_root is None:
            return {}
        return {
            "media_root": self.media_root,
            "follow_links_outside_media_root": self.follow_links_outside_media_root,
        }

    def summary(self) -> str:
        text = f"{self.name}: {len(self.tasks)} task(s) from {', '.join(self.files) or '-'}"
        if self.missing:
            text += f"; {len(self.missing)} skipped for missing media (first: {self.missing[0]})"
        for reason, n in sorted(self.skipped.items()):
            text += f"\n  skipped {n} record(s): {reason}"
        evidence = evidence_note(self.tasks)
        if evidence:
            text += f"\n  {evidence}"
        for line in self.warnings[:10]:
            text += f"\n  warning: {line}"
        if len(self.warnings) > 10:
            text += f"\n  ... and {len(self.warnings) - 10} more warning(s)"
        return text


@dataclass
class Row:
    """One annotation record and where it came from (for error messages)."""

    data: dict[str, Any]
    where: str  # "file:row"


class SkipRow(Exception):  # noqa: N818 (a signal, not an error: the record is counted, not reported)
    """Raised by an adapter for a well-formed record it leaves out on purpose (an open-ended question in
    a multiple-choice preset, a test-split record without ground truth); counted by ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def evidence_note(tasks: Iterable[Task]) -> str | None:
    """One line on evidence times parsed from free text (``Task.extra["evidence_steps"]``, set by adapters
    that read them from reasoning steps), or None when no task carries such counts."""
    counts: Counter[str] = Counter()
    tasks_with = n = 0
    for t in tasks:
        steps = t.extra.get("evidence_steps")
        if not steps:
            continue
        n += 1
        counts.update(steps)
        tasks_with += bool(t.evidence)
    if not n:
        return None
    return (
        f"evidence: {counts['timed']} of {counts['steps']} reasoning steps name a time; {counts['parsed']} "
        f"parsed into intervals ({counts['out_of_range']} beyond the video); {tasks_with} of {n} task(s) "
        "have evidence intervals"
    )


class RowError(ValueError):
    """One malformed record; ``where`` is ``file:row``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


def check_media(tasks: Iterable[Task]) -> tuple[list[Task], list[MissingMedia]]:
    """Split tasks into those whose media file exists and is non-empty, and the rest (with reasons)."""
    ok: list[Task] = []
    missing: list[MissingMedia] = []
    cache: dict[str, str | None] = {}
    for t in tasks:
        if t.media not in cache:
            p = Path(t.media)
            if not p.exists():
                cache[t.media] = "file not found"
            elif not p.is_file():
                cache[t.media] = "not a regular file"
            elif p.stat().st_size == 0:
                cache[t.media] = "file is empty (0 bytes)"
            else:
                cache[t.media] = None
        reason = cache[t.media]
        if reason is None:
            ok.append(t)
        else:
            missing.append(MissingMedia(t.id, t.media, reason))
    return ok, missing
