"""The tiny agent's whole recipe in one command: data, teacher synthesis, SFT, held-out evaluation.

    python -m recipes.tiny_agent --out runs/tiny_agent            # data .. eval; resumes where it stopped
    python -m recipes.tiny_agent --out runs/tiny_agent --stages scaling ship

Its defaults are the shipped agent's recipe (47 minutes on 2 cores with ``--eval-jobs 2``);
``--preset NAME`` takes an earlier agent's settings instead (``recipes.tiny_agent.options.PRESETS``).

Why one command: a training framework is judged by whether a run produces an agent that gets
better, and the claim must be reproducible end to end on a 2-core CPU. Stages (each skipped when
its output exists, so a killed run continues; SFT itself resumes from its last checkpoint):

1. ``data``: a training synthetic set (``--train-seed``, split ``train``), envs.synth; with
   ``--caption-pool N``, also N extra 60 s videos (``OUT/caption_pool``) whose frames are captioned
   alongside the served ones in both SFT phases (``recipes.tiny_agent.frame_captions.pool_chats``).
2. ``synth``: best-of-N offline teacher trajectories (``synth_teacher``), kept only when the answer
   is right and the rule auditor passes every turn (``rl/synthesize.py``), under the caps the tiny
   agent can take in (``--max-frames 8 --max-clip-s 10 --max-audio-s 30``; eval uses the same).
   ``--error-rate``/``--look-error-rate``: the teacher sometimes answers in another task's format
   or swaps a look's start and end, and the next turn recovers (the agent's own commonest failure
   was never recovering from a rejected answer); ``--min-turns``: the low end of the budget K;
   ``--per-frame 1``: Observations of a frame look in one sentence per frame, not per run;
   ``--named-frame 1``: a time the question names is first looked at as that one frame (a copy of
   the question's number; the default window around it asks the student for arithmetic).
3. ``export``: one SFT row per turn (``rl.sft.export``), the teacher's scripted mistakes excepted.
4. ``build``: the untrained agent (``recipes.tiny_agent.model``: tokenizer trained on the exported prompts;
   ``--vision-width``/``--vision-depth`` size its vision encoder);
   ``OUT/turn_tokens.json``: the teacher turns' token lengths against ``--max-new-tokens``.
5. ``glyphs`` (with ``--glyph-steps N``): N steps in which the untrained agent's vision encoder alone
   learns to classify digits, words, shapes and hues on shifted training and pool frames
   (``recipes/tiny_agent/glyph_pretrain.py``), into ``OUT/init_glyphs``, where SFT then starts with it frozen.
6. ``read`` (with ``--read-steps N``): N steps of single-frame captions alone from the untrained
   agent, the served frames and the pool's, into ``OUT/init_read`` (``recipes.tiny_agent.probes.reading``; its
   reading of held-out frames in ``OUT/reading.json``): where it learns to read values. After the
   glyph stage only its text model trains, and the encoder stays frozen through SFT too. With
   ``--read-keep vision`` SFT starts from the untrained agent with that vision encoder grafted in
   (``OUT/init_read_vision``) and frozen, so the text model is not the one captions bent.
7. ``sft``: local plain-torch SFT (``rl/train_sft.py --config-dir recipes/tiny_agent/conf/sft +exp=tiny_agent``,
   complete folder in ``OUT/agent``):
   first ``--text-warmup-steps`` batches of short text-only turns (``recipes/tiny_agent/text_warmup.py``: where
   the agent learns to copy numbers; ``--option-shuffles N`` adds each answer turn that names an
   option N more times with the options reordered), then ``--steps`` full-context turns with their media, each
   followed, with ``--caption-batch N``, by a batch of N single-frame captions
   (``recipes/tiny_agent/frame_captions.py``: where it learns to read a frame; README Train says why).
   With ``--event-steps`` the folder is ``OUT/agent_sft``, and
8. ``events``: ``--event-steps`` more full-context steps from it, each followed by a caption batch
   in which ``--event-share`` of the frames show an event (shape, digit, word, flash), into ``OUT/agent``.
   With ``--vision-read-steps`` the folder is ``OUT/agent_events``, and
9. ``vision``: ``--vision-read-steps`` caption-only steps that train the last phase's vision encoder
   alone, the text model frozen (``recipes.tiny_agent.probes.reading --train-part vision``), into ``OUT/agent``: the
   agent learns to read values with its text model as SFT left it (README "Reading values").
10. ``probe``: ``OUT/media_probe.json``, the agent's SFT loss with real against zeroed media
   (``recipes/tiny_agent/probes/media.py``): a minute's check that it reads its media before the long eval.
11. ``eval``: a held-out set (``--eval-seed``: other videos, other tasks; the overlap guard checks it)
   for the trained agent, random weights, the ``uniform``, ``random`` and ``prior`` scripted baselines
   (``prior``: the training set's best constant answer to each question, given without looking), and
   the agent "blind" (the same tasks on copies of the media with black frames and silence of the
   same durations); ``OUT/results.json`` and ``OUT/results.md`` hold the table and paired CIs.
12. ``scaling`` (only when named): the agent's held-out score against its turn budget
   (``--scaling-ks``), ``OUT/scaling``.
13. ``ship`` (only when named): ``OUT/agent`` becomes the package's ``--model tiny`` with a manifest
   of hashes and recipe fingerprints (:mod:`omniagent.tiny_agent`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from envs.messages import message_text
from recipes.tiny_agent.options import parse_args
from recipes.tiny_agent.results import results_markdown, summarise
from recipes.tiny_agent.sets import blank_media, make_caption_pool, make_synth_set

REPO = Path(__file__).resolve().parents[2]
CONF = (
    Path(__file__).resolve().parent / "conf"
)  # the recipe's config: sft/exp/tiny_agent.yaml, exp/tiny_agent.yaml


def run_stage(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Run one stage's command, its output appended to ``log``; a failure names the log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    print("+", " ".join(cmd), flush=True)
    with open(log, "a") as fh:
        fh.write("+ " + " ".join(cmd) + "\n")
        fh.flush()
        code = subprocess.run(cmd, cwd=str(REPO), stdout=fh, stderr=subprocess.STDOUT, env=env).returncode
    if code != 0:
        raise SystemExit(f"stage failed (exit {code}): {' '.join(cmd)}; see {log}")


def _eval_cmd(
    args: argparse.Namespace,
    tasks: Path,
    out_dir: Path,
    policy: str,
    kwargs: dict[str, Any],
    script: str = "eval.py",
) -> list[str]:
    cmd = [
        sys.executable, str(REPO / "scripts" / script), "unfreeze=true", "benchmark.dataset=tasks",
        f"benchmark.annotations={tasks}", "benchmark.name=tiny-heldout", "benchmark.dataset_kwargs={}",
        f"policy.name={policy}", f"out_dir={out_dir}", "workers=1", "progress=false",
        f"overlap_guard.train_set={args.out / 'synth_train' / 'tasks.jsonl'}",
    ]  # fmt: skip
    cmd += [f"+policy.kwargs.{k}={v}" for k, v in kwargs.items()]
    cmd += [f"benchmark.limits.{k}={v}" for k, v in limit_overrides(args).items()]
    if args.eval_limit:
        cmd.append(f"limit={args.eval_limit}")
    return cmd


def limit_overrides(args: argparse.Namespace) -> dict[str, float]:
    """The environment caps used for synthesis AND evaluation, sized to what the tiny agent can take in:
    its processor hears only the first 30 s of audio, and every served frame becomes a line of the
    teacher's Observation, so wide looks make turns longer than the agent can learn or generate.
    The same caps in both stages keep the system prompt (which states them) identical. The free-form
    answer cap is not in the prompt; under constrained decoding it stops a runaway answer string."""
    return {
        "max_frames": args.max_frames,
        "max_clip_s": args.max_clip_s,
        "max_audio_s": args.max_audio_s,
        "max_answer_chars": args.max_answer_chars,
    }


def turn_token_stats(parquet: Path, tokenizer_dir: Path, max_new_tokens: int) -> dict[str, Any]:
    """Token lengths of the teacher's turns (the SFT targets) under the agent's tokenizer, against the
    generation limit: a target longer than ``max_new_tokens`` teaches a turn the agent is cut off in."""
    import pandas as pd
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    lengths = []
    for raw in pd.read_parquet(parquet, columns=["messages"])["messages"]:
        messages = json.loads(raw) if isinstance(raw, str) else list(raw)
        lengths.append(len(tok(message_text(messages[-1]))["input_ids"]))
    lengths.sort()
    n = max(1, len(lengths))
    return {
        "turns": len(lengths),
        "mean": sum(lengths) / n,
        "p95": lengths[min(len(lengths) - 1, int(0.95 * n))] if lengths else 0,
        "max": lengths[-1] if lengths else 0,
        "max_new_tokens": max_new_tokens,
        "over_limit": sum(x > max_new_tokens for x in lengths) / n,
    }


def run_rows(args: argparse.Namespace) -> dict[str, tuple[Path, Path, str, dict[str, Any]]]:
    """Every evaluated row: name -> (tasks file, run folder, policy, policy kwargs)."""
    held, blind, runs = (
        args.out / "synth_eval" / "tasks.jsonl",
        args.out / "synth_blind" / "tasks.jsonl",
        args.out / "eval",
    )
    base = {"model": str(args.out / "agent"), "max_new_tokens": args.max_new_tokens, "device": "cpu"}
    free = {**base, "constrained": False}  # the backend decodes under the turn schema unless told not to
    agent = {**base, "constrained": bool(args.constrained)}
    return {
        "agent": (held, runs / "agent", "transformers", agent),
        "agent_blind": (blind, runs / "agent_blind", "transformers", agent),
        "agent_free": (held, runs / "agent_free", "transformers", free),
        "agent_free_blind": (blind, runs / "agent_free_blind", "transformers", free),
        "uniform": (held, runs / "uniform", "uniform", {}),
        "random": (held, runs / "random", "random", {}),
        # the training set's best constant answers, given without looking (omniagent/backends/prior.py)
        "prior": (held, runs / "prior", "prior", {"train_tasks": str(args.out / "synth_train" / "tasks.jsonl")}),
        # the agent's own architecture and tokenizer before any training (OUT/init, the build stage's)
        "random_weights": (held, runs / "random_weights", "transformers",
                           {**agent, "model": str(args.out / "init")}),
    }  # fmt: skip


def run_parallel(jobs: dict[str, tuple[list[str], Path]], at_once: int) -> None:
    """Run named commands, ``at_once`` at a time, each logged as :func:`run_stage` does; with more than
    one at once the CPU's threads are split between them (``OMP_NUM_THREADS``): on 2 cores each
    of the tiny agent's rows ran about three times faster on one thread beside the other than alone
    on both (README, "The tiny agent"). A failed row does not stop the others; the first failure
    is raised after they end."""
    env = None
    if at_once > 1:
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // at_once))}

    def one(name: str) -> None:
        start = time.monotonic()
        run_stage(*jobs[name], env=env)
        print(f"eval {name}: {time.monotonic() - start:.0f} s", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, at_once)) as pool:
        futures = [pool.submit(one, name) for name in jobs]
    for future in futures:
        future.result()


def stage_eval(args: argparse.Namespace) -> None:
    blank_media(held_out_set(args), args.out / "synth_blind")
    jobs, rows = {}, run_rows(args)
    for name, (tasks_file, run_dir, policy, kwargs) in rows.items():
        if (name == "random_weights" and not args.eval_random_weights) or (
            name.startswith("agent_free") and not (args.eval_free and args.constrained)
        ):
            continue
        cmd = _eval_cmd(args, tasks_file, run_dir, policy, kwargs)
        jobs[name] = (cmd, args.out / "logs" / f"eval_{name}.log")
    run_parallel(jobs, args.eval_jobs)
    res = summarise({name: row[1] for name, row in rows.items()})
    write_atomic(args.out / "results.json", json.dumps(res, indent=2))
    write_atomic(args.out / "results.md", results_markdown(res))
    print(results_markdown(res))


def scaling_command(args: argparse.Namespace) -> list[str]:
    """The trained agent's score against its turn budget K (``--scaling-ks``) on the held-out set:
    ``scripts/turn_scaling.py`` (one resumable eval per K; CSV and plots in ``OUT/scaling``). Greedy
    decoding makes a run deterministic, so one seed per K."""
    held, _, policy, kwargs = run_rows(args)["agent"]
    cmd = _eval_cmd(args, held, args.out / "scaling", policy, kwargs, script="turn_scaling.py")
    return cmd + [f"scaling.ks=[{','.join(str(k) for k in args.scaling_ks)}]", "scaling.seeds=[0]"]


def synth_command(args: argparse.Namespace) -> list[str]:
    """Best-of-N offline teacher episodes on the training set, under the tiny agent's caps."""
    return [
        sys.executable, str(REPO / "rl" / "synthesize.py"), f"data.tasks={args.out / 'synth_train' / 'tasks.jsonl'}",
        f"out_dir={args.out / 'sft_data'}", "teacher.backend=synth_teacher", f"n_samples={args.n_samples}",
        f"seed={args.seed}", f"turn_budget.min={args.min_turns}", "turn_budget.max=16",
        *(f"+env.limits.{k}={v}" for k, v in limit_overrides(args).items()),
        *([f"+teacher.kwargs.error_rate={args.error_rate}"] if args.error_rate else []),
        *([f"+teacher.kwargs.look_error_rate={args.look_error_rate}"] if args.look_error_rate else []),
        *(["+teacher.kwargs.per_frame=true"] if args.per_frame else []),
        *(["+teacher.kwargs.named_frame=true"] if args.named_frame else []),
        *(["+teacher.kwargs.option_thought=true"] if args.option_thought else []),
        *(["+teacher.kwargs.unit_thought=true"] if args.unit_thought else []),
    ]  # fmt: skip


PHASE_DIRS = {"sft": "agent_sft", "events": "agent_events", "vision": "agent_vision"}


def phases(args: argparse.Namespace) -> list[str]:
    """The training phases this run has, in order: SFT, then the event phase and the vision read if asked."""
    return ["sft", *(["events"] if args.event_steps else []), *(["vision"] if args.vision_read_steps else [])]


def phase_dir(args: argparse.Namespace, phase: str) -> Path:
    """Where a phase saves: ``OUT/agent`` for the last one, else its own folder the next one starts from."""
    return args.out / ("agent" if phase == phases(args)[-1] else PHASE_DIRS[phase])


def phase_input(args: argparse.Namespace, phase: str) -> Path:
    """The folder a phase starts from: the previous phase's, or for SFT :func:`sft_init`."""
    chain = phases(args)
    at = chain.index(phase)
    return phase_dir(args, chain[at - 1]) if at else sft_init(args)


def _train_sft(args: argparse.Namespace, model: Path, run_dir: str, steps: int, lr: float, save: Path,
               seed: int, captions: int, log_every: int) -> list[str]:  # fmt: skip
    """The ``rl/train_sft.py --config-dir recipes/tiny_agent/conf/sft +exp=tiny_agent`` command both phases
    share (the framework's tiny SFT with the recipe's text warm-up and caption hooks): full fine-tuning of
    ``model`` on the exported turns, a fresh shuffle per epoch, resumable checkpoints, a complete folder at
    ``save``."""
    return [
        sys.executable, str(REPO / "rl" / "train_sft.py"), "--config-dir", str(CONF / "sft"), "+exp=tiny_agent",
        f"model.path={model}",
        f"data.train_files={args.out / 'sft_data' / 'train.parquet'}", "omni_sft.tiny.build=false",
        f"omni_sft.freeze=[{','.join(frozen(args))}]", f"omni_sft.run_dir={args.out / run_dir}", f"omni_sft.local.steps={steps}",
        f"omni_sft.local.lr={lr}", "omni_sft.local.repeat_batch=false", f"omni_sft.local.save_every={args.save_every}",
        f"omni_sft.local.log_every={log_every}", f"omni_sft.local.save_dir={save}", f"trainer.seed={seed}",
        f"omni_sft.local.captions.batch_size={captions}",
        *([f"omni_sft.local.captions.pool={args.out / 'caption_pool'}"] if args.caption_pool and captions else []),
    ]  # fmt: skip


def grafted(args: argparse.Namespace) -> bool:
    """Whether SFT starts from the untrained agent with the read stage's vision encoder grafted in."""
    return bool(args.read_steps) and args.read_keep == "vision"


def base_init(args: argparse.Namespace) -> Path:
    """The untrained agent, or with ``--glyph-steps`` the same agent with the glyph-trained encoder."""
    return args.out / ("init_glyphs" if args.glyph_steps else "init")


def sft_init(args: argparse.Namespace) -> Path:
    """Phase 1 starts from :func:`base_init`, or with ``--read-steps`` from it after the read stage;
    with ``--read-keep vision``, from the untrained agent with the read stage's vision encoder."""
    if not args.read_steps:
        return base_init(args)
    return args.out / ("init_read_vision" if grafted(args) else "init_read")


def frozen(args: argparse.Namespace) -> list[str]:
    """Modules SFT leaves as they are: the read stage's vision encoder when it alone was kept, and
    the glyph stage's (which a read stage after it does not train either)."""
    return ["visual"] if grafted(args) or args.glyph_steps else []


def read_part(args: argparse.Namespace, vision: bool) -> str:
    """What a read stage trains (``recipes.tiny_agent.probes.reading --train-part``): the encoder alone after SFT; the
    text model alone on a glyph-trained encoder, so it learns to name what that encoder tells apart;
    else the whole untrained agent."""
    return "vision" if vision else "text" if args.glyph_steps else "all"


def held_out_set(args: argparse.Namespace) -> Path:
    """The held-out synthetic set (``--eval-seed``) the read stages and eval read: ``OUT/synth_eval``."""
    return make_synth_set(args.out / "synth_eval", args.eval_seed, args.eval_videos, args.durations, "test")


def read_command(args: argparse.Namespace, vision: bool = False) -> list[str]:
    """A read stage: single-frame captions alone (``recipes.tiny_agent.probes.reading``: the served training frames and
    ``--caption-pool`` videos), with the reading of the held-out videos' frames as JSON. ``read``
    (``--read-steps N``) trains the untrained agent (:func:`read_part`) into ``OUT/init_read`` (``OUT/reading.json``);
    ``vision`` (``--vision-read-steps N``) trains the last phase's vision encoder alone into
    ``OUT/agent`` (``OUT/reading_vision.json``), so its turns stay the ones SFT taught."""
    if not args.caption_pool:
        raise SystemExit("a read stage needs --caption-pool: the served frames alone are learnt by heart")
    model, steps, lr, save, out = (
        (phase_input(args, "vision"), args.vision_read_steps, args.vision_read_lr, phase_dir(args, "vision"),
         "reading_vision.json")
        if vision else (base_init(args), args.read_steps, args.lr, args.out / "init_read", "reading.json")
    )  # fmt: skip
    return [
        sys.executable, "-m", "recipes.tiny_agent.probes.reading", "--model", str(model),
        "--train-data", str(args.out / "sft_data" / "train.parquet"), "--pool", str(args.out / "caption_pool"),
        "--steps", str(steps), "--lr", str(lr), "--seed", str(args.seed),
        "--event-share", str(args.event_share), "--eval-dir", str(args.out / "synth_eval"),
        "--out", str(args.out / out), "--save", str(save), "--train-part", read_part(args, vision),
    ]  # fmt: skip


def glyph_command(args: argparse.Namespace) -> list[str]:
    """The glyph stage (``--glyph-steps N``): the untrained agent's vision encoder alone learns to
    classify digits, words, shapes and hues on the training and pool videos' frames
    (``recipes/tiny_agent/glyph_pretrain.py``), into ``OUT/init_glyphs``; its held-out accuracy in ``OUT/glyphs.json``."""
    if not args.caption_pool:
        raise SystemExit("--glyph-steps needs --caption-pool: the training videos alone hold too few glyphs")
    return [
        sys.executable, "-m", "recipes.tiny_agent.glyph_pretrain", "--model", str(args.out / "init"),
        "--media", str(args.out / "synth_train"), str(args.out / "caption_pool"),
        "--eval-dir", str(args.out / "synth_eval"), "--steps", str(args.glyph_steps), "--lr", str(args.glyph_lr),
        "--pool", args.glyph_pool, "--seed", str(args.seed), "--out", str(args.out / "glyphs.json"), "--save", str(base_init(args)),
    ]  # fmt: skip


def sft_command(args: argparse.Namespace) -> list[str]:
    """Phase 1: the text warm-up, then full-context SFT from the untrained agent (with captions if asked),
    into its :func:`phase_dir`."""
    return [
        *_train_sft(args, sft_init(args), "sft", args.steps, args.lr, phase_dir(args, "sft"), args.seed,
                    args.caption_batch, log_every=25),
        f"omni_sft.local.batch_size={args.batch_size}", f"omni_sft.local.warmup_steps={args.warmup_steps}",
        "omni_sft.local.cosine=true", f"omni_sft.local.text_warmup.steps={args.text_warmup_steps}",
        f"omni_sft.local.text_warmup.batch_size={args.text_warmup_batch}",
        f"omni_sft.local.text_warmup.observation_loss={bool(args.warmup_observation_loss)}",
        f"omni_sft.local.text_warmup.option_shuffles={args.option_shuffles}",
    ]  # fmt: skip


def events_command(args: argparse.Namespace) -> list[str]:
    """Phase 2 (``--event-steps N``): N more full-context steps from phase 1's agent at a constant
    ``--event-lr``, each followed by a caption batch in which ``--event-share`` of the frames show an
    event (a shape, digit, word or flash), so the agent learns to read events and not only backgrounds;
    with ``--event-percepts N``, each batch also holds N whole served runs of frames, captioned with
    the text of their Observation (which of the frames shows the event). Another seed than phase
    1's, so it sees the turns in another order."""
    return [
        *_train_sft(args, phase_input(args, "events"), "sft_events", args.event_steps, args.event_lr,
                    phase_dir(args, "events"), args.seed + 1, args.caption_batch or 16, log_every=50),
        f"omni_sft.local.captions.event_share={args.event_share}",
        f"omni_sft.local.captions.percepts={args.event_percepts}",
    ]  # fmt: skip


def run_stages(args: argparse.Namespace) -> None:
    out, logs = args.out, args.out / "logs"
    kept, parquet = out / "sft_data" / "kept.jsonl", out / "sft_data" / "train.parquet"
    for stage in args.stages:
        start = time.monotonic()
        if stage == "data":
            make_synth_set(out / "synth_train", args.train_seed, args.train_videos, args.durations, "train")
            if args.caption_pool:
                make_caption_pool(args)
        elif stage == "synth" and not (out / "sft_data" / "summary.json").exists():
            run_stage(synth_command(args), logs / "synth.log")
        elif stage == "export" and not parquet.exists():
            run_stage(
                [sys.executable, "-m", "rl.sft.export", "--kept", str(kept), "--out", str(parquet)],
                logs / "export.log",
            )
        elif stage == "build" and not (out / "init" / "config.json").exists():
            from recipes.tiny_agent.model import AgentSize, build_agent_thinker, corpus_texts

            size = AgentSize(vision_hidden_size=args.vision_width, vision_depth=args.vision_depth)
            build_agent_thinker(out / "init", corpus_texts([parquet]), seed=args.seed, size=size)
            stats = turn_token_stats(parquet, out / "init", args.max_new_tokens)
            write_atomic(out / "turn_tokens.json", json.dumps(stats, indent=2))
            print(f"teacher turns: {json.dumps(stats)}", flush=True)
        elif stage == "glyphs" and args.glyph_steps and not (base_init(args) / "config.json").exists():
            held_out_set(args)
            run_stage(glyph_command(args), logs / "glyphs.log")
        elif stage == "read" and args.read_steps and not (sft_init(args) / "config.json").exists():
            held_out_set(args)
            if not (out / "init_read" / "config.json").exists():
                run_stage(read_command(args), logs / "read.log")
            if grafted(args):
                from rl.checkpoint import graft_weights

                graft_weights(out / "init", out / "init_read", "visual.", sft_init(args))
        elif stage == "sft" and not (phase_dir(args, "sft") / "config.json").exists():
            run_stage(sft_command(args), logs / "sft.log")
        elif (
            stage == "events"
            and args.event_steps
            and not (phase_dir(args, "events") / "config.json").exists()
        ):
            run_stage(events_command(args), logs / "sft_events.log")
        elif (
            stage == "vision"
            and args.vision_read_steps
            and not (phase_dir(args, "vision") / "config.json").exists()
        ):
            held_out_set(args)
            run_stage(read_command(args, vision=True), logs / "read_vision.log")
        elif (
            stage == "probe"
        ):  # a minute: does the agent read its media at all? (recipes/tiny_agent/probes/media.py)
            probe = [sys.executable, "-m", "recipes.tiny_agent.probes.media", "--model", str(out / "agent"), "--data", str(parquet),
                     "--out", str(out / "media_probe.json")]  # fmt: skip
            run_stage(probe, logs / "probe.log")
        elif stage == "eval":
            stage_eval(args)
        elif stage == "scaling":
            run_stage(scaling_command(args), logs / "scaling.log")
        elif stage == "ship":
            from omniagent.tiny_agent import ship_agent

            print(f"shipped: {ship_agent(out, vars(args))}", flush=True)
        print(f"stage {stage}: {time.monotonic() - start:.0f} s", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    run_stages(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
