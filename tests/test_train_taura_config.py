"""The TAURA launcher's Hydra config (conf/rl/) and the GPU smoke script's training command, on CPU (the trainer
override in rl/verl_ext/trainer.py: test_verl_taura_trainer.py).

Needs verl 0.9.1 (`pip install "verl[verl-core]==0.9.1"`): its `ppo_trainer` config is the base of ours. End-to-end
training is not run here (it needs vLLM and a GPU).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from testkit import compose_taura

pytest.importorskip("verl", reason="verl is not installed (pip install 'verl[verl-core]==0.9.1')")

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: E402
from verl.utils.config import validate_config  # noqa: E402

from envs.limits import EnvLimits  # noqa: E402
from rl.verl_ext import trainer as verl_trainer  # noqa: E402
from rl.verl_ext.agent_loop import EnvSettings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "rl" / "train_taura.py"
CONF_DIR = REPO / "conf" / "rl"
SMOKE = REPO / "scripts" / "gpu_smoke.sh"
PATHS = (
    "actor_rollout_ref.model.path=/ckpt/x",
    "data.train_files=/d/t.parquet",
    "data.val_files=[/d/v.parquet]",
)


def _print_cfg_commands(*runs: tuple[str, ...]):
    """Run `python rl/train_taura.py <overrides> --cfg job` for each run, concurrently; parse what each prints."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), *overrides, "--cfg", "job"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for overrides in runs
    ]
    configs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-3000:]
        configs.append(OmegaConf.create(stdout))
    return configs


def _check_trainable(cfg) -> None:
    """Every check rl/train_taura.py runs before Ray starts (verl's own validation included)."""
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    verl_trainer.check_taura_config(cfg)
    verl_trainer.check_no_placeholders(cfg)
    assert verl_trainer.trainer_class(cfg) is verl_trainer.TauraPPOTrainer


# ------------------------------------------------------------------ config composition


def test_printed_configs_name_taura_and_take_overrides():
    """The README's print command works without a GPU; what it prints is a config verl accepts and that
    names the registered TAURA estimator; a command-line override reaches our own block."""
    cfg_7b, cfg_tiny = _print_cfg_commands(("+exp=7b", *PATHS), ("+exp=tiny", *PATHS, "taura.mode=grpo"))
    for cfg in (cfg_7b, cfg_tiny):
        _check_trainable(cfg)
        assert core_algos.get_adv_estimator_fn(cfg.algorithm.adv_estimator) is verl_trainer.taura_estimator
        assert not need_critic(cfg) and not need_reference_policy(cfg)
        assert cfg.actor_rollout_ref.rollout.calculate_log_probs  # verl's defaults are still underneath ours
    assert (cfg_7b.taura.mode, cfg_tiny.taura.mode) == ("taura", "grpo")


@pytest.mark.parametrize("exp", ["7b", "tiny"])
def test_placeholders_must_be_overridden(exp):
    with pytest.raises(ValueError, match="placeholder"):
        verl_trainer.check_no_placeholders(compose_taura(exp))
    _check_trainable(compose_taura(exp, *PATHS))


@pytest.mark.parametrize("exp", ["7b", "tiny"])
def test_env_block_is_the_agent_loops_settings(exp):
    """The `env` block builds the agent loop's settings, its limits are EnvLimits fields by name, and a limit
    override moves vLLM's per-prompt image cap with it."""
    cfg = compose_taura(exp, "env.limits.max_frames=7", "env.turns.max=12")
    settings = EnvSettings.from_config(cfg.env)
    assert set(cfg.env.limits) <= set(EnvLimits.model_fields)
    assert settings.limits.max_frames == 7 and settings.turns.max == 12
    vllm_limits = OmegaConf.to_container(cfg.actor_rollout_ref.rollout.engine_kwargs.vllm, resolve=True)
    assert vllm_limits["limit_mm_per_prompt"]["image"] == 7
    with pytest.raises(ValueError, match="max_frames_per_call"):  # EnvLimits refuses names it does not have
        EnvSettings.from_config(compose_taura(exp, "+env.limits.max_frames_per_call=60").env)


@pytest.mark.parametrize(
    "override, message",
    [
        ("algorithm.adv_estimator=grpo", "adv_estimator"),
        ("taura.mode=ppo", "taura.mode"),
        ("taura.mode=ig", "taura.mode"),  # needs per-turn scores the verl agent loop does not measure
        ("trainer.v1.trainer_mode=colocate_async", "sync"),
        ("algorithm.rollout_correction.bypass_mode=true", "bypass_mode"),
        ("critic.enable=true", "critic"),
    ],
)
def test_check_taura_config_rejects(override, message):
    with pytest.raises(ValueError, match=message):
        verl_trainer.check_taura_config(compose_taura("tiny", override))


def test_the_flat_scope_number_credit_is_refused_on_verl_and_the_plain_one_passes():
    """The flat scope needs a whole group's scores, which verl's agent loop (one episode at a time) never has."""
    with pytest.raises(ValueError, match="num_credit_scope=flat needs a group's scores.*local trainer"):
        verl_trainer.check_taura_config(
            compose_taura("tiny", "env.reward.num_credit=1.0", "env.reward.num_credit_scope=flat")
        )
    verl_trainer.check_taura_config(
        compose_taura("tiny", "env.reward.num_credit=1.0")
    )  # scope all: per episode
    verl_trainer.check_taura_config(
        compose_taura("tiny", "env.reward.num_credit_scope=flat")
    )  # no credit to pay


def test_prepare_ray_init_reserves_cpus():
    cfg = compose_taura("tiny")
    verl_trainer.prepare_ray_init(cfg)
    assert cfg.ray_kwargs.ray_init.num_cpus >= verl_trainer.MIN_RAY_CPUS
    fixed = compose_taura("tiny", "ray_kwargs.ray_init.num_cpus=3")
    verl_trainer.prepare_ray_init(fixed)
    assert fixed.ray_kwargs.ray_init.num_cpus == 3  # a user's own setting is kept


@pytest.mark.skipif(
    torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None,
    reason="this machine can train",
)
def test_training_without_gpu_or_vllm_stops_in_one_line():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "+exp=tiny", *PATHS],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]  # one line, no traceback
    assert "needs a CUDA GPU and vLLM" in proc.stderr
    assert "ray" not in proc.stdout.lower()  # stopped before Ray started
    # the same line names the files that are not there, and how to make them
    assert "actor_rollout_ref.model.path=/ckpt/x (no model folder" in proc.stderr
    assert "data.train_files=/d/t.parquet (the RL parquet: python -m rl.verl_ext.rl_dataset" in proc.stderr


def test_missing_checkpoint_and_parquet_files_are_named_before_training(tmp_path: Path) -> None:
    """``+exp=7b`` as shipped names its three placeholders; real paths pass once the files are there; remote
    paths (hdfs://, a hub id) are left to verl."""
    from rl.train_taura import missing_files

    unset = missing_files(compose_taura("7b"))
    assert [m.split("=")[0] for m in unset] == [
        "actor_rollout_ref.model.path",
        "data.train_files",
        "data.val_files",
    ]
    model, train, val = tmp_path / "sft", tmp_path / "train.parquet", tmp_path / "val.parquet"
    given = (f"actor_rollout_ref.model.path={model}", f"data.train_files={train}", f"data.val_files=[{val}]")
    assert len(missing_files(compose_taura("7b", *given))) == 3  # not there yet
    model.mkdir()
    (model / "config.json").write_text("{}")
    train.write_bytes(b"x")
    assert missing_files(compose_taura("7b", *given)) == [f"data.val_files={val} (the RL parquet: python -m "
                                                     f"rl.verl_ext.rl_dataset --tasks TASKS.jsonl --out {val})"]  # fmt: skip
    val.write_bytes(b"x")
    assert missing_files(compose_taura("7b", *given)) == []
    remote = ("actor_rollout_ref.model.path=Qwen/Qwen2.5-Omni-7B", "data.train_files=hdfs://d/t.parquet",
              "data.val_files=hdfs://d/v.parquet")  # fmt: skip
    assert missing_files(compose_taura("7b", *remote)) == []


# ------------------------------------------------------------------ the GPU smoke script's command


def test_gpu_smoke_dry_run_prints_a_command_that_composes(tmp_path):
    """The smoke script parses, and the training command it would run composes into a config that passes
    every pre-Ray check, with the script's model, data, step count and limits in it."""
    subprocess.run(["bash", "-n", str(SMOKE)], check=True)
    work = tmp_path / "smoke"
    env = {**os.environ, "OMNIAGENT_SMOKE_DIR": str(work), "STEPS": "3", "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", str(SMOKE), "--dry-run", "trainer.logger=[console]"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    argv = shlex.split(proc.stdout)
    assert argv[:2] == [sys.executable, "rl/train_taura.py"] and (REPO / argv[1]).is_file()
    assert not work.exists()  # a dry run builds and writes nothing
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="taura", overrides=argv[2:])
    _check_trainable(cfg)
    assert cfg.trainer.total_training_steps == 3 and list(cfg.trainer.logger) == ["console"]
    assert cfg.actor_rollout_ref.model.path == str(work / "tiny-thinker-seed0")
    assert cfg.data.train_files == str(work / "data" / "train.parquet")
    settings = EnvSettings.from_config(cfg.env)
    vllm_limits = OmegaConf.to_container(cfg.actor_rollout_ref.rollout.engine_kwargs.vllm, resolve=True)
    assert vllm_limits["limit_mm_per_prompt"]["image"] == settings.limits.max_frames
    assert settings.limits.max_frames != compose_taura("tiny").env.limits.max_frames  # the script's own cap
