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
