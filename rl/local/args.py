"""Every setting of the local trainer (``rl/train_local.py``), each named once and read from the key verl reads.

The trainer composes the verl entry's own config (``conf/rl/taura.yaml`` + an experiment + ``conf/rl/local``), so a
setting such as the clip ratio or the group size is the same key for a tiny CPU run and a 7B verl run; only what
verl has no key for lives under ``local:`` (``conf/rl/local/default.yaml`` documents each).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

# verl's kl_loss_type names of one per-token estimate of KL(policy || reference) from the sampled tokens:
# k1 = log ratio (unbiased, can go negative), abs = its size, k2 = half its square, k3 = r - log r - 1 with
# r = p_ref / p (unbiased, never negative, lowest variance; verl's default for GRPO). verl's "full" needs whole
# vocabularies, which the rows do not keep.
KL_TYPES = frozenset({"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"})


@dataclass
class Args:
    """Every knob of the run, with the shared-config key it is read from (verl reads the same key)."""

    model: str  # actor_rollout_ref.model.path: checkpoint folder, "tiny" (shipped agent) or "tiny-random"
    group_size: int  # actor_rollout_ref.rollout.n: episodes per task (one GRPO group)
    temperature: float  # actor_rollout_ref.rollout.temperature: rollout sampling temperature
    top_p: float  # actor_rollout_ref.rollout.top_p
    max_new_tokens: int  # data.max_response_length: tokens generated per turn
    tasks_per_iteration: int  # data.train_batch_size: groups per iteration
    lr: float  # actor_rollout_ref.actor.optim.lr
    weight_decay: float  # actor_rollout_ref.actor.optim.weight_decay (AdamW)
    betas: tuple[float, float]  # actor_rollout_ref.actor.optim.betas
    grad_clip: float  # actor_rollout_ref.actor.grad_clip: max global grad norm
    clip_low: float  # actor_rollout_ref.actor.clip_ratio_low: ratio floor 1 - clip_low
    clip_high: float  # actor_rollout_ref.actor.clip_ratio_high: ratio ceiling 1 + clip_high
    clip_c: float  # actor_rollout_ref.actor.clip_ratio_c: dual-clip bound for negative advantages
    loss_agg_mode: str  # actor_rollout_ref.actor.loss_agg_mode: token-mean | seq-mean-token-mean
    ppo_epochs: int  # actor_rollout_ref.actor.ppo_epochs: passes over each iteration's rows
    mini_batch_rows: (
        int  # actor_rollout_ref.actor.ppo_mini_batch_size x rollout.n: turn rows per optimizer step
    )
    mode: str  # taura.mode: taura | grpo | ig | oracle (rl/algo/taura.py)
    std_eps: float  # taura.std_eps: added to the group reward std
    entropy_eps: float  # taura.entropy_eps: groups with mean turn score <= this get weight 1
    score_floor: float  # taura.score_floor: ig/oracle weight = (floor + score) / group mean
    hold_answer_turns: bool  # taura.hold_answer_turns: answer turns keep weight 1, out of the group mean
    norm_by_std: bool  # algorithm.norm_adv_by_std_in_grpo: false = centre rewards only (Dr.GRPO)
    # actor_rollout_ref.actor.kl_loss_coef if .use_kl_loss, else 0: weight of the KL to the starting model
    kl_coef: float
    kl_type: str  # actor_rollout_ref.actor.kl_loss_type: the per-token KL estimate (KL_TYPES)
    filter_metric: str | None  # algorithm.filter_groups.metric if .enable: drop groups flat in it (DAPO)
    max_gen_batches: int  # algorithm.filter_groups.max_num_gen_batches: task batches drawn at most
    env: dict[str, Any]  # env.turns / env.limits / env.reward (as the verl agent loop reads them)
    local: dict[str, Any] = field(default_factory=dict)  # local.* (conf/rl/local/default.yaml documents each)

    @property
    def masked_stats(self) -> bool:
        """``local.masked_stats`` (null: ``local.constrained``): rows train the sampled token ids, and log-probs,
        PPO ratios and TAURA entropies are those of the distribution that sampled them (rl/local/sampling.py)."""
        value = self.local.get("masked_stats")
        return bool(self.local.get("constrained", False)) if value is None else bool(value)

    @property
    def stats_temperature(self) -> float | None:
        """The temperature the trainer's statistics are computed at: the rollout's with masked statistics, else
        None (the full vocabulary at temperature 1)."""
        return self.temperature if self.masked_stats else None

    def __post_init__(self) -> None:
        if self.masked_stats and self.top_p < 1.0:
            raise ValueError(
                "local.masked_stats scores the sampling distribution, which a nucleus cut (rollout.top_p < 1) "
                "changes per step: set actor_rollout_ref.rollout.top_p=1.0 or local.masked_stats=false"
            )
        if self.masked_stats and self.temperature <= 0:
            raise ValueError("local.masked_stats needs a sampling temperature above 0 (rollout.temperature)")
        if self.kl_type not in KL_TYPES:
            raise ValueError(
                f"actor_rollout_ref.actor.kl_loss_type={self.kl_type!r}: this trainer knows {sorted(KL_TYPES)}"
            )
        if self.kl_coef < 0:
            raise ValueError(f"actor_rollout_ref.actor.kl_loss_coef={self.kl_coef} must be >= 0")
        if self.filter_metric is not None and self.max_gen_batches <= 0:  # verl: no limit; here: a hang
            raise ValueError(
                "algorithm.filter_groups.enable=true needs a bound in this trainer: set "
                "algorithm.filter_groups.max_num_gen_batches to a positive number of task batches (e.g. 3)"
            )

    @classmethod
    def from_config(cls, cfg: DictConfig) -> Args:
        actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
        taura, groups = cfg.taura, cfg.algorithm.get("filter_groups")
        return cls(
            model=str(cfg.actor_rollout_ref.model.path),
            group_size=int(rollout.n),
            temperature=float(rollout.temperature),
            top_p=float(rollout.top_p),
            max_new_tokens=int(cfg.data.max_response_length),
            tasks_per_iteration=int(cfg.data.train_batch_size),
            lr=float(actor.optim.lr),
            weight_decay=float(actor.optim.weight_decay),
            betas=tuple(float(b) for b in actor.optim.betas),  # type: ignore[arg-type]
            grad_clip=float(actor.grad_clip),
            clip_low=float(actor.clip_ratio_low),
            clip_high=float(actor.clip_ratio_high),
            clip_c=float(actor.clip_ratio_c),
            loss_agg_mode=str(actor.loss_agg_mode),
            ppo_epochs=int(actor.ppo_epochs),
            mini_batch_rows=int(actor.ppo_mini_batch_size) * int(rollout.n),
            mode=str(taura.mode),
            std_eps=float(taura.std_eps),
            entropy_eps=float(taura.entropy_eps),
            score_floor=float(taura.get("score_floor", 1.0)),
            hold_answer_turns=bool(taura.get("hold_answer_turns", False)),
            norm_by_std=bool(cfg.algorithm.norm_adv_by_std_in_grpo),
            kl_coef=float(actor.get("kl_loss_coef", 0.0)) if actor.get("use_kl_loss") else 0.0,
            kl_type=str(actor.get("kl_loss_type", "low_var_kl")),
            filter_metric=str(groups.metric or "reward") if groups and groups.enable else None,
            max_gen_batches=int(groups.max_num_gen_batches) if groups else 0,
            env=OmegaConf.to_container(cfg.env, resolve=True),  # type: ignore[arg-type]
            local=OmegaConf.to_container(cfg.local, resolve=True),  # type: ignore[arg-type]
        )

    def fingerprint(self) -> dict[str, Any]:
        """Settings a resumed run must share with the run that saved the checkpoint."""
        keep = {k: v for k, v in asdict(self).items() if k not in ("local", "model")}
        keep["train_tasks"], keep["seed"] = str(self.local["train_tasks"]), int(self.local["seed"])
        if self.local.get("task_types"):  # only when set, so runs saved before the knob existed still resume
            keep["task_types"] = sorted(self.local["task_types"])
        if self.local.get("target_kl") is not None:  # likewise
            keep["target_kl"] = float(self.local["target_kl"])
        if self.local.get("task_pool"):  # likewise
            keep["task_pool"] = int(self.local["task_pool"])
        if self.local.get("task_repeats"):  # likewise
            keep["task_repeats"] = {str(k): int(v) for k, v in sorted(self.local["task_repeats"].items())}
        if self.local.get("shuffle_options"):  # likewise
            keep["shuffle_options"] = True
        if self.masked_stats:  # likewise (runs before the key scored the full vocabulary)
            keep["masked_stats"] = True
        anchor = self.local.get("sft_anchor") or {}
        if anchor.get("data"):  # likewise
            keep["sft_anchor"] = {
                "data": str(anchor["data"]),
                "coef": anchor.get("coef"),
                "rows": anchor.get("rows"),
            }
        if self.filter_metric is None:  # likewise (fields added later)
            keep.pop("filter_metric"), keep.pop("max_gen_batches")
        if not self.kl_coef:  # likewise
            keep.pop("kl_coef"), keep.pop("kl_type")
        if not self.hold_answer_turns:  # likewise
            keep.pop("hold_answer_turns")
        reward = keep["env"].get("reward", {})
        defaults = (
            ("evidence_gate", False),
            ("evidence_bonus", 0.0),
            ("reading_credit", 0.0),
            ("reading_scope", "all"),
            ("prior_tasks", None),
        )
        for key, default in defaults:
            if key in reward and reward[key] == default:
                reward.pop(key)
        return json.loads(json.dumps(keep))
