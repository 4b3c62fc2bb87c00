"""TAURA (or GRPO) in one process, on a CPU or one GPU: the reference trainer for small models.

    python rl/train_local.py +exp=tiny local.train_tasks=runs/synth_train/tasks.jsonl \
        local.eval_tasks=runs/synth_test/tasks.jsonl actor_rollout_ref.model.path=runs/tiny_sft/final
    python rl/train_local.py +exp=tiny ... taura.mode=grpo          # the ablation

verl cannot run on a CPU (no CPU device, NCCL hard-wired, rollout needs vLLM), so this file is the loop spelled
out, readable top to bottom like CleanRL's ``ppo.py``. It composes the verl entry's own config
(``conf/rl/taura.yaml`` + an experiment, plus the ``local:`` block of ``conf/rl/local/default.yaml``) and reads each
algorithm setting from the key verl reads (see :class:`Args`). One iteration:

1. **Rollout.** ``data.train_batch_size`` tasks, each played ``rollout.n`` times (one group) through
   :class:`envs.env.OmniVideoEnv` and the transformers backend, sampling at ``rollout.temperature``.
   Every turn is recorded as an SFT sample (:class:`TurnEncoder`, the builder of ``rl/sft/dataset.py``):
   the context exactly as the environment showed it, the loss mask on that turn's output only. With
   ``algorithm.filter_groups.enable`` (DAPO), groups whose episodes all scored alike are replaced by new draws.
2. **Old log-probs.** One no-grad forward per turn row gives the behaviour policy's per-token log-prob and
   entropy on exactly the tokens trained (as verl recomputes them with the actor; the rollout and training
   model are the same weights in the same precision here, so verl's rollout importance correction is 1).
3. **Advantages.** :func:`rl.algo.taura.taura_advantages`: GRPO outcome advantage per trajectory, times the TAURA
   turn weight (``taura.mode``: taura | grpo | ig | oracle; ``taura.hold_answer_turns``: answer turns at 1).
4. **Update.** ``actor.ppo_epochs`` passes of verl's vanilla PPO-clip loss (``clip_ratio_low``/``high``, dual
   clip ``clip_ratio_c``, ``loss_agg_mode`` token-mean) over mini-batches of ``actor.ppo_mini_batch_size`` x
   ``rollout.n`` turn rows (as verl counts them), AdamW with ``actor.optim`` settings and ``actor.grad_clip``;
   with ``actor.use_kl_loss``, plus ``kl_loss_coef`` x a per-token KL estimate to the starting model; with
   ``local.sft_anchor``, plus the SFT loss of a few rows of the agent's SFT set per step (PPO-ptx, rl/local/sft_anchor.py).
5. **Log, eval, save.** A row of ``<run_dir>/metrics.csv``; a greedy held-out eval every ``local.eval_every``;
   a complete, loadable checkpoint folder (:func:`rl.checkpoint.save_checkpoint`) with the optimizer state every
   ``local.save_every``. Started again, the run resumes from the newest checkpoint (also after ``kill -9``):
   task draws, episode seeds and sampling are seeded from ``(local.seed, iteration)``, so a resumed run repeats
   exactly what an uninterrupted one would have done.
"""

from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from envs.env import OmniVideoEnv
from envs.limits import EnvLimits
from envs.tasks import Task, load_tasks_jsonl
from omniagent.episode import run_episode
from omniagent.policy import Policy, TurnOutput
from omniagent.trajectory import Trajectory
from recipes.tiny_agent.probes.turn_labels import overlaps_evidence, touched_evidence
from rl.algo.reward import (
    RewardConfig,
    answer_closeness,
    group_credit,
    prior_score,
    reading_rate,
    shaped_reward,
)
from rl.algo.taura import SCORE_MODES, answer_turns, taura_advantages, weight_stats
from rl.algo.turn_budget import turn_budget
from rl.checkpoint import latest_checkpoint, load_training_state, prune_checkpoints, save_checkpoint
from rl.local.rollout import (
    TurnEncoder,
    TurnRow,
    append_rollouts,
    forward_stats,
    group_values,
    is_flat,
    read_metrics,
    renumber,
    truncate_rollouts,
    write_metrics,
)
from rl.local.sft_anchor import SFTAnchor
from rl.local.task_draw import tasks_from_config
from rl.sft.step import collate

CONF_DIR = Path(__file__).resolve().parents[1] / "conf" / "rl"


# ====================================================================== 0. settings, each named once


@dataclass
class Args:
    """Every knob of the run, with the shared-config key it is read from (verl reads the same key)."""

    model: str  # actor_rollout_ref.model.path: checkpoint folder, "tiny" (shipped agent) or "tiny-random"
    group_size: int  # actor_rollout_ref.rollout.n: episodes per task (one GRPO group)
    temperature: float  # actor_rollout_ref.rollout.temperature: rollout sampling temperature
    top_p: float  # actor_rollout_ref.rollout.top_p
    max_new_tokens: int  # data.max_response_length: tokens generated per turn
    tasks_per_iteration: int  # data.train_batch_size: groups per iteration
    lr: float  # actor_rollout_ref.actor.optim.lr
    weight_decay: float  # actor_rollout_ref.actor.optim.weight_decay (AdamW)
    betas: tuple[float, float]  # actor_rollout_ref.actor.optim.betas
    grad_clip: float  # actor_rollout_ref.actor.grad_clip: max global grad norm
    clip_low: float  # actor_rollout_ref.actor.clip_ratio_low: ratio floor 1 - clip_low
    clip_high: float  # actor_rollout_ref.actor.clip_ratio_high: ratio ceiling 1 + clip_high
    clip_c: float  # actor_rollout_ref.actor.clip_ratio_c: dual-clip bound for negative advantages
    loss_agg_mode: str  # actor_rollout_ref.actor.loss_agg_mode: token-mean | seq-mean-token-mean
    ppo_epochs: int  # actor_rollout_ref.actor.ppo_epochs: passes over each iteration's rows
    mini_batch_rows: (
        int  # actor_rollout_ref.actor.ppo_mini_batch_size x rollout.n: turn rows per optimizer step
    )
    mode: str  # taura.mode: taura | grpo | ig | oracle (rl/algo/taura.py)
    std_eps: float  # taura.std_eps: added to the group reward std
    entropy_eps: float  # taura.entropy_eps: groups with mean turn score <= this get weight 1
    score_floor: float  # taura.score_floor: ig/oracle weight = (floor + score) / group mean
    hold_answer_turns: bool  # taura.hold_answer_turns: answer turns keep weight 1, out of the group mean
    norm_by_std: bool  # algorithm.norm_adv_by_std_in_grpo: false = centre rewards only (Dr.GRPO)
    # actor_rollout_ref.actor.kl_loss_coef if .use_kl_loss, else 0: weight of the KL to the starting model
    kl_coef: float
    kl_type: str  # actor_rollout_ref.actor.kl_loss_type: the per-token KL estimate (KL_TYPES)
    filter_metric: str | None  # algorithm.filter_groups.metric if .enable: drop groups flat in it (DAPO)
    max_gen_batches: int  # algorithm.filter_groups.max_num_gen_batches: task batches drawn at most
    env: dict[str, Any]  # env.turns / env.limits / env.reward (as the verl agent loop reads them)
    local: dict[str, Any] = field(default_factory=dict)  # local.* (conf/rl/local/default.yaml documents each)

    def __post_init__(self) -> None:
        if self.kl_type not in KL_TYPES:
            raise ValueError(
                f"actor_rollout_ref.actor.kl_loss_type={self.kl_type!r}: this trainer knows {sorted(KL_TYPES)}"
            )
        if self.kl_coef < 0:
            raise ValueError(f"actor_rollout_ref.actor.kl_loss_coef={self.kl_coef} must be >= 0")
        if self.filter_metric is not None and self.max_gen_batches <= 0:  # verl: no limit; here: a hang
            raise ValueError(
                "algorithm.filter_groups.enable=true needs a bound in this trainer: set "
                "algorithm.filter_groups.max_num_gen_batches to a positive number of task batches (e.g. 3)"
            )

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Args:
        actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
        taura, groups = cfg.taura, cfg.algorithm.get("filter_groups")
        return cls(
            model=str(cfg.actor_rollout_ref.model.path),
            group_size=int(rollout.n),
            temperature=float(rollout.temperature),
            top_p=float(rollout.top_p),
            max_new_tokens=int(cfg.data.max_response_length),
            tasks_per_iteration=int(cfg.data.train_batch_size),
            lr=float(actor.optim.lr),
            weight_decay=float(actor.optim.weight_decay),
            betas=tuple(float(b) for b in actor.optim.betas),  # type: ignore[arg-type]
            grad_clip=float(actor.grad_clip),
            clip_low=float(actor.clip_ratio_low),
            clip_high=float(actor.clip_ratio_high),
            clip_c=float(actor.clip_ratio_c),
            loss_agg_mode=str(actor.loss_agg_mode),
            ppo_epochs=int(actor.ppo_epochs),
            mini_batch_rows=int(actor.ppo_mini_batch_size) * int(rollout.n),
            mode=str(taura.mode),
            std_eps=float(taura.std_eps),
            entropy_eps=float(taura.entropy_eps),
            score_floor=float(taura.get("score_floor", 1.0)),
            hold_answer_turns=bool(taura.get("hold_answer_turns", False)),
            norm_by_std=bool(cfg.algorithm.norm_adv_by_std_in_grpo),
            kl_coef=float(actor.get("kl_loss_coef", 0.0)) if actor.get("use_kl_loss") else 0.0,
            kl_type=str(actor.get("kl_loss_type", "low_var_kl")),
            filter_metric=str(groups.metric or "reward") if groups and groups.enable else None,
            max_gen_batches=int(groups.max_num_gen_batches) if groups else 0,
            env=OmegaConf.to_container(cfg.env, resolve=True),  # type: ignore[arg-type]
            local=OmegaConf.to_container(cfg.local, resolve=True),  # type: ignore[arg-type]
        )

    def fingerprint(self) -> dict[str, Any]:
        """Settings a resumed run must share with the run that saved the checkpoint."""
        keep = {k: v for k, v in asdict(self).items() if k not in ("local", "model")}
        keep["train_tasks"], keep["seed"] = str(self.local["train_tasks"]), int(self.local["seed"])
        if self.local.get("task_types"):  # only when set, so runs saved before the knob existed still resume
            keep["task_types"] = sorted(self.local["task_types"])
        if self.local.get("target_kl") is not None:  # likewise
            keep["target_kl"] = float(self.local["target_kl"])
        if self.local.get("task_pool"):  # likewise
            keep["task_pool"] = int(self.local["task_pool"])
        if self.local.get("task_repeats"):  # likewise
            keep["task_repeats"] = {str(k): int(v) for k, v in sorted(self.local["task_repeats"].items())}
        if self.local.get("shuffle_options"):  # likewise
            keep["shuffle_options"] = True
        anchor = self.local.get("sft_anchor") or {}
        if anchor.get("data"):  # likewise
            keep["sft_anchor"] = {
                "data": str(anchor["data"]),
                "coef": anchor.get("coef"),
                "rows": anchor.get("rows"),
            }
        if self.filter_metric is None:  # likewise (fields added later)
            keep.pop("filter_metric"), keep.pop("max_gen_batches")
        if not self.kl_coef:  # likewise
            keep.pop("kl_coef"), keep.pop("kl_type")
        if not self.hold_answer_turns:  # likewise
            keep.pop("hold_answer_turns")
        reward = keep["env"].get("reward", {})
        defaults = (
            ("evidence_gate", False),
            ("evidence_bonus", 0.0),
            ("reading_credit", 0.0),
            ("reading_scope", "all"),
            ("prior_tasks", None),
        )
        for key, default in defaults:
            if key in reward and reward[key] == default:
                reward.pop(key)
        return json.loads(json.dumps(keep))


# ====================================================================== 1. rollout


class RecordingPolicy(Policy):
    """Wraps the transformers policy and keeps, for every turn, the context it saw and what it wrote."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.turns = inner, []
        self.name = getattr(inner, "name", type(inner).__name__)  # trajectories name the wrapped policy

    def reset(self, info: dict[str, Any]) -> None:
        self.inner.reset(info)

    def act(self, messages: list[Any]) -> TurnOutput:
        out = self.inner.act(messages)
        self.turns.append((copy.deepcopy(messages), out))  # the env rewrites old percepts in place later
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
            item = encoder.encode(
                [*context, {"role": "assistant", "content": [{"type": "text", "text": out.text}]}]
            )
            rows.append(TurnRow(item, group, group * args.group_size + i, k, reward, rec, context))
    return trajs, rows


def rollout(
    policy: Any, encoder: TurnEncoder, env: OmniVideoEnv, tasks: list[Task], args: Args, seed: int, it: int
) -> tuple[list[int], list[Trajectory], list[TurnRow], dict[str, float]]:
    """Iteration ``it``'s groups: which tasks, their trajectories and turn rows (all seeded by seed and it), and
    how many groups were played and how many of those were flat.

    With ``algorithm.filter_groups.enable`` (DAPO's dynamic sampling, verl's key): a group whose episodes all
    measure the same in ``filter_groups.metric`` is dropped (its advantages would be 0, and under token-mean it
    would only dilute the others), and further batches of ``data.train_batch_size`` tasks are drawn until that
    many groups are kept or ``max_num_gen_batches`` batches were drawn; then the most recent dropped groups fill
    the remaining places, so every iteration trains on ``data.train_batch_size`` groups. Off, the draws are
    exactly those of a run without the knob."""
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


# ====================================================================== 2-3. old log-probs and advantages


def score_rows(model: Any, rows: list[TurnRow], pad_id: int, ref_model: Any = None) -> None:
    """Fill each row's behaviour log-probs, entropies and (shifted) response mask, without gradients; with a
    reference model (``actor.use_kl_loss``), also its log-probs of the same tokens."""
    model.eval()
    with torch.no_grad():
        for row in rows:
            batch = collate([row.item], pad_id)
            stats = forward_stats(model, batch)
            row.old_logp, row.entropy, row.mask = (t.cpu() for t in stats)  # advantages are computed on CPU
            if ref_model is not None:
                row.ref_logp = forward_stats(ref_model, batch)[0].cpu()


def advantages(rows: list[TurnRow], args: Args, turn_scores: torch.Tensor | None) -> Any:
    """TAURA (or GRPO/ig/oracle) per-token advantages over all rows, padded to the longest row."""
    width = max(r.mask.shape[0] for r in rows)

    def pad(t: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(t.float(), (0, width - t.shape[0]))

    return taura_advantages(
        entropy=torch.stack([pad(r.entropy) for r in rows]),
        response_mask=torch.stack([pad(r.mask) for r in rows]),
        rewards=torch.tensor([r.reward for r in rows]),
        traj_index=torch.tensor([r.traj for r in rows]),
        group_index=torch.tensor([r.group for r in rows]),
        turn_index=torch.tensor([r.turn for r in rows]),
        mode=args.mode,  # type: ignore[arg-type]
        std_eps=args.std_eps,
        entropy_eps=args.entropy_eps,
        norm_by_std=args.norm_by_std,
        turn_scores=turn_scores,
        score_floor=args.score_floor,
        held=answer_turns([r.record.action_type for r in rows]) if args.hold_answer_turns else None,
    )


# ====================================================================== 4. PPO update


def ppo_clip_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, args: Args
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """verl's vanilla policy loss per token (dual clip included); also clipped flags and -log ratio."""
    neg_kl = torch.clamp(logp - old_logp, -20.0, 20.0)
    ratio = torch.exp(neg_kl)
    loss1 = -adv * ratio
    loss2 = -adv * torch.clamp(ratio, 1.0 - args.clip_low, 1.0 + args.clip_high)
    clipped = torch.maximum(loss1, loss2)
    dual = torch.minimum(-adv * args.clip_c, clipped)
    loss = torch.where(adv < 0, dual, clipped)
    return loss, (loss2 > loss1).float(), -neg_kl


# verl's kl_loss_type names of one per-token estimate of KL(policy || reference) from the sampled tokens:
# k1 = log ratio (unbiased, can go negative), abs = its size, k2 = half its square, k3 = r - log r - 1 with
# r = p_ref / p (unbiased, never negative, lowest variance; verl's default for GRPO). verl's "full" needs whole
# vocabularies, which the rows do not keep.
KL_TYPES = frozenset({"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"})


def kl_to_reference(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token KL estimate of ``kind`` (KL_TYPES) between the policy being trained and the reference:
    verl's own ``kl_penalty``, the function its actor calls, so both trainers compute the same term."""
    if kind not in KL_TYPES:
        raise ValueError(f"kl_loss_type {kind!r}: use one of {sorted(KL_TYPES)}")
    # imported here: the module costs seconds of start-up, which runs without the KL term need not pay
    from verl.trainer.ppo.core_algos import kl_penalty

    return kl_penalty(logp, ref_logp, kind)


def mini_batch_backward(
    model: Any, batch: list[TurnRow], adv: torch.Tensor, args: Args, pad_id: int
) -> dict[str, float]:
    """Accumulate one mini-batch's PPO-clip (+ KL) loss gradients, a forward pass per turn row; returns the
    mini-batch's loss, clip fraction, approx. KL to the rollout policy and KL to the reference (per token)."""
    tokens = sum(float(row.mask.sum()) for row in batch)
    seqs = sum(1 for row in batch if row.mask.sum() > 0)
    total = clipfrac = kl = ref_kl = 0.0
    for row, row_adv in zip(batch, adv, strict=True):
        logp, _, mask = forward_stats(model, collate([row.item], pad_id), with_grad=True)
        old, row_adv = row.old_logp.to(logp.device), row_adv[: mask.shape[0]].to(logp.device)
        loss, was_clipped, neg_log_ratio = ppo_clip_loss(logp, old, row_adv, args)
        if args.kl_coef:
            to_ref = kl_to_reference(logp, row.ref_logp.to(logp.device), args.kl_type)
            loss = loss + args.kl_coef * to_ref
            ref_kl += float((to_ref.detach() * mask).sum()) / max(tokens, 1.0)
        if args.loss_agg_mode == "token-mean":
            row_loss = (loss * mask).sum() / max(tokens, 1.0)
        elif args.loss_agg_mode == "seq-mean-token-mean":
            row_loss = (loss * mask).sum() / max(float(mask.sum()), 1.0) / max(seqs, 1)
        else:
            raise ValueError(f"loss_agg_mode {args.loss_agg_mode!r}: use token-mean or seq-mean-token-mean")
        row_loss.backward()
        total += float(row_loss.detach())
        clipfrac += float((was_clipped * mask).sum()) / max(tokens, 1.0)
        kl += float((neg_log_ratio.detach() * mask).sum()) / max(tokens, 1.0)
    return {"loss": total, "clipfrac": clipfrac, "approx_kl": kl, "ref_kl": ref_kl}


def update(
    model: Any,
    opt: Any,
    rows: list[TurnRow],
    adv: torch.Tensor,
    args: Args,
    pad_id: int,
    anchor: SFTAnchor | None = None,
    iteration: int = 0,
) -> dict:
    """``ppo_epochs`` passes over the rows in order, in mini-batches of ``mini_batch_rows`` turn rows (verl
    counts ``ppo_mini_batch_size x rollout.n`` rows per mini-batch); returns loss statistics.

    With ``local.target_kl`` set, the update stops before the first optimizer step whose mini-batch shows the
    policy already further than that (approx. KL per token) from the one that sampled the rollouts (the
    per-mini-batch early stop of Stable-Baselines3's PPO): a step size that suits most iterations cannot run
    away on one. Mini-batches go in row order, as verl's do, so the groups after the stop go untrained.

    With ``actor.use_kl_loss``, each token's loss also carries ``kl_loss_coef`` times its KL estimate to the
    reference model (verl's actor does the same): an anchor to the SFT policy for tokens, such as an
    Observation's, whose likelihood the episode's advantage would otherwise move with answer luck.

    With ``local.sft_anchor`` (``anchor``), each optimizer step also carries ``coef`` times the SFT loss of a few rows
    of the SFT set (:mod:`rl.local.sft_anchor`, PPO-ptx): an anchor for the question types the batch does not hold."""
    params = [p for p in model.parameters() if p.requires_grad]
    size = max(1, args.mini_batch_rows)
    target_kl = args.local.get("target_kl")
    stats: dict[str, list[float]] = {
        "loss": [],
        "clipfrac": [],
        "approx_kl": [],
        "grad_norm": [],
        "ref_kl": [],
        "sft_nll": [],
    }
    steps, stopped = 0, False
    model.train()
    for _ in range(args.ppo_epochs):
        for start in range(0, len(rows), size):
            stop = min(start + size, len(rows))
            opt.zero_grad(set_to_none=True)
            done = mini_batch_backward(model, rows[start:stop], adv[start:stop], args, pad_id)
            if target_kl is not None and done["approx_kl"] > float(target_kl):
                # the drift that stopped the update is logged; no step taken
                stats["approx_kl"].append(done["approx_kl"])
                stopped = True
                break
            if anchor is not None:  # PPO-ptx: the SFT rows' gradient joins this step's, before the clip
                stats["sft_nll"].append(anchor.backward(model, iteration, steps))
            done["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, args.grad_clip))
            opt.step()
            steps += 1
            for key, value in done.items():
                stats[key].append(value)
        if stopped:
            break
    model.eval()
    out = {k: float(np.mean(v)) if v else 0.0 for k, v in stats.items()}
    return {**out, "opt_steps": float(steps), "kl_stop": float(stopped)}


# ====================================================================== 5. eval, metrics, checkpoints


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


# ====================================================================== the loop


def train(cfg: DictConfig) -> Path:
    """Run (or resume) the training described by ``cfg``; returns the metrics CSV path."""
    from tqdm import tqdm

    args = Args.from_config(cfg)
    local = args.local
    run_dir = Path(str(local["run_dir"]))
    ckpt_root, metrics_path = run_dir / "checkpoints", run_dir / "metrics.csv"
    run_dir.mkdir(parents=True, exist_ok=True)
    if local.get("threads"):
        torch.set_num_threads(int(local["threads"]))
    print(json.dumps({"threads": torch.get_num_threads()}), flush=True)
    resume_dir, state = resume_point(args, ckpt_root)
    policy = load_policy(str(resume_dir) if resume_dir else args.model, args)
    model = policy.model
    encoder = TurnEncoder(
        policy.processor, model.config, policy.use_audio_in_video, policy.image_pixels, policy.video_pixels
    )
    # the KL anchor is the model the run started from (not a resumed checkpoint), frozen
    ref_model = load_policy(args.model, args).model.requires_grad_(False).eval() if args.kl_coef else None
    anchor = SFTAnchor.from_local(local, encoder)  # None unless local.sft_anchor.data is set
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=args.betas, weight_decay=args.weight_decay)
    start = 0
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        start = int(state["iteration"])
        print(json.dumps({"resumed_from": str(resume_dir), "iteration": start}), flush=True)
    history = read_metrics(metrics_path, start)
    truncate_rollouts(run_dir / "rollouts.jsonl", start)

    env = OmniVideoEnv(limits=EnvLimits(**(args.env.get("limits") or {})))
    seed, iterations = int(local["seed"]), int(local["iterations"])
    train_tasks = tasks_from_config(local, seed)
    if local.get("task_pool"):  # which tasks a fixed-pool run trained on, for its analysis
        (run_dir / "task_pool.json").write_text(json.dumps([t.id for t in train_tasks], indent=1) + "\n")
    eval_tasks = load_tasks_jsonl(str(local["eval_tasks"])) if local.get("eval_tasks") else []
    eval_tasks = eval_tasks[: int(local.get("max_eval_tasks", len(eval_tasks)))]
    bar = tqdm(
        range(start, iterations), initial=start, total=iterations, disable=not local.get("progress", True)
    )
    for it in bar:
        t0 = time.perf_counter()
        # 1. rollout: groups of episodes per task, drawn and sampled from seeds fixed by (seed, iteration)
        picks, trajs, rows, played = rollout(policy, encoder, env, train_tasks, args, seed, it)
        # 2-3. behaviour log-probs and entropies on exactly the trained tokens, then advantages
        score_rows(model, rows, encoder.pad_id, ref_model)
        turn_scores = rl_turn_scores(policy, encoder, rows, train_tasks, picks, args)
        adv = advantages(rows, args, turn_scores)
        append_rollouts(run_dir / "rollouts.jsonl", trajs, rows, adv.weights, it + 1)
        # 4. PPO-clip update
        before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        losses = update(model, opt, rows, adv.advantages, args, encoder.pad_id, anchor, it)
        after = [p.detach() for p in model.parameters() if p.requires_grad]
        delta = math.sqrt(sum(float(((a - b) ** 2).sum()) for a, b in zip(after, before, strict=True)))
        # 5. log, eval, save
        row = {
            "iteration": it + 1,
            **played,
            **rollout_metrics(trajs, rows, adv),
            **losses,
            "param_delta": delta,
        }
        last = it + 1 == iterations
        every = int(local.get("eval_every") or 0)
        if eval_tasks and ((every and (it + 1) % every == 0) or last):
            row["eval_reward"] = evaluate(policy, env, eval_tasks, args)
        row["seconds"] = time.perf_counter() - t0
        history.append(row)
        write_metrics(metrics_path, history, METRICS)
        bar.set_postfix(reward=f"{row['reward_mean']:.3f}", turns=f"{row['turns']:.1f}")
        save_every = int(local.get("save_every") or 0)
        if last or (save_every and (it + 1) % save_every == 0):
            save(policy, opt, args, ckpt_root, it + 1)
    env.close()
    save_checkpoint(model, policy.processor, run_dir / "final")
    return metrics_path


def rl_turn_scores(
    policy: Any, encoder: TurnEncoder, rows: list[TurnRow], tasks: list[Task], picks: Any, args: Args
) -> torch.Tensor | None:
    """Per-row turn scores for ``mode=ig`` (answer-entropy drop) and ``mode=oracle`` (evidence overlap)."""
    if args.mode not in SCORE_MODES:
        return None
    from rl.local.info_gain import information_gains

    if args.mode == "oracle":
        return torch.tensor(
            [float(overlaps_evidence(r.record, tasks[int(picks[r.group])].evidence or [])) for r in rows]
        )
    scores = torch.zeros(len(rows))
    for traj in sorted({r.traj for r in rows}):
        index = [i for i, r in enumerate(rows) if r.traj == traj]  # already in turn order
        task = tasks[int(picks[rows[index[0]].group])]
        scores[index] = torch.tensor(information_gains(policy.model, encoder, [rows[i] for i in index], task))
    return scores


LOCAL_GROUP = "+local=default"  # conf/rl/local/default.yaml: the `local:` block (verl's entry never loads it)


def compose_config(overrides: list[str]) -> DictConfig:
    """The config ``python rl/train_local.py OVERRIDES`` trains with (for tests and notebooks)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose("taura", overrides=[LOCAL_GROUP, *overrides])


def main() -> None:
    """Hydra entry on verl's own primary config (``conf/rl/taura.yaml``) plus the ``local`` group."""
    import sys

    import hydra

    if not any(a.lstrip("+").startswith("local=") for a in sys.argv[1:]):
        sys.argv.insert(1, LOCAL_GROUP)

    @hydra.main(config_path=str(CONF_DIR), config_name="taura", version_base=None)
    def _run(cfg: DictConfig) -> None:
        print(f"metrics: {train(cfg)}", flush=True)

    _run()


if __name__ == "__main__":
    main()
