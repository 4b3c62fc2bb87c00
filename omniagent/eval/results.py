"""The files of an evaluation folder: ``results.jsonl`` rows, ``trajectories.jsonl`` and the ``run.json``
config fingerprint. Resuming (torn lines, orphan trajectories, retried rows) is
:class:`omniagent.eval.batch.ResumableBatch`'s job."""

from __future__ import annotations

import hashlib
import json
import os
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

from envs.jsonl import read_jsonl, write_atomic
from envs.tasks import Task
from omniagent.eval.accounting import usage_fields
from omniagent.trajectory import Trajectory

RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories.jsonl"
RUN_META = "run.json"
# Policy arguments that say where and how patiently to reach a server, not what it computes: left out of
# the fingerprint, so shards on other machines (other endpoints) merge and a run resumes against new ones.
DEPLOYMENT_KWARGS = ("base_url", "timeout", "retries", "cooldown")


class RunSettings(Protocol):
    """What the rows and the fingerprint need of a run's config (:class:`omniagent.eval.config.EvalConfig`
    has it; this module does not import the config, so the two never import each other)."""

    mode: str
    policy: str
    max_turns: int | None
    allow_config_change: bool

    def fingerprint(self) -> dict[str, Any]: ...


class ConfigMismatchError(RuntimeError):
    """The output folder holds a run made with different settings."""


def _task_fields(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "source": task.source,
        "split": task.split,
        "task_type": task.task_type,
        "question": task.question,
        "choices": task.choices,
        "ground_truth": task.answer,
        "evidence": task.evidence,
        "media": task.media,
        "category": task.extra.get("category") or task.extra.get("template"),
        "duration_label": task.extra.get("duration_label"),
        # samples=k: which question and which of its samples (omniagent/eval/samples.py)
        **(
            {"base_id": task.extra["base_id"], "sample": task.extra["sample"]}
            if "sample" in task.extra
            else {}
        ),
    }


def result_row(task: Task, traj: Trajectory, cfg: RunSettings, started: float) -> dict[str, Any]:
    """One ``results.jsonl`` row: the task, what the episode did, and what it cost."""
    media_info = traj.meta.get("media_info") or {}
    turn_errors = Counter(t.error for t in traj.turns if t.error)
    actions = Counter(t.action_type or "invalid" for t in traj.turns)
    ctx = [t.context_tokens for t in traj.turns if t.context_tokens is not None]
    comp = [t.completion_tokens for t in traj.turns if t.completion_tokens is not None]
    if traj.stop_reason in ("media_error", "policy_error"):
        status = "failed"
    else:
        status = "ok"
    error_code = None
    if traj.stop_reason == "media_error":
        error_code = traj.meta.get("error_code", "media_error")
    elif traj.stop_reason == "policy_error":
        error_code = "policy_error"
    return {
        **_task_fields(task),
        "duration": task.duration or media_info.get("duration"),
        "status": status,
        "mode": cfg.mode,
        "policy": cfg.policy,
        "prediction": traj.answer,
        "answered": traj.stop_reason == "answered",
        "reward": float(traj.reward),
        "reward_available": bool(traj.meta.get("reward_available", False)),
        "stop_reason": traj.stop_reason,
        "error_code": error_code,
        "error": traj.error,
        "max_turns": traj.max_turns,
        "turns": traj.num_turns,
        "frames_used": traj.frames_used,
        "audio_seconds_used": traj.audio_seconds_used,
        "action_counts": dict(actions),
        "turn_error_codes": dict(turn_errors),
        "context_tokens": ctx,
        "context_tokens_max": max(ctx) if ctx else None,
        "context_tokens_mean": (sum(ctx) / len(ctx)) if ctx else None,
        "completion_tokens": sum(comp) if comp else None,
        "model_seconds": round(traj.model_seconds, 4),
        "env_seconds": round(traj.env_seconds, 4),
        "wall_seconds": round(traj.wall_seconds, 4),
        **usage_fields(traj, int(traj.meta.get("tokens_counted_turns") or 0)),
        "started_at": round(started, 3),
        "finished_at": round(time.time(), 3),
    }


def error_row(task: Task, cfg: RunSettings, exc: BaseException, started: float) -> dict[str, Any]:
    return {
        **_task_fields(task),
        "duration": task.duration,
        "status": "error",
        "mode": cfg.mode,
        "policy": cfg.policy,
        "prediction": None,
        "answered": False,
        "reward": 0.0,
        "reward_available": False,
        "stop_reason": None,
        "error_code": getattr(exc, "code", None) or f"exception:{type(exc).__name__}",
        "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:],
        "max_turns": cfg.max_turns,
        "turns": 0,
        "frames_used": 0,
        "audio_seconds_used": 0.0,
        "action_counts": {},
        "turn_error_codes": {},
        "context_tokens": [],
        "context_tokens_max": None,
        "context_tokens_mean": None,
        "completion_tokens": None,
        "model_seconds": 0.0,
        "env_seconds": 0.0,
        "wall_seconds": round(time.time() - started, 4),
        "prompt_tokens": None,
        "tokens_counted_turns": 0,
        "clip_seconds": 0.0,
        "started_at": round(started, 3),
        "finished_at": round(time.time(), 3),
    }


def load_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a results file (a torn last line is ignored), last row per id kept."""
    rows: dict[str, dict[str, Any]] = {}
    for r in read_jsonl(path, torn_tail=True, missing_ok=True):
        rows[r["id"]] = r
    return list(rows.values())


def fingerprint_digest(cfg: RunSettings) -> str:
    """A short digest of everything that changes a run's numbers (:meth:`EvalConfig.fingerprint`)."""
    fp = json.loads(json.dumps(cfg.fingerprint(), sort_keys=True, default=str))
    return hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _without_deployment(config: dict[str, Any]) -> dict[str, Any]:
    kwargs = {k: v for k, v in (config.get("policy_kwargs") or {}).items() if k not in DEPLOYMENT_KWARGS}
    return {**config, "policy_kwargs": kwargs} if "policy_kwargs" in config else config


def check_fingerprint(out: Path, cfg: RunSettings) -> dict[str, Any]:
    meta_path = out / RUN_META
    fp = json.loads(json.dumps(cfg.fingerprint(), sort_keys=True, default=str))
    digest = fingerprint_digest(cfg)
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
        if old.get("digest") != digest and _without_deployment(old.get("config", {})) == fp:
            old["digest"] = digest  # written before endpoints were left out of the fingerprint: same run
        if old.get("digest") != digest and not cfg.allow_config_change:
            changed = sorted(
                k for k in set(fp) | set(old.get("config", {})) if fp.get(k) != old.get("config", {}).get(k)
            )
            raise ConfigMismatchError(
                f"{out} holds a run with other settings (changed: {', '.join(changed)}); use another "
                "output folder, or allow_config_change=true to mix them knowingly"
            )
    meta = {"digest": digest, "config": fp, "updated_at": time.time()}
    write_atomic(meta_path, json.dumps(meta, indent=1, default=str))
    return meta
