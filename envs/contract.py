"""The environment's Gymnasium contract in types: the observation space and the ``info`` dicts.

Why a module of its own: harnesses (episode loop, passive baseline, RL agent loop) read these keys,
so they are declared once, as TypedDicts a type checker can hold them to, and documented here
rather than only in the code that fills them.
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired[...] from real annotations.
from typing import Any, Literal

from gymnasium import spaces
from typing_extensions import NotRequired, TypedDict

from envs.messages import MEDIA_TYPES, Message, text_part


class TaskFields(TypedDict):
    """The task of the episode, as the policy may see it (``answer`` is the ground truth or None)."""

    question: str
    task_type: str
    choices: list[str] | None
    answer: Any


class ResetInfo(TypedDict):
    """``info`` returned by ``reset``."""

    turn: int  # always 0
    max_turns: int  # the turn budget K of this episode
    media: dict[str, Any]  # envs.media.MediaInfo as a dict: duration, has_video, has_audio, fps, ...
    task: TaskFields
    task_id: str | None  # the Task id when drawn from a task source or given in options, else None
    turn_schema: dict[str, Any]  # JSON schema of a well-formed turn (envs/turn_schema.py)
    final_turn_schema: dict[str, Any]  # the same for the budget's last turn: the action must be an answer
    error: None
    timestamps: list[float]  # empty
    frames_used: int  # 0
    audio_seconds_used: float  # 0.0
    clip_seconds_used: float  # 0.0


class StepInfo(TypedDict):
    """``info`` returned by ``step``."""

    turn: int  # 1-based number of the turn just taken
    max_turns: int
    error: str | None  # an envs.errors.ErrorCode value when the turn was rejected, else None
    error_message: str | None  # what the model is told about the rejection
    notes: list[str]  # adjustments made to a served request (times trimmed, num lowered, ...)
    timestamps: list[float]  # true times of the frames served, or [start, end] of the audio
    parsed: dict[str, Any] | None  # the parsed Turn (observation, thought, action) or None
    action_type: str | None  # "get_frames" | "get_audio" | "get_clip" | "answer" when parsed
    frames_used: int  # frames served so far in the episode
    audio_seconds_used: float  # seconds of audio served so far (get_audio, and a clip's sound)
    clip_seconds_used: float  # seconds get_clip served so far (spans after trimming; refused: 0)
    stop_reason: NotRequired[Literal["answered", "turn_budget"]]  # only when the episode ends
    answer: NotRequired[Any]  # the parsed answer (a letter, intervals, a number, text)
    reward_available: NotRequired[bool]  # False when there is no truth, or an ff answer has no judge


class ChatSpace(spaces.Space):
    """The space of chat contexts: lists of {"role", "content": [parts]} messages."""

    def __init__(self) -> None:
        super().__init__(shape=None, dtype=None)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list):
            return False
        for m in x:
            if not (isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")):
                return False
            if not isinstance(m.get("content"), list):
                return False
            for p in m["content"]:
                if not isinstance(p, dict) or p.get("type") not in ("text", *MEDIA_TYPES):
                    return False
        return True

    def __eq__(self, other: object) -> bool:  # all chat spaces are one space (gymnasium.vector compares them)
        return isinstance(other, ChatSpace)

    def __hash__(self) -> int:
        return hash(ChatSpace)

    def __repr__(self) -> str:
        return "ChatSpace()"

    def sample(self, mask: Any = None, probability: Any = None) -> list[Message]:
        return [{"role": "user", "content": [text_part("")]}]

    @property
    def is_np_flattenable(self) -> bool:
        return False
