"""The tiny agent recipe's stages and settings (``python -m recipes.tiny_agent --help``), apart from the
stages' code in :mod:`recipes.tiny_agent.recipe` so each stays short. Every setting is named once here, with
its meaning, and recorded in the shipped agent's manifest."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipes.tiny_agent.glyph_pretrain import POOLS

DESCRIPTION = (
    "The tiny agent's whole recipe in one command: data, teacher synthesis, SFT, held-out evaluation."
)

STAGES = (
    "data",
    "synth",
    "export",
    "build",
    "glyphs",
    "read",
    "sft",
    "events",
    "vision",
    "probe",
    "eval",
    "scaling",
    "ship",
)
# ``scaling`` (a turn-budget sweep, ~15 min) and ``ship`` (replaces the package's agent): only when named
DEFAULT_STAGES = tuple(s for s in STAGES if s not in ("scaling", "ship"))


# (flag, type, default, help): the recipe's settings; every one is recorded in the shipped manifest
OPTIONS: list[tuple[str, type, Any, str]] = [
    ("--train-seed", int, 101, "synthetic training set seed"),
    ("--eval-seed", int, 202, "held-out set seed (other videos and tasks)"),
    ("--train-videos", int, 16, "training videos"),
    ("--eval-videos", int, 4, "held-out videos"),
    ("--n-samples", int, 4, "best-of-N teacher episodes per task"),
    ("--min-turns", int, 8, "teacher episodes draw their turn budget K from [min-turns, 16]"),
    (
        "--error-rate",
        float,
        0.0,
        "teacher's chance of first answering in a wrong format (recovered; not a target)",
    ),
    ("--look-error-rate", float, 0.0, "the same for looks (a reversed span)"),
    ("--per-frame", int, 1, "1: the teacher observes a get_frames look one sentence per frame (0: per run)"),
    ("--named-frame", int, 1, "1: the teacher first looks at a question's named time as that one frame"),
    ("--option-thought", int, 1, "1: the teacher's mcq answer Thought names the option ('7 is option C.')"),
    (
        "--unit-thought",
        int,
        0,
        "1: the teacher's number answer Thought names what it counts or measures ('a count of beeps')",
    ),
    ("--option-shuffles", int, 8, "text warm-up: each such answer turn N more times, options reordered"),
    ("--text-warmup-steps", int, 1500, "short-context text steps first (recipes/tiny_agent/text_warmup.py)"),
    ("--text-warmup-batch", int, 16, "text warm-up batch size"),
    (
        "--warmup-observation-loss",
        int,
        0,
        "1: the text warm-up trains the Observation too; 0: gives it, trains Thought and Action",
    ),
    ("--steps", int, 2500, "full-context SFT optimizer steps (batch 1)"),
    (
        "--caption-batch",
        int,
        16,
        "single-frame captions after every SFT step (recipes/tiny_agent/frame_captions.py; 0: off)",
    ),
    ("--batch-size", int, 1, "full-context SFT batch size"),
    ("--lr", float, 2e-3, "SFT peak learning rate (cosine decay)"),
    ("--warmup-steps", int, 30, "linear lr warm-up steps"),
    ("--event-steps", int, 600, "phase 2: full-context steps with event-rich captions after SFT (0: none)"),
    ("--event-lr", float, 1e-3, "phase 2 learning rate (constant)"),
    ("--event-share", float, 0.5, "phase 2: share of caption frames showing an event"),
    (
        "--event-percepts",
        int,
        8,
        "phase 2: whole served runs of frames captioned per batch (recipes/tiny_agent/frame_captions.py)",
    ),
    ("--vision-width", int, 64, "the agent's vision encoder width (recipes.tiny_agent.model.AgentSize)"),
    ("--vision-depth", int, 2, "its layers"),
    ("--caption-pool", int, 200, "extra 60 s synthetic videos whose frames are captioned too (0: none)"),
    ("--caption-pool-seed", int, 606, "their seed (neither the training nor a held-out seed)"),
    (
        "--glyph-steps",
        int,
        3000,
        "vision encoder classification steps before SFT (recipes/tiny_agent/glyph_pretrain.py)",
    ),
    ("--glyph-lr", float, 2e-3, "their learning rate (constant)"),
    ("--glyph-pool", str, "lse", "how each glyph head pools its token scores over a frame: lse or mean"),
    (
        "--read-steps",
        int,
        2500,
        "caption-only steps before SFT (recipes.tiny_agent.probes.reading; needs --caption-pool)",
    ),
    ("--read-keep", str, "all", "all: SFT starts from the read stage's agent; vision: its encoder alone"),
    (
        "--vision-read-steps",
        int,
        0,
        "caption-only steps after SFT, vision encoder alone (needs --caption-pool)",
    ),
    ("--vision-read-lr", float, 2e-3, "their learning rate (constant)"),
    ("--save-every", int, 100, "steps between resumable checkpoints"),
    ("--seed", int, 0, "synthesis, build and SFT seed"),
    ("--max-new-tokens", int, 384, "generation limit (see OUT/turn_tokens.json)"),
    ("--max-frames", int, 8, "frames per look, synthesis and eval"),
    ("--max-clip-s", float, 10.0, "seconds per clip, synthesis and eval"),
    ("--max-audio-s", float, 30.0, "seconds per audio look (the processor hears 30)"),
    ("--max-answer-chars", int, 40, "characters in a free-form answer (synthetic ff answers are one word)"),
    ("--eval-limit", int, 0, "first N held-out tasks only (0: all)"),
    ("--eval-jobs", int, 1, "eval rows run at once, the CPU's threads split between them (1: in turn)"),
    (
        "--constrained",
        int,
        1,
        "1: the agent decodes under the env's turn schema (xgrammar); 0: free decoding",
    ),
]


# settings whose value is one of a fixed set: refused when the recipe starts, not when their stage does
CHOICES: dict[str, tuple[str, ...]] = {"--read-keep": ("all", "vision"), "--glyph-pool": POOLS}

# Earlier agents' recipes by name: their settings replace the defaults, and flags still override
# them. The defaults are the shipped agent's (a glyph stage, a read stage); README Results shows each.
PRESETS: dict[str, dict[str, Any]] = {
    # shipped until 2026-12-02: runs of frames observed per run, no glyph or read stage, no pool
    "event-phase": {
        "per_frame": 0,
        "named_frame": 0,
        "option_thought": 0,
        "option_shuffles": 0,
        "text_warmup_steps": 1500,
        "warmup_observation_loss": 1,
        "steps": 2500,
        "event_steps": 1000,
        "event_percepts": 0,
        "vision_width": 32,
        "caption_pool": 0,
        "glyph_steps": 0,
        "read_steps": 0,
    },
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m recipes.tiny_agent", description=DESCRIPTION)
    p.add_argument("--out", type=Path, default=Path("runs/tiny_agent"))
    p.add_argument("--stages", nargs="+", choices=STAGES, default=list(DEFAULT_STAGES))
    p.add_argument("--durations", type=lambda s: [float(x) for x in s.split(",")], default=[60.0, 180.0])
    for flag, kind, default, help_ in OPTIONS:
        p.add_argument(flag, type=kind, default=default, help=help_, choices=CHOICES.get(flag))
    p.add_argument(
        "--scaling-ks",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[2, 4, 8, 16],
        help="turn budgets of the scaling stage",
    )
    p.add_argument(
        "--eval-random-weights",
        action="store_true",
        help="also evaluate the untrained agent, OUT/init (slow)",
    )
    p.add_argument(
        "--eval-free", action="store_true", help="also evaluate the agent, and blind, with free decoding"
    )
    p.add_argument("--preset", choices=sorted(PRESETS), help="an earlier agent's settings as the defaults")
    args = p.parse_args(argv)
    if args.preset:
        p.set_defaults(**PRESETS[args.preset])
        args = p.parse_args(argv)
    args.out = args.out.resolve()
    return args
