"""Judges for free-form (``ff``) answers: exact match, or an LLM behind an OpenAI-compatible endpoint.

A judge is a callable ``(question, reference, prediction) -> score`` with a ``check()`` that fails
early when it cannot work; every failure is a :class:`JudgeError`, so a task is never scored 0
because the judge was down."""

from __future__ import annotations

import re
from typing import Any

from omniagent.openai_client import make_client


class JudgeError(RuntimeError):
    """The free-form judge could not score an answer (endpoint down, unparseable verdict)."""


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", str(text).lower()).split())


class ExactMatchJudge:
    """Scores 1 when the answer equals the reference after lower-casing and dropping punctuation."""

    name = "exact"

    def __call__(self, question: str, reference: str, prediction: str) -> float:
        return float(_norm(reference) == _norm(prediction))

    def check(self) -> None:
        pass


JUDGE_PROMPT = """\
You grade an answer to a question about a video against the reference answer.
Question: {question}
Reference answer: {reference}
Candidate answer: {prediction}
Is the candidate answer correct (same meaning as the reference)? Reply with one word: yes or no."""


class OpenAIJudge:
    """An LLM judge behind an OpenAI-compatible endpoint; any failure raises :class:`JudgeError`."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        import openai

        self.base_url, self.model = base_url, model
        self.client = make_client(
            openai.OpenAI, api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def check(self) -> None:
        """Fail now, before any task runs, when the endpoint is unreachable."""
        try:
            self.client.models.list()
        except Exception as exc:
            raise JudgeError(f"judge endpoint {self.base_url} is unreachable: {exc}") from exc

    def __call__(self, question: str, reference: str, prediction: str) -> float:
        prompt = JUDGE_PROMPT.format(question=question, reference=reference, prediction=prediction)
        try:
            reply = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "user", "content": prompt}],
                temperature=0.0,
                max_tokens=4,
            )
            text = (reply.choices[0].message.content or "").strip().lower()
        except Exception as exc:
            raise JudgeError(f"judge endpoint {self.base_url} failed: {exc}") from exc
        if text.startswith("yes"):
            return 1.0
        if text.startswith("no"):
            return 0.0
        raise JudgeError(f"judge reply {text[:40]!r} is neither yes nor no")


def make_judge(cfg: dict[str, Any] | None) -> Any:
    """``None`` / ``{"kind": "none"}`` -> no judge (ff tasks unscored, flagged); ``exact``; ``openai``
    (``base_url``, ``model``, ``api_key``, ``timeout``). The returned judge's ``check()`` is called."""
    cfg = dict(cfg or {})
    kind = cfg.pop("kind", "none") or "none"
    if kind == "none":
        return None
    if kind == "exact":
        judge: Any = ExactMatchJudge()
    elif kind == "openai":
        judge = OpenAIJudge(**cfg)
    else:
        raise ValueError(f"unknown judge kind {kind!r} (none, exact, openai)")
    judge.check()
    return judge


def wrap_judge(judge: Any) -> Any:
    """Re-raise every judge failure as JudgeError, so the runner can tell it from a policy bug."""
    if judge is None:
        return None

    def call(question: str, reference: str, prediction: str) -> float:
        try:
            return float(judge(question, reference, prediction))
        except JudgeError:
            raise
        except Exception as exc:
            raise JudgeError(f"judge failed: {type(exc).__name__}: {exc}") from exc

    return call
