"""The SFT anchor of the local trainer (``local.sft_anchor``): each optimizer step of RL also takes the SFT loss of a
few teacher turns, InstructGPT's PPO-ptx with the agent's own SFT set as the mix.

Why: the KL term anchors only the tokens the rollouts sampled. An update rewarded on one question type can move the
answers of types seldom or never in the batch (for example through one shared distribution over number answers).
Rows drawn from the whole SFT set keep a gradient towards the teacher's answer on every type while the RL term
moves the policy.

The rows are the SFT parquet's (``rl/sft/export.py``), encoded by the rollout encoder itself (its processor, pixel
caps, audio-in-video setting and TMRoPE positions), so an anchor row is built exactly as a rollout row of the same
turn. Draws are a function of
``(seed, iteration, step)``, so a resumed run takes the rows an uninterrupted one would have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from rl.local.rollout import TurnEncoder, model_inputs
from rl.sft.export import row_messages
from rl.sft.rows import ParquetRows
from rl.sft.step import collate, sft_loss


class SFTAnchor:
    """``coef`` x the token-mean NLL of ``rows`` SFT rows, added to one optimizer step's gradient."""

    def __init__(self, data: str, coef: float, rows: int, seed: int, encoder: TurnEncoder) -> None:
        if coef <= 0:
            raise ValueError(f"local.sft_anchor.coef={coef} must be > 0 when local.sft_anchor.data is set")
        if rows < 1:
            raise ValueError(f"local.sft_anchor.rows={rows} must be >= 1 (SFT rows per optimizer step)")
        if not Path(data).is_file():
            raise FileNotFoundError(
                f"local.sft_anchor.data={data}: no such file (the SFT parquet the agent was trained on: "
                "python -m rl.sft.export --kept SYNTH_OUT/kept.jsonl --out FILE)"
            )
        self.data = ParquetRows(data)  # read a row group at a time: memory does not grow with the SFT data
        if len(self.data) == 0:
            raise ValueError(f"local.sft_anchor.data={data} holds no rows")
        self.encoder = encoder  # the rollout rows' encoder: same processor, pixel caps, TMRoPE positions
        self.coef, self.rows, self.seed = float(coef), int(rows), int(seed)

    @classmethod
    def from_local(cls, local: dict[str, Any], encoder: TurnEncoder) -> SFTAnchor | None:
        """The anchor ``local.sft_anchor`` asks for, or None when its ``data`` is unset."""
        spec = local.get("sft_anchor") or {}
        if not spec.get("data"):
            return None
        return cls(
            str(spec["data"]),
            float(spec.get("coef", 0.0)),
            int(spec.get("rows", 1)),
            int(local["seed"]),
            encoder,
        )

    def __len__(self) -> int:
        return len(self.data)

    def item(self, index: int) -> dict[str, Any]:
        """SFT row ``index`` encoded as the rollout row of the same turn (:meth:`TurnEncoder.encode`)."""
        row = self.data.row(index)
        return self.encoder.encode(row_messages(row), sample_id=str(row.get("id", index)))

    def indices(self, iteration: int, step: int) -> list[int]:
        """The rows of optimizer step ``step`` of ``iteration`` (without replacement within the step)."""
        rng = np.random.default_rng([self.seed, iteration, step, 0x5F7])
        n = len(self)
        return [int(i) for i in rng.choice(n, size=min(self.rows, n), replace=False)]

    def backward(self, model: torch.nn.Module, iteration: int, step: int) -> float:
        """Add ``coef`` x the drawn rows' NLL to the parameters' gradients; returns the NLL (before scaling)."""
        batch = collate([self.item(i) for i in self.indices(iteration, step)], self.encoder.pad_id)
        batch = {
            **model_inputs(batch, model),
            "loss_mask": batch["loss_mask"].to(next(model.parameters()).device),
        }
        loss, _ = sft_loss(model, batch)
        (self.coef * loss).backward()
        return float(loss.detach())
