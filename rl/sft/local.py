"""Plain-torch SFT on CPU (``omni_sft.mode=local``) that saves complete folders and resumes after a crash.

Why a loop of its own: :func:`rl.sft.step.train_steps` is one optimizer's life in memory; a run of
thousands of steps must survive ``kill -9``. Every ``omni_sft.local.save_every`` steps the model,
its whole processor and the training state (optimizer, step, RNG, losses so far) are published
together as ``<omni_sft.run_dir>/checkpoints/step-N`` (:func:`rl.checkpoint.save_checkpoint`: a
staging folder renamed into place). Started again with the same settings, the run continues from
the newest such folder; the sample order is a function of the seed and the step, so a resumed run
sees the batches an uninterrupted one would have. ``omni_sft.local.save_dir`` receives the final,
complete, loadable folder.

Two hooks let a recipe add training without this module knowing it (``conf/sft/sft.yaml`` documents them):

- ``omni_sft.local.warmup``: ``{_target_: function, ...}``, called once before the first step of a fresh run
  as ``function(model=, tokenizer=, train_files=, seed=, lr=, clip=, log_every=, ...)``: a stage of its own
  (e.g. a short-context text warm-up) that leaves the model trained further. With ``save_every`` set, its
  result is published at once as ``checkpoints/step-0``, so a run killed before its first save resumes
  after the warm-up instead of repeating it;
- ``omni_sft.local.extra_batches``: ``{name: {_target_: factory, ...}}``, each built once as
  ``factory(dataset=, seed=, ...)``; unless it returns None, after every SFT step one more optimizer step
  trains on its ``batch(step)`` (a function of the step, so resume stays exact) and logs ``<name>_loss``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Protocol

import torch

from rl.checkpoint import latest_checkpoint, load_training_state, prune_checkpoints, save_checkpoint
from rl.sft.step import collate, freeze_modules, optimizer_step


class StepBatches(Protocol):
    """What an ``extra_batches`` factory returns: one collated batch per SFT step."""

    def batch(self, step: int) -> dict[str, Any]: ...


# Settings a resumed run must share with the run that saved the checkpoint (steps may grow).
_FINGERPRINT_KEYS = (
    "train_files",
    "batch_size",
    "seed",
    "repeat_batch",
    "max_samples",
    "model",
    "warmup",
    "extra_batches",
)


def sample_indices(step: int, batch_size: int, n: int, seed: int, repeat: bool) -> list[int]:
    """Dataset indices of ``step``'s batch: a fresh seeded permutation per epoch (or the first batch at every step)."""
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


def _hook_settings(node: Any) -> Any:
    """A hook's config as plain data (interpolations resolved), for the fingerprint."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True) if node is not None else None


def _fingerprint(cfg: Any) -> dict[str, Any]:
    local = cfg.omni_sft.local
    files = cfg.data.train_files
    return {
        "train_files": [str(f) for f in files] if not isinstance(files, str) else [files],
        "batch_size": int(local.batch_size),
        "seed": int(cfg.trainer.seed),
        "repeat_batch": bool(local.get("repeat_batch")),
        "max_samples": int(local.get("max_samples") or -1),
        "model": str(cfg.model.path),
        "warmup": _hook_settings(local.get("warmup")),
        "extra_batches": _hook_settings(local.get("extra_batches")) or {},
    }


def _differences(saved: Any, now: Any, path: str) -> list[str]:
    """Dotted paths under which two fingerprints differ (``extra_batches.caption.settings.event_share``)."""
    if isinstance(saved, dict) and isinstance(now, dict):
        keys = sorted(set(saved) | set(now), key=str)
        return [d for k in keys for d in _differences(saved.get(k), now.get(k), f"{path}.{k}")]
    return [] if saved == now else [path]


def _resume_state(ckpt_root: Path, cfg: Any) -> tuple[Path | None, dict[str, Any] | None]:
    if not bool(cfg.omni_sft.local.get("resume", True)):
        return None, None
    folder = latest_checkpoint(ckpt_root)
    if folder is None:
        return None, None
    state = load_training_state(folder)
    saved, now = state.get("fingerprint", {}), _fingerprint(cfg)
    diff = [d for k in _FINGERPRINT_KEYS for d in _differences(saved.get(k), now.get(k), k)]
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


def load_model(path: str) -> Any:
    """The thinker at ``path`` in float32 (what the CPU steps train), by the folder's model family."""
    from omniagent.checkpoint import checkpoint_family

    return checkpoint_family(path).transformers_class("thinker").from_pretrained(path, dtype=torch.float32)


def _train_files(cfg: Any) -> list[str]:
    files = cfg.data.train_files
    return [str(f) for f in files] if not isinstance(files, str) else [files]


def resolve_hook(node: Any) -> tuple[Any, dict[str, Any]]:
    """A hook's ``_target_`` (imported by its dotted name, as verl's ``custom_cls`` is) and its other settings,
    interpolations resolved."""
    from hydra.utils import get_object
    from omegaconf import OmegaConf

    settings = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
    target = settings.pop("_target_", None)
    if not target:
        raise ValueError(f"an omni_sft.local hook needs a _target_ (a dotted name), got {settings}")
    return get_object(str(target)), settings


def run_warmup_hook(cfg: Any, model: Any, tokenizer: Any, lr: float) -> None:
    """``omni_sft.local.warmup``: the configured stage, once, before the first SFT step (module docstring)."""
    local = cfg.omni_sft.local
    if local.get("warmup") is None:
        return
    stage, settings = resolve_hook(local.warmup)
    stage(
        model=model, tokenizer=tokenizer, train_files=_train_files(cfg), seed=int(cfg.trainer.seed), lr=lr,
        clip=float(cfg.optim.clip_grad), log_every=int(local.get("log_every") or 0), **settings,
    )  # fmt: skip


def build_extra_batches(cfg: Any, dataset: Any) -> dict[str, StepBatches]:
    """``omni_sft.local.extra_batches``: each configured factory's batches, by name (None: that one is off)."""
    built = {}
    for name, node in (cfg.omni_sft.local.get("extra_batches") or {}).items():
        factory, settings = resolve_hook(node)
        batches = factory(dataset=dataset, seed=int(cfg.trainer.seed), **settings)
        if batches is not None:
            built[str(name)] = batches
    return built


def _setup(cfg: Any) -> dict[str, Any]:
    """Dataset, model, optimizer and (when resuming) the state to continue from, in the order the loop's
    random draws depend on."""
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
    model = load_model(str(resume_dir) if resume_dir else path)
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
    warmed = state is None and local.get("warmup") is not None  # a resumed run's checkpoint is warmed up
    if warmed:
        run_warmup_hook(cfg, model, tokenizer, base_lr)
    return {
        "dataset": dataset, "items": items, "processor": processor, "model": model, "counts": counts, "params": params, "opt": opt,
        "base_lr": base_lr, "losses": losses, "start": start, "ckpt_root": ckpt_root, "warmed": warmed,
    }  # fmt: skip


def _save_step(cfg: Any, run: dict[str, Any], step: int) -> None:
    """Publish ``checkpoints/step-N``: the model, its processor and the training state, then prune."""
    state = {
        "step": step,
        "optimizer": run["opt"].state_dict(),
        "rng": torch.get_rng_state(),
        "losses": run["losses"],
        "fingerprint": _fingerprint(cfg),
    }
    model = run["model"]
    save_checkpoint(model.eval(), run["processor"], run["ckpt_root"] / f"step-{step:06d}", state)
    model.train()
    prune_checkpoints(run["ckpt_root"], int(cfg.omni_sft.local.get("keep_checkpoints") or 2))


def run_local(cfg: Any) -> list[float]:
    """``omni_sft.local.steps`` AdamW steps on ``model.path`` through ``OmniTurnSFTDataset``, each followed by
    one step per ``extra_batches`` hook; returns the loss before each SFT step (those of a resumed run's
    earlier life included)."""
    local, seed, clip = cfg.omni_sft.local, int(cfg.trainer.seed), float(cfg.optim.clip_grad)
    run = _setup(cfg)
    model, opt, params, losses, dataset = (
        run["model"],
        run["opt"],
        run["params"],
        run["losses"],
        run["dataset"],
    )
    steps, bs, n = int(local.steps), int(local.batch_size), len(dataset)
    extra = build_extra_batches(cfg, dataset)
    save_every = int(local.get("save_every") or 0)
    if save_every and run["warmed"]:  # a crash before the first save must not cost the warm-up again
        _save_step(cfg, run, 0)
    model.train()
    for step in range(run["start"], steps):
        idx = sample_indices(step, bs, n, seed, bool(local.get("repeat_batch")))
        batch = collate([run["items"][i] for i in idx], dataset.pad_id)
        for group in opt.param_groups:
            group["lr"] = lr_at(
                step, steps, run["base_lr"], int(local.get("warmup_steps") or 0), bool(local.get("cosine"))
            )
        losses.append(optimizer_step(model, opt, params, batch, clip))
        line = {"step": step + 1, "loss": round(losses[-1], 4)}
        for name, batches in extra.items():  # one more step per hook, on its batch of this step
            line[f"{name}_loss"] = round(optimizer_step(model, opt, params, batches.batch(step), clip), 4)
        if local.get("log_every") and (step + 1) % int(local.log_every) == 0:
            print(json.dumps(line), flush=True)
        if save_every and ((step + 1) % save_every == 0 or step + 1 == steps):
            _save_step(cfg, run, step + 1)
    model.eval()
    print(
        json.dumps({"samples": n, "params": run["counts"], "losses": [round(x, 4) for x in losses]}),
        flush=True,
    )
    if local.get("save_dir"):
        save_checkpoint(model, run["processor"], str(local.save_dir))
        print(f"saved: {local.save_dir}", flush=True)
    return losses
