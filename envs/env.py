"""The Gymnasium environment: one media file, one question, a turn budget.

Observation = the model's whole current context as chat messages (see :mod:`envs.messages`).
Action = the model's raw text for the turn. ``step`` parses it, serves the requested percept,
and purges the raw media of every earlier percept, replacing it with a text stub that keeps the
exact timestamps. At most one raw percept is ever in the context, so context cost follows the
number of turns, not the length of the file.

Clamp or reject, per case (the model always learns what happened; rules in :mod:`envs.step_rules`):

- times partly outside the file are trimmed to [0, duration] (note in the percept); a span that
  lies wholly outside, is reversed, or is not finite is rejected;
- ``num`` above the per-call cap is lowered to the cap (note); ``num`` < 1 is rejected;
  ``get_frames`` with start == end returns one frame;
- audio or clip spans longer than their cap, or of zero length, are rejected (the cap is stated);
- malformed output, unknown actions and answers in the wrong format are rejected.

A rejected turn still counts against the budget; ``info["error"]`` holds its stable code
(:class:`envs.errors.ErrorCode`).
"""

from __future__ import annotations

import numbers
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from envs import prompts
from envs.actions import Answer, FormatError, GetAudio, GetClip, GetFrames, Turn, parse_turn, safe_text
from envs.contract import ChatSpace, ResetInfo, StepInfo
from envs.errors import ActionRejected, EpisodeOver, ErrorCode, MediaError, MediaReadError
from envs.limits import EnvLimits
from envs.media import MediaConfig, MediaInfo, MediaSource
from envs.media_access import input_url
from envs.messages import MEDIA_TYPES, Message, text_part
from envs.percepts import audio_parts, clip_parts, frame_parts
from envs.scoring import SCORERS, AnswerFormatError, Judge, Scorer, get_scorer
from envs.step_rules import check_length, clamp_span, damage_notes, frame_count
from envs.task_source import TaskSource, TaskSpec
from envs.tasks import LETTERS
from envs.turn_schema import turn_schemas

__all__ = ["TASK_TYPES", "ChatSpace", "EnvLimits", "OmniVideoEnv"]


TASK_TYPES = tuple(SCORERS)


def turn_budget(value: Any, default: int) -> int:
    """The turn budget K: ``value`` (``None``: ``default``) as a whole number of at least 1."""
    raw = default if value is None else value
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    elif isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, numbers.Integral):
        raise ValueError(f"max_turns must be a whole number of turns, got {raw!r}")
    if raw < 1:
        raise ValueError(f"max_turns must be at least 1, got {raw}")
    return int(raw)


class OmniVideoEnv(gym.Env[list[Message], str]):
    """Active perception over one media file: each step is one model turn.

    - **Task.** ``reset(options=...)`` takes ``media``, ``question``, ``task_type``, ``choices``,
      ``answer`` and ``max_turns`` (and an optional ``id``), falling back to the constructor's
      arguments. Built with ``tasks`` (a tasks JSONL path, or a list of :class:`envs.tasks.Task`
      or Task-schema dicts), ``reset()`` without ``media`` in its options draws the next task, so
      wrappers and ``gymnasium.vector`` (which reset with no options) work; ``reset(seed=...)``
      restarts that stream.
    - **Observation.** The whole chat context (``list[Message]``, see :mod:`envs.messages`).
    - **Action.** The model's raw text (``str``).
    - **Reward.** The task's score (:mod:`envs.scoring`) on the answer turn, else 0.
    - **terminated** when the model answered; **truncated** when the turn budget is spent.
    - **info.** :class:`envs.contract.ResetInfo` from ``reset`` and
      :class:`envs.contract.StepInfo` from ``step``.
    - **Errors.** A turn the model gets wrong is never an exception: it is an error percept with a
      stable code in ``info["error"]``. Misuse raises: ``reset`` raises ValueError for a bad task
      and :class:`envs.errors.MediaError` for an unusable file; ``step`` raises TypeError for a
      non-string and :class:`envs.errors.EpisodeOver` (Gymnasium's ``ResetNeeded``) when no
      episode is running.
    """

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
        tasks: TaskSpec | None = None,
        shuffle: bool = False,
    ) -> None:
        self.limits = limits if isinstance(limits, EnvLimits) else EnvLimits(**(limits or {}))
        self.defaults: dict[str, Any] = {
            "media": media,
            "question": question,
            "task_type": task_type,
            "choices": choices,
            "answer": answer,
        }
        self.task_source = TaskSource(tasks, shuffle=shuffle) if tasks is not None else None
        self.judge = judge
        self.render_mode = render_mode
        self.observation_space = ChatSpace()
        self.action_space = spaces.Text(max_length=8192)
        # episode state; reset() fills it, and step() refuses to run until it has
        self.task: dict[str, Any] = {}
        self.task_id: str | None = None
        self.max_turns = self.limits.max_turns
        self.media: MediaInfo | None = None
        self.scorer: Scorer | None = None
        self.turn = 0
        self.frames_used = 0
        self.audio_seconds_used = 0.0
        self.clip_seconds_used = 0.0
        self.done = True
        self._source: MediaSource | None = None
        self._messages: list[Message] = []
        self._percepts: list[dict[str, Any]] = []  # where each percept lives, for purging

    # ------------------------------------------------------------------ reset
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], ResetInfo]:
        """Start an episode: open the media, show the system prompt and the question.

        Returns the observation and a :class:`~envs.contract.ResetInfo`: ``turn`` (0),
        ``max_turns``, ``media`` (probe results), ``task`` (question, task_type, choices, answer),
        ``task_id``, ``error`` (None), ``timestamps`` ([]), ``frames_used`` (0),
        ``audio_seconds_used`` (0.0), ``clip_seconds_used`` (0.0). Raises ValueError for a task that
        cannot be run (no media or question, unknown task type, an mcq without choices or with more
        than 26, ``max_turns`` below 1) and :class:`envs.errors.MediaError` for an unusable file.
        """
        super().reset(seed=seed)
        self.done = True  # until the new episode is ready
        if seed is not None and self.task_source is not None:
            self.task_source.restart()
        task = self._resolve_task(options)
        max_turns = self._check_task(task)
        self._open(str(task["media"]))
        self.task, self.task_id, self.max_turns = task, task.get("id"), max_turns
        self.scorer = get_scorer(task["task_type"], self.limits.max_answer_chars, self.limits.mcq_option_text)
        self.turn, self.frames_used, self.audio_seconds_used, self.clip_seconds_used = 0, 0, 0.0, 0.0
        self._percepts = []
        self._messages = self._first_messages()
        self.done = False
        schemas = turn_schemas(self.media, task["task_type"], task.get("choices"), self.limits)
        info: ResetInfo = {
            "turn": 0,
            "max_turns": self.max_turns,
            "media": self.media.model_dump(),
            "task": {
                "question": task["question"],
                "task_type": task["task_type"],
                "choices": task.get("choices"),
                "answer": task.get("answer"),
            },
            "task_id": self.task_id,
            "turn_schema": schemas[0],
            "final_turn_schema": schemas[1],
            "error": None,
            "timestamps": [],
            "frames_used": 0,
            "audio_seconds_used": 0.0,
            "clip_seconds_used": 0.0,
        }
        return self._observation(), info

    def _resolve_task(self, options: dict[str, Any] | None) -> dict[str, Any]:
        """Constructor defaults, then the next task of the source (unless options name the media),
        then the options themselves."""
        opts = dict(options or {})
        task: dict[str, Any] = {**self.defaults, "id": None}
        if self.task_source is not None and "media" not in opts:
            drawn = self.task_source.next(self.np_random)
            task.update(drawn.env_options(), id=drawn.id)
        return {**task, **opts}

    def _check_task(self, task: dict[str, Any]) -> int:
        """Refuse a task the episode could not run; returns its turn budget."""
        if not task.get("media") or not task.get("question"):
            raise ValueError(
                "reset needs a media path and a question (constructor arguments, options or a task source)"
            )
        if task.get("task_type") not in TASK_TYPES:
            raise ValueError(f"task_type must be one of {TASK_TYPES}, got {task.get('task_type')!r}")
        if task["task_type"] == "mcq":
            choices = task.get("choices")
            if not choices:
                raise ValueError("an mcq task needs choices")
            if len(choices) > len(LETTERS):
                raise ValueError(
                    f"an mcq task takes at most {len(LETTERS)} choices (one letter A-Z each), got {len(choices)}"
                )
        return turn_budget(task.get("max_turns"), self.limits.max_turns)

    def _open(self, path: str) -> None:
        """Open ``path`` (or keep it open from the last episode), re-checking the ``media_root`` limit
        first: where a link leads is judged now, at every reset, not when the task was made."""
        cfg = MediaConfig.from_limits(self.limits)
        try:
            input_url(path, cfg.access)  # raises media_outside_root for a local file outside media_root
        except MediaError:
            self.close()
            raise
        if self._source is None or self._source.path != path:
            self.close()
            self._source = MediaSource(path, cfg)  # raises MediaError for unusable files
        self.media = self._source.info

    def _first_messages(self) -> list[Message]:
        task, media = self.task, self.media
        system = prompts.system_prompt(media, task["task_type"], self.limits, self.max_turns)
        return [
            {"role": "system", "content": [text_part(system)]},
            {
                "role": "user",
                "content": [
                    text_part(prompts.question_prompt(task["question"], task.get("choices"), media)),
                    text_part("\n" + prompts.turn_notice(1, self.max_turns)),
                ],
            },
        ]

    def _observation(self) -> list[Message]:
        return [{"role": m["role"], "content": list(m["content"])} for m in self._messages]

    # ------------------------------------------------------------------- step
    def step(self, action: str) -> tuple[list[Message], float, bool, bool, StepInfo]:
        """Take one model turn: parse ``action``, serve the percept or record the answer.

        Returns ``(observation, reward, terminated, truncated, info)`` with a
        :class:`~envs.contract.StepInfo`: ``turn``, ``max_turns``, ``error`` and
        ``error_message`` (None unless rejected), ``notes``, ``timestamps``, ``parsed``,
        ``action_type``, ``frames_used``, ``audio_seconds_used``, ``clip_seconds_used`` (the seconds
        served by get_clip so far, after trimming to the file); when the episode ends also
        ``stop_reason`` ("answered" | "turn_budget"); on an answer ``answer`` and ``reward_available``. Any string is a valid action (bad ones become error percepts); a
        non-string raises TypeError and no episode running raises EpisodeOver, both before the
        turn is counted.
        """
        if not isinstance(action, str):
            raise TypeError(f"step takes the model's text (str), not {type(action).__name__}")
        if self.done:
            raise EpisodeOver("no episode is running (call reset() first, or again after the episode ended)")
        text = safe_text(action)  # lone surrogates would make the context unserialisable
        self.turn += 1
        self._purge()
        self._messages.append({"role": "assistant", "content": [text_part(text)]})
        info: StepInfo = {
            "turn": self.turn,
            "max_turns": self.max_turns,
            "error": None,
            "error_message": None,
            "notes": [],
            "timestamps": [],
            "parsed": None,
            "action_type": None,
            **self._usage(),
        }
        reward, terminated = 0.0, False
        try:
            turn = self._parse(text, info)
            if isinstance(turn.action, Answer):
                reward, content = self._answer(turn.action, info)
                terminated = True
            else:
                content = self._perceive(turn.action, info)
        except ActionRejected as exc:
            info["error"], info["error_message"] = exc.code, exc.message
            content = [text_part(prompts.error_percept(exc.code, exc.message))]
        truncated = self._close_turn(content, terminated, info)
        return self._observation(), reward, terminated, truncated, info

    def _parse(self, text: str, info: StepInfo) -> Turn:
        parsed = parse_turn(text, strict=self.limits.strict_format)
        if isinstance(parsed, FormatError):
            raise ActionRejected(parsed.code, parsed.message)
        info["parsed"], info["action_type"] = parsed.model_dump(), parsed.action.type
        return parsed

    def _close_turn(self, content: list[dict[str, Any]], terminated: bool, info: StepInfo) -> bool:
        """Append the environment's reply, end the episode if due; returns ``truncated``."""
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
        info.update(self._usage())
        return truncated

    def _usage(self) -> dict[str, Any]:
        """The episode's media counters so far: frames, audio seconds and clip seconds served."""
        return {
            "frames_used": self.frames_used,
            "audio_seconds_used": round(self.audio_seconds_used, 3),
            "clip_seconds_used": round(self.clip_seconds_used, 3),
        }

    def _answer(self, action: Answer, info: StepInfo) -> tuple[float, list[dict[str, Any]]]:
        try:
            prediction = self.scorer.parse(action.content, self.task.get("choices"))
        except AnswerFormatError as exc:
            raise ActionRejected(
                ErrorCode.ANSWER_INVALID, f"Your answer is not in the required format: {exc}."
            ) from None
        # JSON-native in info (tr intervals come back from the scorer as tuples)
        info["answer"] = [list(pair) for pair in prediction] if isinstance(prediction, list) else prediction
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
        return reward, [text_part(f"Answer recorded: {action.content}")]

    # ------------------------------------------------------------- percepts
    def _perceive(self, action: GetFrames | GetAudio | GetClip, info: StepInfo) -> list[dict[str, Any]]:
        start, end, notes = clamp_span(action.start, action.end, self.media.duration)
        info["notes"].extend(notes)
        try:
            if isinstance(action, GetFrames):
                content = self._frames(start, end, action.num, info)
            elif isinstance(action, GetAudio):
                content = self._audio(start, end, info)
            else:
                content = self._clip(start, end, info)
        except MediaReadError as exc:
            raise ActionRejected(exc.code, str(exc) + ".") from None
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

    def _frames(self, start: float, end: float, num: int, info: StepInfo) -> list[dict[str, Any]]:
        num, notes = frame_count(num, self.limits.max_frames, start, end)
        info["notes"].extend(notes)
        frames = self._source.frames(start, end, num)
        info["notes"].extend(filter(None, [self._source.video_tail_note(start, end)]))
        self.frames_used += len(frames)
        info["timestamps"] = [f.time for f in frames]
        return [text_part(f"Frames {start:.2f}s-{end:.2f}s (num={len(frames)}):"), *frame_parts(frames)]

    def _audio(self, start: float, end: float, info: StepInfo) -> list[dict[str, Any]]:
        check_length(start, end, self.limits.max_audio_s, "get_audio")
        span = self._source.audio_span(start, end)
        info["notes"].extend(damage_notes(span.damaged))
        self.audio_seconds_used += end - start
        info["timestamps"] = [start, end]
        return audio_parts(span.samples, start, end)

    def _clip(self, start: float, end: float, info: StepInfo) -> list[dict[str, Any]]:
        check_length(start, end, self.limits.max_clip_s, "get_clip", self.limits.min_clip_s)
        clip = self._source.clip(start, end, self.limits.clip_fps)
        info["notes"].extend(filter(None, [self._source.video_tail_note(start, end)]))
        info["notes"].extend(damage_notes(clip.audio_damaged))
        times = [f.time for f in clip.frames]
        self.frames_used += len(times)
        if clip.audio is not None:
            self.audio_seconds_used += end - start
        self.clip_seconds_used += end - start  # the span served, after trimming to the file
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
