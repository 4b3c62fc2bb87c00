"""Deterministic non-model policies: baselines, and drivers for tests of the machinery.

- ``uniform``: one uniform scan of the whole file (``num_frames`` frames, or ``get_audio`` windows
  for an audio-only file), then a fixed guess that is valid for the task type (mcq ``"A"``, tr the
  whole file, num/size ``0``, ff ``"unknown"``).
- ``oracle``: answers the ground truth from the reset info (``info["task"]["answer"]``), optionally
  after looking at the evidence spans (given, or for tr the answer's own intervals).
- ``random``: a seeded number of random valid perception actions, then a random valid answer.
- ``replay``: plays back a given list of raw texts (malformed ones included), one per turn.

Every policy writes its turns with :func:`json.dumps`, so the text is always valid JSON, and never
takes more turns than the budget: the last turn is always an answer (except for ``replay``).
"""

from __future__ import annotations

import json
import math
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from envs.limits import EnvLimits
from envs.messages import Message
from envs.scoring import letters
from omniagent.policy_base import Policy, PolicyError, PolicyParams, TurnOutput, register_policy


def turn_text(action: dict[str, Any], observation: str = "none", thought: str = "") -> str:
    """One well-formed turn as JSON text."""
    return json.dumps({"observation": observation, "thought": thought, "action": action})


def fixed_guess(task_type: str, duration: float) -> Any:
    """An answer in the right format for ``task_type`` that uses no information."""
    if task_type == "mcq":
        return "A"
    if task_type == "tr":
        return [[0.0, round(duration, 3)]]
    if task_type in ("num", "size"):
        return 0
    return "unknown"


class ScriptedParams(PolicyParams):
    """Parameters every scripted policy takes."""

    limits: EnvLimits = Field(
        default_factory=EnvLimits, description="the environment's limits, so every planned action fits them"
    )


class ScriptedPolicy(Policy):
    """A plan of actions made at reset and played turn by turn, ending in an answer.

    Subclasses declare ``Params`` (a subclass of :class:`ScriptedParams`) and read ``self.params``.
    """

    name = "scripted"
    Params = ScriptedParams

    def __init__(self, **kwargs: Any) -> None:
        self.limits: EnvLimits = self._init_params(kwargs).limits
        self.info: dict[str, Any] = {}
        self.plan: list[dict[str, Any]] = []
        self.turn = 0

    @property
    def duration(self) -> float:
        return float(self.info["media"]["duration"])

    @property
    def task(self) -> dict[str, Any]:
        return self.info["task"]

    def reset(self, info: dict[str, Any]) -> None:
        self.info = info
        self.turn = 0
        self.max_turns = int(info["max_turns"])
        self.plan = self.make_plan()

    def make_plan(self) -> list[dict[str, Any]]:
        """Perception actions to take before answering (cut to fit the budget)."""
        return []

    def answer(self) -> Any:
        raise NotImplementedError

    def thought(self, action: dict[str, Any]) -> str:
        return f"{self.name} policy: step {self.turn}."

    def act(self, messages: list[Message]) -> TurnOutput:
        t0 = time.perf_counter()
        if not self.info:
            raise PolicyError(f"{self.name}: act() before reset(); run it through run_episode")
        self.turn += 1
        looks = self.plan[: max(0, self.max_turns - 1)]
        if self.turn <= len(looks):
            action = looks[self.turn - 1]
        else:
            action = {"type": "answer", "content": self.answer()}
        observation = "none" if self.turn == 1 else f"(not read by the {self.name} policy)"
        text = turn_text(action, observation, self.thought(action))
        return TurnOutput(text=text, model_seconds=time.perf_counter() - t0)

    # spans that fit the limits ---------------------------------------------------------------
    def audio_windows(self, start: float, end: float, max_windows: int) -> list[dict[str, Any]]:
        """``get_audio`` actions covering [start, end] in at most ``max_windows`` windows of at
        most ``max_audio_s`` each (spread evenly when the span is longer than that)."""
        cap = self.limits.max_audio_s
        length = end - start
        if length <= 0:
            return []
        n = max(1, min(max_windows, math.ceil(length / cap - 1e-9)))
        w = min(cap, length / n)
        starts = [start + (length - w) * i / (n - 1) for i in range(n)] if n > 1 else [start]
        return [{"type": "get_audio", "start": round(s, 3), "end": round(min(end, s + w), 3)} for s in starts]


class UniformParams(ScriptedParams):
    num_frames: int = Field(8, ge=1, description="frames of the one scan (capped at limits.max_frames)")
    max_audio_windows: int = Field(1, ge=1, description="get_audio windows for an audio-only file")


@register_policy("uniform")
class UniformPolicy(ScriptedPolicy):
    """Scan ``num_frames`` uniform frames of the whole video (or up to ``max_audio_windows`` audio
    windows of an audio-only file), then answer a fixed guess."""

    name = "uniform"
    Params = UniformParams

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        p: UniformParams = self.params  # type: ignore[assignment]
        self.num_frames = min(p.num_frames, self.limits.max_frames)
        self.max_audio_windows = p.max_audio_windows

    def make_plan(self) -> list[dict[str, Any]]:
        media = self.info["media"]
        if media["has_video"]:
            return [{"type": "get_frames", "start": 0.0, "end": self.duration, "num": self.num_frames}]
        if media["has_audio"]:
            return self.audio_windows(0.0, self.duration, self.max_audio_windows)
        return []

    def answer(self) -> Any:
        return fixed_guess(self.task["task_type"], self.duration)


class OracleParams(ScriptedParams):
    evidence: list[list[float]] | None = Field(
        None, description="[start, end] spans to look at first (default: a tr task's answer intervals)"
    )
    look: bool = Field(True, description="fetch the evidence spans before answering")
    frames_per_span: int = Field(
        4, ge=1, description="frames per evidence span (capped at limits.max_frames)"
    )


@register_policy("oracle")
class OraclePolicy(ScriptedPolicy):
    """Answer the ground truth from the reset info; with ``look`` first fetch each evidence span
    (``evidence`` intervals, or for a tr task the answer's intervals): frames for a video, audio
    for an audio-only file. For tests of the machinery, never for results."""

    name = "oracle"
    Params = OracleParams

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        p: OracleParams = self.params  # type: ignore[assignment]
        self.evidence = p.evidence
        self.look = p.look
        self.frames_per_span = min(p.frames_per_span, self.limits.max_frames)

    def make_plan(self) -> list[dict[str, Any]]:
        if not self.look:
            return []
        spans = self.evidence
        if spans is None and self.task["task_type"] == "tr" and self.task.get("answer") is not None:
            truth = self.task["answer"]
            if isinstance(truth, str):
                truth = json.loads(truth)
            spans = [truth] if truth and not isinstance(truth[0], list | tuple) else truth
        plan: list[dict[str, Any]] = []
        for s, e in spans or []:
            s, e = max(0.0, float(s)), min(self.duration, float(e))
            if e < s:
                continue
            if self.info["media"]["has_video"]:
                plan.append({"type": "get_frames", "start": s, "end": e, "num": self.frames_per_span})
            elif e > s:
                plan += self.audio_windows(s, e, 1)
        return plan

    def answer(self) -> Any:
        truth = self.task.get("answer")
        if truth is None:
            raise PolicyError("the oracle policy needs the ground truth: pass --answer")
        return truth

    def thought(self, action: dict[str, Any]) -> str:
        return "oracle: answering the ground truth." if action["type"] == "answer" else "oracle: evidence."


class RandomParams(ScriptedParams):
    seed: int | None = Field(0, description="draw of the episodes (None: 0)")
    max_looks: int | None = Field(None, ge=0, description="most perception actions (default: the budget - 1)")
    max_num: int = Field(8, ge=1, description="most frames per get_frames (capped at limits.max_frames)")


@register_policy("random")
class RandomPolicy(ScriptedPolicy):
    """A seeded random number of random valid perception actions, then a random valid answer.

    Each episode's generator is seeded with ``(seed, hash of the media file name and question)``, so a task
    gets the same episode whatever worker runs it and in whatever order (resumed runs included);
    change ``seed`` for another draw of the same task.
    """

    name = "random"
    Params = RandomParams

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        p: RandomParams = self.params  # type: ignore[assignment]
        self.seed = 0 if p.seed is None else p.seed
        self.max_looks = p.max_looks
        self.max_num = min(p.max_num, self.limits.max_frames)

    def reset(self, info: dict[str, Any]) -> None:
        task_key = zlib.crc32(f"{Path(info['media']['path']).name}\n{info['task']['question']}".encode())
        self.rng = np.random.default_rng([self.seed & 0xFFFFFFFF, task_key])
        super().reset(info)

    def _span(self, cap: float) -> tuple[float, float]:
        dur, rng = self.duration, self.rng
        length = float(rng.uniform(0.0, min(cap, dur))) or min(cap, dur)
        length = max(length, min(0.1, dur))
        start = float(rng.uniform(0.0, max(0.0, dur - length)))
        return round(start, 3), round(min(dur, start + length), 3)

    def make_plan(self) -> list[dict[str, Any]]:
        media, rng = self.info["media"], self.rng
        kinds = (["get_frames", "get_clip"] if media["has_video"] else []) + (
            ["get_audio"] if media["has_audio"] else []
        )
        if not kinds:
            return []
        most = self.max_turns - 1 if self.max_looks is None else min(self.max_looks, self.max_turns - 1)
        plan = []
        for _ in range(int(rng.integers(0, max(0, most) + 1))):
            kind = kinds[int(rng.integers(len(kinds)))]
            if kind == "get_frames":
                s, e = sorted(float(x) for x in rng.uniform(0.0, self.duration, 2))
                plan.append(
                    {
                        "type": kind,
                        "start": round(s, 3),
                        "end": round(e, 3),
                        "num": int(rng.integers(1, self.max_num + 1)),
                    }
                )
            else:
                cap = self.limits.max_clip_s if kind == "get_clip" else self.limits.max_audio_s
                s, e = self._span(cap)
                plan.append({"type": kind, "start": s, "end": e})
        return plan

    def answer(self) -> Any:
        task, rng, dur = self.task, self.rng, self.duration
        kind = task["task_type"]
        if kind == "mcq":
            return letters(len(task.get("choices") or ["x"]))[
                int(rng.integers(len(task.get("choices") or ["x"])))
            ]
        if kind == "tr":
            s, e = sorted(float(x) for x in rng.uniform(0.0, dur, 2))
            return [[round(s, 3), round(e, 3)]]
        if kind in ("num", "size"):
            return int(rng.integers(0, 11))
        return "unknown"


class ReplayParams(PolicyParams):
    texts: list[str] | str | None = Field(None, description="the outputs to play, one per turn")
    path: str | None = Field(
        None,
        description="instead of texts: a .json file holding a list of strings, or a text file, one per line",
    )
    delay: float = Field(0.0, ge=0, description="seconds to sleep per turn (stands in for model time)")
    repeat_last: bool = Field(True, description="repeat the last text when they run out; else PolicyError")


@register_policy("replay")
class ReplayPolicy(Policy):
    """Play back raw texts, one per turn (malformed output included); parameters in :class:`ReplayParams`."""

    name = "replay"
    Params = ReplayParams

    def __init__(self, **kwargs: Any) -> None:
        p: ReplayParams = self._init_params(kwargs)
        texts, path, delay, repeat_last = p.texts, p.path, p.delay, p.repeat_last
        if path is not None:
            raw = Path(path).read_text(encoding="utf-8")
            texts = (
                json.loads(raw)
                if str(path).endswith(".json")
                else [ln for ln in raw.splitlines() if ln.strip()]
            )
        if isinstance(texts, str):
            texts = [texts]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError("replay needs a non-empty list of strings (texts=[...] or path=FILE)")
        self.texts = list(texts)
        self.delay = float(delay)
        self.repeat_last = repeat_last
        self.index = 0

    def reset(self, info: dict[str, Any]) -> None:
        self.index = 0

    def act(self, messages: list[Message]) -> TurnOutput:
        t0 = time.perf_counter()
        if self.index >= len(self.texts) and not self.repeat_last:
            raise PolicyError(f"replay: all {len(self.texts)} texts were played")
        text = self.texts[min(self.index, len(self.texts) - 1)]
        self.index += 1
        if self.delay > 0:
            time.sleep(self.delay)
        return TurnOutput(text=text, model_seconds=time.perf_counter() - t0)
