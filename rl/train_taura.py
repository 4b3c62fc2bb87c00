"""Train OmniAgent with TAURA on verl's V1 trainer (needs a CUDA GPU and vLLM).

    python rl/train_taura.py +exp=7b actor_rollout_ref.model.path=/ckpt/sft data.train_files=... data.val_files=...
    python rl/train_taura.py +exp=tiny --cfg job     # print the composed config and exit (no GPU needed)

The config is verl's ``ppo_trainer`` (found through ``hydra.searchpath: pkg://verl.trainer.config``) with
``conf/rl/taura.yaml`` and one ``conf/rl/exp/*.yaml`` on top. verl 0.9.1 cannot train on a CPU (NCCL and GPU
resource pools are hard-wired, and rollout needs vLLM, SGLang or TRT-LLM), so training checks for a CUDA GPU and
vLLM before anything else and says so in one line. Everything verl-side (Ray, TransferQueue, the trainer
override) is imported only when training actually starts, so printing the config stays cheap.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

CONF_DIR = Path(__file__).resolve().parents[1] / "conf" / "rl"


def missing_requirements() -> list[str]:
    """What this machine lacks for verl training: "CUDA GPU" and/or "vLLM" (empty when both are there)."""
    import torch

    missing = [] if torch.cuda.is_available() else ["CUDA GPU"]
    if importlib.util.find_spec("vllm") is None:
        missing.append("vLLM")
    return missing


@hydra.main(config_path=str(CONF_DIR), config_name="taura", version_base=None)
def main(config: DictConfig) -> None:
    missing = missing_requirements()
    if missing:
        sys.exit(
            f"rl/train_taura.py needs a CUDA GPU and vLLM; found no {' and no '.join(missing)}. "
            "On one machine without them: python rl/train_local.py +exp=tiny local.train_tasks=TASKS.jsonl"
        )
    from rl.verl_ext.trainer import run_taura

    run_taura(config)


if __name__ == "__main__":
    main()
