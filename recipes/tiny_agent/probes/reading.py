"""Can the agent READ a frame? Single held-out frames captioned greedily, each claim checked against
the synthetic world: the background hue, whether a shape/digit/word is named, and its value (which
digit, which word, which colour and shape, how wide).

Why: the agent's frame claims in its episodes (``recipes/tiny_agent/probes/observations.py``) showed it names the
background and the kind of event far above chance, yet it answers value questions (which digit, how
wide) no better than blind. This isolates the reading itself from search and answering, and, with
``--steps``, trains single-frame captions alone from an untrained agent (``recipes.tiny_agent.model``) to
measure what its vision can learn at all: from the served training frames only, or with a pool of
extra synthetic videos (``--pool``, :func:`recipes.tiny_agent.frame_captions.pool_chats`).

    python -m recipes.tiny_agent.probes.reading --model runs/tiny_agent/agent --eval-dir runs/tiny_agent/synth_eval
    python -m recipes.tiny_agent.probes.reading --model runs/tiny_agent/init --eval-dir runs/tiny_agent/synth_eval \\
        --train-data runs/tiny_agent/sft_data/train.parquet --pool runs/tiny_agent/caption_pool --steps 3000
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import write_atomic
from omniagent.backends.synth_world import Item, SynthWorld, parse_observation

READ_KINDS = ("shape", "digit", "word")
TRAIN_PARTS = ("all", "vision", "text")


def held_out_frames(
    eval_dirs: Sequence[str | Path], seed: int = 0
) -> list[tuple[float, np.ndarray, list[Item]]]:
    """``(time, image, truth)`` for the middle frame of every shape, digit and word of the videos in
    ``eval_dirs``, and half as many frames at random times (background only, mostly)."""
    from recipes.tiny_agent.frame_captions import decoded_frames

    rng = random.Random(seed)
    frames = []
    for path in sorted(p for d in eval_dirs for p in Path(d).glob("*.mp4")):
        world = SynthWorld.for_media(path)
        times = [0.5 * (e["start"] + e["end"]) for e in world.events if e["kind"] in READ_KINDS]
        times += [rng.uniform(0.0, world.duration - 0.5) for _ in range(len(times) // 2)]
        frames += [(round(f.time, 2), f.image, world.frame(f.time)) for f in decoded_frames(path, times)]
    if not frames:
        raise SystemExit(f"no synthetic video with a sidecar in {', '.join(map(str, eval_dirs))}")
    return frames


def score_caption(
    text: str, truth: list[Item], hits: dict[str, list[int]], width_errors: list[float]
) -> None:
    """Append one caption's hits (1 or 0 per measure it applies to) to ``hits`` and its width error."""

    def add(name: str, hit: bool) -> None:
        hits.setdefault(name, []).append(int(hit))

    claims = [item for claim in parse_observation(text) for item in claim.items]
    for true in truth:
        said = [c for c in claims if c.kind == true.kind]
        if true.kind == "background":
            add("hue", any(c.value == true.value for c in said))
        elif true.kind in READ_KINDS:
            add(f"{true.kind}_named", bool(said))
            add(f"{true.kind}_value", any(c.value == true.value for c in said))
            if true.kind == "shape" and said and said[0].width and true.width:
                width_errors.append(abs(said[0].width - true.width) / true.width)


def read_accuracy(
    model: Any, processor: Any, frames: list[tuple[float, np.ndarray, list[Item]]]
) -> dict[str, Any]:
    """Greedy single-frame captions of ``frames`` (the caption prompt: frame label, then the image)."""
    from omniagent.eval.intervals import bootstrap_ci
    from recipes.tiny_agent.frame_captions import frame_prompt, greedy_caption

    hits: dict[str, list[int]] = {}
    width_errors: list[float] = []
    model.eval()
    for label, image, truth in frames:
        prompt = frame_prompt(label, {"type": "image", "image": image, "timestamp": label})
        text = greedy_caption(model, processor, prompt, max_new_tokens=48)
        score_caption(text, truth, hits, width_errors)
    res: dict[str, Any] = {k: round(float(np.mean(v)), 3) for k, v in sorted(hits.items())}
    res["frames"] = {k: len(v) for k, v in sorted(hits.items())}
    res["ci95"] = {k: [round(bootstrap_ci(v)[e], 3) for e in ("lo", "hi")] for k, v in sorted(hits.items())}
    if width_errors:
        res["width_rel_error_median"] = round(float(np.median(width_errors)), 3)
        res["width_within_10pct"] = round(float(np.mean([e <= 0.1 for e in width_errors])), 3)
    return res


def trainable_params(model: Any, part: str) -> list[Any]:
    """The parameters a caption run trains: ``all``; ``vision`` (``visual.*``, the encoder and its
    merger) with the text model frozen, so an SFT agent learns to read without its turns changing;
    or ``text``, everything but the encoder, which is how SFT trains after the glyph stage
    (``recipes/tiny_agent/glyph_pretrain.py``): can the text model learn to name what that encoder tells apart?"""
    from rl.sft.step import freeze_modules

    if part not in TRAIN_PARTS:
        raise ValueError(f"train part {part!r} is not one of {TRAIN_PARTS}")
    if part == "vision":
        freeze_modules(model, [name for name, _ in model.named_children() if name != "visual"])
    elif part == "text":
        freeze_modules(model, ["visual"])
    return [p for p in model.parameters() if p.requires_grad]


def train_captions(
    model: Any, train_data: str, processor: Any, args: argparse.Namespace, frames: list[Any]
) -> dict[str, Any]:
    """``args.steps`` AdamW steps of single-frame caption batches alone (``recipes/tiny_agent/frame_captions.py``);
    with ``args.eval_every``, the reading of ``frames`` every that many steps (a learning curve)."""
    import torch

    from recipes.tiny_agent.frame_captions import CaptionBatches
    from rl.sft.dataset import OmniTurnSFTDataset
    from rl.sft.step import optimizer_step

    dataset = OmniTurnSFTDataset(train_data, processor.tokenizer, {"max_length": 16384}, processor=processor)
    batches = CaptionBatches(dataset, args.batch_size, args.seed, args.event_share, pool=args.pool)
    params = trainable_params(model, args.train_part)
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    model.train()
    start, losses, curve = time.monotonic(), [], []
    for step in range(args.steps):
        losses.append(optimizer_step(model, opt, params, batches.batch(step), 1.0))
        if (step + 1) % 250 == 0:
            print(json.dumps({"step": step + 1, "loss": round(float(np.mean(losses[-250:])), 4)}), flush=True)
        if args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < args.steps:
            curve.append({"step": step + 1, **read_accuracy(model, processor, frames)})
            print(json.dumps(curve[-1]), flush=True)
            model.train()
    return {
        "curve": curve,
        "caption_frames": len(batches.chats),
        "caption_event_frames": len(batches.events),
        "final_loss": round(float(np.mean(losses[-250:])), 4),
        "train_s": round(time.monotonic() - start),
    }


def save_and_report(
    model: Any, processor: Any, result: dict[str, Any], save: Path | None, out: Path | None
) -> None:
    """Save the trained agent as a complete folder (``save``), print ``result`` and write it as JSON (``out``)."""
    if save:
        from rl.checkpoint import save_checkpoint

        save_checkpoint(model.eval(), processor, save)
    print(json.dumps(result))
    if out:
        write_atomic(out, json.dumps(result, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.tiny_agent.probes.reading", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--model",
        required=True,
        help="an agent folder (trained, or recipes.tiny_agent.model's untrained init)",
    )
    p.add_argument("--eval-dir", nargs="+", required=True, help="held-out synthetic video folder(s)")
    p.add_argument(
        "--train-data", help="exported SFT parquet whose served frames are captioned (with --steps)"
    )
    p.add_argument(
        "--pool",
        help="a folder of extra synthetic videos captioned too (recipes.tiny_agent.frame_captions.pool_chats)",
    )
    p.add_argument("--steps", type=int, default=0, help="caption-only training steps first (0: read as is)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument(
        "--train-part",
        choices=TRAIN_PARTS,
        default="all",
        help="vision: train the encoder, freeze the text model; text: the reverse",
    )
    p.add_argument("--event-share", type=float, default=0.5, help="share of caption frames showing an event")
    p.add_argument("--eval-every", type=int, default=0, help="also read the held-out frames every N steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="write the result here as JSON")
    p.add_argument("--save", type=Path, help="save the caption-trained agent here (a complete folder)")
    args = p.parse_args(argv)
    if args.steps and not args.train_data:
        p.error("--steps needs --train-data")
    import torch
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration

    from rl.sft.dataset import load_processor

    torch.manual_seed(args.seed)
    processor = load_processor(args.model)
    model = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32)
    result: dict[str, Any] = {
        "model": args.model,
        "steps": args.steps,
        "pool": args.pool,
        "train_part": args.train_part,
    }
    frames = held_out_frames(args.eval_dir, args.seed)
    if args.steps:
        result.update(train_captions(model, args.train_data, processor, args, frames))
    result.update(read_accuracy(model, processor, frames))
    save_and_report(model, processor, result, args.save, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
