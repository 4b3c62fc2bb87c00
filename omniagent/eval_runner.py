"""The evaluation runner behind ``scripts/eval.py`` and ``scripts/turn_scaling.py``.

:func:`run_eval` plays every task with a policy backend (active episodes, or the passive one-turn
baseline), on a thread pool with one environment and one policy per worker, and appends each
finished task to ``results.jsonl`` (one row per task) and its full trajectory to
``trajectories.jsonl``. Each line is written with one ``write`` + fsync, trajectory first and row
last, so the row is the commit marker:

- a rerun skips every id with a row and never writes a second row for it;
- a torn last line (a kill mid-write) is cut off before appending, and a trajectory without a row
  (a kill between the two writes) is dropped, so nothing is duplicated and nothing half-written
  survives;
- a media error (unusable file) or a policy error (dead server, garbage) is a ``failed`` row and
  the run moves on; an unexpected exception is an ``error`` row, retried by the next run.

A judge that cannot be reached (``ff`` tasks) stops the run with :class:`JudgeError`: a task is
never scored 0 because the judge was down. ``run.json`` holds the run's config fingerprint; a rerun
with a different config into the same folder is refused, so one folder never mixes settings.
"""

from __future__ import annotations

import inspect
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from envs.env import EnvLimits, OmniVideoEnv
from envs.errors import MediaError
from envs.tasks import Task
from omniagent.episode import EpisodeInterrupted, run_episode
from omniagent.eval_results import (
    RESULTS,
    TRAJECTORIES,
    _check_fingerprint,
    _error_row,
    _prepare_resume,
    result_row,
)
from omniagent.judges import JudgeError, _wrap_judge
from omniagent.passive import PassiveConfig, run_passive_episode
from omniagent.policy import POLICIES, Policy, make_policy
from omniagent.trajectory import Trajectory, append_jsonl

_SECRET = re.compile(r"key|token|secret|password", re.I)  # never written to run.json


class EvalConfig(BaseModel):
    out_dir: str
    policy: str
    policy_kwargs: dict[str, Any] = Field(default_factory=dict)
    mode: Literal["active", "passive"] = "active"
    limits: dict[str, Any] = Field(default_factory=dict)
    max_turns: int | None = Field(None, ge=1, description="turn budget K; default: limits.max_turns")
    temperature: float | None = 0.0
    seed: int | None = 0
    workers: int = Field(1, ge=1)
    passive: PassiveConfig = Field(default_factory=PassiveConfig)
    retry_failed: bool = False
    max_consecutive_policy_errors: int = Field(
        10, ge=0, description="stop after this many in a row (0: never)"
    )
    progress: bool = True
    allow_config_change: bool = False
    fingerprint_extra: dict[str, Any] = Field(default_factory=dict, description="e.g. the benchmark preset")

    def fingerprint(self) -> dict[str, Any]:
        """Everything that changes the numbers (not workers, paths or progress bars)."""
        return {
            "policy": self.policy,
            "policy_kwargs": {k: v for k, v in self.policy_kwargs.items() if not _SECRET.search(k)},
            "mode": self.mode,
            "limits": EnvLimits(**self.limits).model_dump(exclude={"audio_cache_dir", "backend"}),
            "max_turns": self.max_turns,
            "temperature": self.temperature,
            "seed": self.seed,
            "passive": self.passive.model_dump() if self.mode == "passive" else None,
            **self.fingerprint_extra,
        }


class PolicyStreakError(RuntimeError):
    """The policy failed on many tasks in a row (a dead server): the run stops instead of failing them all."""


class RunReport(BaseModel):
    out_dir: str
    total: int
    skipped: int  # already done before this run
    ran: int
    failed: int
    errors: int
    seconds: float
    results: str
    trajectories: str


def policy_kwargs_for(
    name: str, kwargs: dict[str, Any], temperature: float | None, seed: int | None
) -> dict[str, Any]:
    """``kwargs`` plus ``temperature`` / ``seed`` when the backend's constructor takes them."""
    import omniagent.backends  # noqa: F401  (fills the registry)

    out = dict(kwargs)
    factory = POLICIES.get(name)
    if factory is None:
        return out
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return out
    for key, value in (("temperature", temperature), ("seed", seed)):
        if value is not None and key not in out and key in params:
            out[key] = value
    return out


def _policy_kwargs_with_limits(ecfg: EvalConfig) -> dict[str, Any]:
    kwargs = policy_kwargs_for(ecfg.policy, ecfg.policy_kwargs, ecfg.temperature, ecfg.seed)
    factory = POLICIES.get(ecfg.policy)
    try:
        params = inspect.signature(factory).parameters if factory else {}
    except (TypeError, ValueError):
        params = {}
    if "limits" in params and "limits" not in kwargs:
        kwargs["limits"] = dict(ecfg.limits)
    return kwargs


class _Worker:
    """One environment and one policy, used by one thread at a time."""

    def __init__(self, cfg: EvalConfig, judge: Any, factory: Callable[[], Policy]) -> None:
        self.env = OmniVideoEnv(limits=cfg.limits, judge=judge)
        self.policy = factory()

    def close(self) -> None:
        self.env.close()
        self.policy.close()


def _media_error_traj(task: Task, cfg: EvalConfig, exc: MediaError, policy: Policy) -> Trajectory:
    return Trajectory(
        id=task.id,
        media=task.media,
        question=task.question,
        task_type=task.task_type,
        choices=task.choices,
        ground_truth=task.answer,
        max_turns=cfg.max_turns or EnvLimits(**cfg.limits).max_turns,
        policy=getattr(policy, "name", type(policy).__name__),
        stop_reason="media_error",
        error=str(exc),
        meta={"error_code": exc.code},
    )


def run_eval(
    tasks: list[Task],
    cfg: EvalConfig,
    *,
    judge: Any = None,
    policy_factory: Callable[[], Policy] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> RunReport:
    """Run every task not yet in ``cfg.out_dir/results.jsonl``; see the module docstring.

    ``judge``: a callable ``(question, reference, prediction) -> score`` for ``ff`` tasks (see
    :func:`make_judge`). ``policy_factory`` overrides building the policy from the registry (one
    call per worker). Raises :class:`JudgeError` (judge down), ``KeyboardInterrupt`` (rows of
    finished tasks are kept) and :class:`ConfigMismatchError`.
    """
    t_start = time.perf_counter()
    ids = [t.id for t in tasks]
    dup = [i for i, n in Counter(ids).items() if n > 1]
    if dup:
        raise ValueError(f"duplicate task ids: {', '.join(dup[:10])}")
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_fingerprint(out, cfg)
    done = _prepare_resume(out, cfg.retry_failed)
    todo = [t for t in tasks if t.id not in done]
    if policy_factory is None:
        kwargs = _policy_kwargs_with_limits(cfg)

        def policy_factory() -> Policy:
            return make_policy(cfg.policy, **kwargs)

    wrapped_judge = _wrap_judge(judge)
    local = threading.local()
    workers: list[_Worker] = []
    lock = threading.Lock()
    counts = Counter()

    def worker() -> _Worker:
        w = getattr(local, "worker", None)
        if w is None:
            w = _Worker(cfg, wrapped_judge, policy_factory)
            local.worker = w
            with lock:
                workers.append(w)
        return w

    def play(task: Task) -> dict[str, Any]:
        started = time.time()
        w = worker()
        try:
            if cfg.mode == "passive":
                traj = run_passive_episode(
                    w.env, w.policy, task.env_options(), cfg.passive, episode_id=task.id, seed=cfg.seed
                )
            else:
                traj = run_episode(
                    w.env, w.policy, task.env_options(cfg.max_turns), episode_id=task.id, seed=cfg.seed
                )
        except MediaError as exc:
            traj = _media_error_traj(task, cfg, exc, w.policy)
        except (KeyboardInterrupt, JudgeError):
            raise
        except Exception as exc:
            row = _error_row(task, cfg, exc, started)
            with lock:
                append_jsonl(out / RESULTS, row)
                counts["error"] += 1
            return row
        row = result_row(task, traj, cfg, started)
        with lock:
            append_jsonl(out / TRAJECTORIES, traj)
            append_jsonl(out / RESULTS, row)
            counts[row["status"]] += 1
        return row

    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(
            total=len(tasks), initial=len(tasks) - len(todo), desc=f"{cfg.policy}/{cfg.mode}", unit="task"
        )
    scored = [done[t.id]["reward"] for t in tasks if t.id in done]
    pool = ThreadPoolExecutor(max_workers=cfg.workers, thread_name_prefix="eval")
    pending: set[Future] = set()
    queue = iter(todo)
    streak = 0
    try:
        # keep at most 2x workers tasks in flight, so an abort leaves little queued work behind
        for task in queue:
            pending.add(pool.submit(play, task))
            if len(pending) >= 2 * cfg.workers:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                row = fut.result()  # re-raises KeyboardInterrupt / JudgeError from the worker
                streak = streak + 1 if row.get("error_code") == "policy_error" else 0
                if cfg.max_consecutive_policy_errors and streak >= cfg.max_consecutive_policy_errors:
                    raise PolicyStreakError(
                        f"the policy failed {streak} tasks in a row (last: {row.get('error')}); stopping. "
                        "Fix the backend, then rerun with retry_failed=true to redo the failed tasks"
                    )
                scored.append(row["reward"])
                if on_row is not None:
                    on_row(row)
                if bar is not None:
                    bar.set_postfix(score=f"{sum(scored) / len(scored):.3f}", refresh=False)
                    bar.update(1)
                nxt = next(queue, None)
                if nxt is not None:
                    pending.add(pool.submit(play, nxt))
    except BaseException as exc:
        for fut in pending:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)  # running episodes finish and are recorded
        if isinstance(exc, EpisodeInterrupted):
            raise KeyboardInterrupt("evaluation interrupted; rerun to resume") from exc
        raise
    finally:
        pool.shutdown(wait=True)
        if bar is not None:
            bar.close()
        for w in workers:
            w.close()
    return RunReport(
        out_dir=str(out),
        total=len(tasks),
        skipped=len(tasks) - len(todo),
        ran=len(todo),
        failed=counts["failed"],
        errors=counts["error"],
        seconds=round(time.perf_counter() - t_start, 3),
        results=str(out / RESULTS),
        trajectories=str(out / TRAJECTORIES),
    )
