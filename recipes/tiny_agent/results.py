"""The tiny recipe's results table: per-row score CIs, turn-level rates and the paired differences
(``OUT/results.json`` and ``OUT/results.md``, written by ``recipes.tiny_agent.recipe``'s eval stage)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WELL_FORMED_ERRORS = ("format_", "action_")  # a turn with one of these codes did not parse as an action


def well_formed(run_dir: Path) -> dict[str, float]:
    """Turn-level rates from a run's trajectories: well-formed turns, turns that fetched media, the
    share of rejected turns whose next turn was accepted (recovery), and the share of episodes whose
    first answer was accepted (an answer in another task's format is rejected and costs a turn)."""
    episodes = []
    path = run_dir / "trajectories.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.strip():
            episodes.append(json.loads(line).get("turns") or [])
    turns = [t for ep in episodes for t in ep]
    bad = [t for t in turns if str(t.get("error") or "").startswith(WELL_FORMED_ERRORS)]
    percepts = [t for t in turns if t.get("action_type") in ("get_frames", "get_audio", "get_clip")]
    followed = [(a, b) for ep in episodes for a, b in zip(ep, ep[1:], strict=False) if a.get("error")]
    answers = [next((t for t in ep if t.get("action_type") == "answer"), None) for ep in episodes]
    answers = [a for a in answers if a is not None]
    n = max(1, len(turns))
    return {
        "turns_total": len(turns),
        "well_formed_rate": 1 - len(bad) / n,
        "percept_turn_rate": len(percepts) / n,
        "recovery_rate": sum(not b.get("error") for _, b in followed) / max(1, len(followed)),
        "first_answer_valid": sum(not a.get("error") for a in answers) / max(1, len(answers)),
    }


def summarise(run_dirs: dict[str, Path]) -> dict[str, Any]:
    """The results table (score CI, rates, frames, turns, by type) of each evaluated row (name -> its
    run folder; rows not run yet are left out) and the paired differences."""
    from omniagent.eval.compare import load_run
    from omniagent.eval.summary import paired_compare

    table: dict[str, Any] = {}
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, run_dir in run_dirs.items():
        if not (run_dir / "results.jsonl").exists():
            continue
        summary, rows[name] = load_run(str(run_dir))
        table[name] = {
            "n": summary.get("n_scored", summary.get("n")),
            "score": summary["score"],
            "answer_rate": summary["answer_rate"],
            "frames_used": summary["frames_used"],
            "turns": summary["turns"],
            "by_task_type": summary.get("metric_by_task_type"),
            **well_formed(run_dir),
        }
    pairs = {}
    for a, b in (
        ("agent", "uniform"),
        ("agent", "agent_blind"),
        ("agent", "random"),
        ("agent", "prior"),
        ("agent_blind", "prior"),
        ("agent", "random_weights"),
        ("agent", "agent_free"),
        ("agent_free", "agent_free_blind"),
        ("agent_free", "uniform"),
    ):
        if a in rows and b in rows:
            pairs[f"{a} - {b}"] = paired_compare(rows[a], rows[b], names=(a, b))
    return {"table": table, "paired": pairs}


def _fmt(ci: dict[str, Any] | None) -> str:
    if not ci or ci.get("mean") is None:
        return "-"
    return f"{ci['mean']:.3f} [{ci['lo']:.3f}, {ci['hi']:.3f}]"


def _val(x: Any) -> float:
    return float(x["mean"]) if isinstance(x, dict) else float(x or 0)


def results_markdown(res: dict[str, Any]) -> str:
    lines = ["| row | n | score [95% CI] | well-formed turns | answer rate | first answer valid | recovery "
             "| frames / q | turns / q |", "| --- |" + " --- |" * 8]  # fmt: skip
    for name, r in res["table"].items():
        lines.append(
            f"| {name} | {r['n']} | {_fmt(r['score'])} | {r['well_formed_rate']:.3f} | {_val(r['answer_rate']):.3f}"
            f" | {r.get('first_answer_valid', float('nan')):.3f} | {r.get('recovery_rate', float('nan')):.3f}"
            f" | {_val(r['frames_used']):.1f} | {_val(r['turns']):.2f} |"
        )
    kinds = sorted({k for r in res["table"].values() for k in (r.get("by_task_type") or {})})
    if kinds:
        lines += ["", "| row | " + " | ".join(kinds) + " |", "| --- |" + " --- |" * len(kinds)]
        for name, r in res["table"].items():
            by = r.get("by_task_type") or {}
            lines.append(f"| {name} | " + " | ".join(_fmt(by.get(k)) for k in kinds) + " |")
    lines += ["", "| paired difference | n | mean [95% CI] | resolved |", "| --- | --- | --- | --- |"]
    for name, p in res["paired"].items():
        lines.append(f"| {name} | {p['n_shared']} | {_fmt(p['diff'])} | {p['diff'].get('resolved')} |")
    return "\n".join(lines) + "\n"
