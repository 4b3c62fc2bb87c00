"""What a loadable Qwen2.5-Omni checkpoint folder must hold, checked before anything is loaded.

Why: a folder with weights and ``config.json`` but no processor, tokenizer or chat template used to
fail deep inside transformers with a traceback that named none of them. :func:`check_checkpoint`
names every missing file first. The transformers backend calls it on a local folder; the training
side (:mod:`rl.checkpoint`) writes folders that pass it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["REQUIRED", "IncompleteCheckpointError", "check_checkpoint", "missing_files"]

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
    """What ``path`` lacks to load as a Qwen2.5-Omni checkpoint (empty when complete)."""
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


def check_checkpoint(path: str | os.PathLike[str]) -> Path:
    """Raise :class:`IncompleteCheckpointError` naming every missing file; return the folder."""
    missing = missing_files(path)
    if missing:
        raise IncompleteCheckpointError(Path(path), missing)
    return Path(path)
