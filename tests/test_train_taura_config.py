"""The TAURA launcher's Hydra config (conf/) and the verl trainer override (rl/verl_trainer.py) on CPU.

Needs verl 0.9.1 (`pip install "verl[verl-core]==0.9.1"`): its `ppo_trainer` config is the base of ours and
the override subclasses its V1 sync trainer. End-to-end training is not run here (it needs vLLM and a GPU);
the override's advantage step runs on hand-built batches shaped exactly as TransferQueue returns them.
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("verl", reason="verl is not installed (pip install 'verl[verl-core]==0.9.1')")

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from transfer_queue import KVBatchMeta  # noqa: E402
from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: E402
from verl.trainer.ppo.v1 import PPOTrainerSync  # noqa: E402
from verl.utils.config import validate_config  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402

from rl import taura, verl_trainer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "rl" / "train_taura.py"


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


@functools.cache
def _compose_cached(exp: str, overrides: tuple[str, ...]):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base=None):
        return compose(config_name="taura", overrides=[f"+exp={exp}", *overrides])


def _compose(exp: str, *overrides: str):
    """In-process composition (same files as the script); a fresh copy each call."""
    return copy.deepcopy(_compose_cached(exp, overrides))


@pytest.fixture(scope="module")
def printed_configs():
    return _print_cfg_commands(("+exp=7b",), ("+exp=tiny", "taura.mode=grpo"))


@pytest.fixture(scope="module")
def cfg_7b(printed_configs):
    return printed_configs[0]


@pytest.fixture(scope="module")
def cfg_tiny(printed_configs):
    return printed_configs[1]


# ------------------------------------------------------------------ config composition


def _assert_taura_common(cfg):
    arr = cfg.actor_rollout_ref
    assert arr.actor.optim.lr == pytest.approx(1e-6)
    assert (arr.actor.clip_ratio_low, arr.actor.clip_ratio_high) == (0.2, 0.28)
    assert arr.actor.use_kl_loss is False and cfg.algorithm.use_kl_in_reward is False
    assert arr.rollout.name == "vllm"
    assert cfg.trainer.use_v1 is True and cfg.trainer.v1.trainer_mode == "sync"
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.taura.trainer_class == "rl.verl_trainer.TauraPPOTrainer"
    assert (cfg.env.turns.min, cfg.env.turns.max, cfg.env.turns.dynamic_by_duration) == (5, 10, True)
    assert cfg.env.limits.max_frames_per_call == 60
    # verl's own defaults are still there underneath ours
    assert cfg.actor_rollout_ref.rollout.calculate_log_probs is True
    assert "transfer_queue" in cfg and "reward" in cfg


def test_7b_composes_with_recipe_values(cfg_7b):
    _assert_taura_common(cfg_7b)
    assert cfg_7b.actor_rollout_ref.rollout.n == 8
    assert cfg_7b.data.train_batch_size == 32
    assert cfg_7b.taura.mode == "taura"
    assert cfg_7b.actor_rollout_ref.model.path.startswith(verl_trainer.PLACEHOLDER_PREFIX)
    assert cfg_7b.taura.std_eps == pytest.approx(1e-6) and cfg_7b.taura.entropy_eps == pytest.approx(1e-8)


def test_tiny_composes_cpu_sized(cfg_tiny):
    _assert_taura_common(cfg_tiny)
    assert cfg_tiny.taura.mode == "grpo"  # the command-line override reached our block
    assert cfg_tiny.data.train_batch_size * cfg_tiny.actor_rollout_ref.rollout.n <= 8
    assert cfg_tiny.trainer.n_gpus_per_node == 1
    assert "tiny-thinker" in cfg_tiny.actor_rollout_ref.model.path


@pytest.mark.parametrize("exp", ["7b", "tiny"])
def test_composed_config_passes_verl_and_taura_checks(exp):
    cfg = _compose(exp)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert not need_critic(cfg) and not need_reference_policy(cfg)
    verl_trainer.check_taura_config(cfg)
    assert verl_trainer.trainer_class(cfg) is verl_trainer.TauraPPOTrainer
    with pytest.raises(ValueError, match="placeholder"):
        verl_trainer.check_no_placeholders(cfg)
    ok = _compose(
        exp,
        "actor_rollout_ref.model.path=/ckpt/x",
        "data.train_files=/d/t.parquet",
        "data.val_files=[/d/v.parquet]",
    )
    verl_trainer.check_no_placeholders(ok)


@pytest.mark.parametrize(
    "override, message",
    [
        ("algorithm.adv_estimator=gae", "adv_estimator"),
        ("taura.mode=ppo", "taura.mode"),
        ("trainer.v1.trainer_mode=colocate_async", "sync"),
        ("algorithm.rollout_correction.bypass_mode=true", "bypass_mode"),
    ],
)
def test_check_taura_config_rejects(override, message):
    with pytest.raises(ValueError, match=message):
        verl_trainer.check_taura_config(_compose("tiny", override))


def test_prepare_ray_init_reserves_cpus_and_pythonpath():
    cfg = _compose("tiny")
    verl_trainer.prepare_ray_init(cfg)
    assert cfg.ray_kwargs.ray_init.num_cpus >= verl_trainer.MIN_RAY_CPUS
    assert str(REPO) in cfg.ray_kwargs.ray_init.runtime_env.env_vars.PYTHONPATH.split(":")


# ------------------------------------------------------------------ the advantage step on verl batches

# (session, turn, reward, token entropies, action); one prompt uid, rollout.n = 3 sessions.
TURNS = [
    (0, 0, 1.0, [1.0, 3.0], "frames"),
    (0, 1, 1.0, [0.0, 0.0, 0.0], "answer"),
    (1, 0, 0.0, [4.0], "audio"),
    (1, 1, 0.0, [2.0, 2.0], "answer"),
    (2, 0, 0.0, [0.5, 0.5, 0.5, 0.5], "answer"),
]
UID = "9f1c"


def _agent_loop_rows():
    """Rows as verl's AgentLoopWorkerTQ._agent_loop_postprocess writes them, plus the old-log-prob fields."""
    keys, fields = [], []
    for session, turn, reward, ent, action in TURNS:
        n = len(ent)
        rm_scores = torch.zeros(n)
        rm_scores[-1] = reward
        fields.append(
            {
                "prompts": torch.arange(6),
                "responses": torch.arange(n),
                "response_mask": torch.ones(n, dtype=torch.int64),
                "rm_scores": rm_scores,
                "rollout_log_probs": torch.full((n,), -1.0),
                "old_log_probs": torch.full((n,), -1.1),
                "entropy": torch.tensor(ent),
                "extra_fields": {"action_type": action, "turn_index": turn},
                "uid": UID,
                "session_id": session,
            }
        )
        keys.append(f"{UID}_{session}_{turn}")
    return keys, fields


def _expected_advantages():
    keys, _ = _agent_loop_rows()
    width = max(len(t[3]) for t in TURNS)
    entropy = torch.zeros(len(TURNS), width)
    mask = torch.zeros(len(TURNS), width, dtype=torch.long)
    for i, t in enumerate(TURNS):
        entropy[i, : len(t[3])] = torch.tensor(t[3])
        mask[i, : len(t[3])] = 1
    return taura.taura_advantages(
        entropy=entropy,
        response_mask=mask,
        rewards=torch.tensor([t[2] for t in TURNS]),
        traj_index=torch.tensor([t[0] for t in TURNS]),
        group_index=torch.zeros(len(TURNS), dtype=torch.long),
        turn_index=torch.tensor([t[1] for t in TURNS]),
    )


def _check_output(output: TensorDict, metrics: dict):
    expected = _expected_advantages()
    assert set(output.keys()) >= {"advantages", "returns"}
    for i, t in enumerate(TURNS):
        n = len(t[3])
        torch.testing.assert_close(output["advantages"][i], expected.advantages[i, :n])
        torch.testing.assert_close(output["returns"][i], expected.advantages[i, :n])
    # group mean turn entropy = (2 + 0 + 4 + 2 + 0.5) / 5 = 1.7
    assert metrics["taura/weight/mean"] == pytest.approx(1.0)
    assert metrics["taura/weight/max"] == pytest.approx(4 / 1.7)
    assert metrics["taura/weight/min"] == pytest.approx(0.0)
    assert metrics["taura/turns_per_traj/mean"] == pytest.approx(5 / 3)
    assert metrics["taura/action/answer/turns"] == 3
    assert metrics["taura/action/frames/entropy_mean"] == pytest.approx(2.0)


def test_row_ids_from_keys():
    group, traj, turn = verl_trainer.row_ids_from_keys(["a_b_0_1", "a_b_0_0", "c_1_0", "a_b_1_0"])
    assert group.tolist() == [0, 0, 1, 0]  # uid "a_b" may itself contain underscores
    assert traj.tolist() == [0, 0, 2, 1]
    assert turn.tolist() == [1, 0, 0, 0]
    with pytest.raises(ValueError):
        verl_trainer.row_ids_from_keys(["no-underscores"])


def test_compute_taura_advantage_on_transfer_queue_shaped_batch():
    keys, fields = _agent_loop_rows()
    data = list_of_dict_to_tensordict(fields)  # jagged nested tensors + non-tensor stacks, as TQ returns
    output, metrics = verl_trainer.compute_taura_advantage(data, keys, _compose("tiny"))
    assert output["advantages"].is_nested
    _check_output(output, metrics)


def test_compute_taura_advantage_grpo_mode_equals_verl_grpo():
    from verl.protocol import DataProto
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    keys, fields = _agent_loop_rows()
    output, _ = verl_trainer.compute_taura_advantage(
        list_of_dict_to_tensordict(fields), keys, _compose("tiny", "taura.mode=grpo")
    )
    padded = list_of_dict_to_tensordict(fields).select("rm_scores", "response_mask").to_padded_tensor()
    data = DataProto.from_dict(
        tensors={"token_level_rewards": padded["rm_scores"], "response_mask": padded["response_mask"]},
        non_tensors={"uid": [UID] * len(keys)},
    )
    verl_adv = compute_advantage_for_multi_trajectories(data, keys, "grpo", num_repeat=3).batch["advantages"]
    for i, t in enumerate(TURNS):
        torch.testing.assert_close(output["advantages"][i], verl_adv[i, : len(t[3])].float())


def test_missing_entropy_is_a_clear_error():
    keys, fields = _agent_loop_rows()
    for f in fields:
        f.pop("entropy")
    with pytest.raises(KeyError, match="entropy"):
        verl_trainer.compute_taura_advantage(list_of_dict_to_tensordict(fields), keys, _compose("tiny"))


class _FakeTransferQueue:
    """kv_batch_get / kv_batch_put over a dict, with TransferQueue's signatures."""

    def __init__(self, keys, fields):
        self.rows = {k: dict(f) for k, f in zip(keys, fields, strict=True)}

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        present = [f for f in select_fields if all(f in self.rows[k] for k in keys)]
        return list_of_dict_to_tensordict([{f: self.rows[k][f] for f in present} for k in keys])

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        for i, key in enumerate(keys):
            for name in fields.keys():
                self.rows[key][name] = fields[name][i]
        return KVBatchMeta(keys=list(keys), tags=[{}] * len(keys), partition_id=partition_id)


def test_trainer_override_compute_advantage(monkeypatch):
    assert issubclass(verl_trainer.TauraPPOTrainer, PPOTrainerSync)
    assert "_compute_advantage" in verl_trainer.TauraPPOTrainer.__dict__
    keys, fields = _agent_loop_rows()
    fake = _FakeTransferQueue(keys, fields)
    monkeypatch.setattr(verl_trainer, "tq", fake)
    trainer = verl_trainer.TauraPPOTrainer.__new__(verl_trainer.TauraPPOTrainer)  # skip Ray/worker setup
    trainer.config = _compose("tiny")
    metrics: dict = {}
    batch = KVBatchMeta(keys=keys, tags=[{"status": "success"}] * len(keys), partition_id="train")
    out = trainer._compute_advantage(batch, metrics)
    assert out.keys == keys
    written = TensorDict(
        {
            "advantages": torch.nested.as_nested_tensor(
                [fake.rows[k]["advantages"] for k in keys], layout=torch.jagged
            )
        },
        batch_size=len(keys),
    )
    written["returns"] = written["advantages"]
    _check_output(written, metrics)


@pytest.mark.slow
def test_trainer_override_with_real_transfer_queue():
    """The override against a live TransferQueue on a local Ray (about 30 s on 2 cores)."""
    import ray
    import transfer_queue as tq

    keys, fields = _agent_loop_rows()
    ray.init(num_cpus=verl_trainer.MIN_RAY_CPUS, include_dashboard=False, log_to_driver=False)
    try:
        tq.init()
        tq.kv_batch_put(
            keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=[{}] * len(keys)
        )
        trainer = verl_trainer.TauraPPOTrainer.__new__(verl_trainer.TauraPPOTrainer)
        trainer.config = _compose("tiny")
        metrics: dict = {}
        batch = KVBatchMeta(keys=keys, tags=[{}] * len(keys), partition_id="train")
        trainer._compute_advantage(batch, metrics)
        written = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages", "returns"])
        _check_output(written, metrics)
    finally:
        tq.close()
        ray.shutdown()
