"""TAURA inside verl 0.9.1's V1 trainer. Imports verl, Ray and TransferQueue: import it from training code only.

TAURA is registered in verl's advantage-estimator registry as ``taura`` (:func:`taura_estimator`), and the
config names it: ``algorithm.adv_estimator: taura``. Like every estimator but ``gae`` it needs no critic
(verl's ``need_critic``; conf/rl/taura.yaml also says ``critic.enable: false``). verl's own
``PPOTrainer._compute_advantage`` (``verl/trainer/ppo/v1/trainer_base.py``) cannot call it usefully: it
fetches a fixed field list from TransferQueue and hands custom estimators only rewards, mask, index and
config, so the per-token ``entropy`` that ``_compute_old_log_prob`` already stored never reaches them.
:class:`TauraPPOTrainer` subclasses the sync trainer and overrides that one method: same steps as verl's
(KL-in-reward, rollout correction, nested write-back), with the estimator looked up by name and given the
entropy, the row keys and the ``taura`` settings too. ``tests/test_verl_taura_trainer.py`` pins the
signatures of the verl functions this copy of verl's method depends on.

Row ids come from the TransferQueue keys ``{uid}_{session_id}_{i}`` that verl's
``AgentLoopWorkerTQ._agent_loop_postprocess`` writes, one row per ``AgentLoopOutput`` (= one turn here):
group = ``uid``, trajectory = ``{uid}_{session_id}``, turn = ``i``. The agent loop may name each turn's
action in ``AgentLoopOutput.extra_fields[<taura.action_field>]`` for per-action entropy logging.

:func:`run_taura` is the launcher (``rl/train_taura.py`` calls it): verl's ``run_ppo`` with our task runner,
which builds :class:`TauraPPOTrainer` instead of the class registered for ``trainer.v1.trainer_mode``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pprint import pprint
from typing import Any

import numpy as np
import ray
import torch
import transfer_queue as tq
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.protocol import DataProto
from verl.trainer.main_ppo import run_ppo
from verl.trainer.ppo.core_algos import get_adv_estimator_fn, register_adv_est
from verl.trainer.ppo.ray_trainer import apply_kl_penalty
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.trainer.ppo.v1 import AgentLoopManagerTQ, PPOTrainerSync
from verl.utils.config import validate_config
from verl.utils.device import auto_set_device
from verl.utils.import_utils import load_class_from_fqn
from verl.utils.logging_utils import configure_verl_logging
from verl.workers.utils.padding import response_to_nested

from rl.algo import taura

# TransferQueue's tq.init() hangs when Ray has only a couple of CPUs (2 on the CI box): reserve at least this.
MIN_RAY_CPUS = 16
# Fields verl's own _compute_advantage reads, plus the per-token entropy and the agent loop's extra fields.
ADVANTAGE_FIELDS = (
    "uid",
    "response_mask",
    "rm_scores",
    "rollout_log_probs",
    "old_log_probs",
    "ref_log_prob",
    "values",
    "entropy",
    "extra_fields",
)
METRIC_PREFIX = "taura"
TAURA_ESTIMATOR = "taura"  # algorithm.adv_estimator
# Config values starting with this are placeholders (conf/*.yaml) that must be overridden before training.
PLACEHOLDER_PREFIX = "/path/to/"
PLACEHOLDER_KEYS = ("actor_rollout_ref.model.path", "data.train_files", "data.val_files")


# ------------------------------------------------------------------ pure pieces (no Ray, no TransferQueue)


def row_ids_from_keys(keys: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(group, trajectory, turn) integer ids of rows keyed ``{uid}_{session_id}_{i}``."""
    parts = [key.rsplit("_", 2) for key in keys]
    if any(len(p) != 3 for p in parts):
        raise ValueError(f"row keys must look like '{{uid}}_{{session_id}}_{{i}}', got {list(keys)[:3]}...")
    uids = np.array([p[0] for p in parts], dtype=object)
    sessions = np.array([f"{p[0]}_{p[1]}" for p in parts], dtype=object)
    _, group = np.unique(uids, return_inverse=True)
    _, traj = np.unique(sessions, return_inverse=True)
    turn = [int(p[2]) for p in parts]
    return (
        torch.as_tensor(group, dtype=torch.long),
        torch.as_tensor(traj, dtype=torch.long),
        torch.tensor(turn),
    )


def check_taura_config(config: DictConfig) -> None:
    """Fail before any GPU work on settings TAURA cannot run with."""
    mode = config.taura.mode
    modes = tuple(m for m in taura.MODES if m not in taura.SCORE_MODES)
    if mode not in modes:  # ig / oracle need per-turn scores that only the local trainer measures
        raise ValueError(f"taura.mode={mode!r}; on verl it is one of {modes}")
    if config.algorithm.adv_estimator != TAURA_ESTIMATOR:
        raise ValueError(
            f"algorithm.adv_estimator={config.algorithm.adv_estimator!r}: this trainer computes TAURA; set "
            f"{TAURA_ESTIMATOR!r} (taura.mode=grpo gives the GRPO ablation)"
        )
    if need_critic(config):
        raise ValueError("critic.enable=true: TAURA is critic-free (outcome advantages normalised per group)")
    if not config.trainer.use_v1 or config.trainer.v1.trainer_mode != "sync":
        raise ValueError(
            "TAURA runs on verl's V1 sync trainer: set trainer.use_v1=true, trainer.v1.trainer_mode=sync"
        )
    if OmegaConf.select(config, "env.reward.num_credit_scope", default="all") == "flat" and OmegaConf.select(
        config, "env.reward.num_credit", default=0.0
    ):  # the agent loop scores one episode at a time; the flat-scope credit needs the whole group's scores
        raise ValueError(
            "env.reward.num_credit_scope=flat needs a group's scores at once, which only the local trainer "
            "(rl/train_local.py) has; on verl use num_credit_scope=all"
        )
    rollout_corr = config.algorithm.get("rollout_correction", None)
    if rollout_corr is not None and rollout_corr.get("bypass_mode", False):
        raise ValueError(
            "algorithm.rollout_correction.bypass_mode=true skips the old-log-prob pass that computes token entropy"
        )


def check_no_placeholders(config: DictConfig) -> None:
    """Refuse to train on the placeholder checkpoint / data paths of conf/*.yaml."""
    unset = []
    for key in PLACEHOLDER_KEYS:
        value = OmegaConf.select(config, key)
        values = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        if any(str(v).startswith(PLACEHOLDER_PREFIX) for v in values):
            unset.append(f"{key}={value}")
    if unset:
        raise ValueError(
            f"placeholder paths still set, override them on the command line: {', '.join(unset)}"
        )


def _action_types(extra_fields: Any, action_field: str, num_rows: int) -> list[str | None]:
    if extra_fields is None:
        return [None] * num_rows
    rows = extra_fields.tolist() if hasattr(extra_fields, "tolist") else list(extra_fields)  # NonTensorStack
    return [f.get(action_field) if isinstance(f, dict) else None for f in rows]


def taura_metrics(result: taura.TauraAdvantages, traj_index: torch.Tensor, actions: Sequence[str | None]):
    """Scalars for the tracker: turn-weight stats, turn entropy, turns per trajectory, per-action entropy."""
    valid = result.valid
    metrics = {f"{METRIC_PREFIX}/weight/{k}": v for k, v in taura.weight_stats(result.weights, valid).items()}
    num_valid = int(valid.sum())
    num_traj = int(torch.unique(traj_index[valid]).numel())
    metrics[f"{METRIC_PREFIX}/turn_entropy/mean"] = (
        result.turn_entropy[valid].mean().item() if num_valid else 0.0
    )
    metrics[f"{METRIC_PREFIX}/turns_per_traj/mean"] = num_valid / num_traj if num_traj else 0.0
    metrics[f"{METRIC_PREFIX}/outcome_adv/abs_mean"] = (
        result.outcome_advantage[valid].abs().mean().item() if num_valid else 0.0
    )
    for action, stats in taura.entropy_by_action(result.turn_entropy, actions, valid).items():
        for name, value in stats.items():
            metrics[f"{METRIC_PREFIX}/action/{action}/{name}"] = value
    return metrics


def _held_rows(settings: Any, action_types: Sequence[str | None] | None) -> torch.Tensor | None:
    """The answer rows when ``taura.hold_answer_turns`` is on (their weight stays 1), else None."""
    if not settings.get("hold_answer_turns", False):
        return None
    if action_types is None:
        raise ValueError("taura.hold_answer_turns=true needs each row's action type (taura.action_field)")
    return taura.answer_turns(action_types)


@register_adv_est(TAURA_ESTIMATOR)
def taura_estimator(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    *,
    entropy: torch.Tensor | None = None,
    row_keys: Sequence[str] | None = None,
    taura_config: Any = None,
    action_types: Sequence[str | None] | None = None,
    metrics: dict[str, float] | None = None,
    **_verl_extras: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's advantage estimator ``taura``: per-token TAURA advantages of per-turn rows, as (advantages, returns).

    Beyond verl's estimator arguments (rewards, mask, ``index`` = uid, ``config`` = the algorithm block) it needs
    the per-token ``entropy`` and the TransferQueue ``row_keys`` ``{uid}_{session}_{turn}`` (group, trajectory
    and turn of each row), which only :class:`TauraPPOTrainer` passes. ``taura_config`` is the config's
    ``taura`` block (mode, eps, hold_answer_turns, log_action_entropy); ``action_types`` names each row's action
    (``hold_answer_turns`` needs them); ``metrics``, when given, receives the turn-weight and entropy
    statistics, per action type too when ``action_types`` is given and ``log_action_entropy`` is on.
    """
    if entropy is None or row_keys is None:
        raise ValueError(
            f"adv_estimator={TAURA_ESTIMATOR!r} needs per-token entropy and row keys, which verl's own "
            "_compute_advantage does not pass: train with rl/train_taura.py (rl.verl_ext.trainer.TauraPPOTrainer)"
        )
    settings = taura_config if taura_config is not None else {}
    group_index, traj_index, turn_index = row_ids_from_keys(row_keys)
    result = taura.taura_advantages(
        entropy=entropy,
        response_mask=response_mask,
        rewards=token_level_rewards.sum(dim=-1),
        traj_index=traj_index,
        group_index=group_index,
        turn_index=turn_index,
        mode=settings.get("mode", "taura"),
        std_eps=settings.get("std_eps", taura.STD_EPS),
        entropy_eps=settings.get("entropy_eps", taura.ENTROPY_EPS),
        norm_by_std=True if config is None else config.get("norm_adv_by_std_in_grpo", True),
        held=_held_rows(settings, action_types),
    )
    if metrics is not None:
        by_action = action_types is not None and settings.get("log_action_entropy", True)
        actions = action_types if by_action else [None] * len(row_keys)
        metrics.update(taura_metrics(result, traj_index, actions))
    return result.advantages, result.advantages


def compute_taura_advantage(
    data: TensorDict,
    keys: Sequence[str],
    config: DictConfig,
    kl_ctrl: Any = None,
) -> tuple[TensorDict, dict[str, float]]:
    """verl's ``_compute_advantage`` body on a batch already fetched from TransferQueue, with step 3 calling the
    configured estimator (:func:`taura_estimator`) with the entropy and row keys.

    ``data`` holds the rows of ``keys`` as TransferQueue returns them (jagged nested per-token fields,
    ``uid`` / ``extra_fields`` as non-tensor stacks). Returns the nested fields to write back and the metrics.
    """
    if "entropy" not in data.keys():
        raise KeyError(
            "no 'entropy' in the batch: TAURA needs the old-log-prob pass (calculate_entropy=True)"
        )
    algo = config.algorithm
    metrics: dict[str, float] = {}
    response_mask_nested = data["response_mask"]
    extra_fields = data.pop("extra_fields") if "extra_fields" in data.keys() else None

    data = DataProto(batch=data.to_padded_tensor())
    data.batch["token_level_scores"] = data.batch["rm_scores"]
    data.non_tensor_batch["uid"] = np.array(data.batch.pop("uid").tolist(), dtype=object)

    # 1. KL penalty in the reward (off in our configs)
    if algo.use_kl_in_reward:
        data, kl_metrics = apply_kl_penalty(data, kl_ctrl=kl_ctrl, kl_penalty=algo.kl_penalty)
        metrics.update(kl_metrics)
    else:
        data.batch["token_level_rewards"] = data.batch["token_level_scores"]

    # 2. rollout correction: IS weights and rejection (may shrink response_mask), as in verl
    rollout_corr_config = algo.get("rollout_correction", None)
    rollout_correction = rollout_corr_config is not None and "rollout_log_probs" in data.batch.keys()
    if rollout_correction:
        data, is_metrics = compute_rollout_correction_and_add_to_batch(data, rollout_corr_config)
        metrics.update(is_metrics)

    # 3. the estimator the config names (``taura``), given what verl's own step does not pass it
    actions = _action_types(extra_fields, config.taura.action_field, len(keys))
    advantages, returns = get_adv_estimator_fn(algo.adv_estimator)(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
        config=algo,
        entropy=data.batch["entropy"],
        row_keys=keys,
        taura_config=config.taura,
        action_types=actions,
        metrics=metrics,
    )
    data.batch["advantages"] = advantages
    data.batch["returns"] = returns

    # 4. nested write-back, same fields as verl
    fields = ["advantages", "returns"]
    if algo.use_kl_in_reward:
        fields.append("token_level_rewards")
    if rollout_correction:
        fields.append("response_mask")
        if "rollout_is_weights" in data.batch.keys():
            fields.append("rollout_is_weights")
    output = {field: response_to_nested(data.batch[field], response_mask_nested) for field in fields}
    return TensorDict(output, batch_size=len(keys)), metrics


# ------------------------------------------------------------------ the trainer override


class TauraPPOTrainer(PPOTrainerSync):
    """verl's V1 synchronous PPO trainer with TAURA turn-level advantages."""

    def __init__(self, config: DictConfig):
        check_taura_config(config)
        super().__init__(config)

    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=list(ADVANTAGE_FIELDS)
        )
        output, adv_metrics = compute_taura_advantage(
            data, batch.keys, self.config, kl_ctrl=getattr(self, "kl_ctrl_in_reward", None)
        )
        metrics.update(adv_metrics)
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=output)


# ------------------------------------------------------------------ launcher


def trainer_class(config: DictConfig) -> type[TauraPPOTrainer]:
    """The trainer named by ``taura.trainer_class`` (default :class:`TauraPPOTrainer`)."""
    cls = load_class_from_fqn(
        config.taura.get("trainer_class", f"{__name__}.TauraPPOTrainer"), "TAURA trainer"
    )
    if not (isinstance(cls, type) and issubclass(cls, TauraPPOTrainer)):
        raise TypeError(f"taura.trainer_class must name a TauraPPOTrainer subclass, got {cls!r}")
    return cls


class TauraTaskRunner:
    """verl's ``TaskRunnerV1`` (``verl/trainer/main_ppo.py``) building ``taura.trainer_class``, not the trainer
    registered for ``trainer.v1.trainer_mode``."""

    def __init__(self):
        self.config = None
        self.trainer = None
        self.agent_loop_manager = None

    def init_agent_loop_manager(self):
        manager_fqn = self.config.actor_rollout_ref.rollout.get("agent", {}).get("agent_loop_manager_class")
        manager_cls = (
            load_class_from_fqn(manager_fqn, "AgentLoopManager") if manager_fqn else AgentLoopManagerTQ
        )
        self.agent_loop_manager = manager_cls.create(
            config=self.config,
            llm_client=self.trainer.get_llm_client(),
            teacher_client=self.trainer.get_teacher_client(),
            reward_loop_worker_handles=self.trainer.get_reward_handles(),
        )

    def run(self, config: DictConfig):
        configure_verl_logging()
        config.transfer_queue.enable = True
        pprint(OmegaConf.to_container(config, resolve=True))
        OmegaConf.resolve(config)
        self.config = config

        tq.init(config.transfer_queue)
        succeeded = False
        try:
            self.trainer = trainer_class(config)(config=config)
            self.trainer.init()
            self.init_agent_loop_manager()
            self.trainer.fit(self.agent_loop_manager)
            succeeded = True
        finally:
            try:
                tracking = getattr(self.trainer, "logger", None)
                if tracking is not None:
                    tracking.finish(exit_code=0 if succeeded else 1)
            finally:
                tq.close()


def prepare_ray_init(config: DictConfig) -> None:
    """Reserve enough Ray CPUs for TransferQueue (Ray workers import ``rl.*`` from the installed package)."""
    ray_init = config.ray_kwargs.ray_init
    if ray_init.get("num_cpus") is None and ray_init.get("address") is None:
        OmegaConf.update(
            config, "ray_kwargs.ray_init.num_cpus", max(MIN_RAY_CPUS, os.cpu_count() or 1), force_add=True
        )


def run_taura(config: DictConfig) -> None:
    """``verl.trainer.main_ppo.main`` with TAURA's checks and task runner."""
    auto_set_device(config)
    validate_config(
        config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    check_taura_config(config)
    check_no_placeholders(config)
    trainer_class(config)  # fail here, not inside the Ray actor
    prepare_ray_init(config)
    run_ppo(config, task_runner_class=ray.remote(TauraTaskRunner))
