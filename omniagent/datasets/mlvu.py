"""MLVU (multi-task long video understanding): its published multiple-choice JSON files.

The release (``MLVU/json/``) holds one file per task. Files ``1_plotQA.json`` to ``7_topic_reasoning.json``
are multiple choice: a list of ``{video, duration (seconds), question, candidates ([text, ...]), answer
(the text of one candidate), question_type}``; their videos sit in ``MLVU/video/<file stem>/``.
``8_sub_scene.json`` and ``9_summary.json`` are open-ended (no ``candidates``; scored by a model judge
with ``scoring_points``): they are skipped and counted. lmms-eval's flat export (``video_name``,
``question`` with its options as ``(A) ...`` lines, ``answer`` a letter, ``task_type``) is read too.

The GitHub release has a few defective records (an empty question or answer, an answer that is none
of the candidates): they are skipped and counted by reason (:class:`~omniagent.datasets.core.SkipRow`),
so the rest of the file still loads. The same question asked twice about one video with other
candidates is two tasks (the id hashes the question with its candidates).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envs.tasks import Task
from omniagent.datasets.core import Row, RowError, SkipRow
from omniagent.datasets.fields import (
    answer_letter,
    build_task,
    embedded_options,
    first_existing_media,
    format_template,
    get_field,
    media_candidates,
    parse_options,
    question_hash,
)
from omniagent.datasets.registry import register_dataset

__all__ = ["mlvu"]

OPEN_ENDED = "open-ended question (no candidates; MLVU scores it with a model judge)"
EMPTY = "empty question, answer or candidate in the published file"
NOT_A_CANDIDATE = "answer is not one of its candidates in the published file"


def _task_dir(row: Row) -> str:
    """The task folder of a record: the stem of its annotation file (``1_plotQA``)."""
    return Path(row.where.rsplit(":", 1)[0]).stem


@register_dataset("mlvu")
def mlvu(row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any) -> Task:
    """One MLVU multiple-choice question (see the module docstring for the fields).

    Media (first that exists): ``video/{task}/{video}``, ``{task}/{video}``, ``{video}`` under the media
    root, ``{task}`` being the annotation file's stem. The id is ``mlvu-{question_type}-{video stem}-{hash
    of the question}`` (the release has no question id). ``Task.extra``: ``category`` (question_type).
    """
    if "video_name" in row.data:  # lmms-eval's flat export
        return _flat(row, media_root, media_template)
    if not row.data.get("candidates"):
        raise SkipRow(OPEN_ENDED)
    video = str(get_field(row, "video"))
    task_dir = _task_dir(row)
    qtype = str(get_field(row, "question_type", default=task_dir, required=False))
    question = str(row.data.get("question") or "").strip()
    raw = row.data["candidates"]
    if not question or not str(row.data.get("answer") or "").strip() or not all(str(c).strip() for c in raw):
        raise SkipRow(EMPTY)
    choices = parse_options(row, raw)
    try:
        answer = answer_letter(row, row.data["answer"], choices)
    except RowError:
        raise SkipRow(NOT_A_CANDIDATE) from None
    data = {**row.data, "task_dir": task_dir}
    defaults = [f"video/{task_dir}/{video}", f"{task_dir}/{video}", video]
    cands = [
        format_template(t, Row(data, row.where)) for t in media_candidates(media_template, [])
    ] or defaults
    return _mlvu_task(row, qtype, video, first_existing_media(media_root, cands), question, choices, answer)


def _mlvu_task(
    row: Row, qtype: str, video: str, media: str, question: str, choices: list[str], answer: str
) -> Task:
    """One MLVU question; the id hashes the question with its candidates (the same question is asked
    twice about one video with other candidates)."""
    return build_task(
        row,
        id=f"mlvu-{qtype}-{Path(video).stem}-{question_hash(question + ' | ' + ' | '.join(choices))}",
        media=media,
        question=question,
        task_type="mcq",
        choices=choices,
        answer=answer,
        duration=_duration(row),
        source="mlvu",
        extra={"category": qtype, "video": video},
    )


def _duration(row: Row) -> float | None:
    value = row.data.get("duration")
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        raise RowError(row.where, f"duration must be a number of seconds, got {value!r}") from None
    return seconds if seconds and seconds > 0 else None


def _flat(row: Row, media_root: Any, media_template: str | list[str] | None) -> Task:
    """lmms-eval's MLVU record: ``video_name``, ``question`` (stem + ``(A) ...`` lines), ``answer`` (a
    letter), ``task_type``; ``candidates`` when present."""
    video = str(get_field(row, "video_name"))
    text = str(get_field(row, "question"))
    if row.data.get("candidates"):
        stem, choices = text.strip(), parse_options(row, row.data["candidates"])
    else:
        stem, choices = embedded_options(row, text)
    qtype = str(get_field(row, "task_type", "question_type", default="unknown", required=False))
    defaults = [video, f"video/{video}", f"videos/{video}"]
    cands = [format_template(t, row) for t in media_candidates(media_template, [])] or defaults
    answer = answer_letter(row, get_field(row, "answer"), choices)
    return _mlvu_task(row, qtype, video, first_existing_media(media_root, cands), stem, choices, answer)
