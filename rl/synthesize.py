"""Teacher-trajectory synthesis for agentic SFT: best-of-N under random turn budgets, dual quality control.

    python rl/synthesize.py data.tasks=/data/synth/tasks.jsonl out_dir=/data/sft-synth \\
        teacher.backend=openai teacher.kwargs.model=Qwen2.5-Omni-72B teacher.kwargs.temperature=0.8 \\
        judge.base_url=http://judge:8000/v1 judge.model=Qwen3-32B
    python rl/synthesize.py --cfg job                      # print the composed config

For every task of a tasks JSONL (:mod:`envs.tasks`), the teacher (any registered policy backend) runs
``n_samples`` episodes, each with a turn budget drawn uniformly from ``[turn_budget.min,
turn_budget.max]`` and its own seed (derived from ``seed``, the task id and the sample index, so any
sample can be re-run alone). Each trajectory then goes through :mod:`rl.sft_filters`:

1. hygiene: no policy error, no turn-budget exhaustion, no format error or rejected action;
2. outcome verification: MCQ exact, TR IoU / NUM+SIZE MRA >= thresholds (``filters.outcome``);
3. hindsight leakage (only with ``teacher.hindsight``);
4. reasoning audit by a judge model on an OpenAI-compatible endpoint (``judge``): every turn's
   Thought scored 1-5; kept when the aggregate (min by default) >= ``filters.audit.min_score``;
5. dedupe by (media, question, answer) over the whole output.

A judge that cannot be reached, or whose replies do not parse after retries, stops the run with
:class:`JudgeError` -- a trajectory is never passed or failed without its audit. The judge client
(:class:`OpenAIJudge`, :class:`JudgeError`, :func:`build_judge`) lives in :mod:`rl.audit_judge`
and is re-exported here.

Outputs in ``out_dir`` (append-only; a rerun skips finished task ids and drops the records of a task
that was cut off mid-way):

- ``kept.jsonl``: kept trajectories (:class:`~omniagent.trajectory.Trajectory`), ``meta.qc`` holding
  the checks, ``meta.task_id`` / ``meta.sample`` / ``meta.seed`` / ``meta.env_limits`` for replay;
- ``rejected.jsonl``: every other trajectory, with ``meta.qc.reasons``;
- ``task_stats.jsonl``: one line per finished task (pass@N, mean turns, rejection reasons);
- ``summary.json``: totals over all finished tasks.

Hindsight-teacher mode (``teacher.hindsight=true``): the teacher sees the task's ground-truth evidence
intervals as an extra text part of the first user message (:class:`TeacherPolicy` adds it to what
the policy sees; the environment and the saved trajectory never contain it), and the leakage check
rejects trajectories whose text reveals it.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python rl/synthesize.py` puts rl/, not the repo, on sys.path
    sys.path.insert(0, str(REPO_ROOT))

from envs.env import EnvLimits, OmniVideoEnv  # noqa: E402
from envs.errors import MediaError  # noqa: E402
from envs.messages import Message, text_part  # noqa: E402
from envs.tasks import Task, load_tasks_jsonl  # noqa: E402
from omniagent.episode import run_episode  # noqa: E402
from omniagent.policy import Policy, TurnOutput, make_policy  # noqa: E402
from omniagent.trajectory import Trajectory, append_jsonl, read_jsonl, write_atomic  # noqa: E402
from rl.audit_judge import JudgeError, OpenAIJudge, build_judge  # noqa: E402
from rl.sft_filters import (  # noqa: E402
    Deduper,
    OutcomeThresholds,
    find_leaks,
    hygiene_reasons,
    numbers_in,
    outcome_check,
    reason_code,
)

logger = logging.getLogger("omniagent.synthesize")

KEPT, REJECTED, TASK_STATS, SUMMARY = "kept.jsonl", "rejected.jsonl", "task_stats.jsonl", "summary.json"

DEFAULT_HINT = (
    "[Teacher hint, hidden from the final data: the evidence needed to answer lies in {intervals} "
    "(seconds). Use it only to decide where to look. Never mention this hint, and never name these "
    "times before you have fetched media covering them; reason only from what you observe.]"
)


class SynthesisError(RuntimeError):
    """A run-level failure (e.g. the teacher failing every episode) that stops synthesis."""


# --------------------------------------------------------------------------------------------------
# Teacher wrapper: per-episode seed, hindsight hint
# --------------------------------------------------------------------------------------------------


def format_intervals(evidence: list[list[float]]) -> str:
    return ", ".join(f"[{s:g}, {e:g}]" for s, e in evidence)


class TeacherPolicy(Policy):
    """Wraps the teacher: reseeds it per episode and, in hindsight mode, shows it the hint.

    The hint is appended as a text part to the first user message of the context the *policy* sees;
    the environment's own messages (and so the trajectory and the SFT contexts) never hold it.
    """

    def __init__(self, inner: Policy, hint: str | None = None, seed: int | None = None) -> None:
        self.inner, self.hint, self.seed = inner, hint, seed
        self.name = getattr(inner, "name", type(inner).__name__)

    def reset(self, info: dict[str, Any]) -> None:
        if self.seed is not None:
            reseed(self.inner, self.seed)
        self.inner.reset(info)

    def act(self, messages: list[Message]) -> TurnOutput:
        if self.hint:
            messages = inject_hint(messages, self.hint)
        return self.inner.act(messages)

    def close(self) -> None:
        self.inner.close()


def inject_hint(messages: list[Message], hint: str) -> list[Message]:
    """A copy of ``messages`` with ``hint`` appended to the first user message (media untouched)."""
    out = [{"role": m["role"], "content": list(m["content"])} for m in messages]
    for m in out:
        if m["role"] == "user":
            m["content"].append(text_part("\n" + hint))
            break
    return out


def reseed(policy: Policy, seed: int) -> None:
    """Best-effort per-episode reseeding: a policy's ``seed`` attribute (random, openai, transformers)
    and torch's global generator when torch is loaded."""
    if hasattr(policy, "seed"):
        policy.seed = seed
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


def sample_seed(run_seed: int, task_id: str, sample: int) -> int:
    digest = hashlib.sha256(f"{run_seed}\x00{task_id}\x00{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def draw_budget(seed: int, lo: int, hi: int) -> int:
    if not 1 <= lo <= hi:
        raise ValueError(f"turn_budget needs 1 <= min <= max, got [{lo}, {hi}]")
    return int(np.random.default_rng([seed, 1]).integers(lo, hi + 1))


def _load_backends() -> None:
    """Register the built-in backends that ``omniagent.backends`` may not import yet."""
    for mod in ("omniagent.backends.scripted", "omniagent.backends.openai_backend"):
        try:
            importlib.import_module(mod)
        except ImportError as exc:  # pragma: no cover - optional backend missing
            logger.debug("backend %s not available: %s", mod, exc)


# --------------------------------------------------------------------------------------------------
# Quality control of one task's samples
# --------------------------------------------------------------------------------------------------


def allowed_numbers(task: Task) -> list[float]:
    """Numbers the un-hinted context already holds (the model may repeat them without a hint)."""
    nums = numbers_in(task.question) + [n for c in task.choices or [] for n in numbers_in(c)]
    if task.duration:
        nums.append(float(task.duration))
    return nums


def quality_control(
    trajs: list[Trajectory],
    task: Task,
    cfg: dict[str, Any],
    judge: OpenAIJudge | None,
    deduper: Deduper,
) -> None:
    """Fill ``traj.meta["qc"]`` of every trajectory: ``kept``, ``reasons``, scores, audit, leaks."""
    f = cfg["filters"]
    thresholds = OutcomeThresholds(**f["outcome"])
    hindsight = bool(cfg["teacher"]["hindsight"])
    audit_cfg = f["audit"]
    for traj in trajs:
        reasons = hygiene_reasons(traj, f.get("allow_error_codes") or [])
        outcome = outcome_check(traj, thresholds)
        qc: dict[str, Any] = {"outcome_score": outcome.score, "outcome_passed": outcome.passed}
        if not outcome.passed:
            qc["outcome_detail"] = outcome.detail
            # "no_answer" adds nothing when the stop reason (turn_budget, policy_error) already says why
            if outcome.reason not in reasons and not (outcome.reason == "no_answer" and reasons):
                reasons.append(outcome.reason)
        if hindsight:
            duration = traj.meta.get("media_info", {}).get("duration") or task.duration
            leaks = find_leaks(
                traj,
                task.evidence,
                hint_phrases=f["leakage"]["phrases"],
                tolerance=float(f["leakage"]["tolerance"]),
                allowed_numbers=allowed_numbers(task),
                duration=duration,
            )
            qc["leaks"] = leaks
            if leaks:
                reasons.append("leakage")
        qc["reasons"] = reasons
        traj.meta["qc"] = qc

    if audit_cfg["enabled"]:
        if judge is None:
            raise JudgeError("filters.audit.enabled is true but no judge is configured")
        for traj in trajs:
            qc = traj.meta["qc"]
            if qc["reasons"] and not audit_cfg["audit_rejected"]:
                qc["audit"] = None  # already rejected; not sent to the judge
                continue
            if not traj.turns:
                continue
            result = judge.audit(traj)
            qc["audit"] = result.model_dump(exclude={"raw"})
            if not result.passed(float(audit_cfg["min_score"])):
                qc["reasons"].append("audit_low")

    # Dedupe the survivors, best first: highest audit, then fewest turns, then sample order.
    def rank(t: Trajectory) -> tuple[float, int, int]:
        audit = t.meta["qc"].get("audit") or {}
        return (-float(audit.get("aggregate", 0.0)), len(t.turns), int(t.meta.get("sample", 0)))

    survivors = sorted((t for t in trajs if not t.meta["qc"]["reasons"]), key=rank)
    kept_per_task = 0
    cap = f.get("max_keep_per_task")
    for traj in survivors:
        qc = traj.meta["qc"]
        if cap is not None and kept_per_task >= int(cap):
            qc["reasons"].append("duplicate")
            qc["duplicate_of"] = "max_keep_per_task"
            continue
        if not deduper.add(traj):
            qc["reasons"].append("duplicate")
            continue
        kept_per_task += 1
    for traj in trajs:
        traj.meta["qc"]["kept"] = not traj.meta["qc"]["reasons"]


def task_statistics(task: Task, trajs: list[Trajectory], seconds: float, error: str | None = None) -> dict:
    kept = [t for t in trajs if t.meta.get("qc", {}).get("kept")]
    reasons = Counter(reason_code(r) for t in trajs for r in t.meta.get("qc", {}).get("reasons", []))
    detailed = Counter(r for t in trajs for r in t.meta.get("qc", {}).get("reasons", []))
    n_outcome = sum(1 for t in trajs if t.meta.get("qc", {}).get("outcome_passed"))
    turns = [len(t.turns) for t in trajs]
    return {
        "task_id": task.id,
        "task_type": task.task_type,
        "media": task.media,
        "n_samples": len(trajs),
        "n_outcome_pass": n_outcome,
        "pass_at_n": float(n_outcome > 0),  # outcome verification only (the paper's pass@N)
        "pass_at_n_kept": float(bool(kept)),  # after all quality control
        "n_kept": len(kept),
        "mean_turns": float(np.mean(turns)) if turns else 0.0,
        "mean_turns_kept": float(np.mean([len(t.turns) for t in kept])) if kept else None,
        "budgets": [t.max_turns for t in trajs],
        "rejections": dict(reasons),
        "rejections_detailed": dict(detailed),
        "seconds": round(seconds, 3),
        "error": error,
    }


def summarize(stats: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [s for s in stats if not s.get("error")]
    by_type: dict[str, list[dict]] = {}
    for s in ok:
        by_type.setdefault(s["task_type"], []).append(s)

    def block(rows: list[dict]) -> dict[str, Any]:
        n = sum(r["n_samples"] for r in rows)
        rej: Counter = Counter()
        for r in rows:
            rej.update(r["rejections"])
        return {
            "tasks": len(rows),
            "samples": n,
            "kept": sum(r["n_kept"] for r in rows),
            "pass_at_n": float(np.mean([r["pass_at_n"] for r in rows])) if rows else 0.0,
            "pass_at_n_kept": float(np.mean([r["pass_at_n_kept"] for r in rows])) if rows else 0.0,
            "outcome_pass_rate": sum(r["n_outcome_pass"] for r in rows) / n if n else 0.0,
            "mean_turns": float(np.mean([r["mean_turns"] for r in rows])) if rows else 0.0,
            "rejections": dict(rej),
        }

    return {
        **block(ok),
        "failed_tasks": [{"task_id": s["task_id"], "error": s["error"]} for s in stats if s.get("error")],
        "by_type": {k: block(v) for k, v in sorted(by_type.items())},
    }


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------


def _drop_unfinished(path: Path, done: set[str]) -> int:
    """Rewrite ``path`` without records of tasks that did not finish (a crash mid-task)."""
    if not path.exists():
        return 0
    records = list(read_jsonl(path))
    keep = [r for r in records if r.get("meta", {}).get("task_id") in done]
    if len(keep) != len(records) or path.read_text(encoding="utf-8").count("\n") != len(records):
        write_atomic(path, "".join(json.dumps(r, default=str) + "\n" for r in keep))
    return len(records) - len(keep)


def select_tasks(cfg: dict[str, Any]) -> list[Task]:
    data = cfg["data"]
    tasks = load_tasks_jsonl(data["tasks"])
    if data.get("task_types"):
        tasks = [t for t in tasks if t.task_type in set(data["task_types"])]
    if data.get("split"):
        tasks = [t for t in tasks if t.split == data["split"]]
    if data.get("limit"):
        tasks = tasks[: int(data["limit"])]
    return tasks


def run_synthesis(cfg: dict[str, Any], policy: Policy | None = None, progress: bool = True) -> dict[str, Any]:
    """Synthesize (resumably) and return the summary. ``cfg`` is the plain-dict config of
    ``conf/synthesize.yaml``; ``policy`` overrides ``teacher.backend`` (tests, notebooks)."""
    from tqdm import tqdm

    out = Path(cfg["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    stats_path = out / TASK_STATS
    prior = list(read_jsonl(stats_path))
    done = {s["task_id"] for s in prior}
    for name in (KEPT, REJECTED):
        dropped = _drop_unfinished(out / name, done)
        if dropped:
            logger.warning("dropped %d record(s) of unfinished tasks from %s", dropped, name)
    deduper = Deduper()
    for rec in read_jsonl(out / KEPT):
        deduper.add(Trajectory.model_validate(rec))

    tasks = select_tasks(cfg)
    todo = [t for t in tasks if t.id not in done]
    judge = build_judge(cfg)
    if judge is not None and cfg["judge"].get("preflight", True) and todo:
        judge.preflight()

    teacher_cfg = cfg["teacher"]
    limits = EnvLimits(**(cfg["env"]["limits"] or {}))
    owns_policy = policy is None
    if policy is None:
        _load_backends()
        kwargs = dict(teacher_cfg.get("kwargs") or {})
        if teacher_cfg["backend"] in ("uniform", "oracle", "random") and "limits" not in kwargs:
            kwargs["limits"] = limits
        policy = make_policy(teacher_cfg["backend"], **kwargs)
    env = OmniVideoEnv(limits=limits)
    lo, hi = int(cfg["turn_budget"]["min"]), int(cfg["turn_budget"]["max"])
    n = int(cfg["n_samples"])
    hint_template = teacher_cfg.get("hint_template") or DEFAULT_HINT
    max_consecutive = int(teacher_cfg.get("max_consecutive_policy_errors") or 0)
    consecutive_errors = 0
    stats = list(prior)
    try:
        bar = tqdm(todo, desc="synthesize", unit="task", disable=not progress)
        for task in bar:
            t0 = time.perf_counter()
            hint = None
            if teacher_cfg["hindsight"]:
                if not task.evidence:
                    logger.warning("task %s has no evidence intervals; its teacher gets no hint", task.id)
                else:
                    hint = hint_template.format(intervals=format_intervals(task.evidence))
            trajs: list[Trajectory] = []
            error = None
            for i in range(n):
                seed = sample_seed(int(cfg["seed"]), task.id, i)
                budget = draw_budget(seed, lo, hi)
                teacher = TeacherPolicy(policy, hint=hint, seed=seed)
                try:
                    traj = run_episode(
                        env, teacher, task.env_options(budget), episode_id=f"{task.id}#{i}", seed=seed
                    )
                except MediaError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    break
                traj.meta.update(
                    task_id=task.id,
                    sample=i,
                    seed=seed,
                    budget=budget,
                    evidence=task.evidence,
                    hindsight=hint is not None,
                    env_limits=limits.model_dump(),
                    teacher=teacher.name,
                )
                trajs.append(traj)
                if traj.stop_reason == "policy_error":
                    consecutive_errors += 1
                    if max_consecutive and consecutive_errors >= max_consecutive:
                        raise SynthesisError(
                            f"the teacher failed {consecutive_errors} episodes in a row; last error: {traj.error}"
                        )
                else:
                    consecutive_errors = 0
            if error is None:
                quality_control(trajs, task, cfg, judge, deduper)
                for traj in trajs:
                    append_jsonl(out / (KEPT if traj.meta["qc"]["kept"] else REJECTED), traj)
            else:
                logger.warning("task %s skipped: %s", task.id, error)
            row = task_statistics(task, trajs, time.perf_counter() - t0, error)
            append_jsonl(stats_path, row)  # written last: marks the task finished
            stats.append(row)
            bar.set_postfix(kept=sum(s["n_kept"] for s in stats))
    finally:
        env.close()
        if owns_policy:
            policy.close()
        summary = summarize(stats)
        write_atomic(out / SUMMARY, json.dumps(summary, indent=2))
    return summary


def main() -> None:
    import hydra
    from omegaconf import OmegaConf

    @hydra.main(config_path=str(REPO_ROOT / "conf"), config_name="synthesize", version_base=None)
    def _main(config: Any) -> None:
        cfg = OmegaConf.to_container(config, resolve=True)
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        try:
            summary = run_synthesis(copy.deepcopy(cfg))
        except (JudgeError, SynthesisError) as exc:
            print(f"synthesize: stopped: {exc}", file=sys.stderr)
            raise SystemExit(2) from exc
        print(json.dumps({k: v for k, v in summary.items() if k != "by_type"}, indent=2))

    _main()


if __name__ == "__main__":
    main()
