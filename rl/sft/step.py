"""A plain-torch SFT step over :class:`rl.sft.dataset.OmniTurnSFTDataset` items (CPU smoke runs, tests).

It computes the same objective as verl's SFT trainer (``verl/workers/utils/losses.py::sft_loss``):
the log-probability of token ``t+1`` at position ``t``, the loss mask shifted left by one token to
line up with it, summed and divided by the number of loss tokens in the batch. Items are collated
with right padding (verl packs them without padding; the loss is the same).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

ENCODER_PREFIXES = ("visual", "audio_tower")  # both families' thinkers: vision and audio encoders


def freeze_modules(model: torch.nn.Module, prefixes: Iterable[str] = ENCODER_PREFIXES) -> dict[str, int]:
    """Set ``requires_grad=False`` on every parameter under the given top-level module names.

    Returns parameter counts ``{"frozen": n, "trainable": m}``. Raises when a prefix matches nothing
    (a typo would otherwise silently train the encoders).
    """
    prefixes = tuple(p.rstrip(".") for p in prefixes)
    hit = dict.fromkeys(prefixes, 0)
    frozen = trainable = 0
    for name, p in model.named_parameters():
        parts = name.split(".")
        match = next((pre for pre in prefixes if pre in parts and parts.index(pre) <= 1), None)
        if match is not None:
            p.requires_grad_(False)
            hit[match] += 1
        if p.requires_grad:
            trainable += p.numel()
        else:
            frozen += p.numel()
    missing = [k for k, v in hit.items() if v == 0]
    if missing:
        raise ValueError(f"freeze: no parameters under {missing} in {type(model).__name__}")
    return {"frozen": frozen, "trainable": trainable}


LOSS_KEYS = ("loss_mask", "loss_weight")  # a batch's keys that are not model inputs


def _pad_last_dim_cat(values: list[torch.Tensor]) -> torch.Tensor:
    width = max(v.shape[-1] for v in values)
    out = []
    for v in values:
        if v.shape[-1] < width:
            v = torch.nn.functional.pad(v, (0, width - v.shape[-1]))
        out.append(v)
    return torch.cat(out, dim=0)


def collate(items: Sequence[dict[str, Any]], pad_id: int = 0) -> dict[str, Any]:
    """Right-pad ``no_padding`` items into one batch for a HF forward."""
    lengths = [int(it["input_ids"].shape[0]) for it in items]
    width = max(lengths)
    b = len(items)
    input_ids = torch.full((b, width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((b, width), dtype=torch.long)
    loss_mask = torch.zeros((b, width), dtype=torch.long)
    rows = items[0]["position_ids"].shape[0] if items[0]["position_ids"].dim() == 2 else 1
    position_ids = torch.zeros((rows, b, width), dtype=torch.long)
    for i, (it, n) in enumerate(zip(items, lengths, strict=True)):
        input_ids[i, :n] = it["input_ids"][:n]
        attention_mask[i, :n] = 1
        loss_mask[i, :n] = it["loss_mask"][:n]
        pos = it["position_ids"]
        position_ids[:, i, :n] = pos[..., :n] if pos.dim() == 2 else pos[:n]
    batch: dict[str, Any] = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids if rows > 1 else position_ids[0],
        "loss_mask": loss_mask,
    }
    weighted = ["loss_weight" in it for it in items]
    if any(weighted):
        if not all(weighted):
            raise ValueError("collate: some items carry loss_weight and some do not")
        loss_weight = torch.zeros((b, width), dtype=torch.float32)
        for i, (it, n) in enumerate(zip(items, lengths, strict=True)):
            loss_weight[i, :n] = it["loss_weight"][:n]
        batch["loss_weight"] = loss_weight
    keys: dict[str, list[torch.Tensor]] = {}
    for it in items:
        for k, v in (it.get("multi_modal_inputs") or {}).items():
            keys.setdefault(k, []).append(v)
    for k, vs in keys.items():
        if k in ("input_features", "feature_attention_mask"):
            batch[k] = _pad_last_dim_cat(vs)
        else:
            batch[k] = torch.cat(vs, dim=0)
    return batch


def token_log_probs(model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
    """(B, L) log p(input_ids[:, t+1] | ..t) at position t (the last position gets 0)."""
    inputs = {k: v for k, v in batch.items() if k not in LOSS_KEYS}
    logits = model(**inputs, use_cache=False).logits.float()
    ids = batch["input_ids"]
    nxt = torch.roll(ids, shifts=-1, dims=1)
    lp = torch.log_softmax(logits, dim=-1).gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
    lp[:, -1] = 0.0
    return lp


def sft_loss(model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, int]:
    """verl's SFT loss: mean negative log-likelihood over the (shifted) loss-mask tokens; returns it and the
    number of loss tokens. With ``loss_weight`` in the batch (:mod:`rl.sft.weights`) the mean is weighted: the
    sum of weight times negative log-likelihood over the sum of the weights."""
    lp = token_log_probs(model, batch)
    mask = torch.roll(batch["loss_mask"], shifts=-1, dims=1).to(lp.dtype)
    mask[:, -1] = 0.0
    n = int(mask.sum().item())
    if n == 0:
        raise ValueError("the batch has no loss tokens")
    if "loss_weight" in batch:
        weight = torch.roll(batch["loss_weight"], shifts=-1, dims=1).to(lp.dtype) * mask
        return -(lp * weight).sum() / weight.sum(), n
    return -(lp * mask).sum() / n, n


def optimizer_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, params: list[Any], batch: dict[str, Any], clip: float
) -> float:
    """One SFT update on ``batch``; returns the loss before it (gradients clipped to ``clip`` when set)."""
    opt.zero_grad(set_to_none=True)
    loss, _ = sft_loss(model, batch)
    if (
        not loss.requires_grad
    ):  # no trainable parameter on this batch's path (encoders only, a text-only turn)
        return float(loss.detach())
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(params, clip)
    opt.step()
    return float(loss.detach())


def train_steps(
    model: torch.nn.Module,
    batches: Iterable[dict[str, Any]],
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    clip_grad: float | None = 1.0,
) -> list[float]:
    """One AdamW step per batch on the trainable parameters; returns the loss before each step."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("no trainable parameters")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    model.train()
    losses = []
    for batch in batches:
        losses.append(optimizer_step(model, opt, params, batch, clip_grad))
    model.eval()
    return losses
