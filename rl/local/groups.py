"""Step 1 of the local trainer (``rl/train_local.py``): play rollout groups and record every turn as a row.

``data.train_batch_size`` tasks per iteration, each played ``rollout.n`` times (one group) through
:class:`envs.env.OmniVideoEnv` and the transformers backend. Every turn becomes a training row
(:class:`rl.local.rollout.TurnRow`) encoded as an SFT sample of that turn, and every episode gets the shaped reward
of ``env.reward`` (:mod:`rl.algo.reward`). Task draws and episode seeds are functions of ``(local.seed, iteration)``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from envs.env import OmniVideoEnv
from envs.tasks import Task
from omniagent.episode import run_episode
from omniagent.policy import Policy, TurnOutput
from omniagent.trajectory import Trajectory
from rl.algo.reward import (
    RewardConfig,
    answer_closeness,
    group_credit,
    prior_score,
    reading_rate,
    shaped_reward,
)
from rl.algo.turn_budget import turn_budget
from rl.local.args import Args
from rl.local.evidence import touched_evidence
from rl.local.rollout import TurnEncoder, TurnRow, group_values, is_flat, renumber
from rl.local.sampling import Allowed, replay_bitmask


class RecordingPolicy(Policy):
    """Wraps the transformers policy and keeps, for every turn, the context it saw and what it wrote."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.turns = inner, []
        self.grammars: list[Any] = []  # per turn, the compiled grammar it decoded under (None: unconstrained)
        self.name = getattr(inner, "name", type(inner).__name__)  # trajectories name the wrapped policy

    def reset(self, info: dict[str, Any]) -> None:
        self.inner.reset(info)

    def act(self, messages: list[Any]) -> TurnOutput:
        grammar = getattr(self.inner, "active_grammar", None)  # None: this episode decodes unconstrained
        compiled = grammar.current_grammar() if grammar is not None else None  # before act() counts the turn
        out = self.inner.act(messages)
        self.turns.append((copy.deepcopy(messages), out))  # the env rewrites old percepts in place later
        self.grammars.append(compiled)
        return out


def play_group(
    policy: Any, encoder: TurnEncoder, env: OmniVideoEnv, task: Task, args: Args, group: int, seed: int
) -> tuple[list[Trajectory], list[TurnRow]]:
    """``args.group_size`` episodes of one task; every turn becomes one training row."""
    trajs, rows = [], []
    budget = turn_budget(task.duration, args.env.get("turns") or {})
    shaping = RewardConfig(**(args.env.get("reward") or {}))
    shuffle = bool(args.local.get("shuffle_options")) and task.choices is not None
    # None unless env.reward.prior_tasks is set; one score per task, the same for every episode of the group
    prior = prior_score(shaping, task)
    recorders, seens, closes = [], [], []
    for i in range(args.group_size):
        recorder = RecordingPolicy(policy)
        # local.shuffle_options: each episode sees the choices in its own seeded order, so no letter pays
        played = task
        if shuffle:
            order = np.random.default_rng([seed + i, 1]).permutation(len(task.choices or []))
            played = task.with_choices_in_order(order.tolist())
        traj = run_episode(
            env, recorder, played.env_options(budget), episode_id=f"g{group}-{i}", seed=seed + i
        )
        errors = sum(1 for t in traj.turns if t.error)
        seen = touched_evidence(traj, task.evidence) if task.evidence else None  # None: nothing to test
        # None: media without ground truth, or nothing (in the credit's scope) seen
        reading = reading_rate(task.media, traj.turns, shaping.reading_scope)
        close = answer_closeness(shaping, task.task_type, traj.answer, task.answer)  # None unless num_credit
        reward = shaped_reward(
            traj.reward or 0.0, errors, traj.answered, shaping, seen, reading, prior, close
        )
        traj.meta["shaped_reward"], traj.meta["evidence_seen"] = reward, seen is not False
        traj.meta["prior_score"] = prior
        traj.meta["reading"] = reading
        traj.meta["closeness"] = close
        traj.meta["task_id"] = task.id  # the episode id names only its group
        trajs.append(traj)
        recorders.append(recorder)
        seens.append(seen)
        closes.append(close)
    # env.reward.num_credit_scope=flat: the closeness credit, only in a group whose episodes all scored 0
    extra = group_credit(shaping, [t.reward or 0.0 for t in trajs], closes, seens)
    for i, (traj, recorder) in enumerate(zip(trajs, recorders, strict=True)):
        traj.meta["shaped_reward"] = reward = traj.meta["shaped_reward"] + extra[i]
        for k, ((context, out), rec) in enumerate(zip(recorder.turns, traj.turns, strict=False)):
            item, allowed = turn_item(encoder, context, out, recorder.grammars[k], args.masked_stats)
            row = TurnRow(item, group, group * args.group_size + i, k, reward, rec, context, allowed=allowed)
            rows.append(row)
    return trajs, rows


def turn_item(
    encoder: TurnEncoder, context: list[Any], out: TurnOutput, compiled: Any, sampled: bool
) -> tuple[dict[str, Any], Allowed | None]:
    """A turn's training row: with ``sampled`` (``local.masked_stats``) the ids the policy sampled, with the mask
    of what its grammar allowed at each of them; otherwise the turn's text encoded again, no mask."""
    if not sampled:
        reply: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": out.text}]}
        if out.thinking:  # a thinking model's reasoning block is trained on with its turn
            reply["thinking"] = out.thinking
        return encoder.encode([*context, reply]), None
    if out.token_ids is None:
        raise ValueError(
            "local.masked_stats needs the sampled token ids (TurnOutput.token_ids) of the policy"
        )
    item = encoder.encode_sampled(context, out.token_ids)
    if compiled is None:
        return item, None
    at = (
        int(item["input_ids"].shape[0]) - len(out.token_ids) - 1
    )  # the logits that predict the first sampled id
    return item, Allowed(at, replay_bitmask(compiled, out.token_ids))


def rollout(
    policy: Any,
    encoder: TurnEncoder,
    env: OmniVideoEnv,
    tasks: list[Task],
    args: Args,
    seed: int,
    it: int,
    on_group: Callable[[], None] | None = None,
) -> tuple[list[int], list[Trajectory], list[TurnRow], dict[str, float]]:
    """Iteration ``it``'s groups: which tasks, their trajectories and turn rows (all seeded by seed and it), and
    how many groups were played and how many of those were flat.

    With ``algorithm.filter_groups.enable`` (DAPO's dynamic sampling, verl's key): a group whose episodes all
    measure the same in ``filter_groups.metric`` is dropped (its advantages would be 0, and under token-mean it
    would only dilute the others), and further batches of ``data.train_batch_size`` tasks are drawn until that
    many groups are kept or ``max_num_gen_batches`` batches were drawn; then the most recent dropped groups fill
    the remaining places, so every iteration trains on ``data.train_batch_size`` groups. Off, the draws are
    exactly those of a run without the knob. ``on_group`` is called after each group is played."""
    rng = np.random.default_rng([seed, it])
    n, size = args.tasks_per_iteration, args.group_size
    torch.manual_seed(seed * 1_000_003 + it)  # the transformers backend samples from torch's global generator
    kept: list[tuple[int, list[Trajectory], list[TurnRow]]] = []
    dropped: list[tuple[int, list[Trajectory], list[TurnRow]]] = []
    played = flat = batches = 0
    while len(kept) < n and (batches == 0 or args.filter_metric is not None):
        if batches and batches >= args.max_gen_batches:
            break
        batches += 1
        for task_i in rng.choice(len(tasks), size=n, replace=n > len(tasks)):
            g = played  # unique while playing; renumbered below
            t, r = play_group(
                policy, encoder, env, tasks[int(task_i)], args, g, seed=int(rng.integers(2**31))
            )
            played += 1
            if on_group is not None:  # e.g. the progress bar: it moves per group, not per iteration
                on_group()
            flat += is_flat(group_values(t, "reward"))
            keep = args.filter_metric is None or not is_flat(group_values(t, args.filter_metric))
            (kept if keep else dropped).append((int(task_i), t, r))
            if len(kept) == n:
                break
    chosen = kept + dropped[::-1][: n - len(kept)]
    picks, trajs, rows = [], [], []
    for g, (task_i, t, r) in enumerate(chosen):
        renumber(t, r, g, size)
        picks.append(task_i)
        trajs += t
        rows += r
    stats = {"groups_played": played, "groups_flat": flat, "gen_batches": batches}
    return picks, trajs, rows, stats
