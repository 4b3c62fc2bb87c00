"""The task schema every benchmark, data engine and evaluator in omniagent shares.

A :class:`Task` is one question about one media file (video or audio). Task types:

- ``mcq``: multiple choice. ``choices`` holds the option texts; their letters are implied by order
  (``A`` for the first, ``B`` for the second, ...). ``answer`` is a letter.
- ``tr``: temporal retrieval. ``answer`` is a list of ``[start, end]`` intervals in seconds.
- ``num``: a numeric answer (a count, a frequency, ...).
- ``size``: a numeric answer about spatial extent (pixels, area, ...).
- ``ff``: free-form text answer.

``answer`` may be ``None`` for unlabelled tasks. ``evidence`` lists the ``[start, end]`` intervals (in
seconds on the media's own timeline) that hold what is needed to answer, when known.

Tasks are stored one JSON object per line (``.jsonl``). :func:`load_tasks_jsonl` reports each bad line
as ``file:line`` and refuses duplicate ids; relative ``media`` paths are resolved against the folder of
the ``.jsonl`` file unless asked not to.
"""

from __future__ import annotations

import json
import math
import os
import string
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from envs.jsonl import JsonlError, JsonlReader, write_jsonl

TaskType = Literal["mcq", "tr", "num", "size", "ff"]
TASK_TYPES: tuple[str, ...] = ("mcq", "tr", "num", "size", "ff")
LETTERS = string.ascii_uppercase

__all__ = [
    "ROTATION_MARK",
    "circular_tasks",
    "rotation_base",
    "LETTERS",
    "TASK_TYPES",
    "Task",
    "TaskFileError",
    "TaskType",
    "choice_letter",
    "letter_index",
    "load_tasks_jsonl",
    "save_tasks_jsonl",
]


def choice_letter(index: int) -> str:
    """The letter of the ``index``-th choice (0 -> ``A``)."""
    if not 0 <= index < len(LETTERS):
        raise ValueError(f"choice index {index} out of range 0..{len(LETTERS) - 1}")
    return LETTERS[index]


def letter_index(letter: str) -> int:
    """The position of a choice letter (``A`` -> 0)."""
    letter = letter.strip().upper()
    if len(letter) != 1 or letter not in LETTERS:
        raise ValueError(f"not a choice letter: {letter!r}")
    return LETTERS.index(letter)


def _check_interval(pair: Any, what: str) -> list[float]:
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        raise ValueError(f"{what}: each interval must be [start, end], got {pair!r}")
    try:
        start, end = (float(v) for v in pair)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: interval bounds must be numbers, got {pair!r}") from None
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ValueError(f"{what}: interval bounds must be finite, got {pair!r}")
    if start < 0:
        raise ValueError(f"{what}: interval start must be >= 0, got {pair!r}")
    if start > end:
        raise ValueError(f"{what}: interval start must be <= end, got {pair!r}")
    return [start, end]


class Task(BaseModel):
    """One question about one media file, with its ground truth and evidence when known."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    media: str = Field(min_length=1, description="path of the video or audio file")
    question: str = Field(min_length=1)
    task_type: TaskType
    choices: list[str] | None = None
    answer: str | float | list[list[float]] | None = None
    evidence: list[list[float]] | None = None
    source: str = "unknown"
    split: str = "test"
    duration: float | None = Field(default=None, gt=0)
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("answer", mode="before")
    @classmethod
    def _no_bool_answer(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("answer must not be a boolean")
        return value

    @field_validator("evidence")
    @classmethod
    def _evidence_intervals(cls, value: list[list[float]] | None) -> list[list[float]] | None:
        if value is None:
            return None
        return [_check_interval(pair, "evidence") for pair in value]

    @model_validator(mode="after")
    def _check_answer(self) -> Task:
        kind = self.task_type
        if kind == "mcq":
            if self.choices is None or len(self.choices) < 2:
                raise ValueError("an mcq task needs at least 2 choices")
            if len(self.choices) > len(LETTERS):
                raise ValueError(f"an mcq task takes at most {len(LETTERS)} choices")
            if self.answer is not None:
                if not isinstance(self.answer, str):
                    raise ValueError(f"an mcq answer must be a choice letter, got {self.answer!r}")
                letter = self.answer.strip().upper()
                allowed = LETTERS[: len(self.choices)]
                if len(letter) != 1 or letter not in allowed:
                    raise ValueError(
                        f"mcq answer {self.answer!r} is not one of the letters {', '.join(allowed)}"
                    )
                self.answer = letter
        elif self.choices is not None:
            raise ValueError(f"choices are only allowed for mcq tasks, not {kind!r}")

        if kind == "tr" and self.answer is not None:
            if not isinstance(self.answer, list) or not self.answer:
                raise ValueError(f"a tr answer must be a non-empty list of [start, end], got {self.answer!r}")
            self.answer = [_check_interval(pair, "tr answer") for pair in self.answer]
        elif kind in ("num", "size") and self.answer is not None:
            value = self.answer
            if isinstance(value, str):
                try:
                    value = float(value.strip())
                except ValueError:
                    raise ValueError(f"a {kind} answer must be a number, got {self.answer!r}") from None
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"a {kind} answer must be a finite number, got {self.answer!r}")
            self.answer = float(value)
        elif kind == "ff" and self.answer is not None and not isinstance(self.answer, str):
            raise ValueError(f"an ff answer must be text, got {self.answer!r}")

        if self.duration is not None:
            limit = self.duration + 1e-6 + 0.01 * self.duration
            spans = list(self.evidence or [])
            if kind == "tr" and isinstance(self.answer, list):
                spans += self.answer
            for start, end in spans:
                if end > limit:
                    raise ValueError(f"interval [{start}, {end}] ends after the media ({self.duration} s)")
        return self

    # ------------------------------------------------------------------ conveniences
    @property
    def letters(self) -> list[str]:
        """The letters of the choices, in order (empty for non-mcq tasks)."""
        return list(LETTERS[: len(self.choices or [])])

    def answer_choice(self) -> str | None:
        """The text of the correct choice of an mcq task."""
        if self.task_type != "mcq" or self.answer is None or self.choices is None:
            return None
        return self.choices[letter_index(str(self.answer))]

    def with_choices_in_order(self, order: Sequence[int]) -> Task:
        """This task with its choices reordered (``order[k]`` is the old index of the new ``k``-th choice) and
        the answer letter following its choice: the same question, scored the same, under other letters. RL
        rollouts use it so that a preferred letter earns nothing (see ``local.shuffle_options``)."""
        if self.task_type != "mcq" or self.choices is None:
            return self
        if sorted(order) != list(range(len(self.choices))):
            raise ValueError(f"{list(order)} is not an order of the {len(self.choices)} choices")
        answer = self.answer
        if answer is not None:
            answer = choice_letter(list(order).index(letter_index(str(answer))))
        return self.model_copy(update={"choices": [self.choices[i] for i in order], "answer": answer})

    def env_options(self, max_turns: int | None = None) -> dict[str, Any]:
        """``env.reset`` options for this task (``max_turns`` None: the environment's default)."""
        opts: dict[str, Any] = {
            "media": self.media,
            "question": self.question,
            "task_type": self.task_type,
            "choices": self.choices,
            "answer": self.answer,
        }
        if max_turns is not None:
            opts["max_turns"] = max_turns
        return opts

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False)


class TaskFileError(ValueError):
    """A tasks file holds malformed lines or duplicate ids."""


def load_tasks_jsonl(path: str | os.PathLike[str], resolve_media: bool = True) -> list[Task]:
    """Read tasks from a JSON-lines file (an input file: the strict policy of :mod:`envs.jsonl`).

    Blank lines and lines starting with ``#`` are skipped. Every malformed line is reported as
    ``file:line: reason`` in one :class:`TaskFileError`; a repeated id raises it too. With
    ``resolve_media`` a relative ``media`` path is made absolute against the file's folder.
    """
    path = Path(path)
    base = path.resolve().parent
    tasks: list[Task] = []
    first_line: dict[str, int] = {}
    reader = JsonlReader(path, Task.model_validate, comments=True, collect=True)
    try:
        for lineno, task in reader:
            if task.id in first_line:
                reader.problem(lineno, f"duplicate task id {task.id!r} (first at line {first_line[task.id]})")
                continue
            first_line[task.id] = lineno
            if resolve_media and not os.path.isabs(task.media):
                task.media = str(base / task.media)
            tasks.append(task)
    except JsonlError as exc:
        raise TaskFileError(str(exc)) from None
    return tasks


def save_tasks_jsonl(tasks: Iterable[Task], path: str | os.PathLike[str]) -> Path:
    """Write tasks as JSON lines (atomically). Raises :class:`TaskFileError` on duplicate ids."""
    path = Path(path)
    tasks = list(tasks)
    seen: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.id in seen:
            raise TaskFileError(f"duplicate task id {task.id!r} (tasks #{seen[task.id]} and #{i}) for {path}")
        seen[task.id] = i
    write_jsonl(path, (task.model_dump(mode="json") for task in tasks))  # the lines of Task.to_json
    return path


ROTATION_MARK = "#rot"  # a rotated copy's id: the task's id, this mark, and the rotation (1 .. n-1)


def circular_tasks(tasks: Iterable[Task]) -> list[Task]:
    """Every multiple-choice task once per circular shift of its choices, so that each option appears under
    each letter once (MMBench's CircularEval); other tasks once. Rotation 0 keeps the task's own id; rotation k
    is ``ID#rotK``. Why: a held-out set keeps each question's options in one order, so a policy that drifted to
    one letter scores on whichever questions have that letter as their answer; over all rotations it cannot
    (``compare_runs --circular`` counts a question right only when every rotation of it is)."""
    out: list[Task] = []
    for task in tasks:
        n = len(task.choices or []) if task.task_type == "mcq" else 0
        out.append(task)
        for k in range(1, n):
            order = [(i + k) % n for i in range(n)]
            out.append(
                task.with_choices_in_order(order).model_copy(update={"id": f"{task.id}{ROTATION_MARK}{k}"})
            )
    return out


def rotation_base(task_id: str) -> str:
    """The original task's id of a rotated copy (:func:`circular_tasks`); other ids unchanged."""
    base, mark, k = str(task_id).rpartition(ROTATION_MARK)
    return base if mark and k.isdigit() else str(task_id)
