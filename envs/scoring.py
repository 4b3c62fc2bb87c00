"""Answer validation and verifiable rewards, one registered scorer per task type.

Each scorer first parses the model's answer (a parse failure is a format error the model sees and
can fix) and then compares it to the ground truth:

- ``mcq``: exact letter match;
- ``tr``: temporal IoU between the union of predicted [start, end] intervals and the union of the
  ground-truth intervals;
- ``num`` / ``size``: mean relative accuracy (MRA, as in VSI-Bench) over thresholds 0.50..0.95;
- ``ff``: free form, scored only by a configured judge; without one the reward is 0 and the
  info says so (never silently).
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Callable
from typing import Any

import numpy as np

from envs.registry import Registry


class AnswerFormatError(ValueError):
    """The answer does not match its task type's format."""


SCORERS: Registry[type[Scorer]] = Registry("task type")
register_scorer = SCORERS.register


def get_scorer(task_type: str, max_answer_chars: int | None = None, option_text: bool = False) -> Scorer:
    """A fresh scorer for a task type (an unknown type raises, listing the known ones).
    ``max_answer_chars`` caps a free-form answer (``EnvLimits.max_answer_chars``; ``None``: no cap);
    ``option_text`` lets a multiple-choice answer be an option's exact text (``EnvLimits.mcq_option_text``)."""
    return SCORERS[task_type](max_answer_chars, option_text)


class Scorer:
    format_hint = ""  # the answer format, stated in the system prompt

    def __init__(self, max_answer_chars: int | None = None, option_text: bool = False) -> None:
        self.max_answer_chars = max_answer_chars  # read by the free-form scorer only
        self.option_text = option_text  # read by the multiple-choice scorer only

    def parse(self, content: Any, choices: list[str] | None = None) -> Any:
        return content

    def content_schema(self, choices: list[str] | None, duration: float) -> dict[str, Any]:
        """JSON schema of an answer this scorer parses (for constrained decoding; see envs/turn_schema.py)."""
        return {}

    def score(self, prediction: Any, truth: Any, **context: Any) -> float:
        raise NotImplementedError


def letters(n: int) -> list[str]:
    """Option letters A, B, ... for ``n`` choices; more than 26 cannot all be answered, so refuse."""
    if n > len(string.ascii_uppercase):
        raise ValueError(f"at most {len(string.ascii_uppercase)} choices can be lettered A-Z, got {n}")
    return list(string.ascii_uppercase[:n])


_LETTER = re.compile(r"^\(?([A-Za-z])\)?[.:]?$")


@register_scorer("mcq")
class MCQScorer(Scorer):
    """An option's letter (``B``, ``(b)``, ``B.``); with ``option_text`` also an option's exact text (``green``),
    case and surrounding spaces ignored. A text that names one option while being another's letter is refused as
    ambiguous, and so is a text that several options share."""

    format_hint = 'the letter of one option only, e.g. "B"'
    text_hint = 'the letter of one option (e.g. "B") or that option\'s exact text'

    def __init__(self, max_answer_chars: int | None = None, option_text: bool = False) -> None:
        super().__init__(max_answer_chars, option_text)
        if option_text:
            self.format_hint = self.text_hint

    def parse(self, content: Any, choices: list[str] | None = None) -> str:
        text = str(content).strip()
        named = self._named(text, choices)
        m = _LETTER.match(text)
        if named is not None:
            if m and m.group(1).upper() in letters(len(choices or [])) and m.group(1).upper() != named:
                raise AnswerFormatError(f"{text[:40]!r} is option {named}'s text and another option's letter")
            return named
        if not m:
            what = (
                "one option letter or one option's exact text"
                if self.option_text
                else "one option letter only"
            )
            raise AnswerFormatError(f'answer with {what} (e.g. "B"), not {text[:40]!r}')
        letter = m.group(1).upper()
        if choices is not None and letter not in letters(len(choices)):
            raise AnswerFormatError(
                f"{letter!r} is not an option; options are {', '.join(letters(len(choices)))}"
            )
        return letter

    def _named(self, text: str, choices: list[str] | None) -> str | None:
        """The letter of the one option whose text is ``text`` (with ``option_text``), else None."""
        if not (self.option_text and choices and text):
            return None
        hits = [
            x
            for x, c in zip(letters(len(choices)), choices, strict=True)
            if str(c).strip().casefold() == text.casefold()
        ]
        if len(hits) > 1:
            raise AnswerFormatError(
                f"{text[:40]!r} is the text of options {', '.join(hits)}; answer with a letter"
            )
        return hits[0] if hits else None

    def content_schema(self, choices: list[str] | None, duration: float) -> dict[str, Any]:
        named = letters(len(choices)) if choices else list(string.ascii_uppercase)
        if self.option_text and choices:
            named += [t for t in dict.fromkeys(str(c).strip() for c in choices) if t and t not in named]
        return {"type": "string", "enum": named}

    def score(self, prediction: str, truth: Any, **context: Any) -> float:
        return float(prediction == str(truth).strip().upper())


def _as_intervals(value: Any) -> list[tuple[float, float]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise AnswerFormatError(f"intervals must be JSON like [[10.5, 20.0]]: {exc.msg}") from exc
        except (ValueError, RecursionError):  # a number of thousands of digits, nesting thousands deep
            raise AnswerFormatError("intervals must be JSON like [[10.5, 20.0]] with plain numbers") from None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, int | float) for x in value):
        value = [value]
    if not isinstance(value, list) or not value:
        raise AnswerFormatError("give a non-empty list of [start, end] pairs, e.g. [[10.5, 20.0]]")
    out = []
    for pair in value:
        if not (
            isinstance(pair, list | tuple)
            and len(pair) == 2
            and all(isinstance(x, int | float) for x in pair)
        ):
            raise AnswerFormatError(f"each interval must be a [start, end] pair of numbers, got {pair!r}")
        a, b = float(pair[0]), float(pair[1])
        if not (math.isfinite(a) and math.isfinite(b)) or b < a:
            raise AnswerFormatError(f"interval {pair!r} must have finite start <= end")
        out.append((a, b))
    return out


def union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def temporal_iou(pred: list[tuple[float, float]], truth: list[tuple[float, float]]) -> float:
    """IoU of two unions of intervals: |P ∩ G| / |P ∪ G| (0 when both are empty points)."""
    inter = sum(max(0.0, min(b, d) - max(a, c)) for a, b in _merge(pred) for c, d in _merge(truth))
    union = union_length(pred + truth)
    return inter / union if union > 0 else 0.0


def _merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


@register_scorer("tr")
class TRScorer(Scorer):
    format_hint = "a JSON array of [start, end] pairs in seconds, e.g. [[10.5, 20.0], [35.0, 40.0]]"

    def parse(self, content: Any, choices: list[str] | None = None) -> list[tuple[float, float]]:
        return _as_intervals(content)

    def content_schema(self, choices: list[str] | None, duration: float) -> dict[str, Any]:
        # start <= end is beyond JSON schema; the parser still rejects a reversed pair
        time = {"type": "number", "minimum": 0, "maximum": duration}
        pair = {"type": "array", "prefixItems": [time, time], "items": False, "minItems": 2}
        return {"type": "array", "items": pair, "minItems": 1}

    def score(self, prediction: list[tuple[float, float]], truth: Any, **context: Any) -> float:
        return temporal_iou(prediction, _as_intervals(truth))


MRA_THRESHOLDS = np.arange(0.50, 0.951, 0.05)


def mean_relative_accuracy(prediction: float, truth: float) -> float:
    """Share of thresholds θ in 0.50..0.95 with relative error < 1 - θ (exact match needed when truth is 0)."""
    if truth == 0:
        return float(prediction == 0)
    rel = abs(prediction - truth) / abs(truth)
    return float(np.mean(rel < 1 - MRA_THRESHOLDS))


def _as_number(content: Any) -> float:
    if isinstance(content, bool):
        raise AnswerFormatError('give a single number, e.g. "10.3"')
    try:
        value = float(str(content).strip())
    except ValueError as exc:
        raise AnswerFormatError(f'give a single number, e.g. "10.3", not {str(content)[:40]!r}') from exc
    if not math.isfinite(value):
        raise AnswerFormatError("the number must be finite")
    return value


@register_scorer("num")
class NumScorer(Scorer):
    format_hint = 'a single number, e.g. "10.3"'

    def parse(self, content: Any, choices: list[str] | None = None) -> float:
        return _as_number(content)

    def content_schema(self, choices: list[str] | None, duration: float) -> dict[str, Any]:
        return {"type": "number"}

    def score(self, prediction: float, truth: Any, **context: Any) -> float:
        return mean_relative_accuracy(prediction, _as_number(truth))


@register_scorer("size")
class SizeScorer(NumScorer):
    pass


Judge = Callable[[str, str, str], float]  # (question, reference answer, prediction) -> score in [0, 1]


@register_scorer("ff")
class FreeFormScorer(Scorer):
    format_hint = "a descriptive answer in plain text"

    def parse(self, content: Any, choices: list[str] | None = None) -> str:
        text = content if isinstance(content, str) else json.dumps(content)
        if not text.strip():
            raise AnswerFormatError("the answer is empty")
        cap = self.max_answer_chars
        if cap is not None and len(text) > cap:
            raise AnswerFormatError(f"the answer is {len(text)} characters long; give at most {cap}")
        return text

    def content_schema(self, choices: list[str] | None, duration: float) -> dict[str, Any]:
        # the same cap as parse: without it a small model can fill its token limit inside the string
        cap = {} if self.max_answer_chars is None else {"maxLength": self.max_answer_chars}
        return {"type": "string", "minLength": 1, **cap}

    def score(
        self, prediction: str, truth: Any, judge: Judge | None = None, question: str = "", **context: Any
    ) -> float:
        if judge is None:
            return 0.0
        return float(judge(question, str(truth), prediction))
