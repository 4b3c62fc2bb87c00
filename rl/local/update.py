"""Steps 2-4 of the local trainer (``rl/train_local.py``): behaviour log-probs, TAURA advantages, the PPO update.

- :func:`score_rows`: one no-grad forward per turn row gives the behaviour policy's per-token log-prob and entropy
  on exactly the tokens trained (as verl recomputes them with the actor);
- :func:`advantages`: :func:`rl.algo.taura.taura_advantages` over all rows (``taura.mode``), with the per-turn
  scores of ``ig`` (:mod:`rl.local.info_gain`) and ``oracle`` (:mod:`rl.local.evidence`) from :func:`rl_turn_scores`;
- :func:`update`: ``actor.ppo_epochs`` passes of verl's vanilla PPO-clip loss over mini-batches of turn rows,
  with the optional KL term to the starting model, the SFT anchor (PPO-ptx) and the ``local.target_kl`` stop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from envs.tasks import Task
from rl.algo.taura import SCORE_MODES, answer_turns, taura_advantages
from rl.local.args import KL_TYPES, Args
from rl.local.evidence import overlaps_evidence
from rl.local.info_gain import information_gains
from rl.local.rollout import TurnEncoder, TurnRow, forward_stats
from rl.local.sft_anchor import SFTAnchor
from rl.sft.step import collate


def score_rows(
    model: Any, rows: list[TurnRow], pad_id: int, ref_model: Any = None, temperature: float | None = None
) -> None:
    """Fill each row's behaviour log-probs, entropies and (shifted) response mask, without gradients; with a
    reference model (``actor.use_kl_loss``), also its log-probs of the same tokens. ``temperature``
    (:attr:`~rl.local.args.Args.stats_temperature`): under the sampling distribution, each row's grammar mask
    applied (``local.masked_stats``)."""
    model.eval()
    with torch.no_grad():
        for row in rows:
            batch = collate([row.item], pad_id)
            stats = forward_stats(model, batch, allowed=row.allowed, temperature=temperature)
            row.old_logp, row.entropy, row.mask = (t.cpu() for t in stats)  # advantages are computed on CPU
            if ref_model is not None:
                row.ref_logp = forward_stats(ref_model, batch, allowed=row.allowed, temperature=temperature)[
                    0
                ].cpu()


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


def rl_turn_scores(
    policy: Any, encoder: TurnEncoder, rows: list[TurnRow], tasks: list[Task], picks: Any, args: Args
) -> torch.Tensor | None:
    """Per-row turn scores for ``mode=ig`` (answer-entropy drop) and ``mode=oracle`` (evidence overlap)."""
    if args.mode not in SCORE_MODES:
        return None
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
        batch_one = collate([row.item], pad_id)
        logp, _, mask = forward_stats(model, batch_one, True, row.allowed, args.stats_temperature)
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
