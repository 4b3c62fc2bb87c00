"""Pieces of the local trainer (``rl/train_local.py``) that turn recorded turns into training rows, measure and
renumber a rollout's groups (``algorithm.filter_groups``), and keep its files (``metrics.csv``, ``rollouts.jsonl``).

Why a module of its own: the IG turn scores (:mod:`rl.local.info_gain`) and the tests need them without the loop.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from envs.jsonl import append_jsonl, read_jsonl, repair_tail, write_atomic, write_jsonl
from omniagent.backends.convert import build_model_inputs
from omniagent.trajectory import Trajectory, TurnRecord
from rl.local.sampling import Allowed, masked_logits, token_stats
from rl.sft.dataset import END_OF_TURN, NON_MEDIA_KEYS, OmniTurnSFTDataset, RopeIndexer


class TurnEncoder(OmniTurnSFTDataset):
    """The SFT per-turn builder (``OmniTurnSFTDataset.encode``) for contexts recorded during rollouts.

    Same tokens, loss mask (the turn's output and its ``<|im_end|>``) and TMRoPE positions as an SFT sample of
    the same turn, built from the policy's own processor and model config instead of a parquet file.
    """

    def __init__(
        self,
        processor: Any,
        thinker_config: Any,
        allow_audio_in_video: bool = True,
        image_pixels: tuple[int, int] | None = None,
        video_pixels: tuple[int, int] | None = None,
    ) -> None:  # no super().__init__: there is no parquet table behind it
        self.config, self.pad_mode, self.max_length, self.truncation = None, "no_padding", 1 << 30, "error"
        self.processor, self.tokenizer = processor, processor.tokenizer
        self.rope = RopeIndexer(thinker_config)
        self.image_pixels, self.video_pixels = image_pixels, video_pixels
        self.allow_audio_in_video = allow_audio_in_video
        self.end_id = self.tokenizer.convert_tokens_to_ids(END_OF_TURN)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def __len__(self) -> int:
        return 0

    def encode_sampled(self, context: list[Any], token_ids: list[int]) -> dict[str, Any]:
        """The row of a turn from the ids the policy sampled: the context as the policy was given it (rendered
        with the generation prompt), then the sampled ids, the loss on those only (``<|im_end|>`` among them when
        generation stopped on it). Positions and media inputs as :meth:`encode` builds them."""
        batch, _ = build_model_inputs(
            context, self.processor, image_pixels=self.image_pixels, video_pixels=self.video_pixels,
            allow_audio_in_video=self.allow_audio_in_video, add_generation_prompt=True,
        )  # fmt: skip
        prompt = batch["input_ids"][0].long()
        input_ids = torch.cat([prompt, torch.tensor(token_ids, dtype=torch.long)])
        loss_mask = torch.zeros(input_ids.shape[0], dtype=torch.long)
        loss_mask[prompt.shape[0] :] = 1
        mm = {k: v for k, v in batch.items() if k not in NON_MEDIA_KEYS and isinstance(v, torch.Tensor)}
        rope = self.rope(input_ids, mm, bool(batch.get("use_audio_in_video", False)))
        position_ids = torch.cat([torch.arange(input_ids.shape[0], dtype=torch.long)[None], rope], dim=0)
        item: dict[str, Any] = {"input_ids": input_ids, "position_ids": position_ids, "loss_mask": loss_mask}
        if mm:
            item["multi_modal_inputs"] = mm
        return item


@dataclass
class TurnRow:
    """One turn of one trajectory: its encoded sample, ids for TAURA, the final reward and the env's record."""

    item: dict[str, Any]  # input_ids, loss_mask, position_ids, multi_modal_inputs (TurnEncoder.encode)
    group: int  # GRPO group: all episodes of one task in this iteration
    traj: int  # trajectory id, unique in the iteration
    turn: int  # 0-based turn index in the trajectory
    reward: float  # the trajectory's (shaped) final reward
    record: TurnRecord  # the environment's view of the turn (action, error, served timestamps)
    context: list[Any]  # the messages the policy saw (for information-gain probes)
    old_logp: torch.Tensor = field(default_factory=lambda: torch.zeros(0))  # (L,) behaviour log-probs
    entropy: torch.Tensor = field(default_factory=lambda: torch.zeros(0))  # (L,) behaviour entropies
    mask: torch.Tensor = field(
        default_factory=lambda: torch.zeros(0)
    )  # (L,) 1 where position t predicts a trained token
    # (L,) the reference (starting) model's log-probs, for actor.use_kl_loss; empty when the loss is off
    ref_logp: torch.Tensor = field(default_factory=lambda: torch.zeros(0))
    # local.masked_stats: the tokens the turn's grammar allowed at each sampled position (None: unconstrained)
    allowed: Allowed | None = None


def model_inputs(batch: dict[str, Any], model: Any) -> dict[str, Any]:
    """A collated batch as forward kwargs, on the model's device (media tensors in its dtype)."""
    param = next(model.parameters())
    out = {}
    for key, value in batch.items():
        if key == "loss_mask" or not isinstance(value, torch.Tensor):
            continue
        value = value.to(param.device)
        out[key] = value.to(param.dtype) if value.is_floating_point() else value
    return out


def forward_stats(
    model: Any,
    batch: dict[str, Any],
    with_grad: bool = False,
    allowed: Allowed | None = None,
    temperature: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per position t of a one-row batch: log p(token t+1), the entropy at t, and the shifted loss mask.

    With ``temperature`` (``local.masked_stats``: the rollout temperature) the statistics are those of the
    distribution that sampled the row: logits divided by it, and -inf where ``allowed`` (the turn's grammar)
    forbade a token (:mod:`rl.local.sampling`). Without, the full vocabulary at temperature 1 (``allowed`` must be
    None). The entropy (float32) is computed only without gradients (it is the TAURA signal, not a loss term);
    with gradients it comes back as zeros.
    """
    logits = model(**model_inputs(batch, model), use_cache=False).logits[0].float()  # (L, V)
    ids = batch["input_ids"][0].to(logits.device)
    if temperature is None and allowed is not None:
        raise ValueError("a grammar mask needs the sampling temperature (local.masked_stats)")
    mask = torch.roll(batch["loss_mask"][0].to(logits.device), shifts=-1).float()
    mask[-1] = 0.0
    inside = torch.arange(len(ids), device=logits.device) < len(ids) - 1
    if temperature is not None:  # the sampling distribution (rl/local/sampling.py)
        logp, entropy = token_stats(masked_logits(logits, allowed, temperature), ids)
        if with_grad:
            return logp * inside, torch.zeros_like(logp), mask
        return (logp * inside).detach(), entropy.detach(), mask
    logp_all = torch.log_softmax(logits, dim=-1)
    nxt = torch.roll(ids, shifts=-1)
    logp = logp_all.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
    logp = logp * inside
    if with_grad:
        return logp, torch.zeros_like(logp), mask
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp.detach(), entropy.detach(), mask


def group_values(trajs: list[Trajectory], metric: str) -> list[float]:
    """A group's episodes measured by ``metric``: ``reward`` (the shaped reward, what the advantages use), ``acc``
    (the environment's score before shaping) or a key every trajectory's ``meta`` has (``evidence_seen``)."""
    if metric == "reward":
        return [float(t.meta["shaped_reward"]) for t in trajs]
    if metric == "acc":
        return [float(t.reward or 0.0) for t in trajs]
    missing = [t.id for t in trajs if metric not in t.meta]
    if missing:
        raise ValueError(
            f"algorithm.filter_groups.metric={metric!r}: no such value on episodes {missing[:3]}"
        )
    return [float(t.meta[metric]) for t in trajs]


def is_flat(values: list[float]) -> bool:
    """Every episode the same (verl keeps a group when its std is above 0, or when it has one episode)."""
    return len(values) > 1 and max(values) == min(values)


def renumber(trajs: list[Trajectory], rows: list[TurnRow], group: int, size: int) -> None:
    """Give a kept group the index ``group`` (episode ids ``g<group>-<i>``, row ``group`` and ``traj``), so the
    iteration's groups are numbered 0.. in training order whatever was dropped in between."""
    old = rows[0].group if rows else group
    for traj in trajs:
        traj.id = f"g{group}-{traj.id.rsplit('-', 1)[1]}"
    for row in rows:
        row.group, row.traj = group, group * size + (row.traj - old * size)


def write_metrics(path: Path, rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    """Rewrite the CSV atomically (a resumed run drops rows of iterations it will redo)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: row.get(k, "") for k in columns})
    write_atomic(path, text.getvalue())


def read_metrics(path: Path, up_to: int) -> list[dict[str, Any]]:
    """The CSV rows of iterations up to ``up_to`` (what a run resumed from that checkpoint keeps)."""
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if int(r["iteration"]) <= up_to]


def append_rollouts(
    path: Path, trajs: Sequence[Trajectory], rows: Sequence[TurnRow], weights: Any, it: int
) -> None:
    """Append the iteration's trajectories (``trajs[j]``'s rows have ``traj == j``), each with its turns' TAURA
    weights in ``meta``, to a JSONL file (``python -m recipes.tiny_agent.probes.turn_labels`` reads it: turn entropy vs discovery turns during training)."""
    for j, traj in enumerate(trajs):
        traj.meta["iteration"] = it
        traj.meta["turn_weights"] = [float(weights[i]) for i, r in enumerate(rows) if r.traj == j]
    for traj in trajs:
        append_jsonl(path, traj)


def truncate_rollouts(path: Path, up_to: int) -> None:
    """Drop the rollouts of iterations after ``up_to`` (a resumed run redoes them), rewriting the file atomically.

    A kill mid-append leaves a torn last line: :func:`~envs.jsonl.repair_tail` cuts it off first, so appending
    can go on."""
    repair_tail(path)
    records = read_jsonl(path, missing_ok=True)
    keep = [r for r in records if (r.get("meta") or {}).get("iteration", 0) <= up_to]
    if len(keep) < len(records):
        write_jsonl(path, keep)
