"""What an evaluation run is: :class:`EvalConfig`, validated from the composed hydra config.

Defaults live in one place: the hydra config (``conf/eval.yaml`` and the benchmark presets) for the
command line, and the fields of :class:`EvalConfig` for code that builds one directly.
:func:`eval_config_from` only copies the keys the hydra config has, so no default is repeated here.
Benchmark presets are frozen: :func:`check_frozen` and :func:`check_decoding` refuse overrides that
would change what a preset measures.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from envs.limits import RETIRED, EnvLimits
from envs.tasks import Task
from omniagent.eval.passive import PassiveConfig
from omniagent.eval.protocols import ProtocolConfig, turn_budget_for
from omniagent.eval.results import DEPLOYMENT_KWARGS, RESULTS

__all__ = [
    "UNFROZEN",
    "EvalConfig",
    "FrozenPresetError",
    "check_decoding",
    "check_frozen",
    "eval_config_from",
    "judge_config",
    "to_plain",
]

# never written to run.json or logs: api_key, hf_token, secret, password ... (not max_tokens, a setting)
SECRET_KEY = re.compile(r"(^|_)(api_?key|key|token|secret|password)$", re.I)

# Overrides of these preset fields do not change what is measured (where files are, which decoder).
UNFROZEN = (
    "benchmark.annotations",
    "benchmark.media_root",
    "benchmark.dataset_kwargs.allow_outside_media_root",
    "benchmark.dataset_kwargs.follow_links_outside_media_root",
    "benchmark.limits.allow_protocols",  # which inputs may be opened, not what a question shows
    "benchmark.limits.allow_demuxers",
    "benchmark.dataset_kwargs.out_dir",
    "benchmark.limits.backend",
    *(f"benchmark.limits.{name}" for name in sorted(RETIRED)),  # dropped on load; an old command still runs
)

# Top-level keys of conf/eval.yaml that are EvalConfig fields under the same name.
_RUN_KEYS = (
    "mode",
    "seed",
    "workers",
    "threads",
    "decode_threads",
    "retry_failed",
    "max_consecutive_policy_errors",
    "progress",
    "allow_config_change",
    "samples",
)


class EvalConfig(BaseModel):
    """One evaluation run: the policy, the environment limits and how the run is driven."""

    model_config = ConfigDict(extra="forbid")

    out_dir: str = Field(description="run folder: results.jsonl, trajectories.jsonl, run.json, summary")
    policy: str = Field(description="registered policy backend name")
    policy_kwargs: dict[str, Any] = Field(default_factory=dict, description="the backend's parameters")
    mode: Literal["active", "passive"] = Field("active", description="multi-turn episodes or one turn")
    limits: dict[str, Any] = Field(default_factory=dict, description="EnvLimits fields")
    max_turns: int | None = Field(None, ge=1, description="turn budget K; default: limits.max_turns")
    temperature: float | None = Field(0.0, description="decoding temperature, when the backend takes one")
    seed: int | None = Field(0, description="episode seed; the policy's seed when it takes one")
    workers: int = Field(1, ge=1, description="threads, one environment and one policy each")
    threads: int | None = Field(
        None, ge=1, description="torch CPU threads (null: torch's default); not in the fingerprint"
    )
    decode_threads: int = Field(
        1,
        ge=0,
        description="threads per video decoder (EnvLimits.decode_threads): 1, the workers being the "
        "parallelism; 0 lets the decoder choose; not in the fingerprint",
    )
    media_root: str | None = Field(
        None,
        description="folder the environment holds every media open to (EnvLimits.media_root): the loaded "
        "dataset's media_root, re-checked when each file is opened; null: not confined; not in the fingerprint",
    )
    follow_links_outside_media_root: bool = Field(
        False, description="with media_root, links inside it may lead outside it; not in the fingerprint"
    )
    passive: PassiveConfig = Field(default_factory=PassiveConfig)
    retry_failed: bool = Field(False, description="rerun tasks whose row is a media or policy failure")
    max_consecutive_policy_errors: int = Field(
        10, ge=0, description="stop after this many in a row (0: never)"
    )
    progress: bool = Field(True, description="show a progress bar")
    allow_config_change: bool = Field(False, description="resume into a folder made with other settings")
    fingerprint_extra: dict[str, Any] = Field(default_factory=dict, description="e.g. the benchmark preset")
    protocol: ProtocolConfig = Field(
        default_factory=ProtocolConfig, description="decoding and budget protocol"
    )
    samples: int = Field(1, ge=1, description="sampled runs per question (mean with a CI, and pass@k)")

    @model_validator(mode="after")
    def _samples_need_sampling(self) -> EvalConfig:
        if self.samples > 1 and self.temperature == 0:
            raise ValueError(
                f"samples={self.samples} needs sampled decoding, but the temperature is 0 (the runs would be "
                "the same): use protocol=official (temperature 1.0) or a protocol with a temperature above 0"
            )
        return self

    @field_validator("limits")
    @classmethod
    def _valid_limits(cls, limits: dict[str, Any]) -> dict[str, Any]:
        EnvLimits(**limits)  # an unknown key or a value out of range fails here, before any task runs
        if "decode_threads" in limits:
            raise ValueError("decode_threads is a run setting: write decode_threads=N, not in the limits")
        return limits

    def env_limits(self) -> EnvLimits:
        """The validated environment limits of this run (with its ``decode_threads`` and, when set, its
        ``media_root``)."""
        confine = {}
        if self.media_root is not None:
            confine = {
                "media_root": self.media_root,
                "follow_links_outside_media_root": self.follow_links_outside_media_root,
            }
        return EnvLimits(**{**self.limits, "decode_threads": self.decode_threads, **confine})

    def turn_budget(self) -> int:
        return self.max_turns or self.env_limits().max_turns

    def task_turn_budget(self, task: Task) -> int | None:
        """The turn budget of ``task``: scaled by its media's length under the protocol, else ``max_turns``."""
        if self.protocol.turns_by_duration is None:
            return self.max_turns
        return turn_budget_for(task, self.turn_budget(), self.protocol.turns_by_duration)

    def fingerprint(self) -> dict[str, Any]:
        """Everything that changes the numbers (not workers, paths, progress bars, secrets, or where the
        model server is: ``DEPLOYMENT_KWARGS``)."""
        kwargs = self.policy_kwargs.items()
        return {
            "policy": self.policy,
            "policy_kwargs": {
                k: v for k, v in kwargs if not SECRET_KEY.search(k) and k not in DEPLOYMENT_KWARGS
            },
            "mode": self.mode,
            "limits": fingerprint_limits(self.env_limits()),
            "max_turns": self.max_turns,
            "temperature": self.temperature,
            "seed": self.seed,
            "passive": self.passive.model_dump() if self.mode == "passive" else None,
            **self.fingerprint_extra,
            # only when not the defaults, so folders made before protocols and samples keep their fingerprint
            **({"protocol": self.protocol.fingerprint()} if self.protocol.fingerprint() else {}),
            **({"samples": self.samples} if self.samples > 1 else {}),
        }


def fingerprint_limits(limits: EnvLimits) -> dict[str, Any]:
    """The limits that change the numbers: not the decoder nor its threads, nor where media may be read
    from (``media_root``, a path of this machine), and the media access options only when set (so
    folders made before those options existed still resume)."""
    unset = {name for name in ("allow_protocols", "allow_demuxers") if not getattr(limits, name)}
    where = {"media_root", "follow_links_outside_media_root"}
    return limits.model_dump(exclude={"backend", "decode_threads", *where, *unset})


class FrozenPresetError(ValueError):
    """A command-line override changes a frozen preset field."""


def check_frozen(overrides: list[str] | None, unfreeze: bool = False) -> list[str]:
    """The ``benchmark.*`` overrides that would change a frozen preset; raise unless ``unfreeze``."""
    changed = []
    for item in overrides or []:
        key = item.split("=", 1)[0].lstrip("+~")
        if key.startswith("protocol."):  # choosing a protocol is fine; editing one is like editing a preset
            changed.append(item)
        elif key.startswith("benchmark.") and not any(key == u or key.startswith(u + ".") for u in UNFROZEN):
            changed.append(item)
    if changed and not unfreeze:
        raise FrozenPresetError(
            f"benchmark presets and protocols are frozen; these overrides change one: {', '.join(changed)} "
            "(add unfreeze=true to run anyway; the numbers are then not the preset's)"
        )
    return changed


def check_decoding(cfg: Any) -> None:
    """Refuse a policy temperature other than the run's (the protocol's, else the preset's): it would
    bypass the frozen settings."""
    t = (cfg.policy.get("kwargs") or {}).get("temperature")
    preset = (cfg.get("protocol") or {}).get("temperature")
    if preset is None:
        preset = cfg.benchmark.get("temperature")
    if t is not None and preset is not None and float(t) != float(preset) and not cfg.get("unfreeze"):
        raise FrozenPresetError(
            f"policy.kwargs.temperature={t} differs from the run's decoding temperature {preset} "
            "(add unfreeze=true to run anyway)"
        )


def to_plain(node: Any) -> Any:
    """A hydra/omegaconf node as plain Python containers (anything else unchanged)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(node, DictConfig | ListConfig):
        return OmegaConf.to_container(node, resolve=True)
    return node


def judge_config(cfg: Any) -> dict[str, Any] | None:
    """The ``ff`` judge's settings (``judge.kind: auto`` takes the preset's), or None for no judge."""
    j = dict(to_plain(cfg.get("judge")) or {})
    kind = j.get("kind") or "auto"
    if kind == "auto":
        kind = cfg.benchmark.get("judge") or "none"
    if kind == "none":
        return None
    if kind == "exact":
        return {"kind": "exact"}
    return {"kind": kind, **{k: v for k, v in j.items() if k != "kind" and v is not None}}


def _passive_config(cfg: Any) -> PassiveConfig:
    """``passive.*`` with the frame budget resolved: given, matched to an active run, or the preset's."""
    fields = {k: v for k, v in (to_plain(cfg.get("passive")) or {}).items() if v is not None}
    match_run = fields.pop("match_run", None)
    if cfg.get("mode") == "passive" and "num_frames" not in fields:
        if match_run:
            from omniagent.eval.passive import matched_frame_budget

            p = Path(str(match_run))
            fields["num_frames"] = matched_frame_budget(p / RESULTS if p.is_dir() else p)
        elif cfg.benchmark.get("passive_frames") is not None:
            fields["num_frames"] = int(cfg.benchmark.passive_frames)
    return PassiveConfig.model_validate(fields)


def _fingerprint_extra(cfg: Any) -> dict[str, Any]:
    bench = to_plain(cfg.benchmark) or {}
    return {
        "benchmark": {
            k: v for k, v in bench.items() if k not in ("annotations", "media_root", "dataset_kwargs")
        },
        "judge": {k: v for k, v in (judge_config(cfg) or {}).items() if not SECRET_KEY.search(k)} or None,
    }


def eval_config_from(
    cfg: Any, *, out_dir: str | None = None, max_turns: int | None = None, seed: int | None = None
) -> EvalConfig:
    """The :class:`EvalConfig` a hydra config describes (``out_dir``/``max_turns``/``seed`` override).

    Only keys present in the config are passed on: a key the config lacks takes the model's default.
    """
    b = cfg.benchmark
    protocol = ProtocolConfig.model_validate(to_plain(cfg.get("protocol")) or {})
    fields: dict[str, Any] = {k: to_plain(cfg[k]) for k in _RUN_KEYS if cfg.get(k) is not None}
    fields.update(
        out_dir=str(out_dir or cfg.out_dir),
        policy=cfg.policy.name,
        policy_kwargs=dict(to_plain(cfg.policy.get("kwargs")) or {}),
        limits={**(to_plain(b.get("limits")) or {}), **protocol.limits},
        passive=_passive_config(cfg),
        fingerprint_extra=_fingerprint_extra(cfg),
        protocol=protocol,
    )
    if "temperature" in b:
        fields["temperature"] = b.temperature
    if protocol.temperature is not None:
        fields["temperature"] = protocol.temperature
    k = max_turns if max_turns is not None else (protocol.max_turns or b.get("max_turns"))
    if k is not None:
        fields["max_turns"] = int(k)
    if seed is not None:
        fields["seed"] = seed
    return EvalConfig.model_validate(fields)
