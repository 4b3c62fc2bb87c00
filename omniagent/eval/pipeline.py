"""What ``scripts/eval.py`` does with its composed hydra config: tasks, overlap guard, judge, run, summary.

:func:`run_from_config` is the whole command; :func:`run_one` runs (or resumes) one run folder and
writes its summary, and is shared with ``scripts/turn_scaling.py``. With ``shard=I/N`` (or ``auto``)
the command runs its shard's tasks (:mod:`omniagent.eval.shards`) into ``{out_dir}/shard-I-of-N``,
with a ``shard.json`` manifest; ``omniagent-merge-runs`` joins the shard folders afterwards.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from envs.jsonl import write_jsonl
from envs.tasks import Task, circular_tasks
from omniagent.eval.config import (
    EvalConfig,
    check_decoding,
    check_frozen,
    eval_config_from,
    judge_config,
    to_plain,
)
from omniagent.eval.judges import make_judge
from omniagent.eval.results import RESULTS, fingerprint_digest, load_rows
from omniagent.eval.runner import run_eval
from omniagent.eval.samples import sample_tasks
from omniagent.eval.shards import Shard, write_manifest

__all__ = ["load_tasks_from_config", "run_from_config", "run_one", "train_tasks"]


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
        **({"progress": bool(cfg.get("progress"))} | (to_plain(b.get("dataset_kwargs")) or {})),
    )
    if console is not None:
        console.print(loaded.summary())
        for m in loaded.missing[:10]:
            console.print(f"  [yellow]missing media[/yellow] {m}")
        if len(loaded.missing) > 10:
            console.print(f"  ... and {len(loaded.missing) - 10} more")
    return loaded.tasks, loaded


def train_tasks(spec: Any) -> list[Task]:
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


def summary_options(cfg: Any) -> dict[str, Any]:
    """The bootstrap and duration-bin settings of the run's summary (``summary.*``, the preset's bins)."""
    options = {k: v for k, v in (to_plain(cfg.get("summary")) or {}).items() if v is not None}
    if cfg.benchmark.get("duration_bins") is not None:  # else summarize's own default bins
        options["duration_bins"] = to_plain(cfg.benchmark.duration_bins)
    return options


def run_one(tasks: list[Task], ecfg: EvalConfig, *, judge: Any, cfg: Any, name: str,
            console: Any = None) -> dict[str, Any]:  # fmt: skip
    """Run (or resume) one eval into ``ecfg.out_dir``, then write and return its summary."""
    from omniagent.eval.headline import headline
    from omniagent.eval.summary import print_eval_summary, summarize, write_summary

    report = run_eval(tasks, ecfg, judge=judge)
    ids = {t.id for t in tasks}
    rows = [r for r in load_rows(Path(ecfg.out_dir) / RESULTS) if r["id"] in ids]
    summary = summarize(rows, name=name, **summary_options(cfg))
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
        print_eval_summary(summary, console)
        for url, c in (report.endpoints or {}).items():
            health = "up" if c["up"] else f"DOWN ({c['last_error']})"
            console.print(
                f"endpoint {url}: {c['requests']} request(s), {c['ok']} ok, {c['failed']} failed, "
                f"taken out {c['times_down']} time(s); {health}",
                highlight=False,
            )
        console.print(
            f"wrote {ecfg.out_dir} (results.jsonl, trajectories.jsonl, summary.json, summary.csv)",
            highlight=False,
            soft_wrap=True,
        )
        console.print(headline(summary), highlight=False, soft_wrap=True)
    return summary


def _shard_tasks(
    cfg: Any, tasks: list[Task], all_keys: list[str], ecfg: EvalConfig, name: str, console: Any
) -> tuple[list[Task], EvalConfig]:
    """This process's shard of ``tasks`` and its run folder (``shard=null``: all of them, unchanged)."""
    shard = Shard.parse(cfg.get("shard"))
    if shard is None:
        return tasks, ecfg
    mine = shard.select(tasks, key=lambda t: t.id)
    folder = Path(ecfg.out_dir) / shard.name
    folder.mkdir(parents=True, exist_ok=True)
    ecfg = ecfg.model_copy(update={"out_dir": str(folder)})
    extra = {"summary": {"name": name, **summary_options(cfg)}}
    write_manifest(
        folder, shard, expected=len(mine), all_keys=all_keys, settings=fingerprint_digest(ecfg), extra=extra
    )
    say = console.print if console is not None else print
    say(
        f"shard {shard.index}/{shard.count} (from {shard.source}): {len(mine)} of {len(tasks)} task(s) -> {folder}"
    )
    return mine, ecfg


def run_from_config(cfg: Any, overrides: list[str] | None = None, console: Any = None) -> dict[str, Any]:
    """Everything ``scripts/eval.py`` does with its composed hydra config; returns the summary."""
    from omniagent.eval.overlap import guard

    check_frozen(overrides, bool(cfg.get("unfreeze")))
    check_decoding(cfg)
    tasks, loaded = load_tasks_from_config(cfg, console)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if loaded.missing:
        write_jsonl(out / "missing_media.jsonl", (asdict(m) for m in loaded.missing))
    og = cfg.get("overlap_guard") or {}
    if og.get("train_set"):
        options: dict[str, Any] = {"allow": bool(og.get("allow_overlap"))}
        if og.get("fail_on") is not None:  # else the guard's own default kinds
            options["fail_on"] = tuple(to_plain(og.fail_on))
        guard(train_tasks(og["train_set"]), tasks, printer=console.print if console else print, **options)
    if cfg.get("circular"):  # every multiple-choice question under each rotation of its choices
        tasks = circular_tasks(tasks)
    ecfg = eval_config_from(cfg).model_copy(update=loaded.confinement())  # the env re-checks media_root
    tasks = sample_tasks(tasks, ecfg.samples)  # samples=k: each question k times, ids ID#s0 ... ID#s{k-1}
    name = str(cfg.get("run_name") or out.name)
    all_keys = [t.id for t in tasks] + [m.task_id for m in loaded.missing]
    tasks, ecfg = _shard_tasks(cfg, tasks, all_keys, ecfg, name, console)
    # the judge is checked (and must be up) only when there is something for it to score
    judge = make_judge(judge_config(cfg)) if any(t.task_type == "ff" for t in tasks) else None
    return run_one(tasks, ecfg, judge=judge, cfg=cfg, name=name, console=console)
