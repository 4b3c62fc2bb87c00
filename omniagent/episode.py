"""The episode loop: environment and policy, turn by turn, into a :class:`Trajectory`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from envs.env import OmniVideoEnv
from omniagent.policy import Policy, PolicyError
from omniagent.trajectory import Trajectory, TurnRecord


class EpisodeInterrupted(KeyboardInterrupt):
    """Ctrl-C during an episode; ``trajectory`` holds the turns completed so far."""

    def __init__(self, trajectory: Trajectory) -> None:
        super().__init__("interrupted")
        self.trajectory = trajectory


def run_episode(
    env: OmniVideoEnv,
    policy: Policy,
    options: dict[str, Any],
    *,
    episode_id: str | None = None,
    seed: int | None = None,
    on_turn: Callable[[TurnRecord, list[dict[str, Any]]], None] | None = None,
) -> Trajectory:
    """Run one episode. ``options`` are ``env.reset`` options (media, question, task_type, ...).

    Never raises for model misbehaviour: a policy error ends the episode with
    ``stop_reason="policy_error"``; output that never parses ends it at the turn budget. A media
    file the environment rejects raises :class:`envs.errors.MediaError` from ``reset``.
    ``on_turn(record, percept_message_content)`` is called after each turn (for printing).
    """
    wall0 = time.perf_counter()
    env_t0 = time.perf_counter()
    obs, info = env.reset(seed=seed, options=options)
    reset_seconds = time.perf_counter() - env_t0
    task = info["task"]
    traj = Trajectory(
        id=episode_id or uuid.uuid4().hex[:12],
        media=str(options["media"]),
        question=task["question"],
        task_type=task["task_type"],
        choices=task["choices"],
        ground_truth=task["answer"],
        max_turns=info["max_turns"],
        policy=getattr(policy, "name", type(policy).__name__),
        env_seconds=reset_seconds,
        meta={"media_info": info["media"]},
    )
    policy.reset(info)
    try:
        while True:
            try:
                out = policy.act(obs)
            except PolicyError as exc:
                traj.stop_reason, traj.error = "policy_error", str(exc)
                break
            t0 = time.perf_counter()
            obs, reward, terminated, truncated, info = env.step(out.text)
            env_seconds = time.perf_counter() - t0
            parsed = info.get("parsed") or {}
            rec = TurnRecord(
                turn=info["turn"],
                raw_text=out.text,
                observation=parsed.get("observation"),
                thought=parsed.get("thought"),
                action=parsed.get("action"),
                action_type=info.get("action_type"),
                error=info["error"],
                error_message=info.get("error_message"),
                notes=info.get("notes", []),
                timestamps=info["timestamps"],
                frames_used=info["frames_used"],
                audio_seconds_used=info["audio_seconds_used"],
                context_tokens=out.prompt_tokens,
                completion_tokens=out.completion_tokens,
                model_seconds=out.model_seconds,
                env_seconds=env_seconds,
                entropy=out.entropy,
                entropy_is_estimate=out.entropy_is_estimate,
                token_logprobs=out.token_logprobs,
            )
            traj.turns.append(rec)
            traj.model_seconds += out.model_seconds
            traj.env_seconds += env_seconds
            traj.frames_used, traj.audio_seconds_used = info["frames_used"], info["audio_seconds_used"]
            if on_turn is not None:
                on_turn(rec, obs[-1]["content"])
            if terminated or truncated:
                traj.stop_reason = info["stop_reason"]
                if terminated:
                    traj.answer, traj.reward = info.get("answer"), float(reward)
                    traj.meta["reward_available"] = info.get("reward_available", False)
                break
    except KeyboardInterrupt as exc:
        traj.stop_reason = "interrupted"
        traj.wall_seconds = time.perf_counter() - wall0
        raise EpisodeInterrupted(traj) from exc
    traj.wall_seconds = time.perf_counter() - wall0
    return traj
