"""The handover probe's episodes (:mod:`recipes.testbed.handover` has the design): the teacher's whole episode, then
for every handover point k the teacher's first k turns replayed and the agent playing the rest, one row per
(question, condition, k)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from envs.jsonl import append_jsonl, read_jsonl
from envs.tasks import load_tasks_jsonl
from recipes.testbed.probe_cli import blind_media, probe_players

CONDITIONS = ("media", "blind")


def play(env: Any, policy: Any, task: Any, media: str, given: list[str]) -> tuple[list[str], float]:
    """Replay the turns ``given`` on ``media``, then let ``policy`` play until the episode ends: its turns (raw
    text) and the environment's reward (0 when it never answers)."""
    options = {**task.env_options(max_turns=env.limits.max_turns), "media": media}
    obs, info = env.reset(options=options)
    policy.reset(info)
    done = False
    for text in given:
        obs, reward, terminated, truncated, _ = env.step(text)
        done = terminated or truncated
        if done:
            raise ValueError(f"{task.id}: the episode ended inside the {len(given)} given turns")
    own: list[str] = []
    reward = 0.0
    while not done:
        text = policy.act(obs).text
        own.append(text)
        obs, reward, terminated, truncated, _ = env.step(text)
        done = terminated or truncated
    return own, float(reward)


def lead(thought: str) -> str:
    """A Thought's leading clause (before its first comma or full stop): the cue and the span it tracks."""
    return thought.strip().replace(".", ",").split(",", 1)[0].strip()


def overlaps(action: dict[str, Any], evidence: list[list[float]]) -> int | None:
    """Whether a look's span meets the answer's evidence (None for a turn that is not a look)."""
    if action.get("type") not in ("get_frames", "get_audio", "get_clip"):
        return None
    try:
        a, b = float(action["start"]), float(action["end"])
    except (KeyError, TypeError, ValueError):
        return 0
    return int(any(a <= hi and lo <= b for lo, hi in evidence))


def agreement(agent_text: str, teacher_text: str, evidence: list[list[float]]) -> dict[str, Any]:
    """The agent's turn against the teacher's in the same context: each field identical (strings stripped); the
    action by its type, and for an answer by its content too (``letter``, only on the teacher's answer turn).
    Finer measures: the Thought's leading clause identical (``span_same``); each look's span meets the evidence
    (``look_hits``, and the teacher's ``teacher_look_hits``; None when the turn is not a look)."""
    teacher = json.loads(teacher_text)
    try:
        agent = json.loads(agent_text)
    except ValueError:
        agent = None
    if not isinstance(agent, dict):
        agent = {}
    action = agent.get("action") if isinstance(agent.get("action"), dict) else {}
    thought = str(agent.get("thought", ""))
    out: dict[str, Any] = {
        "parsed": int(bool(agent)),
        "obs_same": int(str(agent.get("observation", "")).strip() == teacher["observation"]),
        "thought_same": int(thought.strip() == teacher["thought"]),
        "type_same": int(action.get("type") == teacher["action"]["type"]),
        "span_same": int(bool(agent) and lead(thought) == lead(teacher["thought"])),
        "look_hits": overlaps(action, evidence),
        "teacher_look_hits": overlaps(teacher["action"], evidence),
    }
    if teacher["action"]["type"] == "answer":
        out["letter"] = int(
            out["type_same"] and str(action.get("content", "")).strip() == teacher["action"]["content"]
        )
    return out


def question_rows(
    env: Any,
    agent: Any,
    task: Any,
    teacher_turns: list[str],
    media: dict[str, str],
    done: set[tuple[Any, ...]],
    last_only: bool = False,
) -> list[dict[str, Any]]:
    """The rows of one teacher-correct question not yet in ``done``: every condition and handover point (with
    ``last_only``, only "last")."""
    n = len(teacher_turns)
    template = (task.extra or {}).get("template")
    rows = []
    for cond, path in media.items():
        for k in [n - 1] if last_only else range(n):
            if (task.id, cond, k) in done:
                continue
            own, reward = play(env, agent, task, path, teacher_turns[:k])
            rows.append({"id": task.id, "media": Path(task.media).name, "template": template,
                         "condition": cond, "k": k, "n_teacher": n, "last": int(k == n - 1), "reward": reward,
                         "turns": own, **agreement(own[0], teacher_turns[k], task.evidence or [])})  # fmt: skip
    return rows


def run_probe(args: argparse.Namespace) -> None:
    env, teacher, agent = probe_players(args.model, args.seed, bool(getattr(args, "option_text", 0)))
    rows_file = args.out / "rows.jsonl"
    done = {(r["id"], r.get("condition"), r.get("k")) for r in read_jsonl(rows_file, missing_ok=True)}
    blind = blind_media(args.set) if "blind" in args.conditions else {}
    tasks = load_tasks_jsonl(args.set / "tasks.jsonl")
    for task in tasks[: args.limit] if args.limit else tasks:
        if (task.id, None, None) in done:
            continue
        teacher_turns, teacher_reward = play(env, teacher, task, task.media, [])
        if teacher_reward < 1.0:
            append_jsonl(rows_file, {"id": task.id, "media": Path(task.media).name, "left_out": "teacher wrong",
                                     "teacher": teacher_turns})  # fmt: skip
            continue
        media = {c: task.media if c == "media" else blind[task.id] for c in args.conditions}
        for row in question_rows(
            env, agent, task, teacher_turns, media, done, getattr(args, "last_only", False)
        ):
            append_jsonl(rows_file, {**row, "teacher": teacher_turns})
    env.close()
