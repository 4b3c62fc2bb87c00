"""LongVideoBench: ``lvb_val.json`` as released, and lmms-eval's flat layout.

Fields of a release record: ``id`` ("86CxyhFV9MI_0"), ``video_id``, ``video_path`` (file name under
``videos/``), ``subtitle_path``, ``question``, ``question_wo_referring_query``, ``candidates`` ([text,
...], up to five), ``correct_choice`` (0-based index; absent in ``lvb_test_wo_gt.json``), ``duration``
(seconds), ``duration_group`` (15, 60, 600 or 3600: the upper end of its length group), ``question_category``
(e.g. "S2E"), ``topic_category``, ``level``, ``position``, ``starting_timestamp_for_subtitles``,
``view_count``. lmms-eval's export has the same fields with the candidates as ``option0`` ...
``option4`` ("N/A" for an unused slot).

Only the video (with its own sound) is given to the agent, not the subtitle file: this is the
benchmark's video-only setting (lmms-eval's ``longvideobench_val_v``). Records without a
``correct_choice`` (the test split) are skipped and counted.
"""

from __future__ import annotations

from typing import Any

from envs.tasks import LETTERS, Task
from omniagent.datasets.core import Row, RowError, SkipRow
from omniagent.datasets.fields import (
    build_task,
    first_existing_media,
    format_template,
    get_field,
    media_candidates,
    parse_options,
)
from omniagent.datasets.registry import register_dataset

__all__ = ["DURATION_GROUPS", "longvideobench"]

# duration_group -> the label of its length range (the groups of the LongVideoBench paper)
DURATION_GROUPS = {15: "8s-15s", 60: "15s-1m", 600: "3m-10m", 3600: "15m-1h"}
NO_GROUND_TRUTH = "no correct_choice (the test split has no ground truth)"


def _options(row: Row) -> list[str]:
    if row.data.get("candidates") is not None:
        return parse_options(row, row.data["candidates"])
    slots = [row.data.get(f"option{i}") for i in range(len(LETTERS))]
    options = [str(o) for o in slots if o is not None and str(o).strip() not in ("", "N/A")]
    if len(options) < 2:
        raise RowError(row.where, "no 'candidates' and fewer than two 'optionN' fields")
    return options


def _answer(row: Row, n: int) -> str:
    value = row.data.get("correct_choice")
    if value is None or value == "" or value == "@":
        raise SkipRow(NO_GROUND_TRUTH)
    try:
        index = int(value)
    except (TypeError, ValueError):
        raise RowError(row.where, f"correct_choice must be an option index, got {value!r}") from None
    if not 0 <= index < n or isinstance(value, bool):
        raise RowError(row.where, f"correct_choice {value!r} is out of range for {n} options")
    return LETTERS[index]


def _group_label(value: Any) -> str | None:
    try:
        group = int(float(value))
    except (TypeError, ValueError):
        return None
    return DURATION_GROUPS.get(group, f"{group}s")


@register_dataset("longvideobench")
def longvideobench(
    row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any
) -> Task:
    """One LongVideoBench question as an mcq task (fields in the module docstring).

    Media (first that exists): ``videos/{video_path}``, ``{video_path}`` under the media root. ``Task.extra``:
    ``category`` (question_category), ``duration_label`` (the length group, e.g. "3m-10m"),
    ``topic_category``, ``level``, ``video_id``.
    """
    path = str(get_field(row, "video_path"))
    choices = _options(row)
    answer = _answer(row, len(choices))
    cands = [format_template(t, row) for t in media_candidates(media_template, [])] or [
        f"videos/{path}",
        path,
    ]
    duration = row.data.get("duration")
    try:
        seconds = float(duration) if duration not in (None, "") else None
    except (TypeError, ValueError):
        raise RowError(row.where, f"duration must be a number of seconds, got {duration!r}") from None
    return build_task(
        row,
        id=f"longvideobench-{get_field(row, 'id')}",
        media=first_existing_media(media_root, cands),
        question=str(get_field(row, "question")).strip(),
        task_type="mcq",
        choices=choices,
        answer=answer,
        duration=seconds if seconds and seconds > 0 else None,
        source="longvideobench",
        extra={
            "category": get_field(row, "question_category", required=False),
            "duration_label": _group_label(row.data.get("duration_group")),
            "topic_category": get_field(row, "topic_category", required=False),
            "level": get_field(row, "level", required=False),
            "video_id": get_field(row, "video_id", required=False),
        },
    )
