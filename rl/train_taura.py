"""Train OmniAgent with TAURA on verl's V1 trainer.

    python rl/train_taura.py +exp=7b actor_rollout_ref.model.path=/ckpt/sft data.train_files=... data.val_files=...
    python rl/train_taura.py +exp=tiny --cfg job     # print the composed config and exit

The config is verl's ``ppo_trainer`` (found through ``hydra.searchpath: pkg://verl.trainer.config``) with
``conf/taura.yaml`` and one ``conf/exp/*.yaml`` on top. Everything verl-side (Ray, TransferQueue, the trainer
override) is imported only when training actually starts, so printing the config stays cheap.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

REPO_ROOT = Path(__file__).resolve().parents[1]


@hydra.main(config_path=str(REPO_ROOT / "conf"), config_name="taura", version_base=None)
def main(config: DictConfig) -> None:
    if str(REPO_ROOT) not in sys.path:  # `python rl/train_taura.py` puts rl/, not the repo, on sys.path
        sys.path.insert(0, str(REPO_ROOT))
    from rl.verl_trainer import run_taura

    run_taura(config)


if __name__ == "__main__":
    main()
