"""The JSON schema of a well-formed turn for one episode, so a backend can decode under it.

Why: a small model loses the answer format and the JSON structure over a long context, and every
malformed turn costs a turn of the budget. The environment knows everything a valid turn depends
on (the actions this media allows, the caps, the file's duration, the task's answer format), so it
publishes the schema in ``reset``'s info (``turn_schema``) and every backend reads the same one:
the transformers backend through xgrammar, a vLLM or OpenAI-compatible server as its structured
output. The schema cannot express everything the parser checks (``start <= end``, span caps), so
the environment still validates each turn; the schema only rules out what can never be accepted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envs.prompts import available_actions
from envs.scoring import get_scorer

if TYPE_CHECKING:
    from envs.limits import EnvLimits
    from envs.media import MediaInfo


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    """Every key required, in this order (the order the prompt shows), and no other key."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def action_schemas(
    media: MediaInfo, task_type: str, choices: list[str] | None, limits: EnvLimits
) -> list[dict]:
    # a span must start inside the file (envs/step_rules.clamp_span); its end is trimmed to it
    span = {
        "start": {"type": "number", "minimum": 0, "exclusiveMaximum": media.duration},
        "end": {"type": "number", "minimum": 0, "maximum": media.duration},
    }
    num = {"type": "integer", "minimum": 1, "maximum": limits.max_frames}
    shapes: dict[str, dict[str, Any]] = {
        "get_frames": {**span, "num": num},
        "get_audio": span,
        "get_clip": span,
    }
    out = [_object({"type": {"const": a}, **shapes[a]}) for a in available_actions(media)]
    scorer = get_scorer(task_type, limits.max_answer_chars, limits.mcq_option_text)
    content = scorer.content_schema(choices, media.duration)
    out.append(_object({"type": {"const": "answer"}, "content": content}))
    return out


def turn_schemas(
    media: MediaInfo, task_type: str, choices: list[str] | None, limits: EnvLimits
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema of any turn, ``{"observation": str, "thought": str, "action": one of the allowed
    actions}``, and of the budget's last turn, where the only allowed action is the answer."""
    actions = action_schemas(media, task_type, choices, limits)

    def turn(action: dict[str, Any]) -> dict[str, Any]:
        return _object({"observation": {"type": "string"}, "thought": {"type": "string"}, "action": action})

    return turn({"anyOf": actions}), turn(actions[-1])
