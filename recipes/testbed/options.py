"""The testbed recipe's stages and settings (``python -m recipes.testbed --help``), apart from the stages' code in
:mod:`recipes.testbed.recipe`. Every setting is named once here, with its meaning."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

from envs.synth.config import SearchFields

DESCRIPTION = "The testbed agent (search level of envs.synth): data, synthesis, build, glyphs, SFT, eval."

STAGES = ("data", "synth", "export", "build", "glyphs", "timecopy", "sft", "eval")

# (flag, type, default, help)
OPTIONS: list[tuple[str, type, Any, str]] = [
    ("--train-seed", int, 5301, "training set seed (SFT synthesis, RL task draws)"),
    ("--train-videos", int, 96, "training videos (12 questions each)"),
    ("--pool-seed", int, 5302, "glyph pool seed (frames only)"),
    ("--pool-videos", int, 100, "glyph pool videos"),
    ("--dev-seed", int, 5303, "development set seed (calibration, learning-rate pilot)"),
    ("--dev-videos", int, 16, "development videos"),
    (
        "--digit-seconds",
        str,
        "1.0,2.0",
        "how long each digit is shown (lo,hi seconds; the level's search_digit_seconds)",
    ),
    (
        "--search-fields",
        str,
        "random",
        "the level's colour fields: random (random lengths) or grid (four equal fields; envs/synth/search.py)",
    ),
    ("--text-width", int, 128, "text model width (heads of 32, MLP twice as wide; recipes/testbed/model.py)"),
    ("--text-layers", int, 4, "text model layers"),
    ("--n-samples", int, 4, "best-of-N teacher episodes per task"),
    (
        "--option-echo",
        int,
        0,
        "1: the teacher's answer Thought writes the chosen option's text right before its letter ('9: D.')",
    ),
    (
        "--option-text",
        int,
        0,
        "1: a multiple-choice answer is the option's text ('green'), which the environment accepts and scores as "
        "its letter, and the answer Thought ends with it ('green at 41: green.')",
    ),
    (
        "--span-quote",
        int,
        0,
        "1: the teacher's second Thought opens with the first look's Observation clauses around the cue's field, "
        "verbatim, before the field's span ('14-28 red, 42 blue, 57 green; blue 28-57.')",
    ),
    (
        "--field-clauses",
        int,
        0,
        "1: the teacher's Observations write a look's frames as one clause per colour in a fixed order, each with "
        "the frames on either side of that colour's ('red 43-60, blue 0-26 digit 9 at 9'), so a colour's span "
        "follows its name",
    ),
    (
        "--answer-weight",
        float,
        1.0,
        "SFT loss weight of an answer action's tokens, in the text warm-up and full SFT (rl/sft/weights.py; 1: plain)",
    ),
    ("--turns", int, 5, "turn budget K of synthesis, RL and eval"),
    ("--token-target", int, 150, "mean tokens per teacher episode the build stage requires (0: no check)"),
    (
        "--glyph-steps",
        int,
        1000,
        "vision encoder classification steps (recipes/tiny_agent/glyph_pretrain.py)",
    ),
    ("--glyph-lr", float, 2e-3, "their learning rate"),
    (
        "--time-copy-steps",
        int,
        0,
        "whole-look caption steps after the glyph stage, before SFT (recipes/testbed/time_copy.py; 0: none)",
    ),
    (
        "--text-warmup-steps",
        int,
        1200,
        "short-context text steps before full SFT (recipes/tiny_agent/text_warmup.py)",
    ),
    ("--text-warmup-batch", int, 16, "text warm-up batch size"),
    ("--steps", int, 2000, "full-context SFT optimizer steps (batch 1)"),
    (
        "--caption-batch",
        int,
        16,
        "compact single-frame captions after every SFT step (recipes/testbed/captions.py; 0: off)",
    ),
    ("--lr", float, 2e-3, "SFT peak learning rate (cosine decay)"),
    ("--warmup-steps", int, 30, "linear lr warm-up steps"),
    ("--save-every", int, 100, "SFT steps between resumable checkpoints"),
    ("--seed", int, 0, "synthesis, build, glyph and SFT seed: the SFT seed of the gates"),
    ("--max-new-tokens", int, 128, "generation limit per turn (OUT/turn_tokens.json holds the teacher's)"),
    ("--max-frames", int, 8, "frames per look"),
    ("--max-clip-s", float, 10.0, "seconds per clip"),
    ("--max-audio-s", float, 30.0, "seconds per audio look (the processor hears 30)"),
    ("--max-answer-chars", int, 40, "characters in a free-form answer"),
    ("--eval-jobs", int, 1, "eval rows run at once, the CPU's threads split between them"),
]


def digit_seconds(args: argparse.Namespace) -> tuple[float, float]:
    lo, hi = (float(x) for x in str(args.digit_seconds).split(","))
    return lo, hi


def level_config(args: argparse.Namespace) -> dict[str, Any]:
    """The envs.synth config of every set the recipe makes: the search level."""
    return {
        "level": "search",
        "search_digit_seconds": list(digit_seconds(args)),
        "search_fields": args.search_fields,
    }


def limit_overrides(args: argparse.Namespace) -> dict[str, float | bool]:
    """The environment's caps, the same in synthesis, RL and evaluation (the system prompt states them), and with
    ``--option-text 1`` its acceptance of an option's text as a multiple-choice answer."""
    caps: dict[str, float | bool] = {
        "max_frames": args.max_frames,
        "max_clip_s": args.max_clip_s,
        "max_audio_s": args.max_audio_s,
        "max_answer_chars": args.max_answer_chars,
    }
    return {**caps, "mcq_option_text": True} if args.option_text else caps


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m recipes.testbed", description=DESCRIPTION)
    p.add_argument("--out", type=Path, default=Path("runs/testbed/sft_s0"), help="the SFT seed's folder")
    p.add_argument("--data", type=Path, default=None, help="folder of the shared sets (default: OUT/../data)")
    p.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    p.add_argument(
        "--eval-set", type=Path, default=None, help="tasks folder the eval stage scores (default: dev)"
    )
    for flag, kind, default, help_ in OPTIONS:
        p.add_argument(flag, type=kind, default=default, help=help_)
    args = p.parse_args(argv)
    args.out = args.out.resolve()
    args.data = (args.data or args.out.parent / "data").resolve()
    args.eval_set = (args.eval_set or args.data / "dev").resolve()
    digit_seconds(args)  # refused now, not when the data stage runs
    if args.search_fields not in get_args(SearchFields):
        p.error(f"--search-fields must be one of {', '.join(get_args(SearchFields))}")
    from recipes.testbed.model import text_size

    try:
        text_size(args.text_width, args.text_layers)
    except ValueError as exc:
        p.error(str(exc))
    return args
