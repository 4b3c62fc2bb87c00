"""The digit probe's forced looks and how a turn is scored against the truth (:mod:`recipes.testbed.digit_probe`
has the design): a look of ``n`` frames inside the cued field with one frame on the digit, and the read of an
Observation in the compact language."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from omniagent.backends.synth_compact import parse_compact
from omniagent.backends.synth_world import SynthWorld

GRID = 8  # the forced looks' frame spacing is the field's length over this, for every look size
EDGE_S = 0.1  # the digit frame lies at least this far inside the showing


def shows_digit(world: SynthWorld, t: float) -> bool:
    """Whether the frame served at ``t`` and those ``EDGE_S`` either side show a digit (not an edge frame)."""
    return all(any(i.kind == "digit" for i in world.frame(x)) for x in (t - EDGE_S, t, t + EDGE_S))


def forced_look(
    world: SynthWorld, field: tuple[float, float], n: int, rng: np.random.Generator
) -> dict[str, Any] | None:
    """A ``get_frames`` action of ``n`` frames with whole-second ends inside ``field``, whose frames are about the
    field's length over :data:`GRID` apart (within half a second) and one of which shows the field's digit; drawn
    at random among those that exist (None when none does)."""
    lo, hi = math.ceil(field[0]), math.floor(field[1])
    if n == 1:
        starts = [(a, a) for a in range(lo, hi + 1) if shows_digit(world, float(a))]
    else:
        spacing = (field[1] - field[0]) / GRID
        starts = [
            (a, b)
            for a in range(lo, hi + 1)
            for b in range(a + 1, hi + 1)
            if abs((b - a) / (n - 1) - spacing) <= 0.5
            and any(shows_digit(world, float(t)) for t in np.linspace(a, b, n))
        ]
    if not starts:
        return None
    a, b = starts[int(rng.integers(len(starts)))]
    return {"type": "get_frames", "start": a, "end": b, "num": n}


def digit_frame(world: SynthWorld, look: dict[str, Any]) -> float:
    """The time of the look's first frame that shows the digit."""
    times = np.linspace(look["start"], look["end"], look["num"])
    return float(next(t for t in times if shows_digit(world, float(t))))


def score_read(text: str, digit: str, second: int, hue: str) -> dict[str, int]:
    """One Observation against the truth: ``read`` (names exactly one digit, the shown one), ``named`` (any
    digit), ``at_frame`` (the shown digit at the digit frame's written second), ``colour`` (the cued colour
    there); an Observation that does not parse scores 0 on all."""
    try:
        claims = [c for c in parse_compact(text) if c.kind == "frames"]
    except ValueError:
        claims = []
    named = {i.value for c in claims for i in c.items if i.kind == "digit"}
    there = [c for c in claims if c.first <= second <= c.last]
    return {
        "read": int(named == {digit}),
        "named": int(bool(named)),
        "at_frame": int(any(i.kind == "digit" and i.value == digit for c in there for i in c.items)),
        "colour": int(any(i.kind == "background" and i.value == hue for c in there for i in c.items)),
    }


def cue_digit_items(tasks_file: Path) -> list[dict[str, Any]]:
    """The set's ``cue_digit_mcq`` questions with their field, showing, digit and cued colour."""
    from envs.tasks import load_tasks_jsonl

    items = []
    for task in load_tasks_jsonl(tasks_file):
        extra = task.extra or {}
        if extra.get("template") != "cue_digit_mcq":
            continue
        digit = task.choices[ord(str(task.answer)) - ord("A")]
        hue = task.question.rsplit(" ", 1)[-1].rstrip("?")
        items.append({"task": task, "field": tuple(extra["field"]), "digit": str(digit), "hue": hue})
    return items
