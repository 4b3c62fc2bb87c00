"""Step 5 of the local trainer (``rl/train_local.py``): the greedy held-out eval, the metrics of an iteration,
loading the policy (or resuming a run: :func:`open_run`), and checkpoints a run resumes from (refused when saved
with other settings)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.env import OmniVideoEnv
from envs.tasks import Task
from omniagent.episode import run_episode
from omniagent.trajectory import Trajectory
from rl.algo.taura import weight_stats
from rl.algo.turn_budget import turn_budget
from rl.checkpoint import latest_checkpoint, load_training_state, prune_checkpoints, save_checkpoint
from rl.local.args import Args
from rl.local.rollout import TurnEncoder, TurnRow, read_metrics, truncate_rollouts
from rl.local.sft_anchor import SFTAnchor


def evaluate(policy: Any, env: OmniVideoEnv, tasks: list[Task], args: Args) -> float:
    """Mean environment reward of one greedy episode per held-out task."""
    sampling = policy.generation_config
    policy.generation_config = copy.deepcopy(sampling)
    policy.generation_config.do_sample, policy.generation_config.top_p = False, 1.0
    try:
        rewards = []
        for j, task in enumerate(tasks):
            budget = turn_budget(task.duration, args.env.get("turns") or {})
            traj = run_episode(env, policy, task.env_options(budget), episode_id=f"eval-{j}", seed=j)
            rewards.append(traj.reward)
    finally:
        policy.generation_config = sampling
    return float(np.mean(rewards)) if rewards else float("nan")


METRICS = (
    "iteration", "reward_mean", "reward_std", "score_mean", "evidence_seen", "answered", "valid_turns", "turns",
    "frames", "entropy_turn_mean", "entropy_turn_std", "weight_mean", "weight_std", "weight_min", "weight_max",
    "adv_abs_mean", "adv_finite", "loss", "clipfrac", "approx_kl", "grad_norm", "opt_steps", "kl_stop",
    "param_delta", "eval_reward", "seconds", "groups_played", "groups_flat", "gen_batches", "reading", "ref_kl",
    "sft_nll",
)  # fmt: skip


def rollout_metrics(trajs: list[Trajectory], rows: list[TurnRow], adv: Any) -> dict[str, float]:
    """Reward, turn and TAURA-weight statistics of one iteration's rollouts."""
    rewards = np.array([t.meta["shaped_reward"] for t in trajs], dtype=float)
    ent = adv.turn_entropy[adv.valid]
    weights = weight_stats(adv.weights, adv.valid)
    read = [t.meta["reading"] for t in trajs if t.meta["reading"] is not None]
    return {
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std()),
        "score_mean": float(np.mean([t.reward or 0.0 for t in trajs])),  # the env's score, before shaping
        "evidence_seen": float(np.mean([t.meta["evidence_seen"] for t in trajs])),
        "answered": float(np.mean([t.answered for t in trajs])),
        "valid_turns": float(np.mean([r.record.error is None for r in rows])),
        "turns": float(np.mean([t.num_turns for t in trajs])),
        "frames": float(np.mean([t.frames_used for t in trajs])),
        "entropy_turn_mean": float(ent.mean()) if ent.numel() else 0.0,
        "entropy_turn_std": float(ent.std(unbiased=False)) if ent.numel() else 0.0,
        **{f"weight_{k}": v for k, v in weights.items()},
        "adv_abs_mean": float(adv.advantages.abs().sum()) / max(sum(float(r.mask.sum()) for r in rows), 1.0),
        "adv_finite": float(bool(torch.isfinite(adv.advantages).all())),
        "reading": float(np.mean(read)) if read else float("nan"),  # served frames/audio read exactly
    }


def load_policy(model: str, args: Args) -> Any:
    """The transformers policy that samples rollouts; its ``.model`` is the network being trained."""
    from omniagent.backends.transformers_backend import TransformersPolicy

    policy = TransformersPolicy(
        model=model, device=str(args.local.get("device", "auto")), dtype="float32", seed=int(args.local["seed"]),
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
        constrained=bool(args.local.get("constrained", False)),
    )  # fmt: skip
    return policy


def resume_point(args: Args, ckpt_root: Path) -> tuple[Path | None, dict[str, Any] | None]:
    """The newest checkpoint to continue from (None when starting afresh); refuses one from other settings."""
    folder = latest_checkpoint(ckpt_root) if args.local.get("resume", True) else None
    if folder is None:
        return None, None
    state = load_training_state(folder)
    if state.get("fingerprint") != args.fingerprint():
        raise ValueError(
            f"{folder} was saved with other settings; set local.resume=false or another local.run_dir"
        )
    return folder, state


def save(policy: Any, opt: Any, args: Args, ckpt_root: Path, iteration: int) -> None:
    state = {"iteration": iteration, "optimizer": opt.state_dict(), "fingerprint": args.fingerprint()}
    save_checkpoint(policy.model, policy.processor, ckpt_root / f"step-{iteration:06d}", state)
    prune_checkpoints(ckpt_root, int(args.local.get("keep_checkpoints", 2)))


@dataclass
class Run:
    """What a run trains with: the policy (its ``.model`` is the network trained), the turn encoder, the frozen
    reference model (``actor.use_kl_loss``) and SFT anchor (``local.sft_anchor``) when set, the optimizer, the
    first iteration to play and the metrics rows so far."""

    policy: Any
    encoder: TurnEncoder
    ref_model: Any
    anchor: SFTAnchor | None
    opt: torch.optim.Optimizer
    start: int
    history: list[dict[str, Any]]


def open_run(args: Args, run_dir: Path) -> Run:
    """Load the policy and a fresh optimizer, or continue from the newest checkpoint under ``run_dir``
    (model, optimizer, iteration; metrics and rollouts of later iterations are dropped)."""
    resume_dir, state = resume_point(args, run_dir / "checkpoints")
    policy = load_policy(str(resume_dir) if resume_dir else args.model, args)
    model = policy.model
    encoder = TurnEncoder(
        policy.processor, model.config, policy.use_audio_in_video, policy.image_pixels, policy.video_pixels
    )
    # the KL anchor is the model the run started from (not a resumed checkpoint), frozen
    ref_model = load_policy(args.model, args).model.requires_grad_(False).eval() if args.kl_coef else None
    anchor = SFTAnchor.from_local(args.local, encoder)  # None unless local.sft_anchor.data is set
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=args.betas, weight_decay=args.weight_decay)
    start = 0
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        start = int(state["iteration"])
        print(json.dumps({"resumed_from": str(resume_dir), "iteration": start}), flush=True)
    history = read_metrics(run_dir / "metrics.csv", start)
    truncate_rollouts(run_dir / "rollouts.jsonl", start)
    return Run(policy, encoder, ref_model, anchor, opt, start, history)
