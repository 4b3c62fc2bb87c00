"""Comparing encoded SFT items in tests/recipes (importable by name, as sft_hook_factories is)."""

from __future__ import annotations

from typing import Any

import torch


def same(a: Any, b: Any) -> bool:
    """Equal encoded items: tensors element for element, containers item for item."""
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return (
            isinstance(b, list | tuple)
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True))
        )
    return bool(a == b)
