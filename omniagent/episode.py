"""The episode loop: environment and policy, turn by turn, into a :class:`Trajectory`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from envs.env import OmniVideoEnv
from envs.messages import Message
from omniagent.policy_base import Policy, PolicyError
from omniagent.trajectory import Trajectory, TurnRecord

OnTurn = Callable[[TurnRecord, list[dict[str, Any]]], None]


class EpisodeInterrupted(KeyboardInterrupt):
    """Ctrl-C during an episode; ``trajectory`` holds the turns completed so far."""

    def __init__(self, trajectory: Trajectory) -> None:
        super().__init__("interrupted")
        self.trajectory = trajectory


def start_trajectory(
    env: OmniVideoEnv,
    policy: Policy,
    options: dict[str, Any],
    episode_id: str | None,
    seed: int | None,
) -> tuple[Trajectory, list[Message]]:
    """Reset the environment and the policy; the empty trajectory and the first context."""
    t0 = time.perf_counter()
    obs, info = env.reset(seed=seed, options=options)
    reset_seconds = time.perf_counter() - t0
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
    return traj, obs


def play_turn(
    env: OmniVideoEnv, policy: Policy, obs: list[Message], traj: Trajectory, on_turn: OnTurn | None
) -> tuple[list[Message], bool]:
    """One turn: the policy acts, the environment steps, the turn is recorded.

    Returns the next context and whether the episode is over.
    """
    try:
        out = policy.act(obs)
    except PolicyError as exc:
        traj.stop_reason, traj.error = "policy_error", str(exc)
        return obs, True
    t0 = time.perf_counter()
    obs, reward, terminated, truncated, info = env.step(out.text)
    rec = TurnRecord.from_step(out, info, env_seconds=time.perf_counter() - t0)
    traj.turns.append(rec)
    traj.model_seconds += rec.model_seconds
    traj.env_seconds += rec.env_seconds
    traj.frames_used, traj.audio_seconds_used = rec.frames_used, rec.audio_seconds_used
    traj.clip_seconds_used = rec.clip_seconds_used
    if on_turn is not None:
        on_turn(rec, obs[-1]["content"])
    if terminated or truncated:
        traj.stop_reason = info["stop_reason"]
        if terminated:
            traj.answer, traj.reward = info.get("answer"), float(reward)
            traj.meta["reward_available"] = info.get("reward_available", False)
    return obs, terminated or truncated


def run_episode(
    env: OmniVideoEnv,
    policy: Policy,
    options: dict[str, Any],
    *,
    episode_id: str | None = None,
    seed: int | None = None,
    on_turn: OnTurn | None = None,
) -> Trajectory:
    """Run one episode. ``options`` are ``env.reset`` options (media, question, task_type, ...).

    Never raises for model misbehaviour: a policy error ends the episode with
    ``stop_reason="policy_error"``; output that never parses ends it at the turn budget. A media
    file the environment rejects raises :class:`envs.errors.MediaError` from ``reset``.
    ``on_turn(record, percept_message_content)`` is called after each turn (for printing).
    Ctrl-C raises :class:`EpisodeInterrupted` holding the turns so far.
    """
    wall0 = time.perf_counter()
    traj, obs = start_trajectory(env, policy, options, episode_id, seed)
    try:
        done = False
        while not done:
            obs, done = play_turn(env, policy, obs, traj, on_turn)
    except KeyboardInterrupt as exc:
        traj.stop_reason = "interrupted"
        traj.wall_seconds = time.perf_counter() - wall0
        raise EpisodeInterrupted(traj) from exc
    traj.wall_seconds = time.perf_counter() - wall0
    return traj
