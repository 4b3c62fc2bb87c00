"""The model's turn format (Observation, Thought, Action) and its strict parser.

The parser never raises on model output: it returns either a :class:`Turn` or a
:class:`FormatError` with a stable code (:class:`envs.errors.ErrorCode`) and a message precise
enough for the model to fix its next turn.

Hostile JSON is refused, not crashed on: nesting deeper than :data:`MAX_DEPTH`, integers longer
than :data:`MAX_INT_DIGITS` digits and repeated keys each have a code. Numbers follow one rule:
every numeric field (``start``, ``end``, ``num``) must be a JSON number, never a string, and
finite; ``num`` must be an integer. Unpaired UTF-16 surrogates in any string are replaced by
U+FFFD (see :func:`safe_text`), so everything parsed encodes as UTF-8 and survives a JSON round
trip.
"""

from __future__ import annotations

import json
import math
import re
import string
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from envs.errors import ActionRejected, ErrorCode

MAX_DEPTH = 32  # nesting levels of arrays/objects; a turn needs 3
MAX_INT_DIGITS = 300  # any integer this long still converts to a finite float


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GetFrames(_Action):
    type: Literal["get_frames"]
    start: float = Field(strict=True)
    end: float = Field(strict=True)
    num: int = Field(strict=True)


class GetAudio(_Action):
    type: Literal["get_audio"]
    start: float = Field(strict=True)
    end: float = Field(strict=True)


class GetClip(_Action):
    type: Literal["get_clip"]
    start: float = Field(strict=True)
    end: float = Field(strict=True)


class Answer(_Action):
    type: Literal["answer"]
    content: str | float | int | list[Any]


Action = Annotated[GetFrames | GetAudio | GetClip | Answer, Field(discriminator="type")]
ACTION_TYPES = ("get_frames", "get_audio", "get_clip", "answer")
TURN_KEYS = ("observation", "thought", "action")
_ACTION = TypeAdapter(Action)


class Turn(BaseModel):
    """One parsed model output."""

    observation: str
    thought: str
    action: Action


class FormatError(BaseModel):
    code: str
    message: str


_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """``text`` with every unpaired UTF-16 surrogate replaced by U+FFFD (pairs are joined).

    Python strings may hold lone surrogates (from ``"\\ud800"`` escapes in JSON, or a backend's
    decoding), which cannot be encoded as UTF-8: a trajectory holding one cannot be saved.
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ActionRejected(
                ErrorCode.FORMAT_DUPLICATE_KEY,
                f"The key {safe_text(key)[:40]!r} appears twice in one object; give each key once.",
            )
        seen.add(key)
    return dict(pairs)


def _bounded_int(digits: str) -> int:
    if len(digits) > MAX_INT_DIGITS:
        raise ActionRejected(
            ErrorCode.FORMAT_NUMBER_TOO_LONG,
            f"An integer in your JSON has {len(digits)} characters; numbers must be at most "
            f"{MAX_INT_DIGITS} digits.",
        )
    return int(digits)


_DECODER = json.JSONDecoder(object_pairs_hook=_reject_duplicates, parse_int=_bounded_int)


def _clean(value: Any, depth: int = 1) -> Any:
    """A copy of decoded JSON with safe strings; refuses nesting deeper than MAX_DEPTH."""
    if isinstance(value, str):
        return safe_text(value)
    if not isinstance(value, dict | list):
        return value
    if depth > MAX_DEPTH:
        raise ActionRejected(
            ErrorCode.FORMAT_TOO_DEEP, f"Your JSON is nested more than {MAX_DEPTH} levels deep."
        )
    if isinstance(value, list):
        return [_clean(v, depth + 1) for v in value]
    return {safe_text(k): _clean(v, depth + 1) for k, v in value.items()}


def _unwrap(text: str, strict: bool) -> str:
    body = text.strip()
    if not body:
        raise ActionRejected(ErrorCode.FORMAT_EMPTY, "Your output was empty. Reply with one JSON object.")
    if body.startswith("```"):
        if strict:
            raise ActionRejected(
                ErrorCode.FORMAT_CODE_FENCE,
                "Your output is wrapped in a Markdown code fence (```). Reply with the bare JSON object only.",
            )
        body = body[3:].lstrip(string.ascii_letters).strip()
        body = body[:-3].rstrip() if body.endswith("```") else body
    return body


def _decode(body: str) -> Any:
    try:
        obj, end = _DECODER.raw_decode(body)
    except RecursionError:
        raise ActionRejected(
            ErrorCode.FORMAT_TOO_DEEP, f"Your JSON is nested more than {MAX_DEPTH} levels deep."
        ) from None
    except json.JSONDecodeError as exc:
        if not body.startswith(("{", "[")):
            raise ActionRejected(
                ErrorCode.FORMAT_NOT_JSON,
                f"Your output must be one JSON object starting with '{{'; it started with {body[:30]!r}.",
            ) from None
        raise ActionRejected(
            ErrorCode.FORMAT_NOT_JSON, f"Your output is not valid JSON: {exc.msg} at char {exc.pos}."
        ) from None
    if body[end:].strip():
        raise ActionRejected(
            ErrorCode.FORMAT_TRAILING_TEXT,
            f"There is text after the JSON object ({body[end:].strip()[:40]!r}...). Output only the object.",
        )
    return _clean(obj)


def _check_shape(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ActionRejected(
            ErrorCode.FORMAT_NOT_OBJECT, "The JSON must be an object with keys observation, thought, action."
        )
    missing = [k for k in TURN_KEYS if k not in obj]
    if missing:
        raise ActionRejected(
            ErrorCode.FORMAT_MISSING_KEY, f"The JSON object lacks the key(s): {', '.join(missing)}."
        )
    extra = sorted(set(obj) - set(TURN_KEYS))
    if extra:
        raise ActionRejected(
            ErrorCode.FORMAT_EXTRA_KEY,
            f"Unexpected key(s): {', '.join(extra)}. Use only observation, thought, action.",
        )
    if not isinstance(obj["observation"], str) or not isinstance(obj["thought"], str):
        raise ActionRejected(ErrorCode.FORMAT_BAD_TYPE, "observation and thought must be strings.")
    act = obj["action"]
    if not isinstance(act, dict) or "type" not in act:
        raise ActionRejected(ErrorCode.ACTION_MISSING_TYPE, 'action must be an object with a "type" field.')
    if act["type"] not in ACTION_TYPES:
        raise ActionRejected(
            ErrorCode.ACTION_UNKNOWN,
            f"Unknown action type {str(act['type'])[:40]!r}; use one of {', '.join(ACTION_TYPES)}.",
        )
    return act


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    return False


def _check_action(act: dict[str, Any]) -> Action:
    for key in ("start", "end"):
        value = act.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            raise ActionRejected(ErrorCode.TIME_NOT_FINITE, f"{key} must be a finite number of seconds.")
        if isinstance(value, str):
            raise ActionRejected(
                ErrorCode.ACTION_INVALID_FIELD,
                f"action field {key!r} must be a JSON number of seconds, not the string {value[:20]!r}.",
            )
    for key, value in act.items():
        if _has_non_finite(value):
            raise ActionRejected(
                ErrorCode.ACTION_INVALID_FIELD, f"action field {key!r} holds NaN or Infinity."
            )
    try:
        return _ACTION.validate_python(act)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"][1:]) or "action"
        raise ActionRejected(
            ErrorCode.ACTION_INVALID_FIELD, f"action field {where!r}: {first['msg']}."
        ) from None


def parse_turn(text: str, strict: bool = True) -> Turn | FormatError:
    """Parse one raw model output into a Turn, or say precisely why it is not one.

    With ``strict=False`` a Markdown code fence around the JSON is tolerated (hosted chat models
    add them); the default is strict because training data and RL rewards depend on the format.
    Raises TypeError only for a non-string (a harness bug, not model output).
    """
    if not isinstance(text, str):
        raise TypeError(f"a turn is the model's text (str), not {type(text).__name__}")
    try:
        obj = _decode(_unwrap(text, strict))
        act = _check_shape(obj)
        action = _check_action(act)
    except ActionRejected as exc:
        return FormatError(code=exc.code, message=exc.message)
    return Turn(observation=obj["observation"], thought=obj["thought"], action=action)
