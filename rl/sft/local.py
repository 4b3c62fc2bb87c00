"""Plain-torch SFT on CPU (``omni_sft.mode=local``) that saves complete folders and resumes after a crash.

Why a loop of its own: :func:`rl.sft.step.train_steps` is one optimizer's life in memory; a run of
thousands of steps must survive ``kill -9``. Every ``omni_sft.local.save_every`` steps the model,
its whole processor and the training state (optimizer, step, RNG, losses so far) are published
together as ``<omni_sft.run_dir>/checkpoints/step-N`` (:func:`rl.checkpoint.save_checkpoint`: a
staging folder renamed into place). Started again with the same settings, the run continues from
the newest such folder; the sample order is a function of the seed and the step, so a resumed run
sees the batches an uninterrupted one would have. ``omni_sft.local.save_dir`` receives the final,
complete, loadable folder.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from rl.checkpoint import latest_checkpoint, load_training_state, prune_checkpoints, save_checkpoint
from rl.sft.step import collate, freeze_modules, optimizer_step

# Settings a resumed run must share with the run that saved the checkpoint (steps may grow).
_FINGERPRINT_KEYS = (
    "train_files",
    "batch_size",
    "seed",
    "repeat_batch",
    "max_samples",
    "model",
    "text_warmup",
    "captions",
)


def sample_indices(step: int, batch_size: int, n: int, seed: int, repeat: bool) -> list[int]:
    """Dataset indices of ``step``'s batch: a fresh seeded permutation per epoch (or batch 0 forever)."""
    if repeat:
        return [i % n for i in range(batch_size)]
    out = []
    for pos in range(step * batch_size, (step + 1) * batch_size):
        epoch, offset = divmod(pos, n)
        gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        out.append(int(torch.randperm(n, generator=gen)[offset]))
    return out


class _ItemCache:
    """Encode each per-turn sample once (media decoding and the processor dominate a tiny step)."""

    def __init__(self, dataset: Any, enabled: bool) -> None:
        self.dataset, self.enabled, self.items = dataset, enabled, {}

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not self.enabled:
            return self.dataset[index]
        if index not in self.items:
            self.items[index] = self.dataset[index]
        return self.items[index]


def _fingerprint(cfg: Any) -> dict[str, Any]:
    local = cfg.omni_sft.local
    captions = local.get("captions") or {}
    percepts = int(captions.get("percepts") or 0)  # recorded only when on: older checkpoints still resume
    files = cfg.data.train_files
    return {
        "train_files": [str(f) for f in files] if not isinstance(files, str) else [files],
        "batch_size": int(local.batch_size),
        "seed": int(cfg.trainer.seed),
        "repeat_batch": bool(local.get("repeat_batch")),
        "max_samples": int(local.get("max_samples") or -1),
        "model": str(cfg.model.path),
        "text_warmup": int((local.get("text_warmup") or {}).get("steps") or 0),
        "captions": [int(captions.get("batch_size") or 0), captions.get("event_share")]
        + ([percepts] if percepts else [])
        + ([str(captions.pool)] if captions.get("pool") else []),  # likewise
    }


def _resume_state(ckpt_root: Path, cfg: Any) -> tuple[Path | None, dict[str, Any] | None]:
    if not bool(cfg.omni_sft.local.get("resume", True)):
        return None, None
    folder = latest_checkpoint(ckpt_root)
    if folder is None:
        return None, None
    state = load_training_state(folder)
    saved, now = state.get("fingerprint", {}), _fingerprint(cfg)
    diff = [k for k in _FINGERPRINT_KEYS if saved.get(k) != now.get(k)]
    if diff:
        raise ValueError(
            f"{folder} was saved by a run with other settings ({', '.join(diff)}); set "
            "omni_sft.local.resume=false or another omni_sft.run_dir to start afresh"
        )
    return folder, state


def lr_at(step: int, steps: int, lr: float, warmup: int, cosine: bool) -> float:
    """Linear warm-up over ``warmup`` steps, then constant or cosine decay to a tenth of ``lr``
    (a function of the step, so a resumed run needs no scheduler state)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if not cosine or steps <= warmup:
        return lr
    frac = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def _load_model(path: str) -> Any:
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration

    return Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(path, dtype=torch.float32)


def _caption_batches(dataset: Any, local: Any, seed: int) -> Any:
    """``recipes/tiny_agent/frame_captions.py``'s batches when ``omni_sft.local.captions.batch_size`` > 0, else None."""
    captions = local.get("captions") or {}
    size = int(captions.get("batch_size") or 0)
    if size <= 0:
        return None
    from recipes.tiny_agent.frame_captions import CaptionBatches

    share = captions.get("event_share")
    percepts = int(captions.get("percepts") or 0)
    pool = captions.get("pool")
    return CaptionBatches(
        dataset, size, seed, None if share is None else float(share), percepts, pool or None
    )


def run_local(cfg: Any) -> list[float]:
    """``omni_sft.local.steps`` AdamW steps on ``model.path`` through ``OmniTurnSFTDataset``; returns
    the loss before each step (those of a resumed run's earlier life included)."""
    from transformers import AutoTokenizer

    from rl.sft.dataset import OmniTurnSFTDataset, load_processor

    local = cfg.omni_sft.local
    path = str(cfg.model.path)
    ckpt_root = Path(str(cfg.omni_sft.run_dir)) / "checkpoints"
    resume_dir, state = _resume_state(ckpt_root, cfg)
    torch.manual_seed(int(cfg.trainer.seed))
    tokenizer = AutoTokenizer.from_pretrained(path)
    files = cfg.data.train_files
    dataset = OmniTurnSFTDataset(
        list(files) if not isinstance(files, str) else files,
        tokenizer,
        cfg.data,
        processor=None,
        max_samples=int(local.get("max_samples") or -1),
    )
    items = _ItemCache(dataset, bool(local.get("cache_items", True)))
    processor = load_processor(path)
    model = _load_model(str(resume_dir) if resume_dir else path)
    counts = freeze_modules(model, list(cfg.omni_sft.freeze or []) or ())
    params = [p for p in model.parameters() if p.requires_grad]
    base_lr = float(local.get("lr") or cfg.optim.lr)
    opt = torch.optim.AdamW(params, lr=base_lr, weight_decay=0.0)
    losses: list[float] = []
    start = 0
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        start, losses = int(state["step"]), list(state["losses"])
        print(json.dumps({"resumed_from": str(resume_dir), "step": start}), flush=True)
    warm = local.get("text_warmup") or {}
    if state is None and int(warm.get("steps") or 0) > 0:  # a resumed run's checkpoint is already warmed up
        from recipes.tiny_agent.text_warmup import run_text_warmup

        run_text_warmup(
            model, tokenizer, list(files) if not isinstance(files, str) else [files], int(warm.steps),
            int(warm.get("batch_size") or 16), float(warm.get("lr") or base_lr), int(cfg.trainer.seed),
            float(cfg.optim.clip_grad), int(local.get("log_every") or 0),
            bool(warm.observation_loss), int(warm.get("option_shuffles") or 0),  # defaults: conf/sft/sft.yaml
        )  # fmt: skip
    steps, bs, n = int(local.steps), int(local.batch_size), len(dataset)
    captions = _caption_batches(dataset, local, int(cfg.trainer.seed))
    save_every = int(local.get("save_every") or 0)
    model.train()
    for step in range(start, steps):
        idx = sample_indices(step, bs, n, int(cfg.trainer.seed), bool(local.get("repeat_batch")))
        batch = collate([items[i] for i in idx], dataset.pad_id)
        for group in opt.param_groups:
            group["lr"] = lr_at(
                step, steps, base_lr, int(local.get("warmup_steps") or 0), bool(local.get("cosine"))
            )
        losses.append(optimizer_step(model, opt, params, batch, float(cfg.optim.clip_grad)))
        line = {"step": step + 1, "loss": round(losses[-1], 4)}
        if captions:  # one caption batch after each step (recipes/tiny_agent/frame_captions.py)
            caption = optimizer_step(model, opt, params, captions.batch(step), float(cfg.optim.clip_grad))
            line["caption_loss"] = round(caption, 4)
        if local.get("log_every") and (step + 1) % int(local.log_every) == 0:
            print(json.dumps(line), flush=True)
        if save_every and ((step + 1) % save_every == 0 or step + 1 == steps):
            train_state = {
                "step": step + 1,
                "optimizer": opt.state_dict(),
                "rng": torch.get_rng_state(),
                "losses": losses,
                "fingerprint": _fingerprint(cfg),
            }
            save_checkpoint(model.eval(), processor, ckpt_root / f"step-{step + 1:06d}", train_state)
            model.train()
            prune_checkpoints(ckpt_root, int(local.get("keep_checkpoints") or 2))
    model.eval()
    print(json.dumps({"samples": n, "params": counts, "losses": [round(x, 4) for x in losses]}), flush=True)
    if local.get("save_dir"):
        save_checkpoint(model, processor, str(local.save_dir))
    return losses
