"""TAURA (or GRPO) in one process, on a CPU or one GPU: the reference trainer for small models.

    python rl/train_local.py +exp=tiny local.train_tasks=runs/synth_train/tasks.jsonl \
        local.eval_tasks=runs/synth_test/tasks.jsonl actor_rollout_ref.model.path=runs/tiny_sft/final
    python rl/train_local.py +exp=tiny ... taura.mode=grpo          # the ablation
    python rl/train_local.py --config-dir recipes/tiny_agent/conf +exp=tiny_agent ...   # a recipe's experiment

verl cannot run on a CPU (no CPU device, NCCL hard-wired, rollout needs vLLM), so :func:`train` is the loop spelled
out, readable top to bottom like CleanRL's ``ppo.py``; each step's code is one module of ``rl/local/``. It composes
the verl entry's own config (``conf/rl/taura.yaml`` + an experiment, plus the ``local:`` block of
``conf/rl/local/default.yaml``) and reads each algorithm setting from the key verl reads
(:class:`rl.local.args.Args`). One iteration:

1. **Rollout** (:mod:`rl.local.groups`). ``data.train_batch_size`` tasks, each played ``rollout.n`` times (one
   group) through :class:`envs.env.OmniVideoEnv` and the transformers backend, sampling at ``rollout.temperature``.
   Every turn is recorded as an SFT sample (:class:`rl.local.rollout.TurnEncoder`, the builder of
   ``rl/sft/dataset.py``): the context exactly as the environment showed it, the loss mask on that turn's output
   only. With ``algorithm.filter_groups.enable`` (DAPO), groups whose episodes all scored alike are replaced by new
   draws. The progress bar moves per group (:mod:`rl.local.progress`).
2. **Old log-probs** (:mod:`rl.local.update`). One no-grad forward per turn row gives the behaviour policy's
   per-token log-prob and entropy on exactly the tokens trained (as verl recomputes them with the actor; the
   rollout and training model are the same weights in the same precision here, so verl's rollout importance
   correction is 1). With ``local.masked_stats`` (default: on when ``local.constrained``) the rows are the
   sampled token ids, and every statistic (old and new log-probs, so the PPO ratio, and TAURA's entropies) is
   that of the distribution that sampled them: the rollout temperature and the turn's grammar mask
   (:mod:`rl.local.sampling`).
3. **Advantages.** :func:`rl.algo.taura.taura_advantages`: GRPO outcome advantage per trajectory, times the TAURA
   turn weight (``taura.mode``: taura | grpo | ig | oracle; ``taura.hold_answer_turns``: answer turns at 1).
4. **Update.** ``actor.ppo_epochs`` passes of verl's vanilla PPO-clip loss (``clip_ratio_low``/``high``, dual
   clip ``clip_ratio_c``, ``loss_agg_mode`` token-mean) over mini-batches of ``actor.ppo_mini_batch_size`` x
   ``rollout.n`` turn rows (as verl counts them), AdamW with ``actor.optim`` settings and ``actor.grad_clip``;
   with ``actor.use_kl_loss``, plus ``kl_loss_coef`` x a per-token KL estimate to the starting model; with
   ``local.sft_anchor``, plus the SFT loss of a few rows of the agent's SFT set per step (PPO-ptx,
   rl/local/sft_anchor.py).
5. **Log, eval, save** (:mod:`rl.local.bookkeeping`). A row of ``<run_dir>/metrics.csv``; a greedy held-out eval
   every ``local.eval_every``; a complete, loadable checkpoint folder (:func:`rl.checkpoint.save_checkpoint`) with
   the optimizer state every ``local.save_every``. Started again, the run resumes from the newest checkpoint (also
   after ``kill -9``): task draws, episode seeds and sampling are seeded from ``(local.seed, iteration)``, so a
   resumed run repeats exactly what an uninterrupted one would have done.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from omegaconf import DictConfig

from envs.env import OmniVideoEnv
from envs.limits import EnvLimits
from envs.tasks import load_tasks_jsonl
from rl.checkpoint import save_checkpoint
from rl.local.args import Args
from rl.local.bookkeeping import METRICS, evaluate, open_run, rollout_metrics, save
from rl.local.groups import rollout
from rl.local.progress import GroupProgress
from rl.local.rollout import append_rollouts, write_metrics
from rl.local.task_draw import tasks_from_config
from rl.local.update import advantages, rl_turn_scores, score_rows, update

CONF_DIR = Path(__file__).resolve().parents[1] / "conf" / "rl"


def train(cfg: DictConfig) -> Path:
    """Run (or resume) the training described by ``cfg``; returns the metrics CSV path."""
    # 0. settings (each from the key verl reads), the policy, or the checkpoint a killed run resumes from
    args = Args.from_config(cfg)
    local = args.local
    run_dir = Path(str(local["run_dir"]))
    metrics_path = run_dir / "metrics.csv"
    run_dir.mkdir(parents=True, exist_ok=True)
    if local.get("threads"):
        torch.set_num_threads(int(local["threads"]))
    print(json.dumps({"threads": torch.get_num_threads()}), flush=True)
    run = open_run(args, run_dir)
    policy, model, encoder = run.policy, run.policy.model, run.encoder
    env = OmniVideoEnv(limits=EnvLimits(**(args.env.get("limits") or {})))
    seed, iterations = int(local["seed"]), int(local["iterations"])
    train_tasks = tasks_from_config(local, seed)
    if local.get("task_pool"):  # which tasks a fixed-pool run trained on, for its analysis
        (run_dir / "task_pool.json").write_text(json.dumps([t.id for t in train_tasks], indent=1) + "\n")
    eval_tasks = load_tasks_jsonl(str(local["eval_tasks"])) if local.get("eval_tasks") else []
    eval_tasks = eval_tasks[: int(local.get("max_eval_tasks", len(eval_tasks)))]
    progress = GroupProgress(
        iterations, args.tasks_per_iteration, run.start, bool(local.get("progress", True))
    )
    for it in range(run.start, iterations):
        t0 = time.perf_counter()
        # 1. rollout: groups of episodes per task, drawn and sampled from seeds fixed by (seed, iteration)
        picks, trajs, rows, played = rollout(
            policy, encoder, env, train_tasks, args, seed, it, progress.group_done
        )
        # 2-3. behaviour log-probs and entropies on exactly the trained tokens, then advantages
        score_rows(model, rows, encoder.pad_id, run.ref_model, args.stats_temperature)
        turn_scores = rl_turn_scores(policy, encoder, rows, train_tasks, picks, args)
        adv = advantages(rows, args, turn_scores)
        append_rollouts(run_dir / "rollouts.jsonl", trajs, rows, adv.weights, it + 1)
        # 4. PPO-clip update
        before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        losses = update(model, run.opt, rows, adv.advantages, args, encoder.pad_id, run.anchor, it)
        after = [p.detach() for p in model.parameters() if p.requires_grad]
        delta = math.sqrt(sum(float(((a - b) ** 2).sum()) for a, b in zip(after, before, strict=True)))
        # 5. log, eval, save
        row = {
            "iteration": it + 1,
            **played,
            **rollout_metrics(trajs, rows, adv),
            **losses,
            "param_delta": delta,
        }
        last = it + 1 == iterations
        every = int(local.get("eval_every") or 0)
        if eval_tasks and ((every and (it + 1) % every == 0) or last):
            row["eval_reward"] = evaluate(policy, env, eval_tasks, args)
        row["seconds"] = time.perf_counter() - t0
        run.history.append(row)
        write_metrics(metrics_path, run.history, METRICS)
        progress.iteration_done(row)
        save_every = int(local.get("save_every") or 0)
        if last or (save_every and (it + 1) % save_every == 0):
            save(policy, run.opt, args, run_dir / "checkpoints", it + 1)
    progress.close()
    env.close()
    save_checkpoint(model, policy.processor, run_dir / "final")
    return metrics_path


LOCAL_GROUP = "+local=default"  # conf/rl/local/default.yaml: the `local:` block (verl's entry never loads it)


def compose_config(overrides: list[str], config_dirs: Sequence[str | Path] = ()) -> DictConfig:
    """The config ``python rl/train_local.py OVERRIDES`` trains with (for tests and notebooks); ``config_dirs``
    are searched too, as ``--config-dir DIR`` adds one (e.g. ``recipes/tiny_agent/conf``)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    extra = []
    if config_dirs:
        own = list(OmegaConf.load(CONF_DIR / "taura.yaml").hydra.searchpath)
        extra.append(
            f"hydra.searchpath=[{','.join(own + [f'file://{Path(d).resolve()}' for d in config_dirs])}]"
        )
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose("taura", overrides=[*extra, LOCAL_GROUP, *overrides])


def main() -> None:
    """Hydra entry on verl's own primary config (``conf/rl/taura.yaml``) plus the ``local`` group."""
    import sys

    import hydra

    argv = sys.argv[1:]
    if not any(a.lstrip("+").startswith("local=") for a in argv):
        # beside the other overrides: argparse takes them as one run of positionals (flags may come first)
        at = next((i for i, a in enumerate(argv) if "=" in a and not a.startswith("-")), len(argv))
        sys.argv.insert(1 + at, LOCAL_GROUP)

    @hydra.main(config_path=str(CONF_DIR), config_name="taura", version_base=None)
    def _run(cfg: DictConfig) -> None:
        print(f"metrics: {train(cfg)}", flush=True)

    _run()


if __name__ == "__main__":
    main()
