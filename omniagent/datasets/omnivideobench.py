"""OmniVideoBench (NJU-LINK): 1,000 audio-visual multiple-choice questions over 628 videos.

The release's ``data.json`` is a list of videos: ``video`` (the file name without extension),
``video_type`` (e.g. "Vlog"), ``duration`` ("MM:SS") and ``questions``: a list of ``{question,
question_type (13 kinds), audio_type (Speech / Sound / Music), reasoning_steps: [{modality, evidence,
inference}], answer (the text of the right option), options (["A.text", ...]), correct_option ("A".."D")}``.

Each reasoning step's ``evidence`` often names the moment it saw or heard ("At 1:39, the woman said
..."): those times become the task's ``evidence`` intervals (:mod:`~omniagent.datasets.evidence_text`),
for the evidence-reach and fidelity tools; ``Task.extra["evidence_steps"]`` counts what was read, and
:meth:`~omniagent.datasets.core.LoadedDataset.summary` reports the totals. A few published steps spell
the key ``evidence`` otherwise (``evidece``, ``nevidence``): any key starting "ev" or ending "evidence" is
read.
"""

from __future__ import annotations

from typing import Any

from envs.tasks import Task
from omniagent.datasets.core import Row, RowError
from omniagent.datasets.evidence_text import EvidenceCounts, evidence_intervals
from omniagent.datasets.fields import (
    answer_letter,
    build_task,
    first_existing_media,
    format_template,
    get_field,
    media_candidates,
    parse_options,
    parse_timestamp,
)
from omniagent.datasets.registry import register_dataset

__all__ = ["omnivideobench", "step_evidence"]


def step_evidence(step: Any) -> str | None:
    """The evidence sentence of one reasoning step (tolerating the release's misspelt keys)."""
    if not isinstance(step, dict):
        return None
    for key, value in step.items():
        k = str(key).lower()
        if isinstance(value, str) and (k.startswith("ev") or k.endswith("evidence")):
            return value
    return None


def _duration(row: Row) -> float | None:
    text = row.data.get("duration")
    if text in (None, ""):
        return None
    try:
        seconds = parse_timestamp(text)
    except ValueError:
        raise RowError(row.where, f"duration must be 'MM:SS', got {text!r}") from None
    return seconds if seconds > 0 else None


@register_dataset("omnivideobench")
def omnivideobench(
    row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any
) -> list[Task]:
    """The questions of one OmniVideoBench video record (fields in the module docstring).

    Media (first that exists): ``{video}.mp4``, ``videos/{video}.mp4``, ``{video}`` under the media root.
    The id is ``omnivideobench-{video}-q{i}``, ``i`` the question's place in its video's list: the release
    has no question id, and for some videos it holds the same question twice, annotated differently.
    ``Task.extra``: ``category`` (question_type), ``audio_type``, ``domain`` (video_type), ``duration_mmss``
    (the labelled length) and ``evidence_steps``.
    """
    video = str(get_field(row, "video"))
    questions = get_field(row, "questions")
    if not isinstance(questions, list):
        raise RowError(row.where, "'questions' must be a list")
    defaults = [f"{video}.mp4", f"videos/{video}.mp4", video]
    cands = [format_template(t, row) for t in media_candidates(media_template, [])] or defaults
    media = first_existing_media(media_root, cands)
    duration = _duration(row)
    tasks = []
    for i, q in enumerate(questions):
        sub = Row(q if isinstance(q, dict) else {}, f"{row.where} questions[{i}]")
        if not isinstance(q, dict):
            raise RowError(sub.where, "each entry of 'questions' must be an object")
        tasks.append(_question(sub, i, video, media, duration, row.data))
    return tasks


def _question(
    row: Row, index: int, video: str, media: str, duration: float | None, parent: dict[str, Any]
) -> Task:
    question = str(get_field(row, "question")).strip()
    choices = parse_options(row, get_field(row, "options"))
    steps = row.data.get("reasoning_steps") or []
    counts = EvidenceCounts()
    sentences = [s for s in (step_evidence(st) for st in steps) if s]
    counts.steps = len(steps) - len(sentences)  # steps without any evidence text still count as steps
    evidence = evidence_intervals(sentences, duration, counts)
    return build_task(
        row,
        id=f"omnivideobench-{video}-q{index}",
        media=media,
        question=question,
        task_type="mcq",
        choices=choices,
        answer=answer_letter(row, get_field(row, "correct_option", "answer"), choices),
        evidence=evidence or None,
        source="omnivideobench",
        extra={
            "category": get_field(row, "question_type", required=False),
            "audio_type": get_field(row, "audio_type", required=False),
            "domain": parent.get("video_type"),
            "duration_mmss": parent.get("duration"),
            "evidence_steps": counts.as_dict(),
        },
    )
