"""The SFT anchor of the local trainer (``local.sft_anchor``): each optimizer step of RL also takes the SFT loss of a
few teacher turns, InstructGPT's PPO-ptx with the agent's own SFT set as the mix.

Why: the KL term anchors only the tokens the rollouts sampled. On the tiny agent an update rewarded on one question
type moves the answers to types seldom or never in the batch (README: RL on widths alone sent beep-count scores from
0.49 to 0.01, through one shared distribution over number answers). Rows drawn from the whole SFT set keep a gradient
towards the teacher's answer on every type while the RL term moves the policy.

The rows are the SFT parquet's (``rl/sft_export.py``), encoded with the rollout encoder's processor, pixel caps and
audio-in-video setting, so an anchor row is built exactly as a rollout row of the same turn. Draws are a function of
``(seed, iteration, step)``, so a resumed run takes the rows an uninterrupted one would have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from rl.local_rollout import model_inputs
from rl.sft_step import collate, sft_loss


class SFTAnchor:
    """``coef`` x the token-mean NLL of ``rows`` SFT rows, added to one optimizer step's gradient."""

    def __init__(self, data: str, coef: float, rows: int, seed: int, encoder: Any, model_path: str) -> None:
        if coef <= 0:
            raise ValueError(f"local.sft_anchor.coef={coef} must be > 0 when local.sft_anchor.data is set")
        if rows < 1:
            raise ValueError(f"local.sft_anchor.rows={rows} must be >= 1 (SFT rows per optimizer step)")
        if not Path(data).is_file():
            raise FileNotFoundError(
                f"local.sft_anchor.data={data}: no such file (the SFT parquet, e.g. OUT/sft_data/train.parquet "
                "from python -m rl.tiny_recipe --stages synth export)"
            )
        from rl.sft_dataset import OmniTurnSFTDataset

        omni = {"model_path": model_path, "allow_audio_in_video": encoder.allow_audio_in_video}
        self.dataset = OmniTurnSFTDataset(
            data, encoder.tokenizer, {"omni": omni}, processor=encoder.processor
        )
        if len(self.dataset) == 0:
            raise ValueError(f"local.sft_anchor.data={data} holds no rows")
        self.dataset.image_pixels, self.dataset.video_pixels = encoder.image_pixels, encoder.video_pixels
        self.dataset.rope = encoder.rope  # the rollout rows' TMRoPE positions, from the policy's own config
        self.coef, self.rows, self.seed, self.pad_id = float(coef), int(rows), int(seed), encoder.pad_id

    @classmethod
    def from_local(cls, local: dict[str, Any], encoder: Any, model_path: str) -> SFTAnchor | None:
        """The anchor ``local.sft_anchor`` asks for, or None when its ``data`` is unset."""
        spec = local.get("sft_anchor") or {}
        if not spec.get("data"):
            return None
        return cls(
            str(spec["data"]), float(spec.get("coef", 0.0)), int(spec.get("rows", 1)), int(local["seed"]),
            encoder, model_path,
        )  # fmt: skip

    def indices(self, iteration: int, step: int) -> list[int]:
        """The rows of optimizer step ``step`` of ``iteration`` (without replacement within the step)."""
        rng = np.random.default_rng([self.seed, iteration, step, 0x5F7])
        n = len(self.dataset)
        return [int(i) for i in rng.choice(n, size=min(self.rows, n), replace=False)]

    def backward(self, model: torch.nn.Module, iteration: int, step: int) -> float:
        """Add ``coef`` x the drawn rows' NLL to the parameters' gradients; returns the NLL (before scaling)."""
        batch = collate([self.dataset[i] for i in self.indices(iteration, step)], self.pad_id)
        batch = {
            **model_inputs(batch, model),
            "loss_mask": batch["loss_mask"].to(next(model.parameters()).device),
        }
        loss, _ = sft_loss(model, batch)
        (self.coef * loss).backward()
        return float(loss.detach())
