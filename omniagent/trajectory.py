"""Trajectory records: everything one episode did, turn by turn, saved as JSON/JSONL and reloadable.

Any text a model writes must survive a save and a reload, including unpaired UTF-16 surrogates
(a model that writes the JSON escape ``"\\ud800"`` yields one), which UTF-8 cannot encode. Every
string that enters a record, at construction or by assignment, is made safe here with
:func:`envs.actions.safe_text` (the environment's own rule: unpaired surrogates become U+FFFD,
pairs are joined), so a record always serialises and reloads equal to itself.
Files are read and written through :mod:`envs.jsonl`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticSerializationError

from envs import jsonl
from envs.actions import safe_text

if TYPE_CHECKING:
    from omniagent.policy_base import TurnOutput

StopReason = Literal["answered", "turn_budget", "policy_error", "interrupted", "media_error"]
RecordedEstimator = Literal["exact", "topk_lump", "topk_legacy"]
"""``entropy_estimator`` of a saved turn; ``topk_legacy``: an older top-k estimate (files written
before the estimator was recorded), not comparable with ``topk_lump``."""


def safe_tree(value: Any) -> Any:
    """``value`` with every string in it (dict keys included) made UTF-8 safe."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_tree(k): safe_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [safe_tree(v) for v in value]
    if isinstance(value, tuple):
        return tuple(safe_tree(v) for v in value)
    return value


SafeStr = Annotated[str, AfterValidator(safe_text)]
SafeAny = Annotated[Any, AfterValidator(safe_tree)]
SafeDict = Annotated[dict[str, Any], AfterValidator(safe_tree)]


class _Record(BaseModel):
    """Strings are made safe on construction and on assignment; a string that slipped in unsafely
    (a dict mutated in place) is made safe when the record is dumped, so dumping never fails on
    what a model wrote, whichever writer calls it."""

    model_config = ConfigDict(validate_assignment=True)

    def model_dump_json(self, **kwargs: Any) -> str:
        try:
            return super().model_dump_json(**kwargs)
        except PydanticSerializationError:
            return type(self).model_validate(self.model_dump()).model_dump_json(**kwargs)


class TurnRecord(_Record):
    turn: int
    raw_text: SafeStr  # what the environment parsed (a thinking variant's reasoning cut off)
    thinking: SafeStr | None = None  # a thinking variant's reasoning block, kept out of the parse
    observation: SafeStr | None = None
    thought: SafeStr | None = None
    action: SafeDict | None = None
    action_type: str | None = None
    error: str | None = None
    error_message: SafeStr | None = None
    notes: list[SafeStr] = Field(default_factory=list)
    timestamps: list[float] = Field(
        default_factory=list, description="times of the percept this turn fetched"
    )
    frames_used: int = 0  # cumulative
    audio_seconds_used: float = 0.0  # cumulative
    clip_seconds_used: float = 0.0  # cumulative: seconds get_clip served (after trimming to the file)
    context_tokens: int | None = None
    completion_tokens: int | None = None
    model_seconds: float = 0.0
    env_seconds: float = 0.0
    entropy: float | None = None
    entropy_estimator: RecordedEstimator | None = None
    token_logprobs: list[float] | None = None
    scripted_error: bool = False  # a teacher's deliberate mistake (TurnOutput.scripted_error): not a target

    @model_validator(mode="before")
    @classmethod
    def _legacy_estimate_flag(cls, data: Any) -> Any:
        """Files written before ``entropy_estimator`` carry a bool ``entropy_is_estimate``."""
        if isinstance(data, dict) and "entropy_is_estimate" in data:
            data = dict(data)
            flag = data.pop("entropy_is_estimate")
            if data.get("entropy_estimator") is None and data.get("entropy") is not None:
                data["entropy_estimator"] = "topk_legacy" if flag else "exact"
        return data

    @property
    def entropy_is_estimate(self) -> bool:
        """True when the entropy comes from truncated top-k log-probs rather than full logits."""
        return self.entropy_estimator not in (None, "exact")

    @classmethod
    def from_step(
        cls, out: TurnOutput, info: Mapping[str, Any], *, env_seconds: float = 0.0, **fields: Any
    ) -> TurnRecord:
        """The record of one turn: the policy's output ``out`` and the environment's step ``info``.

        ``fields`` override or add to what ``info`` holds (a single-turn baseline passes the percept
        statistics it served itself, with an empty ``info``).
        """
        parsed = info.get("parsed") or {}
        data: dict[str, Any] = {
            "turn": info.get("turn", 1),
            "raw_text": out.text,
            "thinking": out.thinking,
            "observation": parsed.get("observation"),
            "thought": parsed.get("thought"),
            "action": parsed.get("action"),
            "action_type": info.get("action_type"),
            "error": info.get("error"),
            "error_message": info.get("error_message"),
            "notes": list(info.get("notes") or []),
            "timestamps": list(info.get("timestamps") or []),
            "frames_used": info.get("frames_used", 0),
            "audio_seconds_used": info.get("audio_seconds_used", 0.0),
            "clip_seconds_used": info.get("clip_seconds_used", 0.0),
            "context_tokens": out.prompt_tokens,
            "completion_tokens": out.completion_tokens,
            "model_seconds": out.model_seconds,
            "env_seconds": env_seconds,
            "entropy": out.entropy,
            "entropy_estimator": out.entropy_estimator,
            "token_logprobs": out.token_logprobs,
            "scripted_error": out.scripted_error,
        }
        return cls(**{**data, **fields})

    def request(self) -> str:
        """The action as one line: ``get_frames 0.00-20.00 s num=8``, ``answer "B"``, ``no valid action``."""
        a = self.action or {}
        if self.action_type is None:
            return "no valid action"
        if self.action_type == "answer":
            return f"answer {json.dumps(a.get('content'))}"
        span = f"{float(a.get('start', 0)):.2f}-{float(a.get('end', 0)):.2f} s"
        return f"{self.action_type} {span}" + (
            f" num={a.get('num')}" if self.action_type == "get_frames" else ""
        )


class Trajectory(_Record):
    id: SafeStr
    media: SafeStr
    question: SafeStr
    task_type: str
    choices: list[SafeStr] | None = None
    ground_truth: SafeAny = None
    max_turns: int
    policy: SafeStr = ""
    turns: list[TurnRecord] = Field(default_factory=list)
    answer: SafeAny = None  # parsed answer, None when the episode did not answer
    reward: float = 0.0
    stop_reason: StopReason | None = None
    error: SafeStr | None = None
    frames_used: int = 0
    audio_seconds_used: float = 0.0
    clip_seconds_used: float = 0.0
    model_seconds: float = 0.0
    env_seconds: float = 0.0
    wall_seconds: float = 0.0
    meta: SafeDict = Field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return self.stop_reason == "answered"

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def env_options(self, media: str | None = None) -> dict[str, Any]:
        """``env.reset`` options that replay this episode's task (``media``: another path to the same file)."""
        return {
            "media": self.media if media is None else media,
            "question": self.question,
            "task_type": self.task_type,
            "choices": self.choices,
            "answer": self.ground_truth,
            "max_turns": self.max_turns,
        }

    def save_json(self, path: str | os.PathLike[str]) -> None:
        jsonl.write_atomic(path, self.model_dump_json(indent=2))

    @classmethod
    def load_json(cls, path: str | os.PathLike[str]) -> Trajectory:
        # json.loads, not pydantic's parser: a file may hold "\ud800" escapes written by other tools
        return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))


def load_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """Every trajectory of a JSONL file (a torn last line, from a killed run, is skipped)."""
    return jsonl.read_jsonl(path, Trajectory.model_validate, torn_tail=True)


def save_trajectories(trajs: Iterable[Trajectory], path: str | os.PathLike[str]) -> None:
    """Write a whole JSONL file of trajectories atomically."""
    jsonl.write_jsonl(path, trajs)
