"""The digit probe's episodes (:mod:`recipes.testbed.digit_probe` has the design): the teacher's context, the forced
look, and the agent's next turn or caption, one row per (question, look size, condition)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import append_jsonl, read_jsonl
from omniagent.backends.synth_compact import sec
from omniagent.backends.synth_world import SynthWorld
from recipes.testbed.digit_looks import cue_digit_items, digit_frame, forced_look, score_read
from recipes.testbed.probe_cli import blind_media, probe_players
from recipes.tiny_agent.frame_captions import frame_prompt, greedy_caption, without_turn_notice

CAPTION_TOKENS = 64


def teacher_context(env: Any, teacher: Any, task: Any) -> tuple[str, dict[str, Any]] | None:
    """The teacher's first turn (raw text) and its second turn's reply as a dict; None when that reply already
    names a digit or answers (the first look hit the showing)."""
    obs, info = env.reset(options=task.env_options(max_turns=env.limits.max_turns))
    teacher.reset(info)
    first = teacher.act(obs).text
    obs, *_ = env.step(first)
    second = json.loads(teacher.act(obs).text)
    if second["action"].get("type") == "answer" or "digit" in str(second.get("thought", "")):
        return None
    return first, second


def served_percept(obs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last percept's parts as served, without the turn notice."""
    return without_turn_notice(obs[-1]["content"])


def caption(agent: Any, parts: list[dict[str, Any]]) -> str:
    """The agent's greedy caption of a look (one frame: the single-frame caption prompt)."""
    images = [p for p in parts if p.get("type") == "image"]
    if len(images) == 1:
        parts = frame_prompt(float(images[0]["timestamp"]), images[0])
    return greedy_caption(agent.model, agent.processor, parts, CAPTION_TOKENS)


def observation_of(text: str) -> str:
    try:
        return str(json.loads(text).get("observation", ""))
    except (ValueError, AttributeError):
        return ""


def agent_turn(
    env: Any, agent: Any, task: Any, media: str, turns: list[str]
) -> tuple[str, list[dict[str, Any]]]:
    """Replay ``turns`` on ``media``; the agent's Observation of the last one's percept, and that percept."""
    options = {**task.env_options(max_turns=env.limits.max_turns), "media": media}
    obs, info = env.reset(options=options)
    agent.reset(info)
    for text in turns:
        obs, *_ = env.step(text)
    return observation_of(agent.act(obs).text), served_percept(obs)


def run_probe(args: argparse.Namespace) -> None:
    env, teacher, agent = probe_players(args.model, args.seed)
    rows_file = args.out / "rows.jsonl"
    done = {(r["id"], r.get("condition"), r.get("n")) for r in read_jsonl(rows_file, missing_ok=True)}
    blind = blind_media(args.set) if "blind" in args.conditions else {}
    for index, item in enumerate(cue_digit_items(args.set / "tasks.jsonl")):
        task = item["task"]
        if (task.id, None, None) in done:
            continue
        context = teacher_context(env, teacher, task)
        if context is None:
            append_jsonl(
                rows_file, {"id": task.id, "media": task.media, "left_out": "first look hit the digit"}
            )
            continue
        first, second = context
        world = SynthWorld.for_media(task.media)
        for n in args.sizes:
            todo = [c for c in args.conditions if (task.id, c, n) not in done]
            look = (
                forced_look(world, item["field"], n, np.random.default_rng([args.seed, index, n]))
                if todo
                else None
            )
            if look is None:
                if todo and (task.id, "none", n) not in done:
                    append_jsonl(rows_file, {"id": task.id, "media": task.media, "condition": "none", "n": n,
                                             "left_out": f"no {n}-frame look fits the field"})  # fmt: skip
                continue
            turns = [first, json.dumps({**second, "action": look})]
            second_of_digit = sec(digit_frame(world, look))
            texts = {}
            if {"episode", "caption"} & set(todo):
                texts["episode"], parts = agent_turn(env, agent, task, task.media, turns)
                if "caption" in todo:
                    texts["caption"] = caption(agent, parts)
            if "blind" in todo:
                texts["blind"], _ = agent_turn(env, agent, task, blind[task.id], turns)
            for cond in todo:
                row = {"id": task.id, "media": Path(task.media).name, "condition": cond, "n": n, "look": look,
                       "text": texts[cond], **score_read(texts[cond], item["digit"], second_of_digit, item["hue"])}  # fmt: skip
                append_jsonl(rows_file, row)
    env.close()
