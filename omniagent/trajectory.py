"""Trajectory records: everything one episode did, turn by turn, saved as JSON/JSONL and reloadable."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

StopReason = Literal["answered", "turn_budget", "policy_error", "interrupted", "media_error"]


class TurnRecord(BaseModel):
    turn: int
    raw_text: str
    observation: str | None = None
    thought: str | None = None
    action: dict[str, Any] | None = None
    action_type: str | None = None
    error: str | None = None
    error_message: str | None = None
    notes: list[str] = Field(default_factory=list)
    timestamps: list[float] = Field(
        default_factory=list, description="times of the percept this turn fetched"
    )
    frames_used: int = 0  # cumulative
    audio_seconds_used: float = 0.0  # cumulative
    context_tokens: int | None = None
    completion_tokens: int | None = None
    model_seconds: float = 0.0
    env_seconds: float = 0.0
    entropy: float | None = None
    entropy_is_estimate: bool = False
    token_logprobs: list[float] | None = None

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


class Trajectory(BaseModel):
    id: str
    media: str
    question: str
    task_type: str
    choices: list[str] | None = None
    ground_truth: Any = None
    max_turns: int
    policy: str = ""
    turns: list[TurnRecord] = Field(default_factory=list)
    answer: Any = None  # parsed answer, None when the episode did not answer
    reward: float = 0.0
    stop_reason: StopReason | None = None
    error: str | None = None
    frames_used: int = 0
    audio_seconds_used: float = 0.0
    model_seconds: float = 0.0
    env_seconds: float = 0.0
    wall_seconds: float = 0.0
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def answered(self) -> bool:
        return self.stop_reason == "answered"

    @property
    def num_turns(self) -> int:
        return len(self.turns)

    def save_json(self, path: str | os.PathLike[str]) -> None:
        write_atomic(path, self.model_dump_json(indent=2))

    @classmethod
    def load_json(cls, path: str | os.PathLike[str]) -> Trajectory:
        return cls.model_validate_json(Path(path).read_text())


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write a whole file so that a crash leaves either the old or the new content, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def append_jsonl(path: str | os.PathLike[str], record: BaseModel | dict[str, Any]) -> None:
    """Append one record as a single line with one write and an fsync, so a killed run leaves
    whole lines only (readers skip a torn last line, see :func:`read_jsonl`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (
        record.model_dump_json() if isinstance(record, BaseModel) else json.dumps(record, default=str)
    ) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file; a torn final line (a crash mid-write) is skipped, any other bad line raises."""
    path = Path(path)
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(lines) - 1:
                return
            raise ValueError(f"{path}:{i + 1}: not valid JSON ({exc.msg})") from exc


def load_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    return [Trajectory.model_validate(r) for r in read_jsonl(path)]


def save_trajectories(trajs: Iterable[Trajectory], path: str | os.PathLike[str]) -> None:
    write_atomic(path, "".join(t.model_dump_json() + "\n" for t in trajs))
