"""Evaluation driven by a composed hydra config (``scripts/eval.py``, ``scripts/turn_scaling.py``),
and the public API of the evaluation runner.

The runner (:func:`run_eval`, one row per task, resume after a kill) is :mod:`omniagent.eval_runner`;
the rows and the resume bookkeeping are :mod:`omniagent.eval_results`, the ``ff`` judges
:mod:`omniagent.judges`. Their public names are re-exported here. This module adds the config glue:
frozen benchmark presets (:func:`check_frozen`, :func:`check_decoding`), tasks and judge from the
config, :func:`eval_config_from`, and :func:`run_one` / :func:`run_from_config` (run, summarise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envs.tasks import Task
from omniagent.eval_results import RESULTS, ConfigMismatchError, load_rows, result_row
from omniagent.eval_results import RUN_META as RUN_META
from omniagent.eval_results import TRAJECTORIES as TRAJECTORIES
from omniagent.eval_runner import EvalConfig, PolicyStreakError, RunReport, policy_kwargs_for, run_eval
from omniagent.judges import JUDGE_PROMPT as JUDGE_PROMPT
from omniagent.judges import ExactMatchJudge, JudgeError, OpenAIJudge, make_judge
from omniagent.passive import PassiveConfig
from omniagent.trajectory import write_atomic

__all__ = [
    "ConfigMismatchError",
    "EvalConfig",
    "ExactMatchJudge",
    "JudgeError",
    "OpenAIJudge",
    "PolicyStreakError",
    "RunReport",
    "load_rows",
    "make_judge",
    "policy_kwargs_for",
    "result_row",
    "run_eval",
]


# Overrides of these preset fields do not change what is measured (where files are, which decoder).
UNFROZEN = (
    "benchmark.annotations",
    "benchmark.media_root",
    "benchmark.dataset_kwargs.out_dir",
    "benchmark.limits.audio_cache_dir",
    "benchmark.limits.backend",
)


class FrozenPresetError(ValueError):
    """A command-line override changes a frozen preset field."""


def check_frozen(overrides: list[str] | None, unfreeze: bool = False) -> list[str]:
    """The ``benchmark.*`` overrides that would change a frozen preset; raise unless ``unfreeze``."""
    changed = []
    for item in overrides or []:
        key = item.split("=", 1)[0].lstrip("+~")
        if key.startswith("benchmark.") and not any(key == u or key.startswith(u + ".") for u in UNFROZEN):
            changed.append(item)
    if changed and not unfreeze:
        raise FrozenPresetError(
            f"benchmark presets are frozen; these overrides change one: {', '.join(changed)} "
            "(add unfreeze=true to run anyway; the numbers are then not the preset's)"
        )
    return changed


def check_decoding(cfg: Any) -> None:
    """Refuse a policy temperature other than the preset's (it would bypass the frozen preset)."""
    t = (cfg.policy.get("kwargs") or {}).get("temperature")
    preset = cfg.benchmark.get("temperature", 0.0)
    if t is not None and float(t) != float(preset) and not cfg.get("unfreeze", False):
        raise FrozenPresetError(
            f"policy.kwargs.temperature={t} differs from the preset's decoding temperature {preset} "
            "(add unfreeze=true to run anyway)"
        )


def to_plain(node: Any) -> Any:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(node, DictConfig | ListConfig):
        return OmegaConf.to_container(node, resolve=True)
    return node


def load_tasks_from_config(cfg: Any, console: Any = None) -> tuple[list[Task], Any]:
    """The preset's tasks (``cfg.benchmark``, ``cfg.limit``); missing media are printed and skipped."""
    from omniagent.datasets import load_dataset

    b = cfg.benchmark
    loaded = load_dataset(
        b.dataset,
        to_plain(b.annotations),
        to_plain(b.media_root),
        limit=cfg.get("limit"),
        task_types=to_plain(b.get("task_types")),
        **(to_plain(b.get("dataset_kwargs")) or {}),
    )
    if console is not None:
        console.print(loaded.summary())
        for m in loaded.missing[:10]:
            console.print(f"  [yellow]missing media[/yellow] {m}")
        if len(loaded.missing) > 10:
            console.print(f"  ... and {len(loaded.missing) - 10} more")
    return loaded.tasks, loaded


def _train_tasks(spec: Any) -> list[Task]:
    from omniagent.datasets import load_dataset

    spec = to_plain(spec)
    if isinstance(spec, str):
        return load_dataset("tasks", spec, check=False).tasks
    spec = dict(spec)
    return load_dataset(
        spec.pop("dataset", "tasks"),
        spec.pop("annotations", None),
        spec.pop("media_root", None),
        check=False,
        **spec.pop("kwargs", {}),
        **spec,
    ).tasks


def judge_config(cfg: Any) -> dict[str, Any] | None:
    j = dict(to_plain(cfg.get("judge")) or {})
    kind = j.get("kind", "auto")
    if kind == "auto":
        kind = cfg.benchmark.get("judge", "none") or "none"
    if kind in ("none", None):
        return None
    if kind == "exact":
        return {"kind": "exact"}
    return {"kind": kind, **{k: v for k, v in j.items() if k != "kind" and v is not None}}


def eval_config_from(
    cfg: Any, *, out_dir: str | None = None, max_turns: int | None = None, seed: int | None = None
) -> EvalConfig:
    """The :class:`EvalConfig` a hydra config describes (``out_dir``/``max_turns``/``seed`` override)."""
    b = cfg.benchmark
    limits = dict(to_plain(b.get("limits")) or {})
    mode = cfg.get("mode", "active")
    passive_cfg = dict(to_plain(cfg.get("passive")) or {})
    num_frames = passive_cfg.pop("num_frames", None)
    match_run = passive_cfg.pop("match_run", None)
    if mode == "passive" and num_frames is None:
        if match_run:
            from omniagent.passive import matched_frame_budget

            p = Path(str(match_run))
            num_frames = matched_frame_budget(p / RESULTS if p.is_dir() else p)
        else:
            num_frames = int(b.get("passive_frames", 32))
    passive = PassiveConfig(num_frames=num_frames or 32, **passive_cfg)
    k = max_turns if max_turns is not None else b.get("max_turns")
    policy_name = cfg.policy.name
    policy_kwargs = dict(to_plain(cfg.policy.get("kwargs")) or {})
    return EvalConfig(
        out_dir=str(out_dir or cfg.out_dir),
        policy=policy_name,
        policy_kwargs=policy_kwargs,
        mode=mode,
        limits=limits,
        max_turns=int(k) if k is not None else None,
        temperature=b.get("temperature", 0.0),
        seed=cfg.get("seed", 0) if seed is None else seed,
        workers=int(cfg.get("workers", 1)),
        passive=passive,
        retry_failed=bool(cfg.get("retry_failed", False)),
        max_consecutive_policy_errors=int(cfg.get("max_consecutive_policy_errors", 10)),
        progress=bool(cfg.get("progress", True)),
        allow_config_change=bool(cfg.get("allow_config_change", False)),
        fingerprint_extra={
            "benchmark": {
                k2: v
                for k2, v in (to_plain(b) or {}).items()
                if k2 not in ("annotations", "media_root", "dataset_kwargs")
            },
            "judge": {k2: v for k2, v in (judge_config(cfg) or {}).items() if k2 != "api_key"} or None,
        },
    )


def run_one(tasks: list[Task], ecfg: EvalConfig, *, judge: Any, cfg: Any, name: str,
            console: Any = None) -> dict[str, Any]:  # fmt: skip
    """Run (or resume) one eval into ``ecfg.out_dir``, then write and return its summary."""
    from omniagent.summary import print_summary, summarize, write_summary

    report = run_eval(tasks, ecfg, judge=judge)
    ids = {t.id for t in tasks}
    rows = [r for r in load_rows(Path(ecfg.out_dir) / RESULTS) if r["id"] in ids]
    s_cfg = to_plain(cfg.get("summary")) or {}
    summary = summarize(
        rows,
        duration_bins=to_plain(cfg.benchmark.get("duration_bins")) or (60.0, 600.0, 1800.0, 3600.0),
        n_boot=int(s_cfg.get("n_boot", 1000)),
        seed=int(s_cfg.get("seed", 0)),
        name=name,
    )
    summary["run"] = {
        **report.model_dump(),
        "max_turns": ecfg.max_turns,
        "seed": ecfg.seed,
        "mode": ecfg.mode,
    }
    if ecfg.mode == "passive":
        summary["run"]["passive_num_frames"] = ecfg.passive.num_frames
    write_summary(summary, ecfg.out_dir)
    if console is not None:
        print_summary(summary, console)
    return summary


def run_from_config(cfg: Any, overrides: list[str] | None = None, console: Any = None) -> dict[str, Any]:
    """Everything ``scripts/eval.py`` does with its composed hydra config; returns the summary."""
    from omniagent.overlap import guard

    check_frozen(overrides, bool(cfg.get("unfreeze", False)))
    check_decoding(cfg)
    tasks, loaded = load_tasks_from_config(cfg, console)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if loaded.missing:
        write_atomic(
            out / "missing_media.jsonl", "".join(json.dumps(m.__dict__) + "\n" for m in loaded.missing)
        )
    og = cfg.get("overlap_guard") or {}
    if og.get("train_set"):
        printer = console.print if console is not None else print
        guard(
            _train_tasks(og["train_set"]),
            tasks,
            allow=bool(og.get("allow_overlap", False)),
            fail_on=tuple(to_plain(og.get("fail_on")) or ("media", "pair")),
            printer=printer,
        )
    # the judge is checked (and must be up) only when there is something for it to score
    judge = make_judge(judge_config(cfg)) if any(t.task_type == "ff" for t in tasks) else None
    ecfg = eval_config_from(cfg)
    return run_one(
        tasks, ecfg, judge=judge, cfg=cfg, name=str(cfg.get("run_name") or out.name), console=console
    )
