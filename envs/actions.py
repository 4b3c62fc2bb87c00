"""The model's turn format (Observation, Thought, Action) and its strict parser.

The parser never raises on model output: it returns either a :class:`Turn` or a
:class:`FormatError` with a stable code and a message precise enough for the model to fix its
next turn. Codes are part of the public interface (trajectories, SFT filters and RL penalties key
on them), so they only ever get added, never renamed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GetFrames(_Action):
    type: Literal["get_frames"]
    start: float
    end: float
    num: int


class GetAudio(_Action):
    type: Literal["get_audio"]
    start: float
    end: float


class GetClip(_Action):
    type: Literal["get_clip"]
    start: float
    end: float


class Answer(_Action):
    type: Literal["answer"]
    content: str | float | int | list[Any]


Action = Annotated[GetFrames | GetAudio | GetClip | Answer, Field(discriminator="type")]
ACTION_TYPES = ("get_frames", "get_audio", "get_clip", "answer")
_ACTION = TypeAdapter(Action)


class Turn(BaseModel):
    """One parsed model output."""

    observation: str
    thought: str
    action: Action


class FormatError(BaseModel):
    code: str
    message: str


_FENCE = re.compile(r"^\s*```")


def parse_turn(text: str, strict: bool = True) -> Turn | FormatError:
    """Parse one raw model output into a Turn.

    With ``strict=False`` a Markdown code fence around the JSON is tolerated (hosted chat models
    add them); the default is strict because training data and RL rewards depend on the format.
    """
    body = text.strip()
    if not body:
        return FormatError(code="format_empty", message="Your output was empty. Reply with one JSON object.")
    if _FENCE.match(body):
        if strict:
            return FormatError(
                code="format_code_fence",
                message="Your output is wrapped in a Markdown code fence (```). Reply with the bare JSON object only.",
            )
        body = re.sub(r"^\s*```[a-zA-Z]*\s*|\s*```\s*$", "", body)
    try:
        obj, end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as exc:
        if not body.startswith(("{", "[")):
            return FormatError(
                code="format_not_json",
                message=f"Your output must be one JSON object starting with '{{'; it started with {body[:30]!r}.",
            )
        return FormatError(
            code="format_not_json", message=f"Your output is not valid JSON: {exc.msg} at char {exc.pos}."
        )
    if body[end:].strip():
        return FormatError(
            code="format_trailing_text",
            message=f"There is text after the JSON object ({body[end:].strip()[:40]!r}...). Output only the object.",
        )
    if not isinstance(obj, dict):
        return FormatError(
            code="format_not_object",
            message="The JSON must be an object with keys observation, thought, action.",
        )
    missing = [k for k in ("observation", "thought", "action") if k not in obj]
    if missing:
        return FormatError(
            code="format_missing_key", message=f"The JSON object lacks the key(s): {', '.join(missing)}."
        )
    extra = sorted(set(obj) - {"observation", "thought", "action"})
    if extra:
        return FormatError(
            code="format_extra_key",
            message=f"Unexpected key(s): {', '.join(extra)}. Use only observation, thought, action.",
        )
    if not isinstance(obj["observation"], str) or not isinstance(obj["thought"], str):
        return FormatError(code="format_bad_type", message="observation and thought must be strings.")
    act = obj["action"]
    if not isinstance(act, dict) or "type" not in act:
        return FormatError(
            code="action_missing_type", message='action must be an object with a "type" field.'
        )
    if act["type"] not in ACTION_TYPES:
        return FormatError(
            code="action_unknown",
            message=f"Unknown action type {act['type']!r}; use one of {', '.join(ACTION_TYPES)}.",
        )
    for key in ("start", "end"):
        value = act.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            return FormatError(code="time_not_finite", message=f"{key} must be a finite number of seconds.")
    try:
        action = _ACTION.validate_python(act)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"][1:]) or "action"
        return FormatError(code="action_invalid_field", message=f"action field {where!r}: {first['msg']}.")
    return Turn(observation=obj["observation"], thought=obj["thought"], action=action)
