"""Teacher-trajectory synthesis for agentic SFT: best-of-N under random turn budgets, dual quality control.

    python rl/synthesize.py data.tasks=/data/synth/tasks.jsonl out_dir=/data/sft-synth \\
        teacher.backend=openai teacher.kwargs.model=Qwen2.5-Omni-72B teacher.temperature=0.8 \\
        judge.base_url=http://judge:8000/v1 judge.model=Qwen3-32B
    python rl/synthesize.py --cfg job                      # print the composed config

For every task of a tasks JSONL (:mod:`envs.tasks`), the teacher (any registered policy backend) runs
``n_samples`` episodes, each with a turn budget drawn uniformly from ``[turn_budget.min,
turn_budget.max]`` and its own seed (derived from ``seed``, the task id and the sample index, so any
sample can be re-run alone). Each trajectory then goes through :mod:`rl.synthesis.filters`:

1. hygiene: no policy error, no turn-budget exhaustion, no format error or rejected action;
2. outcome verification: MCQ exact, TR IoU / NUM+SIZE MRA >= thresholds (``filters.outcome``);
3. hindsight leakage (only with ``teacher.hindsight``);
4. reasoning audit by a judge model on an OpenAI-compatible endpoint (``judge``): every turn's
   Thought scored 1-5; kept when the aggregate (min by default) >= ``filters.audit.min_score``.
   Offline, on synthetic media, the rule-based auditor (:mod:`rl.synthesis.audit_rules`, ``judge.kind``) takes
   its place and also scores ``ff`` answers by exact match;
5. dedupe by (media, question, answer) over the whole output.

A judge that cannot be reached, or whose replies do not parse after retries, stops the run with
:class:`AuditJudgeError` -- a trajectory is never passed or failed without its audit. The judge
client (:class:`~rl.synthesis.audit_judge.ThoughtAuditJudge`, :func:`~rl.synthesis.audit_judge.build_judge`) lives in
:mod:`rl.synthesis.audit_judge`.

Outputs in ``out_dir`` (append-only; a rerun skips finished task ids and drops the records of a task
that was cut off mid-way):

- ``kept.jsonl``: kept trajectories (:class:`~omniagent.trajectory.Trajectory`), ``meta.qc`` holding
  the checks, ``meta.task_id`` / ``meta.sample`` / ``meta.seed`` / ``meta.env_limits`` for replay;
- ``rejected.jsonl``: every other trajectory, with ``meta.qc.reasons``;
- ``task_stats.jsonl``: one line per finished task (pass@N, mean turns, rejection reasons);
- ``summary.json``: totals over all finished tasks.

Large runs (:mod:`rl.synthesis.folder`, :mod:`rl.synthesis.workers`): ``workers=N`` keeps N tasks in
flight, each worker with its own environment and teacher (a teacher server with several endpoints
serves them all); results are deduped and committed in task order, so the output does not depend on
``workers``. ``shard=I/N`` runs one part of the tasks into ``out_dir/shard-I-of-N``;
``python rl/synthesize.py merge DIR... --out DIR`` joins the parts into what one run would have
written (the same kept and rejected trajectories, task stats and summary).

Hindsight-teacher mode (``teacher.hindsight=true``): the teacher sees the task's ground-truth evidence
intervals as an extra text part of the first user message (:class:`TeacherPolicy` adds it to what
the policy sees; the environment and the saved trajectory never contain it), and the leakage check
rejects trajectories whose text reveals it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import sys
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs.env import OmniVideoEnv
from envs.errors import MediaError
from envs.jsonl import read_jsonl, write_atomic
from envs.limits import EnvLimits
from envs.messages import Message, text_part
from envs.tasks import Task, load_tasks_jsonl
from omniagent.episode import run_episode
from omniagent.eval.batch import ErrorStreak, FolderLockedError, ResumableBatch
from omniagent.eval.shards import ShardSpecError
from omniagent.policy import Policy, TurnOutput, make_policy
from omniagent.trajectory import Trajectory
from rl.synthesis.audit_judge import AuditJudge, AuditJudgeError, build_judge
from rl.synthesis.filters import (
    Deduper,
    OutcomeThresholds,
    find_leaks,
    hygiene_reasons,
    numbers_in,
    outcome_check,
)
from rl.synthesis.folder import KEPT, REJECTED, SUMMARY, merge_main, open_batch, shard_tasks
from rl.synthesis.stats import summarize, task_statistics
from rl.synthesis.workers import run_in_order

logger = logging.getLogger("omniagent.synthesize")
REPO_ROOT = Path(__file__).resolve().parents[2]


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


# --------------------------------------------------------------------------------------------------
# Quality control of one task's samples
# --------------------------------------------------------------------------------------------------


def allowed_numbers(task: Task) -> list[float]:
    """Numbers the un-hinted context already holds (the model may repeat them without a hint)."""
    nums = numbers_in(task.question) + [n for c in task.choices or [] for n in numbers_in(c)]
    if task.duration:
        nums.append(float(task.duration))
    return nums


def check_samples(trajs: list[Trajectory], task: Task, cfg: dict[str, Any], judge: AuditJudge | None) -> None:
    """The checks of one task's samples that need no other task: hygiene, outcome, leakage, the audit.

    Each trajectory's ``meta.qc`` gets its scores and ``reasons``; :func:`dedupe_samples` finishes it."""
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
            raise AuditJudgeError("filters.audit.enabled is true but no judge is configured")
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


def dedupe_samples(trajs: list[Trajectory], cfg: dict[str, Any], deduper: Deduper) -> None:
    """Drop repeats of what the run already kept (``deduper``, tasks in order) and set ``meta.qc.kept``."""

    # Dedupe the survivors, best first: highest audit, then fewest turns (a teacher's scripted mistake
    # does not count: it is staged, not a worse search), then sample order.
    def rank(t: Trajectory) -> tuple[float, int, int]:
        audit = t.meta["qc"].get("audit") or {}
        turns = sum(not turn.scripted_error for turn in t.turns)
        return (-float(audit.get("aggregate", 0.0)), turns, int(t.meta.get("sample", 0)))

    survivors = sorted((t for t in trajs if not t.meta["qc"]["reasons"]), key=rank)
    kept_per_task = 0
    cap = cfg["filters"].get("max_keep_per_task")
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


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------


def seeded_deduper(kept: Path) -> Deduper:
    """A deduper that already holds the kept trajectories of earlier (resumed) runs."""
    deduper = Deduper()
    for traj in read_jsonl(kept, Trajectory.model_validate, missing_ok=True):
        deduper.add(traj)
    return deduper


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


def task_hint(task: Task, teacher_cfg: dict[str, Any]) -> str | None:
    """The hindsight hint for ``task`` (None without hindsight, or when the task has no evidence)."""
    if not teacher_cfg["hindsight"]:
        return None
    if not task.evidence:
        logger.warning("task %s has no evidence intervals; its teacher gets no hint", task.id)
        return None
    return (teacher_cfg.get("hint_template") or DEFAULT_HINT).format(
        intervals=format_intervals(task.evidence)
    )


class Sampler:
    """One worker: an environment and a teacher that run a task's best-of-N episodes, each with its own
    seed and turn budget, and check them (:func:`check_samples`; the dedupe waits for the task's turn)."""

    def __init__(
        self, cfg: dict[str, Any], limits: EnvLimits, judge: AuditJudge | None, policy: Policy, owns: bool
    ) -> None:
        self.cfg, self.limits, self.judge, self.policy, self.owns = cfg, limits, judge, policy, owns
        # the offline auditor also scores free-form answers (exact match); a judge model does not
        self.env = OmniVideoEnv(limits=limits, judge=getattr(judge, "ff_judge", None))
        self.seed, self.n = int(cfg["seed"]), int(cfg["n_samples"])
        self.lo, self.hi = int(cfg["turn_budget"]["min"]), int(cfg["turn_budget"]["max"])

    def episode(self, task: Task, i: int, hint: str | None) -> Trajectory:
        seed = sample_seed(self.seed, task.id, i)
        budget = draw_budget(seed, self.lo, self.hi)
        teacher = TeacherPolicy(self.policy, hint=hint, seed=seed)
        traj = run_episode(
            self.env, teacher, task.env_options(budget), episode_id=f"{task.id}#{i}", seed=seed
        )
        traj.meta.update(
            task_id=task.id,
            sample=i,
            seed=seed,
            budget=budget,
            evidence=task.evidence,
            hindsight=hint is not None,
            env_limits=self.limits.model_dump(),
            teacher=teacher.name,
        )
        return traj

    def task(self, task: Task) -> Sampled:
        """The task's checked trajectories, or the media error that stopped it (then they are dropped)."""
        started = time.perf_counter()
        hint = task_hint(task, self.cfg["teacher"])
        trajs: list[Trajectory] = []
        for i in range(self.n):
            try:
                trajs.append(self.episode(task, i, hint))
            except MediaError as exc:
                return Sampled(trajs, f"{type(exc).__name__}: {exc}", time.perf_counter() - started)
        check_samples(trajs, task, self.cfg, self.judge)
        return Sampled(trajs, None, time.perf_counter() - started)

    def close(self) -> None:
        self.env.close()
        if self.owns:
            self.policy.close()


@dataclass
class Sampled:
    """What a worker hands back for one task (``seconds``: the task's wall time on its worker)."""

    trajs: list[Trajectory]
    error: str | None
    seconds: float


def build_teacher(cfg: dict[str, Any], limits: EnvLimits) -> Policy:
    """``teacher.backend`` with ``teacher.kwargs`` (null values left out); backends that take ``limits`` /
    ``temperature`` get the run's (``make_policy``'s shared settings)."""
    teacher = cfg["teacher"]
    shared: dict[str, Any] = {"limits": limits}
    if teacher.get("temperature") is not None:
        shared["temperature"] = float(teacher["temperature"])
    kwargs = {k: v for k, v in (teacher.get("kwargs") or {}).items() if v is not None}
    return make_policy(teacher["backend"], shared=shared, **kwargs)


def build_samplers(
    cfg: dict[str, Any], judge: AuditJudge | None, policy: Policy | None, n_tasks: int
) -> list[Sampler]:
    """``workers`` samplers (no more than there are tasks), each with its own teacher, all built here,
    before any worker thread starts; a given ``policy`` is one teacher, so it runs with one worker."""
    workers = int(cfg.get("workers") or 1)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if policy is not None and workers > 1:
        raise ValueError("a policy object is one teacher: run it with workers=1, or name teacher.backend")
    limits = EnvLimits(**(cfg["env"]["limits"] or {}))
    if policy is not None:
        return [Sampler(cfg, limits, judge, policy, owns=False)]
    samplers: list[Sampler] = []
    try:
        for _ in range(max(1, min(workers, n_tasks))):
            samplers.append(Sampler(cfg, limits, judge, build_teacher(cfg, limits), owns=True))
    except BaseException:
        for sampler in samplers:
            sampler.close()
        raise
    return samplers


def run_synthesis(cfg: dict[str, Any], policy: Policy | None = None, progress: bool = True) -> dict[str, Any]:
    """Synthesize (resumably) and return the summary. ``cfg`` is the plain-dict config of
    ``conf/synthesize.yaml``; ``policy`` overrides ``teacher.backend`` (tests, notebooks).

    The output folder is a :class:`~omniagent.eval.batch.ResumableBatch`: one process at a time, a task is
    finished once its ``task_stats.jsonl`` row is written (after its trajectories), and a rerun skips
    finished tasks and drops the records of a task that was cut off mid-way. With ``shard=I/N`` the
    run takes its shard of the tasks into ``{out_dir}/shard-I-of-N`` (:mod:`rl.synthesis.folder`).
    """
    all_tasks = select_tasks(cfg)
    tasks, out, shard = shard_tasks(cfg, all_tasks, Path(cfg["out_dir"]))
    if shard is not None:
        logger.info(
            "shard %d/%d (from %s): %d of %d task(s) -> %s",
            shard.index, shard.count, shard.source, len(tasks), len(all_tasks), out,
        )  # fmt: skip
    with open_batch(out) as batch:
        stats = list(batch.resume().values())
        try:
            _synthesize(cfg, batch, stats, tasks, policy, progress)
        finally:
            summary = summarize(stats)
            write_atomic(out / SUMMARY, json.dumps(summary, indent=2))
    return summary


def _synthesize(
    cfg: dict[str, Any],
    batch: ResumableBatch,
    stats: list[dict[str, Any]],
    tasks: list[Task],
    policy: Policy | None,
    progress: bool,
) -> None:
    """Run every unfinished task of ``tasks`` on the workers and commit them in order, appending each
    stats row to ``stats`` as it is committed."""
    from tqdm import tqdm

    done = {s["task_id"] for s in stats}
    todo = [t for t in tasks if t.id not in done]
    deduper = seeded_deduper(batch.logs[KEPT])
    judge = build_judge(cfg, todo)
    if judge is not None and cfg["judge"].get("preflight", True) and todo:
        judge.preflight()
    streak = ErrorStreak(
        int(cfg["teacher"].get("max_consecutive_policy_errors") or 0),
        error=lambda n, last: SynthesisError(f"the teacher failed {n} episodes in a row; last error: {last}"),
    )
    samplers = build_samplers(cfg, judge, policy, len(todo))
    bar = tqdm(total=len(todo), desc="synthesize", unit="task", disable=not progress)
    try:
        with closing(run_in_order(todo, samplers, Sampler.task)) as results:
            for task, got in results:
                for traj in got.trajs:  # in episode order, as if one teacher had played them all
                    streak.update(failed=traj.stop_reason == "policy_error", detail=traj.error)
                if got.error is None:
                    dedupe_samples(got.trajs, cfg, deduper)
                else:
                    logger.warning("task %s skipped: %s", task.id, got.error)
                row = task_statistics(task, got.trajs, got.seconds, got.error)
                # a task stopped by its media keeps its stats row only
                logged = got.trajs if got.error is None else []
                batch.commit(
                    row,
                    logs={
                        KEPT: [t for t in logged if t.meta["qc"]["kept"]],
                        REJECTED: [t for t in logged if not t.meta["qc"]["kept"]],
                    },
                )
                stats.append(row)
                bar.update(1)
                bar.set_postfix(kept=sum(s["n_kept"] for s in stats))
    finally:
        bar.close()
        for sampler in samplers:
            sampler.close()


def main() -> None:
    """The command: ``merge DIR... --out DIR`` joins shard folders; anything else is a hydra run."""
    if sys.argv[1:2] == ["merge"]:
        raise SystemExit(merge_main(sys.argv[2:]))
    import hydra
    from omegaconf import OmegaConf

    @hydra.main(config_path=str(REPO_ROOT / "conf"), config_name="synthesize", version_base=None)
    def _main(config: Any) -> None:
        cfg = OmegaConf.to_container(config, resolve=True)
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        try:
            summary = run_synthesis(copy.deepcopy(cfg))
        except (AuditJudgeError, SynthesisError, FolderLockedError, ShardSpecError) as exc:
            print(f"synthesize: stopped: {exc}", file=sys.stderr)
            raise SystemExit(2) from exc
        print(json.dumps({k: v for k, v in summary.items() if k != "by_type"}, indent=2))

    _main()


if __name__ == "__main__":
    main()
