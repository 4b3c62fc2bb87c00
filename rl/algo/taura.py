"""TAURA: turn-level advantages weighted by the policy's uncertainty in each turn.

Every training row is ONE TURN of ONE trajectory (verl's V1 trainer stores each ``AgentLoopOutput`` of a
session as its own row). Rows carry three integer ids: the group ``g`` (all rollouts of one prompt, verl's
``uid``), the trajectory ``i`` (one rollout, ``{uid}_{session}``) and the turn ``k`` (order within the
trajectory). The recipe, read top to bottom:

1. ``H[i,k]``  = mean entropy of the tokens the policy generated in turn ``k``   (``turn_mean_entropy``)
2. ``A[i]``    = GRPO outcome advantage of trajectory ``i``: its final reward, normalised within its group
   as ``(r - mean) / (std + eps)`` (or only centred)                             (``grpo_outcome_advantage``)
3. ``w[i,k]``  = ``H[i,k] / mean(H over every turn of every trajectory in the group)``  (``taura_turn_weights``)
4. every generated token of turn ``k`` gets advantage ``w[i,k] * A[i]``          (``taura_advantages``)

Uncertain turns (where the decision was hard) get a larger share of the outcome's credit, confident turns a
smaller one, and the group's mean weight stays 1. ``mode="grpo"`` sets every weight to 1, which reproduces
verl's multi-trajectory GRPO exactly (the ablation baseline). ``mode="ig"`` and ``mode="oracle"`` replace the
entropy in step 3 by ``score_floor + s[i,k]`` for a per-turn score the caller measures (``turn_scores``):
``ig`` the information gain of the turn's percept (:func:`rl.local.info_gain.information_gains`), ``oracle`` 1 when
the turn's percept overlaps the task's evidence, else 0 (:func:`rl.local.evidence.overlaps_evidence`; an upper
bound that only synthetic tasks allow). The floor keeps turns without a percept (the answer) trained.

``held`` marks turns whose weight stays 1 and which stay out of the group mean (``taura.hold_answer_turns``
passes the answer turns): the weights then move outcome credit among the perceiving turns only, and the answer
step, whose tokens are the most uncertain and so get the largest TAURA weight, is updated exactly as GRPO
updates it.

Everything here is pure, vectorised torch on CPU or GPU: no verl, no Python loops over rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np
import torch

Mode = Literal["taura", "grpo", "ig", "oracle"]
# "taura": entropy-weighted turns; "grpo": every weight is 1; "ig" / "oracle": weighted by caller's turn scores
MODES: tuple[str, ...] = ("taura", "grpo", "ig", "oracle")
SCORE_MODES: tuple[str, ...] = ("ig", "oracle")  # modes that need ``turn_scores``

# Added to the group's reward std before dividing (verl's GRPO default, ``epsilon`` there).
STD_EPS = 1e-6
# A group whose mean turn entropy is at or below this is treated as entropy-free: all its weights are 1.
ENTROPY_EPS = 1e-8


class TauraAdvantages(NamedTuple):
    advantages: torch.Tensor  # (rows, tokens) per-token advantage, zero outside the response mask
    weights: torch.Tensor  # (rows,) turn weight w[i,k] (all ones in "grpo" mode)
    turn_entropy: torch.Tensor  # (rows,) H[i,k], 0 for rows without generated tokens
    outcome_advantage: torch.Tensor  # (rows,) A[i] of the row's trajectory
    valid: torch.Tensor  # (rows,) bool, True where the row has at least one generated token


# ------------------------------------------------------------------ segment helpers


def _dense_ids(ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Map arbitrary integer ids to 0..n-1 (inverse index) and return n."""
    unique, inverse = torch.unique(ids, return_inverse=True)
    return inverse, unique.numel()


def _segment_sum(values: torch.Tensor, segment: torch.Tensor, num_segments: int) -> torch.Tensor:
    return torch.zeros(num_segments, dtype=values.dtype, device=values.device).index_add_(0, segment, values)


# ------------------------------------------------------------------ 1. turn entropy


def turn_mean_entropy(entropy: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Mean token entropy of each row over its generated tokens: (rows, tokens) -> (rows,).

    Rows without any generated token (padding rows, fully masked turns) get 0.
    """
    mask = response_mask.to(entropy.dtype)
    num_tokens = mask.sum(dim=-1)
    return (entropy * mask).sum(dim=-1) / num_tokens.clamp(min=1)


# ------------------------------------------------------------------ 2. outcome advantage


def grpo_outcome_advantage(
    rewards: torch.Tensor,
    group_index: torch.Tensor,
    eps: float = STD_EPS,
    norm_by_std: bool = True,
) -> torch.Tensor:
    """GRPO advantage of each trajectory: its reward normalised within its group. (traj,) -> (traj,).

    ``(r - mean_g) / (std_g + eps)``, or ``r - mean_g`` with ``norm_by_std=False`` (Dr.GRPO). ``std_g`` is the
    unbiased standard deviation. Conventions copied from verl's ``compute_grpo_outcome_advantage`` so that
    both agree to float precision: a group whose rewards are all equal gets advantage 0; a group with a
    single trajectory uses mean 0 and std 1 (its advantage is its raw reward).
    """
    rewards = rewards.float()
    group, num_groups = _dense_ids(group_index)
    count = _segment_sum(torch.ones_like(rewards), group, num_groups)
    mean = _segment_sum(rewards, group, num_groups) / count
    squared_dev = (rewards - mean[group]) ** 2
    std = (_segment_sum(squared_dev, group, num_groups) / (count - 1).clamp(min=1)).sqrt()
    singleton = count == 1
    mean = torch.where(singleton, torch.zeros_like(mean), mean)
    std = torch.where(singleton, torch.ones_like(std), std)

    centred = rewards - mean[group]
    if not norm_by_std:
        return centred
    scale = std[group] + eps
    return centred / torch.where(
        scale > 0, scale, torch.ones_like(scale)
    )  # eps=0 and equal rewards: 0, not NaN


# ------------------------------------------------------------------ 3. turn weights


def taura_turn_weights(
    turn_entropy: torch.Tensor,
    group_index: torch.Tensor,
    eps: float = ENTROPY_EPS,
    valid: torch.Tensor | None = None,
    held: torch.Tensor | None = None,
) -> torch.Tensor:
    """TAURA weight of each turn: its entropy over the mean entropy of all turns in its group. (rows,).

    The mean runs over every (valid) turn of every trajectory in the group, so trajectories with more turns
    count more. Edge cases: a group whose mean entropy is <= ``eps`` gets weight 1 everywhere; rows that are
    not ``valid`` (no generated tokens) are left out of the mean and get weight 1 (they carry no tokens); rows
    that are ``held`` are left out of the mean too and get weight 1 (the other turns are weighted among
    themselves).
    """
    turn_entropy = turn_entropy.float()
    if valid is None:
        valid = torch.ones_like(turn_entropy, dtype=torch.bool)
    if held is not None:
        valid = valid & ~held.to(device=valid.device, dtype=torch.bool)
    group, num_groups = _dense_ids(group_index)
    in_mean = valid.to(turn_entropy.dtype)
    entropy_sum = _segment_sum(turn_entropy * in_mean, group, num_groups)
    group_mean = (entropy_sum / _segment_sum(in_mean, group, num_groups).clamp(min=1))[group]

    weights = torch.where(
        group_mean > eps, turn_entropy / group_mean.clamp(min=eps), torch.ones_like(group_mean)
    )
    return torch.where(valid, weights, torch.ones_like(weights))


ANSWER_ACTION = "answer"  # the environment's action that ends an episode


def answer_turns(action_types: Sequence[str | None]) -> torch.Tensor:
    """(rows,) bool, True on the rows whose action is the answer: the ``held`` rows of ``hold_answer_turns``."""
    return torch.tensor([a == ANSWER_ACTION for a in action_types], dtype=torch.bool)


# ------------------------------------------------------------------ 4. per-token advantages


def taura_advantages(
    entropy: torch.Tensor,
    response_mask: torch.Tensor,
    rewards: torch.Tensor,
    traj_index: torch.Tensor,
    group_index: torch.Tensor,
    turn_index: torch.Tensor,
    mode: Mode = "taura",
    std_eps: float = STD_EPS,
    entropy_eps: float = ENTROPY_EPS,
    norm_by_std: bool = True,
    turn_scores: torch.Tensor | None = None,
    score_floor: float = 1.0,
    held: torch.Tensor | None = None,
) -> TauraAdvantages:
    """Per-token advantages for per-turn rows.

    Args:
        entropy: (rows, tokens) per-token entropy of the policy that generated (or re-scored) the turn.
        response_mask: (rows, tokens) 1 on tokens the policy generated in this turn, 0 elsewhere.
        rewards: (rows,) outcome reward of the row's trajectory. Only the row with the largest
            ``turn_index`` of each trajectory is read (verl copies the final reward to earlier turns).
        traj_index: (rows,) trajectory id, unique across groups.
        group_index: (rows,) group id (same prompt); constant within a trajectory.
        turn_index: (rows,) turn order within the trajectory.
        mode: "taura" (entropy-weighted turns) or "grpo" (all weights 1).
        std_eps, norm_by_std: GRPO normalisation, see :func:`grpo_outcome_advantage`.
        entropy_eps: see :func:`taura_turn_weights`.
        turn_scores: (rows,) per-turn score s >= 0 for modes "ig" and "oracle" (negative values count as 0).
        score_floor: those modes weight a turn by ``(score_floor + s) / group mean of (score_floor + s)``.
        held: (rows,) bool, turns whose weight stays 1 and which stay out of the group mean (any mode; in
            "grpo" every weight is 1 anyway).
    """
    if mode not in MODES:
        raise ValueError(f"unknown TAURA mode {mode!r}; expected one of {MODES}")
    valid = response_mask.sum(dim=-1) > 0
    turn_entropy = turn_mean_entropy(entropy, response_mask)

    # Outcome advantage per trajectory, from the final turn's reward, broadcast back to its rows.
    traj, num_traj = _dense_ids(traj_index)
    last_turn = torch.full((num_traj,), torch.iinfo(torch.long).min, dtype=torch.long, device=traj.device)
    last_turn = last_turn.scatter_reduce(0, traj, turn_index.long(), reduce="amax")
    is_final = turn_index.long() == last_turn[traj]
    traj_reward = torch.zeros(num_traj, dtype=torch.float32, device=rewards.device)
    traj_reward[traj[is_final]] = rewards[is_final].float()
    traj_group = torch.zeros(num_traj, dtype=group_index.dtype, device=group_index.device)
    traj_group[traj] = group_index
    outcome_advantage = grpo_outcome_advantage(traj_reward, traj_group, std_eps, norm_by_std)[traj]

    if mode == "taura":
        weights = taura_turn_weights(turn_entropy, group_index, entropy_eps, valid, held)
    elif mode in SCORE_MODES:
        if turn_scores is None or turn_scores.shape != turn_entropy.shape:
            raise ValueError(f"mode {mode!r} needs turn_scores of shape {tuple(turn_entropy.shape)}")
        scores = score_floor + turn_scores.float().to(turn_entropy.device).clamp(min=0)
        weights = taura_turn_weights(scores, group_index, entropy_eps, valid, held)
    else:
        weights = torch.ones_like(turn_entropy)

    advantages = (weights * outcome_advantage).unsqueeze(-1) * response_mask.to(outcome_advantage.dtype)
    return TauraAdvantages(advantages, weights, turn_entropy, outcome_advantage, valid)


# ------------------------------------------------------------------ logging


def weight_stats(weights: torch.Tensor, valid: torch.Tensor | None = None) -> dict[str, float]:
    """Mean / std (population) / min / max of the turn weights over valid rows; zeros if none."""
    if valid is not None:
        weights = weights[valid]
    if weights.numel() == 0:
        return {"mean": 0.0, "std": 0.0, "min": 0.0, "max": 0.0}
    weights = weights.float()
    return {
        "mean": weights.mean().item(),
        "std": weights.std(unbiased=False).item(),
        "min": weights.min().item(),
        "max": weights.max().item(),
    }


def entropy_by_action(
    turn_entropy: torch.Tensor,
    action_types: Sequence[str | None],
    valid: torch.Tensor | None = None,
) -> dict[str, dict[str, float]]:
    """Mean turn entropy and turn count per action type (e.g. frames / audio / clip / answer).

    Rows with action ``None`` are grouped under ``"unknown"``; rows that are not ``valid`` are skipped.
    Returns ``{action: {"entropy_mean": float, "turns": float}}``.
    """
    labels = np.array(["unknown" if a is None else str(a) for a in action_types], dtype=object)
    keep = np.ones(len(labels), dtype=bool) if valid is None else valid.cpu().numpy().astype(bool)
    if not keep.any():
        return {}
    names, inverse = np.unique(labels[keep], return_inverse=True)
    segment = torch.as_tensor(inverse, dtype=torch.long, device=turn_entropy.device)
    values = turn_entropy[torch.as_tensor(keep, device=turn_entropy.device)].float()
    count = _segment_sum(torch.ones_like(values), segment, len(names))
    mean = _segment_sum(values, segment, len(names)) / count
    return {
        str(name): {"entropy_mean": m, "turns": c}
        for name, m, c in zip(names, mean.tolist(), count.tolist(), strict=True)
    }
