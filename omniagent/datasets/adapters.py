"""Adapters for omniagent's own task format (``tasks``) and for any one-question-per-record file
(``generic``, fields mapped by config)."""

from __future__ import annotations

import json
from typing import Any

from envs.tasks import TASK_TYPES, Task
from omniagent.datasets.core import Row, RowError
from omniagent.datasets.fields import (
    answer_letter,
    build_task,
    first_existing_media,
    format_template,
    get_field,
    join_media_path,
    media_candidates,
    parse_options,
)
from omniagent.datasets.registry import register_dataset


@register_dataset("tasks")
def native_tasks(row: Row, media_root: Any, **_: Any) -> Task:
    """omniagent's own task format (see :class:`envs.tasks.Task`): one task object per record.

    Fields: ``id``, ``media``, ``question``, ``task_type``, ``choices``, ``answer``, ``evidence``,
    ``source``, ``split``, ``duration``, ``extra``. A relative ``media`` is resolved against
    ``media_root`` (default: the annotation file's folder).
    """
    data = dict(row.data)
    if "media" in data and isinstance(data["media"], str):
        data["media"] = join_media_path(media_root, data["media"])
    return build_task(row, **data)


@register_dataset("generic")
def generic(
    row: Row,
    media_root: Any,
    fields: dict[str, str] | None = None,
    task_type: str | None = None,
    media_template: str | list[str] | None = None,
    id_prefix: str = "",
    source: str = "generic",
    split: str = "test",
    extra_fields: list[str] | None = None,
    **_: Any,
) -> Task:
    """Any JSONL / JSON / parquet / CSV with one question per record, fields mapped by config.

    ``fields`` maps omniagent names to the file's names, e.g. ``{"id": "qid", "media": "video_path",
    "question": "q", "choices": "options", "answer": "gt", "task_type": "kind", "evidence":
    "spans", "duration": "seconds", "category": "question_type"}``; unmapped names are looked up
    as themselves. ``task_type`` fixes the type for every record (else the mapped field is read).
    ``media_template`` (``"videos/{video_id}.mp4"``, or a list tried in order) builds the media path
    from the record when there is no media field. mcq answers may be a letter, ``"(B)"``,
    ``"B. text"``, a 0-based index or the option text; options may carry ``"A. "`` prefixes.
    ``extra_fields`` are copied into ``Task.extra``.
    """
    f = {k: k for k in ("id", "media", "question", "task_type", "choices", "answer", "evidence", "duration")}
    f.update(fields or {})
    kind = task_type or get_field(row, f["task_type"])
    if kind not in TASK_TYPES:
        raise RowError(row.where, f"task type {kind!r} is not one of {', '.join(TASK_TYPES)}")
    if media_template is not None and f["media"] not in row.data:
        media = first_existing_media(
            media_root, [format_template(t, row) for t in media_candidates(media_template, [])]
        )
    else:
        media = join_media_path(media_root, str(get_field(row, f["media"])))
    question = str(get_field(row, f["question"]))
    answer = get_field(row, f["answer"], required=False)
    choices = None
    if kind == "mcq":
        choices = parse_options(row, get_field(row, f["choices"]))
        if answer is not None:
            answer = answer_letter(row, answer, choices)
    elif kind == "tr" and isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except json.JSONDecodeError:
            raise RowError(row.where, f"tr answer must be JSON intervals, got {answer[:40]!r}") from None
    evidence = get_field(row, f["evidence"], required=False)
    if isinstance(evidence, str):
        try:
            evidence = json.loads(evidence)
        except json.JSONDecodeError:
            raise RowError(row.where, f"evidence must be JSON intervals, got {evidence[:40]!r}") from None
    extra = {k: row.data[k] for k in (extra_fields or []) if k in row.data}
    if "category" in f and f["category"] in row.data:
        extra["category"] = row.data[f["category"]]
    duration = get_field(row, f["duration"], required=False)
    return build_task(
        row,
        id=f"{id_prefix}{get_field(row, f['id'])}",
        media=media,
        question=question,
        task_type=kind,
        choices=choices,
        answer=answer,
        evidence=evidence,
        source=source,
        split=split,
        duration=float(duration) if duration is not None else None,
        extra=extra,
    )
