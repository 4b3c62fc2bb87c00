"""The testbed agent's recipe in one command: the search level's sets, teacher synthesis in the compact language,
the tiny agent's architecture built on its own turns, a glyph stage, SFT, and an evaluation with its floors.

    python -m recipes.testbed --out runs/testbed/sft_s0 --seed 0        # data .. eval; resumes where it stopped
    python -m recipes.testbed --out runs/testbed/sft_s1 --seed 1 --stages synth export build glyphs sft

Stages (each skipped when its output exists, so a killed run continues; SFT resumes from its last checkpoint):

1. ``data``: the shared sets in ``DATA`` (``--data``, default ``OUT/../data``): ``train`` (``--train-seed``),
   ``pool`` (glyph frames only) and ``dev`` (calibration and the learning-rate pilot), all of the ``search``
   level of :mod:`envs.synth` (``--digit-seconds``).
2. ``synth``: best-of-N teacher episodes (``synth_teacher`` with ``compact``: the compact language of
   :mod:`omniagent.backends.synth_compact`) at turn budget K, kept when right and passed by the rule auditor.
3. ``export``: one SFT row per turn (``rl.sft.export``).
4. ``build``: the untrained agent (:mod:`recipes.testbed.model`: tokenizer trained on these turns) and
   ``OUT/turn_tokens.json``: tokens per turn and per episode; the stage stops when an episode's mean exceeds
   ``--token-target``.
5. ``glyphs``: the vision encoder alone learns digits and hues on the training and pool frames
   (``recipes.tiny_agent.glyph_pretrain``), into ``OUT/init_glyphs``; SFT keeps it frozen.
6. ``timecopy`` (with ``--time-copy-steps``): the text model alone learns to caption whole looks of the pool's
   videos at their frames' seconds (:mod:`recipes.testbed.time_copy`), into ``OUT/timecopy/final``.
7. ``sft``: the text warm-up, then full-context SFT (``rl/train_sft.py --config-dir recipes/testbed/conf/sft
   +exp=testbed``), from the last of those stages that ran, into ``OUT/agent``.
8. ``eval``: the agent, the agent blind (black frames, silence), ``prior`` (fitted on the training set),
   ``uniform`` and ``random`` on ``--eval-set`` (default: dev), greedy and constrained at K;
   ``OUT/eval/<set name>/results.{json,md}`` with the paired differences (clustered by video).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from recipes.testbed.options import level_config, limit_overrides, parse_args
from recipes.tiny_agent.recipe import run_parallel, run_stage

REPO = Path(__file__).resolve().parents[2]
CONF = Path(__file__).resolve().parent / "conf"


def make_set(out: Path, seed: int, n_videos: int, args: argparse.Namespace, split: str) -> Path:
    """A search-level set of 60 s videos (existing files whose sidecar matches are kept)."""
    from envs.synth import generate_benchmark

    generate_benchmark(
        out, seed=seed, n_videos=n_videos, durations=[60.0], config=level_config(args), split=split
    )
    return out / "tasks.jsonl"


def synth_command(args: argparse.Namespace) -> list[str]:
    return [
        sys.executable, str(REPO / "rl" / "synthesize.py"), f"data.tasks={args.data / 'train' / 'tasks.jsonl'}",
        f"out_dir={args.out / 'sft_data'}", "teacher.backend=synth_teacher", f"n_samples={args.n_samples}",
        f"seed={args.seed}", f"turn_budget.min={args.turns}", f"turn_budget.max={args.turns}",
        *(f"+env.limits.{k}={v}" for k, v in limit_overrides(args).items()),
        "+teacher.kwargs.compact=true",
        *(["+teacher.kwargs.option_thought=true"] if args.option_echo else []),
        *(["+teacher.kwargs.answer_text=true"] if args.option_text else []),
        *(["+teacher.kwargs.span_quote=true"] if args.span_quote else []),
        *(["+teacher.kwargs.field_clauses=true"] if args.field_clauses else []),
    ]  # fmt: skip


def episode_token_stats(kept: Path, tokenizer_dir: Path, max_new_tokens: int) -> dict[str, Any]:
    """Tokens of the kept teacher episodes under the agent's tokenizer: per turn (the SFT targets, against the
    generation limit) and per episode (the compact language's target)."""
    from transformers import AutoTokenizer

    from envs.jsonl import read_jsonl

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    turns, episodes = [], []
    for row in read_jsonl(kept):
        lengths = [len(tok(t["raw_text"])["input_ids"]) + 1 for t in row.get("turns") or []]  # + <|im_end|>
        turns += lengths
        episodes.append(sum(lengths))
    turns.sort()
    n, m = max(1, len(turns)), max(1, len(episodes))
    return {
        "episodes": len(episodes),
        "episode_mean": sum(episodes) / m,
        "episode_max": max(episodes, default=0),
        "turns": len(turns),
        "turns_per_episode": len(turns) / m,
        "turn_mean": sum(turns) / n,
        "turn_p95": turns[min(len(turns) - 1, int(0.95 * n))] if turns else 0,
        "turn_max": turns[-1] if turns else 0,
        "max_new_tokens": max_new_tokens,
        "over_limit": sum(x > max_new_tokens for x in turns) / n,
    }


def build(args: argparse.Namespace) -> None:
    from recipes.testbed.model import build_testbed_agent
    from recipes.tiny_agent.model import corpus_texts

    parquet = args.out / "sft_data" / "train.parquet"
    if not (args.out / "init" / "config.json").exists():
        build_testbed_agent(
            args.out / "init", corpus_texts([parquet]), args.seed, args.text_width, args.text_layers
        )
    stats = episode_token_stats(args.out / "sft_data" / "kept.jsonl", args.out / "init", args.max_new_tokens)
    write_atomic(args.out / "turn_tokens.json", json.dumps(stats, indent=2))
    print(f"teacher turns: {json.dumps(stats)}", flush=True)
    if args.token_target and stats["episode_mean"] > args.token_target:
        raise SystemExit(f"teacher episodes average {stats['episode_mean']:.0f} tokens, above --token-target")


def glyph_command(args: argparse.Namespace) -> list[str]:
    return [
        sys.executable, "-m", "recipes.tiny_agent.glyph_pretrain", "--model", str(args.out / "init"),
        "--media", str(args.data / "train"), str(args.data / "pool"), "--eval-dir", str(args.data / "dev"),
        "--steps", str(args.glyph_steps), "--lr", str(args.glyph_lr), "--seed", str(args.seed),
        "--out", str(args.out / "glyphs.json"), "--save", str(args.out / "init_glyphs"),
    ]  # fmt: skip


def time_copy_command(args: argparse.Namespace) -> list[str]:
    return [
        sys.executable, "-m", "recipes.testbed.time_copy", "--model", str(args.out / "init_glyphs"),
        "--sft-data", str(args.out / "sft_data" / "train.parquet"), "--pool", str(args.data / "pool"),
        "--out", str(args.out / "timecopy"), "--seed", str(args.seed), "--steps", str(args.time_copy_steps),
    ]  # fmt: skip


def sft_init(args: argparse.Namespace) -> Path:
    """The checkpoint SFT starts from: after the time-copy stage, the glyph stage, or the untrained agent."""
    if args.time_copy_steps:
        return args.out / "timecopy" / "final"
    return args.out / ("init_glyphs" if args.glyph_steps else "init")


def sft_command(args: argparse.Namespace) -> list[str]:
    init = sft_init(args)
    return [
        sys.executable, str(REPO / "rl" / "train_sft.py"), "--config-dir", str(CONF / "sft"), "+exp=testbed",
        f"model.path={init}", f"data.train_files={args.out / 'sft_data' / 'train.parquet'}",
        f"omni_sft.freeze=[{'visual' if args.glyph_steps else ''}]", f"omni_sft.run_dir={args.out / 'sft'}",
        f"omni_sft.local.steps={args.steps}", f"omni_sft.local.lr={args.lr}",
        f"omni_sft.local.warmup_steps={args.warmup_steps}", f"omni_sft.local.save_every={args.save_every}",
        f"omni_sft.local.save_dir={args.out / 'agent'}", f"trainer.seed={args.seed}",
        f"omni_sft.local.text_warmup.steps={args.text_warmup_steps}",
        f"omni_sft.local.text_warmup.batch_size={args.text_warmup_batch}",
        f"omni_sft.local.captions.batch_size={args.caption_batch}", f"omni_sft.local.captions.pool={args.data / 'pool'}",
        f"data.omni.answer_weight={args.answer_weight}",
    ]  # fmt: skip


def eval_command(
    args: argparse.Namespace, tasks: Path, out_dir: Path, policy: str, kwargs: dict[str, Any]
) -> list[str]:
    """One scripts/eval.py row on a testbed set, at the recipe's caps and K, overlap-guarded against training."""
    cmd = [
        sys.executable, str(REPO / "scripts" / "eval.py"), "unfreeze=true", "benchmark.dataset=tasks",
        f"benchmark.annotations={tasks}", "benchmark.name=testbed", "benchmark.dataset_kwargs={}",
        f"policy.name={policy}", f"out_dir={out_dir}", "workers=1", "progress=false",
        f"overlap_guard.train_set={args.data / 'train' / 'tasks.jsonl'}",
        f"benchmark.max_turns={args.turns}",
    ]  # fmt: skip
    cmd += [f"+policy.kwargs.{k}={v}" for k, v in kwargs.items()]
    return cmd + [f"benchmark.limits.{k}={v}" for k, v in limit_overrides(args).items()]


def agent_kwargs(args: argparse.Namespace, model: Path) -> dict[str, Any]:
    return {"model": str(model), "max_new_tokens": args.max_new_tokens, "device": "cpu", "constrained": True}


def eval_rows(
    args: argparse.Namespace, tasks_dir: Path, model: Path, out: Path
) -> dict[str, tuple[Path, Path, str, dict]]:
    """name -> (tasks file, run folder, policy, kwargs): the agent, blind, and the three floors."""
    held, blind = tasks_dir / "tasks.jsonl", tasks_dir.parent / f"{tasks_dir.name}_blind" / "tasks.jsonl"
    prior = {"train_tasks": str(args.data / "train" / "tasks.jsonl")}
    return {
        "agent": (held, out / "agent", "transformers", agent_kwargs(args, model)),
        "agent_blind": (blind, out / "agent_blind", "transformers", agent_kwargs(args, model)),
        "prior": (held, out / "prior", "prior", prior),
        "uniform": (held, out / "uniform", "uniform", {}),
        "random": (held, out / "random", "random", {}),
    }


def stage_eval(args: argparse.Namespace) -> Path:
    from recipes.tiny_agent.results import results_markdown, summarise
    from recipes.tiny_agent.sets import blank_media

    tasks_dir = args.eval_set
    blank_media(tasks_dir / "tasks.jsonl", tasks_dir.parent / f"{tasks_dir.name}_blind")
    out = args.out / "eval" / tasks_dir.name
    rows = eval_rows(args, tasks_dir, args.out / "agent", out)
    jobs = {
        name: (eval_command(args, *row), args.out / "logs" / f"eval_{tasks_dir.name}_{name}.log")
        for name, row in rows.items()
    }
    run_parallel(jobs, args.eval_jobs)
    res = summarise({name: row[1] for name, row in rows.items()})
    write_atomic(out / "results.json", json.dumps(res, indent=2))
    write_atomic(out / "results.md", results_markdown(res))
    print(results_markdown(res))
    return out


def run_stages(args: argparse.Namespace) -> None:
    out, data, logs = args.out, args.data, args.out / "logs"
    parquet = out / "sft_data" / "train.parquet"
    for stage in args.stages:
        start = time.monotonic()
        if stage == "data":
            make_set(data / "train", args.train_seed, args.train_videos, args, "train")
            make_set(data / "pool", args.pool_seed, args.pool_videos, args, "train")
            make_set(data / "dev", args.dev_seed, args.dev_videos, args, "test")
        elif stage == "synth" and not (out / "sft_data" / "summary.json").exists():
            run_stage(synth_command(args), logs / "synth.log")
        elif stage == "export" and not parquet.exists():
            kept = out / "sft_data" / "kept.jsonl"
            run_stage(
                [sys.executable, "-m", "rl.sft.export", "--kept", str(kept), "--out", str(parquet)],
                logs / "export.log",
            )
        elif stage == "build":
            build(args)
        elif stage == "glyphs" and args.glyph_steps and not (out / "init_glyphs" / "config.json").exists():
            run_stage(glyph_command(args), logs / "glyphs.log")
        elif stage == "timecopy" and args.time_copy_steps and not (out / "timecopy" / "final").exists():
            if not args.glyph_steps:
                raise SystemExit("the timecopy stage trains on after the glyph stage: set --glyph-steps")
            run_stage(time_copy_command(args), logs / "timecopy.log")
        elif stage == "sft" and not (out / "agent" / "config.json").exists():
            run_stage(sft_command(args), logs / "sft.log")
        elif stage == "eval":
            stage_eval(args)
        print(f"stage {stage}: {time.monotonic() - start:.0f} s", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    run_stages(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
