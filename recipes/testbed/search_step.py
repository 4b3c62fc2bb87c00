"""The search step in an agent's own episodes: after its first look over the file, does it aim at the evidence?

    python -m recipes.testbed.search_step --set runs/testbed/data/study_5306 \\
        --eval layouts_s0=runs/testbed/layouts/sft_s0/eval/study_5306

On the search level, a question that names a colour (``cue_digit_mcq``, ``cue_pitch_mcq``) is answered by one look
over the whole file, then a look inside the span where that colour's field lies. For each ``--eval LABEL=DIR`` (an
eval folder of the recipe's ``eval`` stage; its ``agent/trajectories.jsonl`` is read) and each such question whose
episode opens with a frame look over at least half the file, this counts:

- **cue named**: the second turn's Thought leads with the question's colour (``green ...``), after its quote of
  the Observation when it opens with one (``...; green 26-43``);
- **span holds**: the second turn's Thought leads with the cue and a span (``green 26-43``) that contains the
  answer's evidence (the set's ``evidence`` interval of the digit's showing);
- **look meets**: the second turn's action is a look whose span meets the evidence.

Rates come with a 95% percentile interval over videos (10,000 replicates). It is a measurement of a turn the
teacher gets right in most episodes; the handover page measured the same look from the teacher's context.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import read_jsonl
from recipes.testbed.cli_args import labelled
from recipes.testbed.handover_run import overlaps

TEMPLATES = ("cue_digit_mcq", "cue_pitch_mcq")
SPAN = re.compile(r"^\s*(red|yellow|green|blue) (\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)\b")
N_BOOT = 10_000
MEASURES = {
    "cue named": "cue",
    "span holds": "span",
    "look meets": "look",
}  # the table's columns, the row keys


def span_match(thought: str) -> re.Match[str] | None:
    """The colour and span a Thought leads with (``green 26-43``), after its quote of the Observation when it opens
    with one (the teacher's ``span_quote``: ``14-28 red, 42 blue, 57 green; blue 28-57.``), else None."""
    return SPAN.match((thought or "").rsplit("; ", 1)[-1])


def cue_named(thought: str, cue: str) -> int:
    """1 when ``thought`` leads with a colour and a span and that colour is ``cue``, else 0."""
    m = span_match(thought)
    return int(m is not None and m.group(1) == cue)


def span_holds(thought: str, cue: str, evidence: list[list[float]]) -> int:
    """1 when ``thought`` leads with ``cue`` and a span that contains every evidence interval, else 0."""
    m = span_match(thought)
    if m is None or m.group(1) != cue:
        return 0
    a, b = float(m.group(2)), float(m.group(3))
    return int(all(a <= lo and hi <= b for lo, hi in evidence))


def looks_over_file(action: dict[str, Any], duration: float) -> bool:
    """Whether ``action`` is a frame look over at least half the file (the search's first step)."""
    try:
        width = float(action["end"]) - float(action["start"])
    except (KeyError, TypeError, ValueError):
        return False
    return action.get("type") == "get_frames" and width >= 0.5 * duration


def question_cue(task: dict[str, Any]) -> str:
    """The background colour a cue question names (a ValueError when it names none)."""
    cue = re.search(r"background is (\w+)", task["question"])
    if cue is None:
        raise ValueError(
            f"{task['id']}: a {task.get('extra', {}).get('template')} question names no background colour"
        )
    return cue.group(1)


def episode_row(traj: dict[str, Any], task: dict[str, Any]) -> dict[str, Any] | None:
    """The search step of one episode, or None when the question is not a cue search or the episode does not open
    with a frame look over at least half the file."""
    template = task.get("extra", {}).get("template")
    turns = traj.get("turns") or []
    if template not in TEMPLATES or len(turns) < 2:
        return None
    if not looks_over_file(turns[0].get("action") or {}, float(task["duration"])):
        return None
    cue = question_cue(task)
    evidence = task["evidence"]
    second = turns[1]
    return {
        "video": Path(task["media"]).name,
        "template": template,
        "cue": cue_named(str(second.get("thought") or ""), cue),
        "span": span_holds(str(second.get("thought") or ""), cue, evidence),
        "look": overlaps(second.get("action") or {}, evidence) or 0,
    }


def rate(rows: list[dict[str, Any]], key: str, seed: int = 0) -> dict[str, Any]:
    """The share of ``rows`` whose ``key`` is 1, with a percentile interval from resampling whole videos."""
    if not rows:
        return {"n": 0, "mean": None}
    by: dict[str, list[int]] = {}
    for row in rows:
        by.setdefault(row["video"], []).append(row[key])
    videos = list(by.values())
    sums, counts = np.array([sum(v) for v in videos]), np.array([len(v) for v in videos])
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(videos), size=(N_BOOT, len(videos)))
    boot = sums[pick].sum(axis=1) / counts[pick].sum(axis=1)
    return {"n": len(rows), "mean": float(sums.sum() / counts.sum()),
            "lo": float(np.percentile(boot, 2.5)), "hi": float(np.percentile(boot, 97.5))}  # fmt: skip


def measure(tasks: dict[str, dict[str, Any]], folder: Path) -> dict[str, Any]:
    """Both rates of one eval folder, over all search questions and per template; ``opened`` counts the search
    questions whose episode opened with a look over the file."""
    rows, asked = [], 0
    for traj in read_jsonl(folder / "agent" / "trajectories.jsonl"):
        task = tasks.get(str(traj["id"]))
        if task is None:
            raise ValueError(f"{folder}: episode {traj['id']} is not a question of the set")
        asked += task.get("extra", {}).get("template") in TEMPLATES
        row = episode_row(traj, task)
        if row is not None:
            rows.append(row)
    out: dict[str, Any] = {"search questions": asked, "opened": len(rows)}
    for part in ("all", *TEMPLATES):
        some = [r for r in rows if part == "all" or r["template"] == part]
        out[part] = {key: rate(some, short) for key, short in MEASURES.items()}
    return out


def fmt(r: dict[str, Any]) -> str:
    return "—" if r["mean"] is None else f"{r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}] (n {r['n']})"


def table(results: dict[str, dict[str, Any]]) -> str:
    head = "| agent | questions | search questions | opened | " + " | ".join(MEASURES) + " |"
    lines = [head, "| --- " * (4 + len(MEASURES)) + "|"]
    for label, res in results.items():
        for part in ("all", *TEMPLATES):
            cells = " | ".join(fmt(res[part][key]) for key in MEASURES)
            lines.append(f"| {label} | {part} | {res['search questions']} | {res['opened']} | {cells} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.search_step", description=__doc__.split("\n")[0]
    )
    p.add_argument("--set", type=Path, required=True, help="the tasks folder the eval folders scored")
    p.add_argument(
        "--eval",
        type=labelled,
        action="append",
        required=True,
        metavar="LABEL=DIR",
        help="an eval stage's folder",
    )
    args = p.parse_args(argv)
    tasks = {str(t["id"]): t for t in read_jsonl(args.set / "tasks.jsonl")}
    results = {}
    for label, folder in args.eval:
        results[label] = measure(tasks, folder)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
