"""Hook factories for tests/recipes/test_sft_hooks.py, importable by their dotted names as a recipe's are."""

from __future__ import annotations

from typing import Any

CALLS: list[int] = []


class _FirstRow:
    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def batch(self, step: int) -> dict[str, Any]:
        from rl.sft.step import collate

        CALLS.append(step)
        return collate([self.dataset[0]], self.dataset.pad_id)


def first_row_batches(dataset: Any, seed: int) -> _FirstRow:
    """Every step's extra batch is the dataset's first row."""
    CALLS.clear()
    return _FirstRow(dataset)


def no_batches(dataset: Any, seed: int) -> None:
    """A hook that is off."""
    return None


WARMUPS: list[int] = []


def noise_warmup(model: Any, seed: int, scale: float = 0.05, **_: Any) -> None:
    """A warm-up stage that moves every trainable weight by noise from the global RNG (so a lost warm-up,
    or a lost RNG state, changes the run that follows) and records the call."""
    import torch

    WARMUPS.append(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(scale * torch.randn_like(p))
