"""A fair passive baseline: one turn, uniform frames plus the (capped) audio, same answer format.

The active agent chooses what to look at over several turns; the passive baseline gets a fixed
sample up front: ``num_frames`` frames spread uniformly over the whole file (each labelled with its
time, exactly as the environment labels them) and the soundtrack (whole when it fits in
``max_audio_s``, else ``audio_chunks`` evenly spaced excerpts adding up to ``max_audio_s``), then
must answer in the same JSON turn format. Scoring goes through the same environment and scorer, so
the numbers are comparable; :func:`matched_frame_budget` sets ``num_frames`` to an active run's mean
frames used, so the two see the same number of frames.

:func:`single_turn_episode` is the shared one-turn harness (the observation-fidelity tool in
:mod:`omniagent.eval.fidelity` uses it with other contexts).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from envs import prompts
from envs.actions import Answer, FormatError, parse_turn
from envs.env import OmniVideoEnv
from envs.errors import MediaReadError
from envs.jsonl import read_jsonl
from envs.media import MediaInfo, MediaSource
from envs.messages import Message, text_part
from envs.percepts import audio_parts, frame_parts
from envs.scoring import get_scorer
from omniagent.policy import Policy, PolicyError
from omniagent.trajectory import Trajectory, TurnRecord

__all__ = [
    "PassiveConfig",
    "SingleTurnContext",
    "matched_frame_budget",
    "passive_content",
    "run_passive_episode",
    "single_turn_episode",
    "single_turn_system_prompt",
]


class PassiveConfig(BaseModel):
    num_frames: int = Field(32, ge=1, le=1024, description="frames spread uniformly over the file")
    audio: bool = True
    max_audio_s: float = Field(300.0, gt=0, description="total seconds of audio shown")
    audio_chunks: int = Field(4, ge=1, description="excerpts when the file's audio exceeds max_audio_s")


PASSIVE_SYSTEM = """\
You answer a question about a {kind}. {shown} You cannot ask for anything else: this is your only \
turn.

Reply with exactly one JSON object and nothing else (no code fences, no extra text):
{{"observation": "...", "thought": "...", "action": {{"type": "answer", "content": ...}}}}
- observation: what the media shows that matters for the question, with times in seconds.
- thought: your reasoning.
- action: the final answer. Format of content: {answer_format}."""


def single_turn_system_prompt(info: MediaInfo, task_type: str, shown: str, option_text: bool = False) -> str:
    """The single turn's system prompt; ``option_text``: the environment's ``mcq_option_text`` (the answer format
    says an option's text is an answer too)."""
    return PASSIVE_SYSTEM.format(
        kind="video" if info.has_video else "audio recording",
        shown=shown,
        answer_format=get_scorer(task_type, option_text=option_text).format_hint,
    )


class SingleTurnContext(BaseModel):
    """What a context builder returns: the user message parts before the question, and accounting."""

    model_config = {"arbitrary_types_allowed": True}

    shown: str  # one sentence for the system prompt: what the model is shown
    parts: list[dict[str, Any]]
    frames: int = 0
    audio_seconds: float = 0.0
    timestamps: list[float] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


ContextBuilder = Callable[[MediaSource, MediaInfo], SingleTurnContext]


def uniform_times(duration: float, n: int) -> tuple[float, float]:
    """First and last of ``n`` frame times at the centres of ``n`` equal slices of [0, duration]."""
    half = duration / (2 * n)
    return half, max(half, duration - half)


def audio_spans(duration: float, max_s: float, chunks: int) -> list[tuple[float, float]]:
    """The whole file when it fits in ``max_s``; else ``chunks`` evenly spaced excerpts summing to ``max_s``."""
    if duration <= max_s:
        return [(0.0, duration)]
    length = max_s / chunks
    spans = []
    for i in range(chunks):
        centre = (i + 0.5) * duration / chunks
        start = min(max(0.0, centre - length / 2), duration - length)
        spans.append((round(start, 3), round(start + length, 3)))
    return spans


def passive_content(cfg: PassiveConfig) -> ContextBuilder:
    """A context builder: ``cfg.num_frames`` uniform frames plus the capped audio."""

    def build(source: MediaSource, info: MediaInfo) -> SingleTurnContext:
        parts: list[dict[str, Any]] = []
        notes: list[str] = []
        times: list[float] = []
        frames = 0
        audio_s = 0.0
        if info.has_video:
            first, last = uniform_times(info.duration, cfg.num_frames)
            try:
                got = source.frames(first, last, cfg.num_frames)
            except MediaReadError as exc:
                got = []
                notes.append(f"frames unavailable ({exc.code})")
            if got:
                parts.append(
                    text_part(f"{len(got)} frames spread uniformly over 0.00s-{info.duration:.2f}s:")
                )
            parts += frame_parts(got)
            times += [f.time for f in got]
            frames = len(got)
        if cfg.audio and info.has_audio:
            for start, end in audio_spans(info.duration, cfg.max_audio_s, cfg.audio_chunks):
                try:
                    samples = source.audio(start, end)
                except MediaReadError as exc:
                    notes.append(f"audio unavailable ({exc.code})")
                    break
                parts += [text_part("\n"), *audio_parts(samples, start, end)]
                audio_s += end - start
        what = []
        if frames:
            what.append(f"{frames} frames spread uniformly over the whole {info.duration:.2f} s")
        if audio_s:
            whole = audio_s >= info.duration - 1e-6
            what.append(
                "the whole soundtrack"
                if whole
                else f"{cfg.audio_chunks} evenly spaced audio excerpts ({audio_s:.0f} s in all)"
            )
        shown = ("You are shown " + " and ".join(what) + ".") if what else "You are shown nothing."
        return SingleTurnContext(
            shown=shown, parts=parts, frames=frames, audio_seconds=audio_s, timestamps=times, notes=notes
        )

    return build


def _messages(
    task: dict[str, Any], media: MediaInfo, ctx: SingleTurnContext, option_text: bool = False
) -> list[Message]:
    """The single turn's context: the system prompt, then what ``ctx`` shows and the question."""
    question = prompts.question_prompt(task["question"], task.get("choices"), media)
    system = single_turn_system_prompt(media, task["task_type"], ctx.shown, option_text)
    return [
        {"role": "system", "content": [text_part(system)]},
        {"role": "user", "content": [*ctx.parts, text_part("\n" + question)]},
    ]


def _score_turn(env: OmniVideoEnv, traj: Trajectory, record: TurnRecord, text: str) -> None:
    """Parse the reply; an answer is scored through ``env.step``, anything else ends unanswered."""
    parsed = parse_turn(text, strict=env.limits.strict_format)
    if isinstance(parsed, FormatError):
        record.error, record.error_message = parsed.code, parsed.message
        traj.stop_reason = "turn_budget"
        return
    record.observation, record.thought = parsed.observation, parsed.thought
    record.action, record.action_type = parsed.action.model_dump(), parsed.action.type
    if not isinstance(parsed.action, Answer):
        record.error = "passive_not_answer"
        record.error_message = "a single-turn episode must answer; the output asked for media"
        traj.stop_reason = "turn_budget"
        return
    t1 = time.perf_counter()
    _, reward, terminated, _, step_info = env.step(text)
    record.env_seconds = time.perf_counter() - t1
    record.error, record.error_message = step_info["error"], step_info.get("error_message")
    record.notes = step_info.get("notes", [])
    traj.stop_reason = step_info["stop_reason"]
    if terminated:
        traj.answer, traj.reward = step_info.get("answer"), float(reward)
        traj.meta["reward_available"] = step_info.get("reward_available", False)


def single_turn_episode(
    env: OmniVideoEnv,
    policy: Policy,
    options: dict[str, Any],
    build: ContextBuilder,
    *,
    episode_id: str | None = None,
    seed: int | None = None,
    mode: str = "passive",
) -> Trajectory:
    """One turn: reset ``env`` on the task (for scoring), show the policy ``build``'s context plus the
    question, and score its answer through ``env.step`` (same parser, same scorer). An output that is
    not an answer is recorded with its error code and ends the episode unanswered.

    Raises :class:`envs.errors.MediaError` from ``reset`` for unusable media, like ``run_episode``.
    """
    wall0 = time.perf_counter()
    obs, info = env.reset(seed=seed, options={**options, "max_turns": 1})
    media: MediaInfo = env.media
    task = info["task"]
    t0 = time.perf_counter()
    ctx = build(env.source, media)  # the env's open media (one per worker)
    traj = Trajectory(
        id=episode_id or os.urandom(6).hex(),
        media=str(options["media"]),
        question=task["question"],
        task_type=task["task_type"],
        choices=task["choices"],
        ground_truth=task["answer"],
        max_turns=1,
        policy=getattr(policy, "name", type(policy).__name__),
        env_seconds=time.perf_counter() - t0,
        meta={"media_info": info["media"], "mode": mode, "notes": ctx.notes},
    )
    policy.reset({**info, "max_turns": 1, "mode": mode})
    try:
        out = policy.act(_messages(task, media, ctx, env.limits.mcq_option_text))
    except PolicyError as exc:
        traj.stop_reason, traj.error = "policy_error", str(exc)
        traj.wall_seconds = time.perf_counter() - wall0
        return traj
    audio_seconds = round(ctx.audio_seconds, 3)
    record = TurnRecord.from_step(
        out, {}, turn=1, timestamps=ctx.timestamps, frames_used=ctx.frames, audio_seconds_used=audio_seconds
    )
    _score_turn(env, traj, record, out.text)
    traj.turns.append(record)
    traj.frames_used, traj.audio_seconds_used = ctx.frames, audio_seconds
    traj.model_seconds = out.model_seconds
    traj.env_seconds += record.env_seconds
    traj.wall_seconds = time.perf_counter() - wall0
    return traj


def run_passive_episode(
    env: OmniVideoEnv,
    policy: Policy,
    options: dict[str, Any],
    cfg: PassiveConfig | None = None,
    *,
    episode_id: str | None = None,
    seed: int | None = None,
) -> Trajectory:
    """The passive baseline on one task (see the module docstring)."""
    return single_turn_episode(
        env, policy, options, passive_content(cfg or PassiveConfig()), episode_id=episode_id, seed=seed
    )


def matched_frame_budget(results: str | os.PathLike[str] | list[dict[str, Any]], minimum: int = 1) -> int:
    """Mean frames used per task by an active run (its ``results.jsonl`` or rows), rounded up.

    Rows without a trajectory (media errors) are left out. Use it as ``PassiveConfig.num_frames`` so
    the passive baseline sees as many frames as the active agent did on average.
    """
    rows = read_jsonl(results, torn_tail=True) if not isinstance(results, list) else results
    used = [r.get("frames_used", 0) for r in rows if r.get("stop_reason") != "media_error"]
    if not used:
        raise ValueError("no usable rows to match a frame budget to")
    return max(minimum, math.ceil(sum(used) / len(used)))
