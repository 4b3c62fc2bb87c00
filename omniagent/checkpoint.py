"""What a loadable omni checkpoint folder must hold, checked before anything is loaded.

Why: a folder with weights and ``config.json`` but no processor, tokenizer or chat template used to
fail deep inside transformers with a traceback that named none of them. :func:`check_checkpoint`
names every missing file first, then names the model family the folder belongs to (its
``config.json`` ``model_type``, looked up in :mod:`omniagent.families`; a model type no family
declares is refused with the list of known ones). The transformers backend calls it on a local
folder; the training side (:mod:`rl.checkpoint`) writes folders that pass it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from omniagent.families import ModelFamily, UnknownFamilyError, family_for_model_type

__all__ = [
    "REQUIRED",
    "IncompleteCheckpointError",
    "UnknownFamilyError",
    "check_checkpoint",
    "checkpoint_family",
    "missing_files",
    "verl_gaps",
]

# What a folder needs, as (what it is, alternatives); an alternative is a set of files that must all
# exist. Names follow transformers 5.x ``save_pretrained`` and the Qwen hub layout (vocab + merges).
REQUIRED: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("model config", (("config.json",),)),
    ("generation config", (("generation_config.json",),)),
    ("weights", (("model.safetensors",), ("model.safetensors.index.json",), ("pytorch_model.bin",))),
    ("processor (image, video and audio parts)", (("processor_config.json",), ("preprocessor_config.json",))),
    ("tokenizer", (("tokenizer.json",), ("vocab.json", "merges.txt"))),
    ("tokenizer config", (("tokenizer_config.json",),)),
    ("chat template", (("chat_template.jinja",), ("chat_template.json",))),
)
_PROCESSOR_PARTS = ("image_processor", "video_processor", "feature_extractor")


class IncompleteCheckpointError(FileNotFoundError):
    """A checkpoint folder lacks files a loader needs; ``missing`` lists them."""

    def __init__(self, path: Path, missing: list[str]) -> None:
        self.path, self.missing = path, missing
        super().__init__(
            f"checkpoint {path} is incomplete, missing: {'; '.join(missing)}. Save it with "
            "rl.checkpoint.save_checkpoint, or add the processor side from the base model with "
            f"`python -m rl.checkpoint complete {path} --from BASE_MODEL_DIR`"
        )


def _has_template_in_tokenizer_config(folder: Path) -> bool:
    try:
        return bool(json.loads((folder / "tokenizer_config.json").read_text()).get("chat_template"))
    except (OSError, ValueError):
        return False


def _processor_gaps(folder: Path) -> list[str]:
    """Parts missing from a 5.x ``processor_config.json`` (a tokenizer-only save writes one too)."""
    cfg = folder / "processor_config.json"
    if not cfg.is_file() or (folder / "preprocessor_config.json").is_file():
        return []
    try:
        data = json.loads(cfg.read_text())
    except ValueError:
        return ["processor_config.json (not valid JSON)"]
    gaps = [p for p in _PROCESSOR_PARTS if p not in data]
    return [f"processor_config.json lacks {', '.join(gaps)}"] if gaps else []


def missing_files(path: str | os.PathLike[str]) -> list[str]:
    """What ``path`` lacks to load as an omni checkpoint (empty when complete)."""
    folder = Path(path)
    if not folder.is_dir():
        return [f"the folder itself ({folder} does not exist)"]
    missing = []
    for what, options in REQUIRED:
        if any(all((folder / f).is_file() for f in option) for option in options):
            continue
        if what == "chat template" and _has_template_in_tokenizer_config(folder):
            continue
        names = " or ".join(" + ".join(option) for option in options)
        missing.append(f"{names} ({what})")
    return missing + _processor_gaps(folder)


def checkpoint_family(path: str | os.PathLike[str]) -> ModelFamily:
    """The model family of the folder's ``config.json`` (:class:`UnknownFamilyError` when none declares
    its ``model_type``, or the file cannot be read)."""
    config = Path(path) / "config.json"
    try:
        model_type = json.loads(config.read_text()).get("model_type")
    except (OSError, ValueError, AttributeError) as exc:
        raise UnknownFamilyError(f"cannot read the model_type of {config}: {exc}") from None
    return family_for_model_type(model_type)


def check_checkpoint(path: str | os.PathLike[str]) -> Path:
    """Raise :class:`IncompleteCheckpointError` naming every missing file, or
    :class:`UnknownFamilyError` for a model type no family declares; return the folder."""
    missing = missing_files(path)
    if missing:
        raise IncompleteCheckpointError(Path(path), missing)
    checkpoint_family(path)
    return Path(path)


def verl_gaps(path: str | os.PathLike[str], features: list[str]) -> list[str]:
    """One line per training feature in ``features`` (e.g. ``lora``) that upstream verl cannot do yet for the
    folder's model family (the family's ``patches.verl_gaps``); empty while the folder has no ``config.json``."""
    if not (Path(path).expanduser() / "config.json").is_file():
        return []
    family = checkpoint_family(Path(path).expanduser())
    return [gap for gap in (family.patches.verl_gap(f) for f in features) if gap]
