"""Train OmniAgent with TAURA on verl's V1 trainer (needs a CUDA GPU and vLLM).

    python rl/train_taura.py +exp=7b actor_rollout_ref.model.path=/ckpt/sft data.train_files=... data.val_files=...
    python rl/train_taura.py +exp=tiny --cfg job     # print the composed config and exit (no GPU needed)

The config is verl's ``ppo_trainer`` (found through ``hydra.searchpath: pkg://verl.trainer.config``) with
``conf/rl/taura.yaml`` and one ``conf/rl/exp/*.yaml`` on top. verl 0.9.1 cannot train on a CPU (NCCL and GPU
resource pools are hard-wired, and rollout needs vLLM, SGLang or TRT-LLM), so training first checks what it needs
(:func:`missing_prerequisites`: what verl cannot do for the checkpoint's model family with these settings, e.g.
LoRA on the Qwen3-Omni thinker; a CUDA GPU, vLLM, the SFT checkpoint and the RL parquet files) and names
everything missing in one line. Everything verl-side (Ray, TransferQueue, the trainer override) is imported only when training
actually starts, so printing the config stays cheap.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

CONF_DIR = Path(__file__).resolve().parents[1] / "conf" / "rl"
PLACEHOLDER = "/path/to/"  # the configs' unset paths (conf/rl/taura.yaml, conf/rl/exp/7b.yaml)
MAKE_PARQUET = "python -m rl.verl_ext.rl_dataset --tasks TASKS.jsonl --out {path}"
MAKE_CHECKPOINT = "the agentic-SFT checkpoint, e.g. from python rl/train_sft.py +exp=7b"


def missing_requirements() -> list[str]:
    """What this machine lacks for verl training: "CUDA GPU" and/or "vLLM" (empty when both are there)."""
    import torch

    missing = [] if torch.cuda.is_available() else ["CUDA GPU"]
    if importlib.util.find_spec("vllm") is None:
        missing.append("vLLM")
    return missing


def _local(path: str) -> bool:
    """Whether ``path`` names a local file or folder (not a remote URI like hdfs://, nor a hub id like org/name)."""
    if "://" in path:
        return False
    return path.startswith(("/", ".", "~")) or path.count("/") != 1 or Path(path).exists()


def _paths(value: object) -> list[str]:
    return (
        [str(v) for v in value]
        if isinstance(value, Sequence) and not isinstance(value, str)
        else [str(value)]
    )


def missing_files(config: DictConfig) -> list[str]:
    """The SFT checkpoint and RL parquet paths that are still placeholders or are not there, each with how to
    make it (empty when every local path exists)."""
    missing = []
    model = str(OmegaConf.select(config, "actor_rollout_ref.model.path"))
    if model.startswith(PLACEHOLDER) or (
        _local(model) and not (Path(model).expanduser() / "config.json").is_file()
    ):
        missing.append(
            f"actor_rollout_ref.model.path={model} (no model folder with config.json: {MAKE_CHECKPOINT})"
        )
    for key in ("data.train_files", "data.val_files"):
        for path in _paths(OmegaConf.select(config, key)):
            if path.startswith(PLACEHOLDER) or (_local(path) and not Path(path).expanduser().is_file()):
                missing.append(f"{key}={path} (the RL parquet: {MAKE_PARQUET.format(path=path)})")
    return missing


def verl_gaps(config: DictConfig) -> list[str]:
    """What upstream verl lacks to train the checkpoint's model family with these settings
    (:func:`omniagent.checkpoint.verl_gaps`); empty while the folder is not there (missing_files names it)."""
    from omniagent.checkpoint import verl_gaps as family_gaps

    lora = int(OmegaConf.select(config, "actor_rollout_ref.model.lora_rank", default=0) or 0) > 0
    return family_gaps(
        str(OmegaConf.select(config, "actor_rollout_ref.model.path")), ["lora"] if lora else []
    )


# Keys that would make vLLM sample under a grammar. verl's actor recomputes log-probs and entropies over the full
# vocabulary, so the PPO ratio and TAURA's entropies would not be those of the sampling distribution; the local
# trainer (rl/train_local.py local.constrained, local.masked_stats) is where constrained sampling is trained.
STRUCTURED_OUTPUT_KEYS = (
    "actor_rollout_ref.rollout.structured_outputs",
    "actor_rollout_ref.rollout.guided_decoding",
    "local.constrained",
)


def structured_output_refusal(config: DictConfig) -> str | None:
    """A message when the config asks verl's rollout to sample under a grammar (refused), else None."""
    asked = [k for k in STRUCTURED_OUTPUT_KEYS if OmegaConf.select(config, k) not in (None, False, {}, "")]
    if not asked:
        return None
    return (
        f"rl/train_taura.py: {', '.join(asked)} asks for constrained sampling, which the verl path does not train "
        "correctly (its actor scores the full vocabulary, not the grammar-masked distribution that sampled); "
        "drop the key, or train constrained rollouts with rl/train_local.py local.constrained=true"
    )


def missing_prerequisites(config: DictConfig) -> str | None:
    """One line naming everything training lacks (constrained sampling it cannot train, what verl cannot do for
    the model, hardware, files), or None when nothing is missing."""
    refusal = structured_output_refusal(config)
    if refusal:
        return refusal
    parts = [
        f"cannot train {OmegaConf.select(config, 'actor_rollout_ref.model.path')}: {gap}"
        for gap in verl_gaps(config)
    ]
    hardware = missing_requirements()
    if hardware:
        parts.append(
            f"{'also needs' if parts else 'needs'} a CUDA GPU and vLLM; found no {' and no '.join(hardware)}"
        )
    files = missing_files(config)
    if files:
        parts.append(f"{'also needs' if parts else 'needs'} {'; '.join(files)}")
    if not parts:
        return None
    hint = (
        ". On one machine without them: python rl/train_local.py +exp=tiny local.train_tasks=TASKS.jsonl"
        if hardware
        else ""
    )
    return re.sub(r"\s+", " ", f"rl/train_taura.py {'; '.join(parts)}{hint}")


@hydra.main(config_path=str(CONF_DIR), config_name="taura", version_base=None)
def main(config: DictConfig) -> None:
    problem = missing_prerequisites(config)
    if problem:
        sys.exit(problem)
    from rl.verl_ext.trainer import run_taura

    run_taura(config)


if __name__ == "__main__":
    main()
