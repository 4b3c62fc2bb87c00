"""Complete, loadable SFT checkpoint folders, and crash-safe training state for resuming.

Why: a folder with only weights and ``config.json`` cannot be run. ``omniagent.run --model PATH``,
eval's ``policy.kwargs.model=PATH`` and the Hugging Face loaders vLLM and verl use
(``AutoConfig``/``AutoProcessor``/``AutoTokenizer`` on the folder) each need the processor (image,
video and audio parts), the tokenizer, the chat template and the generation config next to the
weights. Every save here writes all of them, into a hidden staging folder that is renamed into
place, so a ``kill -9`` never leaves a half-written checkpoint where a loader or a resume looks.

- :func:`omniagent.checkpoint.check_checkpoint` names each missing file (the transformers backend
  calls it before loading);
- :func:`save_checkpoint` writes a complete folder atomically, optionally with the training state
  (optimizer, step, RNG) that :func:`load_training_state` reads back;
- :func:`complete_checkpoint` adds the processor side to a folder that holds only weights and
  config, copied from the base model's folder (:func:`complete_run_checkpoints`: each of a verl
  run's ``global_step_N/huggingface`` folders, called by ``rl/train_sft.py`` after verl exits);
- :func:`graft_weights` copies a folder with one module's tensors taken from another checkpoint;
- :func:`latest_checkpoint` finds the newest resumable ``step-N`` folder of a run.

    python -m rl.checkpoint check PATH            # exit 1 and list what is missing
    python -m rl.checkpoint complete PATH --from BASE
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omniagent.checkpoint import IncompleteCheckpointError, check_checkpoint, missing_files

TRAINING_STATE = "training_state.pt"
STEP_DIR = re.compile(r"^step-(\d+)$")

# Files copied from a base model by complete_checkpoint (never weights or the model config).
_PROCESSOR_FILES = (
    "generation_config.json",
    "processor_config.json",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
)


def _publish(staging: Path, final: Path) -> None:
    """Rename ``staging`` to ``final``; an existing ``final`` is swapped out first, then removed."""
    old = None
    if final.exists():
        old = final.parent / f".{final.name}.{uuid.uuid4().hex}.old"
        os.replace(final, old)
    os.replace(staging, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_tree(folder: Path) -> None:
    for f in folder.iterdir():
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())


@contextmanager
def _staged(out_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """A hidden staging path next to ``out_dir`` to write a folder into; when the block ends, the
    folder is checked complete, synced and renamed into place (removed instead if the block raised)."""
    final = Path(out_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f".{final.name}.{uuid.uuid4().hex}.tmp"
    try:
        yield staging
        check_checkpoint(staging)
        _fsync_tree(staging)
        _publish(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def save_checkpoint(
    model: Any,
    processor: Any,
    out_dir: str | os.PathLike[str],
    training_state: dict[str, Any] | None = None,
) -> Path:
    """Write weights, config, generation config and the whole processor to ``out_dir`` atomically.

    ``training_state`` (e.g. optimizer state, step, RNG) goes to ``training_state.pt`` in the same
    folder, so weights and state are published together or not at all. The folder is checked with
    :func:`check_checkpoint` before it is renamed into place.
    """
    import torch

    with _staged(out_dir) as staging:
        model.save_pretrained(staging)
        if not (staging / "generation_config.json").is_file():  # a model built from a bare config
            from transformers import GenerationConfig

            GenerationConfig.from_model_config(model.config).save_pretrained(staging)
        processor.save_pretrained(staging)
        if training_state is not None:
            torch.save(training_state, staging / TRAINING_STATE)
    return Path(out_dir)


def graft_weights(
    base: str | os.PathLike[str], donor: str | os.PathLike[str], prefix: str, out_dir: str | os.PathLike[str]
) -> list[str]:
    """A copy of the complete folder ``base`` whose tensors named ``prefix...`` are ``donor``'s, written
    atomically to ``out_dir``; returns the grafted names. Why: an encoder trained in a stage of its own (e.g.
    ``prefix="visual."`` after caption-only training) can start SFT without the rest of the model that stage
    changed. Both folders must hold one ``model.safetensors`` of the same shapes."""
    from safetensors.torch import load_file, save_file

    base_w, donor_w = (load_file(Path(f) / "model.safetensors") for f in (base, donor))
    names = sorted(n for n in base_w if n.startswith(prefix))
    if not names:
        raise ValueError(f"no tensor in {base} starts with {prefix!r}")
    for name in names:
        if name not in donor_w or donor_w[name].shape != base_w[name].shape:
            raise ValueError(f"{donor} has no tensor {name} of shape {tuple(base_w[name].shape)}")
        base_w[name] = donor_w[name]
    with _staged(out_dir) as staging:
        shutil.copytree(base, staging)
        save_file(base_w, staging / "model.safetensors", metadata={"format": "pt"})
    return names


def load_training_state(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The training state saved with a checkpoint (``weights_only=False``: our own files only)."""
    import torch

    return torch.load(Path(folder) / TRAINING_STATE, map_location="cpu", weights_only=False)


def step_dirs(run_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(step, folder)`` of every published ``step-N`` folder under ``run_dir``, oldest first."""
    root = Path(run_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name)) and p.is_dir()]
    return sorted(found)


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> Path | None:
    """The newest complete ``step-N`` folder with a training state, or None."""
    for _, folder in reversed(step_dirs(run_dir)):
        if (folder / TRAINING_STATE).is_file() and not missing_files(folder):
            return folder
    return None


def prune_checkpoints(run_dir: str | os.PathLike[str], keep: int) -> None:
    """Remove all but the newest ``keep`` step folders (and staging debris of killed saves)."""
    steps = step_dirs(run_dir)
    for _, folder in steps[: max(0, len(steps) - keep)]:
        shutil.rmtree(folder, ignore_errors=True)
    for debris in Path(run_dir).glob(".step-*.tmp"):
        shutil.rmtree(debris, ignore_errors=True)


def complete_checkpoint(folder: str | os.PathLike[str], source: str | os.PathLike[str]) -> list[str]:
    """Copy the processor, tokenizer, chat template and generation config from ``source`` into
    ``folder`` where ``folder`` lacks them (weights and model config are never touched).

    Returns the names copied. Raises :class:`IncompleteCheckpointError` when the result is still
    incomplete (for instance ``source`` lacks them too).
    """
    dst, src = Path(folder), Path(source)
    copied = []
    for name in _PROCESSOR_FILES:
        if (src / name).is_file() and not (dst / name).is_file():
            tmp = dst / f".{name}.{uuid.uuid4().hex}.tmp"
            shutil.copyfile(src / name, tmp)
            os.replace(tmp, dst / name)
            copied.append(name)
    check_checkpoint(dst)
    return copied


def complete_run_checkpoints(root: str | os.PathLike[str], source: str | os.PathLike[str]) -> list[Path]:
    """Complete every ``global_step_N/huggingface`` folder of a verl run (weights saved with verl's
    ``checkpoint.save_contents`` ``hf_model``) from the base model ``source``. verl passes no processor
    for the omni thinkers, so its folders hold the tokenizer but no image, video or audio processor."""
    done = []
    for hf in sorted(Path(root).glob("global_step_*/huggingface")):
        if (hf / "config.json").is_file():
            complete_checkpoint(hf, source)
            done.append(hf)
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.checkpoint", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    check = sub.add_parser("check", help="list what a checkpoint folder lacks (exit 1 if anything)")
    check.add_argument("path")
    complete = sub.add_parser("complete", help="copy the processor side from the base model's folder")
    complete.add_argument("path")
    complete.add_argument("--from", dest="source", required=True, help="a complete folder (the base model)")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "check":
            check_checkpoint(args.path)
            print(f"{args.path}: complete")
        else:
            copied = complete_checkpoint(args.path, args.source)
            print(f"{args.path}: complete (copied {', '.join(copied) or 'nothing'})")
    except IncompleteCheckpointError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
