"""Model families: one module per family declares what differs (see :mod:`omniagent.families.spec`).

Adding a family is one module here (a :class:`~omniagent.families.spec.ModelFamily` named ``FAMILY``,
its tiny random test model included) plus its entry in :data:`FAMILIES`. Backends, the checkpoint
checker and the tiny model look a family up by name, by ``config.json``'s ``model_type`` or by
processor class, never by branching on names.
"""

from __future__ import annotations

from typing import Any

from omniagent.families import qwen2_5_omni, qwen3_omni
from omniagent.families.spec import ModelFamily, Thinking, Variant

__all__ = [
    "DEFAULT_FAMILY",
    "FAMILIES",
    "ModelFamily",
    "Thinking",
    "UnknownFamilyError",
    "Variant",
    "family_for_alias",
    "family_for_model_type",
    "family_for_processor",
    "get_family",
]

FAMILIES: dict[str, ModelFamily] = {f.name: f for f in (qwen2_5_omni.FAMILY, qwen3_omni.FAMILY)}
DEFAULT_FAMILY = qwen2_5_omni.FAMILY


class UnknownFamilyError(ValueError):
    """A name, model type or processor that no family declares."""


def get_family(name: str) -> ModelFamily:
    """The family called ``name`` (e.g. ``qwen3-omni``)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise UnknownFamilyError(f"unknown model family {name!r}; known: {', '.join(FAMILIES)}") from None


def family_for_model_type(model_type: str | None) -> ModelFamily:
    """The family whose thinker-only or full checkpoints declare ``model_type`` in ``config.json``."""
    for family in FAMILIES.values():
        if model_type in family.model_types:
            return family
    known = ", ".join(f"{t!r} ({f.title})" for f in FAMILIES.values() for t in f.model_types)
    raise UnknownFamilyError(
        f"model_type={model_type!r} is not an omni family this project drives; known: {known}"
    )


def family_for_processor(processor: Any) -> ModelFamily:
    """The family of a loaded processor (by class name, so subclasses and test doubles need the name)."""
    names = {cls.__name__ for cls in type(processor).__mro__}
    for family in FAMILIES.values():
        if family.classes.processor in names:
            return family
    raise UnknownFamilyError(
        f"{type(processor).__name__} is not the processor of a known family "
        f"({', '.join(f.classes.processor for f in FAMILIES.values())})"
    )


def family_for_alias(model: str) -> ModelFamily | None:
    """The family whose tiny random test model ``model`` names (``tiny-random-qwen3-omni``), else None."""
    for family in FAMILIES.values():
        if model in family.tiny.aliases:
            return family
    return None
