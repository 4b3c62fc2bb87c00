"""The evaluation runner behind ``scripts/eval.py`` and ``scripts/turn_scaling.py``.

:func:`run_eval` plays every task with a policy backend (active episodes, or the passive one-turn
baseline) on a thread pool, and commits each finished task to the run folder through
:class:`omniagent.eval.batch.ResumableBatch`: its trajectory to ``trajectories.jsonl`` first, its
row to ``results.jsonl`` last (the row is the commit marker). So:

- a rerun skips every id with a row and never writes a second row for it; a torn last line or a
  trajectory without a row (a kill between the two writes) is dropped on resume;
- a second process on the same folder is refused (the folder lock names the holder's PID);
- a media error (unusable file) or a policy error (dead server, garbage) is a ``failed`` row and
  the run moves on; an unexpected exception is an ``error`` row, retried by the next run; after
  ``max_consecutive_policy_errors`` policy failures in a row the run stops (:class:`PolicyStreakError`).
  A media error is permanent (``failed``, redone only with ``retry_failed``) unless its code is one of
  :data:`envs.errors.TRANSIENT_MEDIA_CODES` (an I/O error, out of file handles): then it is an
  ``error`` row with that code;
- a full disk stops the run with :class:`envs.jsonl.NoSpaceError` (one line naming the file); the
  log it hit is cut back to its last whole row, so a rerun with space resumes without duplicates.

Every worker's policy is built in the calling thread **before** the worker threads start: model
backends import and load their libraries once, in one thread (transformers' lazy imports are not
thread-safe), and a backend that cannot start fails before any task runs.

A judge that cannot be reached (``ff`` tasks) stops the run with :class:`JudgeError`: a task is
never scored 0 because the judge was down. ``run.json`` holds the run's config fingerprint; a rerun
with a different config into the same folder is refused, so one folder never mixes settings.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from envs.env import OmniVideoEnv
from envs.errors import MediaError
from envs.jsonl import NoSpaceError
from envs.tasks import Task
from omniagent.episode import EpisodeInterrupted, run_episode
from omniagent.eval.accounting import MeteredPolicy
from omniagent.eval.batch import ErrorStreak, ResumableBatch
from omniagent.eval.config import EvalConfig
from omniagent.eval.judges import JudgeError, wrap_judge
from omniagent.eval.passive import run_passive_episode
from omniagent.eval.results import RESULTS, TRAJECTORIES, check_fingerprint, error_row, result_row
from omniagent.eval.samples import episode_seed
from omniagent.policy import Policy, make_policy
from omniagent.trajectory import Trajectory, TurnRecord

__all__ = ["PolicyStreakError", "RunReport", "policy_factory_for", "run_eval"]

log = logging.getLogger(__name__)


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
    endpoints: dict[str, dict[str, Any]] | None = None  # per endpoint of a server backend, this run's counts


def endpoint_stats(policies: list[Any]) -> dict[str, dict[str, Any]] | None:
    """The endpoints' counts and health of a server backend (``endpoint_stats()``), else None."""
    for policy in policies:
        stats = getattr(policy, "endpoint_stats", None)
        if callable(stats):
            return stats()
    return None


def endpoint_delta(
    before: dict[str, dict[str, Any]] | None, after: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]] | None:
    """This run's share of the process-wide endpoint counts (health as it is at the end)."""
    if after is None:
        return None
    counted = ("requests", "ok", "failed", "times_down")
    return {
        url: {k: (v - (before or {}).get(url, {}).get(k, 0) if k in counted else v) for k, v in now.items()}
        for url, now in after.items()
    }


def policy_factory_for(cfg: EvalConfig) -> Callable[[], Policy]:
    """Builds ``cfg.policy`` from the registry; the run's temperature, seed and limits go to backends
    that declare them (:func:`omniagent.policy.make_policy` validates everything else)."""
    shared = {
        "temperature": cfg.temperature,
        "seed": cfg.seed,
        "limits": dict(cfg.limits),
        **cfg.protocol.sampling(),  # top_p, top_k, max_tokens of a protocol that sets them
    }
    shared = {k: v for k, v in shared.items() if v is not None}
    return lambda: make_policy(cfg.policy, shared=shared, **cfg.policy_kwargs)


class _Worker:
    """One environment and one policy, used by one thread at a time."""

    def __init__(self, cfg: EvalConfig, judge: Any, policy: Policy) -> None:
        self.env = OmniVideoEnv(limits=cfg.env_limits(), judge=judge)
        self.policy = MeteredPolicy(policy)  # fills token counts a backend does not report

    def close(self) -> None:
        self.env.close()
        self.policy.close()


def _failed_traj(
    task: Task, cfg: EvalConfig, policy: Policy, exc: Exception, turns: list[TurnRecord], stop: str | None
) -> Trajectory:
    """What a task that failed did: the turns finished before ``exc``, and the error."""
    last = turns[-1] if turns else None
    return Trajectory(
        id=task.id,
        media=task.media,
        question=task.question,
        task_type=task.task_type,
        choices=task.choices,
        ground_truth=task.answer,
        max_turns=cfg.turn_budget(),
        policy=getattr(policy, "name", type(policy).__name__),
        turns=list(turns),
        stop_reason=stop,
        error=str(exc) if stop else f"{type(exc).__name__}: {exc}",
        frames_used=last.frames_used if last else 0,
        audio_seconds_used=last.audio_seconds_used if last else 0.0,
        clip_seconds_used=last.clip_seconds_used if last else 0.0,
        meta={"error_code": getattr(exc, "code", None) or f"exception:{type(exc).__name__}"},
    )


class _Run:
    """One call of :func:`run_eval`: the run folder, the idle workers and the counts."""

    def __init__(self, cfg: EvalConfig, batch: ResumableBatch, workers: list[_Worker]) -> None:
        self.cfg = cfg
        self.batch = batch
        self.workers: list[_Worker] = []
        self.idle: queue.Queue[_Worker] = queue.Queue()
        self.counts: Counter[str] = Counter()
        for w in workers:
            self.add_worker(w)

    def add_worker(self, w: _Worker) -> None:
        self.workers.append(w)
        self.idle.put(w)

    def episode(self, w: _Worker, task: Task, turns: list[TurnRecord]) -> Trajectory:
        """The task's trajectory; each finished turn is also appended to ``turns`` as it happens."""
        cfg = self.cfg
        seed = episode_seed(cfg.seed, task)
        if seed != cfg.seed and hasattr(w.policy, "seed"):  # a sample of a question: its own draw
            w.policy.seed = seed
        if cfg.mode == "passive":
            traj = run_passive_episode(
                w.env, w.policy, task.env_options(), cfg.passive, episode_id=task.id, seed=seed
            )
        else:
            traj = run_episode(
                w.env,
                w.policy,
                task.env_options(cfg.task_turn_budget(task)),
                episode_id=task.id,
                seed=seed,
                on_turn=lambda rec, _percept: turns.append(rec),
            )
        traj.meta["tokens_counted_turns"] = w.policy.counted_turns
        return traj

    def play(self, task: Task) -> dict[str, Any]:
        """Play one task on an idle worker and commit it (runs in a worker thread)."""
        started = time.time()
        turns: list[TurnRecord] = []
        w = self.idle.get()
        try:
            try:
                traj = self.episode(w, task, turns)
                if task.evidence:  # for the report's timeline (omniagent/report.py)
                    traj.meta["evidence"] = task.evidence
            except MediaError as exc:
                if exc.transient:  # the machine, not the file: an error row, retried by the next run
                    raise
                traj = _failed_traj(task, self.cfg, w.policy, exc, [], "media_error")
            row = result_row(task, traj, self.cfg, started)
            self.batch.commit(row, logs={TRAJECTORIES: [traj]})
        except (KeyboardInterrupt, JudgeError, NoSpaceError):
            raise
        except Exception as exc:  # a bug or an unwritable trajectory: an error row, retried next run
            row = error_row(task, self.cfg, exc, started)
            self._commit_error(row, _failed_traj(task, self.cfg, w.policy, exc, turns, None))
        finally:
            self.idle.put(w)
        return row

    def _commit_error(self, row: dict[str, Any], traj: Trajectory) -> None:
        """The error row with the turns played before the failure, or alone if even they cannot be written."""
        try:
            self.batch.commit(row, logs={TRAJECTORIES: [traj]})
        except (ValueError, TypeError, UnicodeError):
            self.batch.commit(row)

    def close(self) -> None:
        for w in self.workers:
            w.close()


def _play_all(run: _Run, todo: list[Task], scored: list[float], total: int, on_row: Any) -> None:
    """Play ``todo`` with a progress bar (unless ``progress`` is off) showing the running score."""
    cfg = run.cfg
    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=total - len(todo), desc=f"{cfg.policy}/{cfg.mode}", unit="task")
    try:
        _drive(run, todo, scored, bar, on_row)
    finally:
        if bar is not None:
            bar.close()


def _streak_error(count: int, last: str | None) -> PolicyStreakError:
    return PolicyStreakError(
        f"the policy failed {count} tasks in a row (last: {last}); stopping. "
        "Fix the backend, then rerun with retry_failed=true to redo the failed tasks"
    )


def _drive(run: _Run, todo: list[Task], scored: list[float], bar: Any, on_row: Any) -> None:
    """Keep at most 2x workers tasks in flight (an abort leaves little queued work behind)."""
    cfg = run.cfg
    streak = ErrorStreak(cfg.max_consecutive_policy_errors, _streak_error)
    pool = ThreadPoolExecutor(max_workers=len(run.workers), thread_name_prefix="eval")
    pending: set[Future[dict[str, Any]]] = set()
    tasks: Iterator[Task] = iter(todo)
    try:
        for task in tasks:
            pending.add(pool.submit(run.play, task))
            if len(pending) >= 2 * len(run.workers):
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                row = fut.result()  # re-raises KeyboardInterrupt / JudgeError from the worker
                run.counts[row["status"]] += 1  # counted in this thread only
                streak.update(row.get("error_code") == "policy_error", row.get("error"))
                scored.append(row["reward"])
                if on_row is not None:
                    on_row(row)
                if bar is not None:
                    bar.set_postfix(score=f"{sum(scored) / len(scored):.3f}", refresh=False)
                    bar.update(1)
                nxt = next(tasks, None)
                if nxt is not None:
                    pending.add(pool.submit(run.play, nxt))
    except BaseException as exc:
        for fut in pending:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)  # running episodes finish and are recorded
        if isinstance(exc, EpisodeInterrupted):
            raise KeyboardInterrupt("evaluation interrupted; rerun to resume") from exc
        raise
    finally:
        pool.shutdown(wait=True)


def _check_unique(tasks: list[Task]) -> None:
    dup = [i for i, n in Counter(t.id for t in tasks).items() if n > 1]
    if dup:
        raise ValueError(f"duplicate task ids: {', '.join(dup[:10])}")


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
    :func:`omniagent.eval.judges.make_judge`). ``policy_factory`` overrides building the policy from
    the registry (one call per worker, all before the workers start). Raises :class:`JudgeError`
    (judge down), ``KeyboardInterrupt`` (rows of finished tasks are kept), :class:`PolicyStreakError`,
    :class:`~omniagent.eval.results.ConfigMismatchError` and
    :class:`~omniagent.eval.batch.FolderLockedError` (another process writes into the folder).
    """
    t_start = time.perf_counter()
    _check_unique(tasks)
    if cfg.threads:  # for local models; only when set, so a server-backed run never imports torch for it
        import torch

        torch.set_num_threads(cfg.threads)
    out = Path(cfg.out_dir)
    factory = policy_factory or policy_factory_for(cfg)
    with ResumableBatch(out, marker=RESULTS, logs=(TRAJECTORIES,)) as batch:
        check_fingerprint(out, cfg)
        done = batch.resume(
            redo=lambda r: r["status"] == "error" or (cfg.retry_failed and r["status"] == "failed")
        )
        todo = [t for t in tasks if t.id not in done]
        run = _Run(cfg, batch, [])
        endpoints = before = None
        try:
            for _ in range(min(cfg.workers, len(todo))):  # built here, before any worker thread starts
                run.add_worker(_Worker(cfg, wrap_judge(judge), factory()))
            before = endpoint_stats([w.policy for w in run.workers])
            if todo:
                _play_all(
                    run, todo, [done[t.id]["reward"] for t in tasks if t.id in done], len(tasks), on_row
                )
        finally:
            endpoints = endpoint_delta(before, endpoint_stats([w.policy for w in run.workers]))
            if endpoints:
                for url, c in endpoints.items():
                    log.info("endpoint %s: %s", url, c)
            run.close()
    return RunReport(
        out_dir=str(out),
        total=len(tasks),
        skipped=len(tasks) - len(todo),
        ran=len(todo),
        failed=run.counts["failed"],
        errors=run.counts["error"],
        seconds=round(time.perf_counter() - t_start, 3),
        results=str(out / RESULTS),
        trajectories=str(out / TRAJECTORIES),
        endpoints=endpoints,
    )
