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

import hashlib
import inspect
import json
import os
import re
import threading
import time
import traceback
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
from omniagent.passive import PassiveConfig, run_passive_episode
from omniagent.policy import POLICIES, Policy, make_policy
from omniagent.trajectory import Trajectory, append_jsonl, read_jsonl, write_atomic

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

RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories.jsonl"
RUN_META = "run.json"


# ================================================================================================ judges
class JudgeError(RuntimeError):
    """The free-form judge could not score an answer (endpoint down, unparseable verdict)."""


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", str(text).lower()).split())


class ExactMatchJudge:
    """Scores 1 when the answer equals the reference after lower-casing and dropping punctuation."""

    name = "exact"

    def __call__(self, question: str, reference: str, prediction: str) -> float:
        return float(_norm(reference) == _norm(prediction))

    def check(self) -> None:
        pass


JUDGE_PROMPT = """\
You grade an answer to a question about a video against the reference answer.
Question: {question}
Reference answer: {reference}
Candidate answer: {prediction}
Is the candidate answer correct (same meaning as the reference)? Reply with one word: yes or no."""


class OpenAIJudge:
    """An LLM judge behind an OpenAI-compatible endpoint; any failure raises :class:`JudgeError`."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        import openai

        self.base_url, self.model = base_url, model
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=timeout,
            max_retries=max_retries,
        )

    def check(self) -> None:
        """Fail now, before any task runs, when the endpoint is unreachable."""
        try:
            self.client.models.list()
        except Exception as exc:
            raise JudgeError(f"judge endpoint {self.base_url} is unreachable: {exc}") from exc

    def __call__(self, question: str, reference: str, prediction: str) -> float:
        prompt = JUDGE_PROMPT.format(question=question, reference=reference, prediction=prediction)
        try:
            reply = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "user", "content": prompt}],
                temperature=0.0,
                max_tokens=4,
            )
            text = (reply.choices[0].message.content or "").strip().lower()
        except Exception as exc:
            raise JudgeError(f"judge endpoint {self.base_url} failed: {exc}") from exc
        if text.startswith("yes"):
            return 1.0
        if text.startswith("no"):
            return 0.0
        raise JudgeError(f"judge reply {text[:40]!r} is neither yes nor no")


def make_judge(cfg: dict[str, Any] | None) -> Any:
    """``None`` / ``{"kind": "none"}`` -> no judge (ff tasks unscored, flagged); ``exact``; ``openai``
    (``base_url``, ``model``, ``api_key``, ``timeout``). The returned judge's ``check()`` is called."""
    cfg = dict(cfg or {})
    kind = cfg.pop("kind", "none") or "none"
    if kind == "none":
        return None
    if kind == "exact":
        judge: Any = ExactMatchJudge()
    elif kind == "openai":
        judge = OpenAIJudge(**cfg)
    else:
        raise ValueError(f"unknown judge kind {kind!r} (none, exact, openai)")
    judge.check()
    return judge


def _wrap_judge(judge: Any) -> Any:
    """Re-raise every judge failure as JudgeError, so the runner can tell it from a policy bug."""
    if judge is None:
        return None

    def call(question: str, reference: str, prediction: str) -> float:
        try:
            return float(judge(question, reference, prediction))
        except JudgeError:
            raise
        except Exception as exc:
            raise JudgeError(f"judge failed: {type(exc).__name__}: {exc}") from exc

    return call


# ================================================================================================ config
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


class ConfigMismatchError(RuntimeError):
    """The output folder holds a run made with different settings."""


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


# ================================================================================================ rows
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
    }


def result_row(task: Task, traj: Trajectory, cfg: EvalConfig, started: float) -> dict[str, Any]:
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
        "started_at": round(started, 3),
        "finished_at": round(time.time(), 3),
    }


def _error_row(task: Task, cfg: EvalConfig, exc: BaseException, started: float) -> dict[str, Any]:
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
        "error_code": f"exception:{type(exc).__name__}",
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
        "started_at": round(started, 3),
        "finished_at": round(time.time(), 3),
    }


# ================================================================================================ files
def _repair_tail(path: Path) -> bool:
    """Cut a torn last line (no trailing newline) off a JSONL file; True when something was cut."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return False
        fh.seek(0)
        keep = fh.read().rfind(b"\n") + 1
        fh.truncate(keep)
    return True


def load_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a results file (a torn last line is ignored), last row per id kept."""
    rows: dict[str, dict[str, Any]] = {}
    for r in read_jsonl(path):
        rows[r["id"]] = r
    return list(rows.values())


def _prepare_resume(out: Path, retry_failed: bool) -> dict[str, dict[str, Any]]:
    """Repair the two files after a kill and return the rows whose tasks count as done."""
    results, trajs = out / RESULTS, out / TRAJECTORIES
    for p in (results, trajs):
        _repair_tail(p)
    rows: dict[str, dict[str, Any]] = {}
    drop = False
    for r in read_jsonl(results):
        if r["id"] in rows:
            drop = True  # should never happen; compact it away
        rows[r["id"]] = r
    redo = {
        i for i, r in rows.items() if r["status"] == "error" or (retry_failed and r["status"] == "failed")
    }
    if redo:
        drop = True
        rows = {i: r for i, r in rows.items() if i not in redo}
    if drop:
        write_atomic(results, "".join(json.dumps(r, default=str) + "\n" for r in rows.values()))
    if trajs.exists():
        keep: list[str] = []
        seen: set[str] = set()
        stale = False
        with open(trajs, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                tid = json.loads(line).get("id")
                if tid in rows and tid not in seen:
                    seen.add(tid)
                    keep.append(line if line.endswith("\n") else line + "\n")
                else:
                    stale = True
        if stale:
            write_atomic(trajs, "".join(keep))
    return rows


def _check_fingerprint(out: Path, cfg: EvalConfig) -> dict[str, Any]:
    meta_path = out / RUN_META
    fp = json.loads(json.dumps(cfg.fingerprint(), sort_keys=True, default=str))
    digest = hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:16]
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
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


# ================================================================================================ runner
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


# ================================================================================================ config glue
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
    from omniagent.validity import guard

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
