"""The reasoning judge of teacher-trajectory synthesis (:mod:`rl.synthesis.synthesize`).

:class:`ThoughtAuditJudge` audits a trajectory's reasoning through any OpenAI-compatible chat-completions
endpoint (one call per trajectory); the prompt and the reply parsing live in :mod:`rl.synthesis.filters`.
A judge that cannot be reached, or whose replies do not parse after retries, raises
:class:`AuditJudgeError` -- a trajectory is never passed or failed without its audit.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from omniagent.trajectory import Trajectory
from rl.synthesis.audit_rules import RulesAuditor, judge_kind
from rl.synthesis.filters import (
    AuditJudgeError,
    AuditParseError,
    AuditResult,
    build_audit_messages,
    parse_audit_reply,
)

__all__ = ["AuditJudge", "AuditJudgeError", "ThoughtAuditJudge", "build_judge"]


class AuditJudge(Protocol):
    """What synthesis needs from a reasoning auditor (the judge model here, or an offline rule-based one)."""

    def preflight(self) -> None:
        """Raise :class:`AuditJudgeError` now if audits cannot work (called once before any teacher work)."""

    def audit(self, traj: Trajectory) -> AuditResult:
        """Score every turn's Thought of ``traj``; raise :class:`AuditJudgeError` rather than guess."""


class ThoughtAuditJudge:
    """Reasoning audit through any OpenAI-compatible chat-completions endpoint (one call per trajectory)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = "EMPTY",
        timeout: float = 120.0,
        max_retries: int = 2,
        retry_wait: float = 1.0,
        temperature: float = 0.0,
        max_tokens: int = 2048,
        aggregate: str = "min",
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        from openai import OpenAI

        if not model:
            raise ValueError("judge.model must name the judge model as the server knows it")
        self.base_url, self.model = base_url.rstrip("/"), model
        self.max_retries, self.retry_wait = int(max_retries), float(retry_wait)
        self.temperature, self.max_tokens = temperature, max_tokens
        self.aggregate, self.extra_body = aggregate, dict(extra_body or {})
        # Retries are ours (visible, bounded); the client's own backoff would hide a dead server.
        self.client = OpenAI(
            base_url=self.base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=0
        )

    def _complete(self, messages: list[dict[str, str]]) -> str:
        import openai

        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                resp = self.client.chat.completions.create(
                    model=self.model,
                    messages=messages,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    extra_body=self.extra_body or None,
                )
                content = resp.choices[0].message.content if resp.choices else None
                if not content:
                    raise AuditParseError("the judge returned an empty reply")
                return content
            except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                last = exc
            except openai.APIStatusError as exc:
                last = exc
                if exc.status_code < 500 and exc.status_code not in (408, 409, 429):
                    break  # 4xx: retrying will not help (wrong model name, bad key)
            except AuditParseError as exc:
                last = exc
            if attempt < self.max_retries:
                time.sleep(self.retry_wait * (attempt + 1))
        raise AuditJudgeError(
            f"reasoning judge {self.model!r} at {self.base_url} failed after {self.max_retries + 1} "
            f"attempt(s): {type(last).__name__}: {str(last).rstrip('.')}. Start the judge server (or fix judge.base_url / "
            "judge.model) and rerun; finished tasks are kept and skipped."
        ) from last

    def preflight(self) -> None:
        """Fail before any teacher work when the judge is not there."""
        self._complete([{"role": "user", "content": 'Reply with the JSON {"ok": true}.'}])

    def audit(self, traj: Trajectory) -> AuditResult:
        messages = build_audit_messages(traj)
        last: AuditParseError | None = None
        for _ in range(self.max_retries + 1):
            reply = self._complete(messages)
            try:
                return parse_audit_reply(reply, len(traj.turns), self.aggregate)
            except AuditParseError as exc:
                last = exc
        raise AuditJudgeError(
            f"reasoning judge {self.model!r} at {self.base_url} gave no usable audit for trajectory "
            f"{traj.id} in {self.max_retries + 1} tries: {last}"
        )


def build_judge(cfg: dict[str, Any], tasks: list[Any] | None = None) -> AuditJudge | None:
    """The configured auditor: the judge model, or offline the rule-based one (``judge.kind``)."""
    if not cfg["filters"]["audit"]["enabled"]:
        return None
    j = cfg["judge"]
    if judge_kind(j, tasks) == "rules":
        return RulesAuditor(aggregate=cfg["filters"]["audit"]["aggregate"])
    return ThoughtAuditJudge(
        base_url=j["base_url"],
        model=j["model"],
        api_key=j.get("api_key") or "EMPTY",
        timeout=float(j["timeout"]),
        max_retries=int(j["max_retries"]),
        retry_wait=float(j.get("retry_wait", 1.0)),
        temperature=float(j["temperature"]),
        max_tokens=int(j["max_tokens"]),
        aggregate=cfg["filters"]["audit"]["aggregate"],
        extra_body=j.get("extra_body") or None,
    )
