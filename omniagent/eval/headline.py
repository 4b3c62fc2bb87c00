"""The one line an evaluation prints last: score with its interval, counts, cost, and samples."""

from __future__ import annotations

from typing import Any

from omniagent.eval.summary import format_ci, format_num

__all__ = ["headline"]


def headline(summary: dict[str, Any]) -> str:
    """The run in one line: score with its interval, counts, answer rate, frames and turns per task."""
    answered = summary["answer_rate"].get("mean")
    cost = summary.get("cost") or {}
    tokens = cost.get("tokens_per_task")
    return (
        f"{summary.get('name') or 'run'}: score {format_ci(summary['score'])} on {summary['n']} task(s) "
        f"({summary['n_failed']} failed, {summary['n_error']} errors); answered "
        f"{'-' if answered is None else f'{100 * answered:.0f}%'}; {format_num(summary['frames_used'].get('mean'))} "
        f"frames, {format_num(summary['turns'].get('mean'))} turns per task"
        + (f"; {tokens:,.0f} tokens per task" if tokens is not None else "")
        + _samples_text(summary.get("samples"))
    )


def _samples_text(samples: dict[str, Any] | None) -> str:
    if not samples:
        return ""
    k = str(max(int(j) for j in samples["pass_at"]))
    return (
        f"; {samples['k']} samples of {samples['questions']} questions: mean {format_ci(samples['mean'])}, "
        f"pass@{k} {format_ci(samples['pass_at'][k])}"
    )
