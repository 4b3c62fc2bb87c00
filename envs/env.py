"""The Gymnasium environment: one media file, one question, a turn budget.

Observation = the model's whole current context as chat messages (see :mod:`envs.messages`).
Action = the model's raw text for the turn. ``step`` parses it, serves the requested percept,
and purges the raw media of every earlier percept, replacing it with a text stub that keeps the
exact timestamps. At most one raw percept is ever in the context, so context cost follows the
number of turns, not the length of the file.

Clamp or reject, per case (the model always learns what happened):

- times partly outside the file are trimmed to [0, duration] (note in the percept); a span that
  lies wholly outside, is reversed, or is not finite is rejected;
- ``num`` above the per-call cap is lowered to the cap (note); ``num`` < 1 is rejected;
  ``get_frames`` with start == end returns one frame;
- audio or clip spans longer than their cap, or of zero length, are rejected (the cap is stated);
- malformed output, unknown actions and answers in the wrong format are rejected.

A rejected turn still counts against the budget; ``info["error"]`` holds its stable code.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium import spaces
from pydantic import BaseModel

from envs import prompts
from envs.actions import Answer, FormatError, GetAudio, GetClip, GetFrames, Turn, parse_turn
from envs.errors import MediaReadError
from envs.media import MediaConfig, MediaSource
from envs.messages import MEDIA_TYPES, Message, text_part
from envs.percepts import audio_parts, clip_parts, frame_parts
from envs.scoring import SCORERS, AnswerFormatError, Judge, get_scorer


class EnvLimits(BaseModel):
    """Per-call and per-episode limits; defaults follow the OmniAgent recipe where it states one."""

    max_frames: int = 32  # frames per get_frames call
    max_audio_s: float = 300.0  # seconds per get_audio call (Qwen2.5-Omni's audio encoder caps at 300 s)
    max_clip_s: float = 60.0  # seconds per get_clip call
    clip_fps: float = 2.0  # frame rate of a clip's frames
    max_side: int = 448  # longer side of every served frame, in pixels
    max_turns: int = 16  # default turn budget K when reset() does not give one
    strict_format: bool = True  # reject code-fenced JSON instead of unwrapping it
    backend: str = "pyav"  # video decoder (see envs.decoders)
    audio_cache_dir: str | None = None


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

    def sample(self, mask: Any = None, probability: Any = None) -> list[Message]:
        return [{"role": "user", "content": [text_part("")]}]

    @property
    def is_np_flattenable(self) -> bool:
        return False


TASK_TYPES = tuple(SCORERS)


class OmniVideoEnv(gym.Env):
    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        media: str | None = None,
        question: str | None = None,
        task_type: str = "mcq",
        choices: list[str] | None = None,
        answer: Any = None,
        limits: EnvLimits | dict[str, Any] | None = None,
        judge: Judge | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.limits = limits if isinstance(limits, EnvLimits) else EnvLimits(**(limits or {}))
        self.defaults = {
            "media": media,
            "question": question,
            "task_type": task_type,
            "choices": choices,
            "answer": answer,
        }
        self.judge = judge
        self.render_mode = render_mode
        self.observation_space = ChatSpace()
        self.action_space = spaces.Text(max_length=8192)
        self._source: MediaSource | None = None
        self._messages: list[Message] = []

    # ------------------------------------------------------------------ reset
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        super().reset(seed=seed)
        task = {**self.defaults, **(options or {})}
        if not task.get("media") or not task.get("question"):
            raise ValueError("reset needs a media path and a question (constructor arguments or options)")
        if task["task_type"] not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {TASK_TYPES}, got {task['task_type']!r}")
        if task["task_type"] == "mcq" and not task.get("choices"):
            raise ValueError("an mcq task needs choices")
        self.task = task
        self.max_turns = int(task.get("max_turns") or self.limits.max_turns)
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        path = str(task["media"])
        if self._source is None or self._source.path != path:
            self.close()
            cfg = MediaConfig(
                backend=self.limits.backend,
                max_side=self.limits.max_side,
                audio_cache_dir=self.limits.audio_cache_dir,
            )
            self._source = MediaSource(path, cfg)  # raises MediaError for unusable files
            self._source.prefetch_audio()
        self.media = self._source.info
        self.scorer = get_scorer(task["task_type"])
        self.turn = 0
        self.frames_used = 0
        self.audio_seconds_used = 0.0
        self.done = False
        self._percepts: list[dict[str, Any]] = []  # where each percept lives, for purging
        self._messages = [
            {
                "role": "system",
                "content": [
                    text_part(
                        prompts.system_prompt(self.media, task["task_type"], self.limits, self.max_turns)
                    )
                ],
            },
            {
                "role": "user",
                "content": [
                    text_part(prompts.question_prompt(task["question"], task.get("choices"), self.media)),
                    text_part("\n" + prompts.turn_notice(1, self.max_turns)),
                ],
            },
        ]
        info = {
            "turn": 0,
            "max_turns": self.max_turns,
            "media": self.media.model_dump(),
            "task": {k: task.get(k) for k in ("question", "task_type", "choices", "answer")},
            "error": None,
            "timestamps": [],
            "frames_used": 0,
            "audio_seconds_used": 0.0,
        }
        return self._observation(), info

    def _observation(self) -> list[Message]:
        return [{"role": m["role"], "content": list(m["content"])} for m in self._messages]

    # ------------------------------------------------------------------- step
    def step(self, action: str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        if self.done:
            raise RuntimeError("the episode has ended; call reset()")
        self.turn += 1
        self._purge()
        self._messages.append({"role": "assistant", "content": [text_part(action)]})
        parsed = parse_turn(action, strict=self.limits.strict_format)
        info: dict[str, Any] = {
            "turn": self.turn,
            "error": None,
            "error_message": None,
            "timestamps": [],
            "notes": [],
        }
        info["parsed"] = parsed.model_dump() if isinstance(parsed, Turn) else None
        info["action_type"] = parsed.action.type if isinstance(parsed, Turn) else None
        reward, terminated = 0.0, False
        content: list[dict[str, Any]] = []
        if isinstance(parsed, FormatError):
            content = self._error(info, parsed.code, parsed.message)
        elif isinstance(parsed.action, Answer):
            reward, terminated, content = self._answer(parsed.action, info)
        else:
            content = self._perceive(parsed.action, info)
        truncated = not terminated and self.turn >= self.max_turns
        if truncated:
            info["stop_reason"] = "turn_budget"
            content = [text_part("The turn budget is spent and no answer was given. The episode is over.")]
        elif terminated:
            info["stop_reason"] = "answered"
        else:
            content.append(text_part("\n" + prompts.turn_notice(self.turn + 1, self.max_turns)))
        self._messages.append({"role": "user", "content": content})
        self.done = terminated or truncated
        info.update(
            frames_used=self.frames_used,
            audio_seconds_used=round(self.audio_seconds_used, 3),
            max_turns=self.max_turns,
        )
        return self._observation(), reward, terminated, truncated, info

    def _error(self, info: dict[str, Any], code: str, message: str) -> list[dict[str, Any]]:
        self._error_into(info, code, message)
        return self._error_percept(info)

    @staticmethod
    def _error_percept(info: dict[str, Any]) -> list[dict[str, Any]]:
        return [text_part(prompts.error_percept(info["error"], info["error_message"]))]

    def _answer(self, action: Answer, info: dict[str, Any]) -> tuple[float, bool, list[dict[str, Any]]]:
        try:
            prediction = self.scorer.parse(action.content, self.task.get("choices"))
        except AnswerFormatError as exc:
            return (
                0.0,
                False,
                self._error(info, "answer_invalid", f"Your answer is not in the required format: {exc}."),
            )
        info["answer"] = prediction
        truth = self.task.get("answer")
        info["reward_available"] = truth is not None and (
            self.task["task_type"] != "ff" or self.judge is not None
        )
        if truth is None:
            reward = 0.0
        else:
            reward = self.scorer.score(prediction, truth, judge=self.judge, question=self.task["question"])
        if not info["reward_available"]:
            info["notes"].append(
                "no ground truth" if truth is None else "free-form answer not scored: no judge configured"
            )
        return reward, True, [text_part(f"Answer recorded: {action.content}")]

    # ------------------------------------------------------------- percepts
    def _span(self, start: float, end: float, info: dict[str, Any]) -> tuple[float, float] | None:
        duration = self.media.duration
        if end < start:
            self._error_into(info, "time_reversed", f"end ({end:g}) is before start ({start:g}).")
            return None
        if start >= duration or end < 0:
            self._error_into(
                info,
                "time_out_of_range",
                f"[{start:g}, {end:g}] lies outside the file, which spans 0 to {duration:.2f} s.",
            )
            return None
        s, e = max(0.0, float(start)), min(duration, float(end))
        if (s, e) != (start, end):
            info["notes"].append(f"Times trimmed to the file: [{s:.2f}, {e:.2f}].")
        return s, e

    def _error_into(self, info: dict[str, Any], code: str, message: str) -> None:
        info["error"], info["error_message"] = code, message

    def _perceive(self, action: GetFrames | GetAudio | GetClip, info: dict[str, Any]) -> list[dict[str, Any]]:
        span = self._span(action.start, action.end, info)
        if span is None:
            return self._error_percept(info)
        start, end = span
        try:
            if isinstance(action, GetFrames):
                content = self._frames(start, end, action.num, info)
            elif isinstance(action, GetAudio):
                content = self._audio(start, end, info)
            else:
                content = self._clip(start, end, info)
        except MediaReadError as exc:
            return self._error(info, exc.code, str(exc) + ".")
        if info["error"]:
            return self._error_percept(info)
        if info["notes"]:
            content.insert(0, text_part(prompts.adjusted_note(info["notes"]) + "\n"))
        self._percepts.append(
            {
                "index": len(self._messages),
                "action": action.type,
                "start": start,
                "end": end,
                "times": info["timestamps"],
                "turn": self.turn,
            }
        )
        return content

    def _frames(self, start: float, end: float, num: int, info: dict[str, Any]) -> list[dict[str, Any]]:
        if num < 1:
            self._error_into(info, "num_invalid", f"num must be at least 1 (got {num}).")
            return []
        if num > self.limits.max_frames:
            info["notes"].append(f"num lowered from {num} to the cap of {self.limits.max_frames}.")
            num = self.limits.max_frames
        if end == start and num > 1:
            info["notes"].append("start equals end, so one frame was taken.")
            num = 1
        frames = self._source.frames(start, end, num)
        times = [f.time for f in frames]
        self.frames_used += len(frames)
        info["timestamps"] = times
        return [text_part(f"Frames {start:.2f}s-{end:.2f}s (num={len(frames)}):"), *frame_parts(frames)]

    def _check_len(self, start: float, end: float, cap: float, what: str, info: dict[str, Any]) -> bool:
        if end - start <= 0:
            self._error_into(info, "span_empty", f"the {what} span [{start:g}, {end:g}] has zero length.")
            return False
        if end - start > cap + 1e-6:
            self._error_into(
                info,
                "span_too_long",
                f"a {what} may be at most {cap:g} s long; you asked for {end - start:.2f} s.",
            )
            return False
        return True

    def _audio(self, start: float, end: float, info: dict[str, Any]) -> list[dict[str, Any]]:
        if not self._check_len(start, end, self.limits.max_audio_s, "get_audio", info):
            return []
        samples = self._source.audio(start, end)
        self.audio_seconds_used += end - start
        info["timestamps"] = [start, end]
        return audio_parts(samples, start, end)

    def _clip(self, start: float, end: float, info: dict[str, Any]) -> list[dict[str, Any]]:
        if not self._check_len(start, end, self.limits.max_clip_s, "get_clip", info):
            return []
        clip = self._source.clip(start, end, self.limits.clip_fps)
        times = [f.time for f in clip.frames]
        self.frames_used += len(times)
        if clip.audio is not None:
            self.audio_seconds_used += end - start
        info["timestamps"] = times
        return clip_parts(clip)

    def _purge(self) -> None:
        """Replace every earlier percept's raw media with its text stub (the model has now written
        its observation of it in the turn being stepped)."""
        for p in self._percepts:
            msg = self._messages[p["index"]]
            if any(part["type"] in MEDIA_TYPES for part in msg["content"]):
                stub = prompts.purged_stub(p["action"], p["start"], p["end"], p["times"], p["turn"] + 1)
                msg["content"] = [text_part(stub)]

    # ----------------------------------------------------------------- misc
    @property
    def source(self) -> MediaSource:
        """The open media of the current episode (for harnesses that read it directly)."""
        if self._source is None:
            raise RuntimeError("no media is open; call reset() first")
        return self._source

    @property
    def messages(self) -> list[Message]:
        return self._observation()

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        lines = []
        for m in self._messages:
            parts = [p["text"] if p["type"] == "text" else f"<{p['type']}>" for p in m["content"]]
            lines.append(f"{m['role']}: {''.join(parts)}")
        return "\n".join(lines)

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None
