"""``prior``: the best answer a policy can give without looking, learnt from a training task file.

Why: a blind row (the agent on blanked media) mixes two things, what the agent guesses and how well it
guesses. This row is the guess at its best: for every question it answers, on turn one and without
perceiving, the constant answer that scored highest on the training tasks whose question reads the same
once its numbers are masked (``"... beep heard at about # s?"``), or failing that on the training tasks
of the same type. On the synthetic set half of the beep-count questions have the answer 2, so a policy that
learnt to say "2" scores there without hearing anything; this row says how much such priors are worth.

Fitting scores each candidate (every answer seen under the key) against every training task under the
key with the task type's own scorer; free-form answers are scored by exact match, and a multiple-choice
candidate is the text of the right option (answered with that option's letter when the question offers
it, else with the letter most often right under the key). Ties go to the candidate seen first.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import Field

from envs.scoring import AnswerFormatError, get_scorer, letters
from envs.tasks import Task, letter_index, load_tasks_jsonl
from omniagent.backends.scripted import ScriptedParams, ScriptedPolicy, fixed_guess
from omniagent.eval.judges import ExactMatchJudge
from omniagent.policy_base import PolicyConfigError, register_policy

_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:st|nd|rd|th)?")


def question_key(question: str) -> str:
    """The question with its numbers (ordinals too) masked and its spacing and case normalised: questions
    that differ only in a time, a size or an index share one key."""
    return " ".join(_NUMBER.sub("#", question.lower()).split())


def _truth_text(task: Task) -> Any:
    """What a constant answer must match: the right option's text for mcq, else the answer itself."""
    if task.task_type == "mcq" and task.choices:
        return task.choices[letter_index(str(task.answer))]
    return task.answer


def _scored(answer: Any, task: Task) -> float:
    """``answer`` scored against ``task`` as the environment would (free-form by exact match; 0 if unparsable)."""
    scorer = get_scorer(task.task_type)
    try:
        prediction = scorer.parse(answer, task.choices)
    except AnswerFormatError:
        return 0.0
    return float(scorer.score(prediction, task.answer, judge=ExactMatchJudge(), question=task.question))


def _score(task_type: str, candidate: Any, task: Task) -> float:
    """``candidate`` (a truth of another task) scored as an answer to ``task``: mcq by option text."""
    if task_type == "mcq":
        return float(candidate == _truth_text(task))
    return _scored(candidate, task)


def best_constant(tasks: list[Task]) -> tuple[Any, float]:
    """(the answer that scores highest summed over ``tasks``, its mean score). All of one task type."""
    task_type = tasks[0].task_type
    candidates: list[Any] = []
    seen: set[str] = set()
    for task in tasks:
        value = _truth_text(task)
        key = json.dumps(value, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            candidates.append(value)
    scored = [(sum(_score(task_type, c, t) for t in tasks), i) for i, c in enumerate(candidates)]
    total, best = max(scored, key=lambda s: (s[0], -s[1]))
    return candidates[best], total / len(tasks)


def best_letter(tasks: list[Task]) -> str:
    """The option letter most often right among multiple-choice ``tasks`` (ties: the earlier letter)."""
    counts: dict[str, int] = defaultdict(int)
    for task in tasks:
        counts[str(task.answer).strip().upper()] += 1
    return min(counts, key=lambda k: (-counts[k], k)) if counts else "A"


class PriorTable:
    """The constants fitted on a training task file: per question wording (numbers masked), per task type, and
    for multiple choice the letter most often right under each; :meth:`answer` gives a task's constant and
    :meth:`score` what it earns on a task with a known answer (what ``env.reward.prior_tasks`` subtracts)."""

    def __init__(self, tasks: list[Task]) -> None:
        tasks = [t for t in tasks if t.answer is not None]
        if not tasks:
            raise ValueError("no task with an answer to fit a prior on")
        by_question: dict[tuple[str, str], list[Task]] = defaultdict(list)
        by_type: dict[str, list[Task]] = defaultdict(list)
        for task in tasks:
            by_question[(task.task_type, question_key(task.question))].append(task)
            by_type[task.task_type].append(task)
        self.by_question = {k: best_constant(v) for k, v in by_question.items()}
        self.by_type = {k: best_constant(v) for k, v in by_type.items()}
        self.letters: dict[Any, str] = {k: best_letter(v) for k, v in by_question.items()}
        self.letters.update({k: best_letter(v) for k, v in by_type.items()})

    @classmethod
    def from_file(cls, path: str | Path) -> PriorTable:
        if not Path(path).exists():
            raise FileNotFoundError(f"training task file {path} does not exist")
        try:
            return cls(load_tasks_jsonl(path, resolve_media=False))
        except ValueError as exc:
            raise ValueError(f"{path} holds {exc}") from None

    def source(self, task_type: str, question: str) -> tuple[str, str] | str | None:
        """The key a question's constant comes from: its (type, wording), else its type, else None."""
        key = (task_type, question_key(question))
        if key in self.by_question:
            return key
        return task_type if task_type in self.by_type else None

    def answer(self, task_type: str, question: str, choices: list[str] | None, duration: float) -> Any:
        """The constant for a question, in its task type's answer format (the ``uniform`` policy's blank
        guess for a type the training set lacks)."""
        key = self.source(task_type, question)
        if key is None:
            return fixed_guess(task_type, duration)
        value = (self.by_question[key] if isinstance(key, tuple) else self.by_type[key])[0]
        if task_type != "mcq":
            return value
        options = list(choices or [])
        if value in options:
            return letters(len(options))[options.index(value)]
        letter = self.letters.get(key, "A")
        return letter if options and letter in letters(len(options)) else "A"

    def score(self, task: Task) -> float:
        """What the constant earns on ``task`` (scored as the environment would; free-form by exact match)."""
        if task.answer is None:
            raise ValueError(f"task {task.id} has no answer to score the prior against")
        return _scored(self.answer(task.task_type, task.question, task.choices, task.duration or 0.0), task)


class PriorParams(ScriptedParams):
    train_tasks: str = Field(description="the training task file (JSON lines) whose answers make the prior")


@register_policy("prior")
class PriorPolicy(ScriptedPolicy):
    """Answer at once, without perceiving, the training set's best constant answer for questions worded
    like this one (numbers masked), else for the task type; a type the training set lacks gets the
    information-free guess of the ``uniform`` policy."""

    name = "prior"
    Params = PriorParams

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        p: PriorParams = self.params  # type: ignore[assignment]
        try:
            self.table = PriorTable.from_file(p.train_tasks)
        except (FileNotFoundError, ValueError) as exc:
            raise PolicyConfigError(f"policy 'prior': {exc}") from None

    def answer(self) -> Any:
        task = self.task
        return self.table.answer(task["task_type"], task["question"], task.get("choices"), self.duration)

    def thought(self, action: dict[str, Any]) -> str:
        key = self.table.source(self.task["task_type"], self.task["question"])
        where = "no training task of this type" if key is None else (
            "the training set's best constant answer for questions worded like this one"
            if isinstance(key, tuple) else "the training set's best constant answer for this task type"
        )  # fmt: skip
        return f"prior policy, without looking: {where}."
