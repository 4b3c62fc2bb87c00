"""Agentic SFT of an omni thinker (Qwen2.5-Omni, Qwen3-Omni) on per-turn teacher samples, through verl's SFT trainer.

    python rl/train_sft.py +exp=7b data.train_files=/data/sft/train.parquet   # torchrun + verl
    python rl/train_sft.py +exp=7b --cfg job                                  # print the composed config
    python rl/train_sft.py +exp=tiny data.train_files=/tmp/sft.parquet        # CPU: plain-torch steps
    python rl/train_sft.py +exp=tiny omni_sft.mode=print ...                  # show the torchrun command

Config: ``conf/sft/sft.yaml`` = verl's ``sft_trainer_engine`` (found through ``hydra.searchpath:
pkg://verl.trainer.config``) + our settings, with one experiment from its own ``exp`` group
(``conf/sft/exp/{7b,tiny}.yaml``; ``conf/rl/exp/`` is the RL config's). The ``omni_sft`` section is
the launcher's and is removed before verl sees the config.

``omni_sft.mode``:

- ``verl``: make sure the model exists (build the tiny one; or extract the thinker from a full
  checkpoint, ``omni_sft.base_model``, into ``model.path``), write the verl config to
  ``omni_sft.run_dir/verl_sft.yaml``, and run ``torchrun ... -m rl.train_sft --verl-worker <yaml>``.
  The worker freezes the modules in ``omni_sft.freeze`` (vision and audio encoders) right after
  verl's FSDP engine builds the model, then runs verl's own ``verl.trainer.sft_trainer.run_sft``
  with the dataset class ``rl.sft.dataset.OmniTurnSFTDataset`` (``data.custom_cls``).
  ``omni_sft.freeze: []`` plus ``omni_sft.plain_verl: true`` runs ``-m verl.trainer.sft_trainer``
  itself instead.
- ``local``: ``omni_sft.local.steps`` plain-torch AdamW steps (:mod:`rl.sft.step`) through the same
  dataset class, on CPU; prints the losses. For smoke tests and the tiny model.
- ``print``: print the torchrun command and the path of the verl config, run nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf" / "sft"  # own folder, so `+exp=` names SFT experiments (conf/rl/exp/ is RL's)

LAUNCHER_KEY = "omni_sft"
PLACEHOLDER = "/path/to/"
# how to make what a placeholder stands for, named beside it when a run is refused
HOW_TO_MAKE = {
    "data.train_files": "the per-turn SFT parquet: python rl/synthesize.py ... out_dir=OUT, then "
    "python -m rl.sft.export --kept OUT/kept.jsonl --out PATH; docs/training.md",
}


# --------------------------------------------------------------------------------------------------
# Config helpers
# --------------------------------------------------------------------------------------------------


def compose(
    overrides: list[str] | None = None, config_name: str = "sft", config_dirs: Sequence[str | Path] = ()
) -> Any:
    """The composed config as ``python rl/train_sft.py <overrides>`` would see it (for tests, notebooks);
    ``config_dirs`` are searched too, as ``--config-dir DIR`` adds one (e.g. a recipe's ``conf/sft``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    extra = []
    if config_dirs:
        own = list(OmegaConf.load(CONF_DIR / f"{config_name}.yaml").hydra.searchpath)
        dirs = [f"file://{Path(d).resolve()}" for d in config_dirs]
        extra.append(f"hydra.searchpath=[{','.join(own + dirs)}]")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return hydra_compose(config_name=config_name, overrides=[*extra, *(overrides or [])])


def verl_config(cfg: Any) -> Any:
    """The config verl's SFT trainer gets: everything but the launcher section."""
    from omegaconf import OmegaConf

    c = OmegaConf.to_container(cfg, resolve=True)
    c.pop(LAUNCHER_KEY, None)
    c.pop("hydra", None)
    return OmegaConf.create(c)


def _placeholders(cfg: Any) -> list[str]:
    from omegaconf import OmegaConf

    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        elif isinstance(node, str) and node.startswith(PLACEHOLDER):
            found.append(f"{path}={node}")

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return found


# --------------------------------------------------------------------------------------------------
# Model preparation
# --------------------------------------------------------------------------------------------------


def prepare_thinker(base: str, out_dir: str, dtype: str = "bfloat16") -> Path:
    """Save the thinker of a full omni checkpoint (talker and vocoder dropped) with its processor.

    verl loads models with ``AutoModelForImageTextToText``, which knows the thinker configs
    (``qwen2_5_omni_thinker``, ``qwen3_omni_moe_thinker``) but not the full ones. The family comes from
    ``base``'s ``config.json`` (:mod:`omniagent.families`). Skipped when ``out_dir`` already holds a
    thinker of that family.
    """
    import torch
    from transformers import AutoConfig

    from omniagent.families import family_for_model_type

    config = AutoConfig.from_pretrained(base)
    family = family_for_model_type(config.model_type)
    out = Path(out_dir)
    if (out / "config.json").exists():
        kind = json.loads((out / "config.json").read_text()).get("model_type")
        if kind != family.thinker_model_type:
            raise ValueError(f"{out} holds a {kind!r} model, not a {family.title} thinker")
        return out
    thinker_config = getattr(config, "thinker_config", config)
    model, info = family.transformers_class("thinker").from_pretrained(
        base, config=thinker_config, dtype=getattr(torch, dtype), output_loading_info=True
    )
    if info.get("missing_keys"):
        raise RuntimeError(f"thinker weights missing from {base}: {sorted(info['missing_keys'])[:10]}")
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp)
    family.transformers_class("processor").from_pretrained(base).save_pretrained(tmp)
    os.replace(tmp, out)
    return out


def prepare_model(cfg: Any) -> str:
    """Make sure ``model.path`` exists: build the tiny thinker (``omni_sft.tiny.family``), or extract the
    thinker of ``omni_sft.base_model``."""
    launcher = cfg[LAUNCHER_KEY]
    path = str(cfg.model.path)
    tiny = launcher.get("tiny") or {}
    if tiny.get("build"):
        from omniagent.tiny_model import build_tiny_thinker

        build_tiny_thinker(seed=int(tiny.get("seed", 0)), out_dir=path, family=tiny.get("family"))
    elif launcher.get("base_model") and not (Path(path) / "config.json").exists():
        prepare_thinker(str(launcher.base_model), path)
    if not (Path(path) / "config.json").exists():
        raise FileNotFoundError(
            f"model.path={path} has no config.json (set omni_sft.base_model to extract it)"
        )
    return path


def refuse_verl_gaps(cfg: Any) -> None:
    """Stop in one line when verl cannot do what the config asks of the model's family (e.g. LoRA on the
    Qwen3-Omni thinker: :func:`omniagent.checkpoint.verl_gaps`); checked on ``model.path`` or, before the
    thinker is extracted, on ``omni_sft.base_model``. Also when ``data.omni.answer_weight`` is not 1."""
    from omegaconf import OmegaConf

    from omniagent.checkpoint import verl_gaps

    lora = int(OmegaConf.select(cfg, "model.lora_rank", default=0) or 0) > 0
    base = cfg[LAUNCHER_KEY].get("base_model")
    folder = (
        str(cfg.model.path)
        if (Path(str(cfg.model.path)) / "config.json").is_file() or not base
        else str(base)
    )
    gaps = verl_gaps(folder, ["lora"] if lora else [])
    if gaps:
        raise SystemExit(f"rl/train_sft.py cannot train {folder}: {'; '.join(gaps)}")
    weight = OmegaConf.select(cfg, "data.omni.answer_weight", default=1.0)
    if weight is not None and float(weight) != 1.0:
        raise SystemExit(
            f"data.omni.answer_weight={weight}: verl's SFT loss reads only the 0/1 loss mask; "
            "per-token weights train with omni_sft.mode=local (rl/sft/weights.py)"
        )


# --------------------------------------------------------------------------------------------------
# verl worker (inside torchrun)
# --------------------------------------------------------------------------------------------------


def install_freeze_patch(prefixes: list[str]) -> None:
    """Freeze ``prefixes`` (e.g. ``visual``, ``audio_tower``) in every model verl's FSDP engine builds,
    before FSDP wrapping and before the optimizer sees the parameters."""
    from verl.workers.engine.fsdp import transformer_impl as ti

    from rl.sft.step import freeze_modules

    original = ti.FSDPEngine._build_module
    if getattr(original, "_omni_freeze", None) is not None:
        original = original._omni_original

    def _build_module(self: Any) -> Any:
        module = original(self)
        counts = freeze_modules(module, prefixes)
        print(f"[omni_sft] froze {prefixes}: {counts}", flush=True)
        return module

    _build_module._omni_freeze = list(prefixes)
    _build_module._omni_original = original
    ti.FSDPEngine._build_module = _build_module


def install_sequence_parallel_patch(cfg: Any) -> bool:
    """With ``engine.ulysses_sequence_parallel_size > 1``, load :mod:`rl.verl_ext.omni_patches`, whose
    ``ulysses_input_slicing`` makes verl slice an omni thinker's embeddings (and Qwen3's DeepStack inputs) per
    rank, as it does for the Qwen-VL models; returns whether it did."""
    import importlib

    from omegaconf import OmegaConf

    if int(OmegaConf.select(cfg, "engine.ulysses_sequence_parallel_size", default=1) or 1) <= 1:
        return False
    importlib.import_module("rl.verl_ext.omni_patches")
    return True


def verl_worker(config_path: str) -> None:
    """Entry point of each torchrun process: patches, then verl's own SFT run."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(config_path)
    freeze = list(OmegaConf.select(cfg, "data.omni.freeze", default=None) or [])
    if freeze:
        install_freeze_patch(freeze)
    install_sequence_parallel_patch(cfg)
    from verl.trainer.sft_trainer import run_sft
    from verl.utils.device import auto_set_device

    auto_set_device(cfg)
    run_sft(cfg)


def torchrun_command(cfg: Any, verl_yaml: Path) -> list[str]:
    launcher = cfg[LAUNCHER_KEY]
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={int(cfg.trainer.nnodes)}",
        f"--nproc_per_node={int(cfg.trainer.n_gpus_per_node)}",
        *[str(a) for a in launcher.get("torchrun_args") or []],
    ]
    if launcher.get("plain_verl"):
        if launcher.get("freeze"):
            raise ValueError(
                "omni_sft.plain_verl cannot freeze encoders; set omni_sft.freeze=[] or plain_verl=false"
            )
        return [
            *cmd,
            "-m",
            "verl.trainer.sft_trainer",
            f"--config-path={verl_yaml.resolve().parent}",
            f"--config-name={verl_yaml.stem}",
        ]
    return [*cmd, "-m", "rl.train_sft", "--verl-worker", str(verl_yaml)]


def write_verl_config(cfg: Any) -> Path:
    from omegaconf import OmegaConf

    run_dir = Path(str(cfg[LAUNCHER_KEY].run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    vcfg = verl_config(cfg)
    OmegaConf.update(vcfg, "data.omni.freeze", list(cfg[LAUNCHER_KEY].freeze or []), force_add=True)
    return write_atomic(run_dir / "verl_sft.yaml", OmegaConf.to_yaml(vcfg))


# --------------------------------------------------------------------------------------------------
# Local plain-torch steps
# --------------------------------------------------------------------------------------------------


def run_local(cfg: Any) -> list[float]:
    """``omni_sft.local.steps`` AdamW steps on ``model.path`` through ``OmniTurnSFTDataset`` (CPU); saves
    complete folders and resumes after a crash (:mod:`rl.sft.local`)."""
    from rl.sft.local import run_local as run_local_sft

    return run_local_sft(cfg)


# --------------------------------------------------------------------------------------------------
# Entry
# --------------------------------------------------------------------------------------------------


def launch(cfg: Any) -> Any:
    mode = str(cfg[LAUNCHER_KEY].mode)
    if mode not in ("verl", "local", "print"):
        raise ValueError(f"omni_sft.mode must be verl, local or print, not {mode!r}")
    bad = _placeholders(cfg)
    if bad and mode != "print":
        named = [
            f"{b} ({HOW_TO_MAKE[b.split('=')[0]]})" if b.split("=")[0] in HOW_TO_MAKE else b for b in bad
        ]
        raise SystemExit("set these paths first: " + ", ".join(named))
    if mode == "verl":
        refuse_verl_gaps(cfg)
    if mode == "local":
        prepare_model(cfg)
        return run_local(cfg)
    if mode == "verl":
        prepare_model(cfg)
    verl_yaml = write_verl_config(cfg)
    cmd = torchrun_command(cfg, verl_yaml)
    print(shlex.join(cmd))
    if mode == "print":
        return cmd
    result = subprocess.run(cmd, cwd=str(REPO_ROOT))  # the workers import rl.* from the installed package
    if result.returncode != 0:
        raise SystemExit(result.returncode)
    from rl.checkpoint import complete_run_checkpoints  # verl saves no Omni processor: add it

    complete_run_checkpoints(str(cfg.trainer.default_local_dir), str(cfg.model.path))
    return cmd


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--verl-worker":
        verl_worker(sys.argv[2])
        return
    import hydra

    @hydra.main(config_path=str(CONF_DIR), config_name="sft", version_base=None)
    def _main(cfg: Any) -> None:
        launch(cfg)

    _main()


if __name__ == "__main__":
    main()
