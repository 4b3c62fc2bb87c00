"""Glyph pretraining: the agent's vision encoder learns to tell digits, words, shapes and hues apart
by classification, before any caption asks it to name them.

Why (measured, README "Reading values"): trained by captions alone, the tiny agent's vision encoder
(32 wide, 2 layers, 14 px patches) names the kind of event but reads a digit at chance even after
10000 caption steps, while classified directly it reads most of them (README "Glyph pretraining").
Two things were missing, we believe (one-off checks, not results). A caption gives the encoder one token's gradient per
frame, passed back through a text model that is itself still learning; and the encoder, which has
no built-in translation invariance, sees each of a few thousand glyphs at one position only, so it
learns the frames by heart. Here every frame trains five linear heads at once (which digit, which
word, which shape and colour, which background hue) straight on the encoder's output tokens, and
every frame is shifted by a random offset each time it is drawn.

Each head scores every output token of a frame and pools the scores over the frame, by log-sum-exp
(``--pool lse``, the default: a label need only be readable from the tokens where the glyph is) or
by their mean (``--pool mean``: readable from the frame's average token, spread over the frame the
way the background hue is, which the text model names from the first SFT steps). Measured (README,
"Glyph pretraining"): the mean learns digits far more slowly, so the recipe keeps log-sum-exp and
teaches the text model to name what the encoder sees with a read stage instead.
The heads are thrown away after training; the saved folder is the agent with the new encoder, the
text model untouched (``recipes.tiny_agent.recipe --glyph-steps N``: SFT then starts from it with the encoder
frozen).

    python -m recipes.tiny_agent.glyph_pretrain --model runs/tiny_agent/init --media runs/tiny_agent/caption_pool \\
        --eval-dir runs/reading_eval --steps 3000 --save runs/tiny_agent/init_glyphs
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

from envs.synth.barcode import barcode_height
from envs.synth.config import SCREEN_WORDS, SHAPE_COLORS, SHAPES
from omniagent.backends.synth_world import HUES, Item, SynthWorld, WorldError

# Each head's classes; class 0 is "not on this frame" for all but the background hue.
LABELS: dict[str, tuple[str, ...]] = {
    "digit": ("none", *"0123456789"),
    "word": ("none", *SCREEN_WORDS),
    "shape": ("none", *SHAPES),
    "color": ("none", *SHAPE_COLORS),
    "hue": HUES,
}
GLYPH_KINDS = ("shape", "digit", "word")


def frame_labels(items: list[Item]) -> dict[str, int]:
    """The class index of every head for one frame's ground truth (``SynthWorld.frame``)."""
    labels = dict.fromkeys(LABELS, 0)
    for item in items:
        if item.kind in ("digit", "word"):
            labels[item.kind] = LABELS[item.kind].index(item.value)
        elif item.kind == "shape":
            color, shape = item.value.split()
            labels["shape"], labels["color"] = LABELS["shape"].index(shape), LABELS["color"].index(color)
        elif item.kind == "background":
            labels["hue"] = LABELS["hue"].index(item.value)
    return labels


def labelled_frames(
    media_dirs: Sequence[str | Path], seed: int, per_event: int = 3
) -> list[tuple[np.ndarray, dict[str, int]]]:
    """Served frames of every synthetic video in ``media_dirs``: ``per_event`` at random times inside
    each shape, digit and word, and a third as many at random times; media without a sidecar are
    skipped. Decoded by the environment's own reader, so they look exactly like served frames."""
    from recipes.tiny_agent.frame_captions import decoded_frames, event_times

    rng = random.Random(seed)
    out = []
    for path in sorted(p for d in media_dirs for p in Path(d).glob("*.mp4")):
        try:
            world = SynthWorld.for_media(path)
        except WorldError:
            continue
        times = event_times(world, GLYPH_KINDS, per_event, rng, random_every=3, margin=0.5)
        out += [(f.image, frame_labels(world.frame(f.time))) for f in decoded_frames(path, times)]
    if not out:
        raise SystemExit(f"no synthetic video with a sidecar in {', '.join(map(str, media_dirs))}")
    return out


def shifted(image: np.ndarray, rng: np.random.Generator, max_shift: tuple[int, int] = (12, 30)) -> np.ndarray:
    """``image`` with its picture (not the frame-index barcode at the bottom) rolled by a random
    offset of up to ``max_shift`` (rows, columns), so a glyph is seen at many positions."""
    rows = image.shape[0] - barcode_height(image.shape[0])
    dy, dx = (int(rng.integers(-m, m + 1)) for m in max_shift)
    out = image.copy()
    out[:rows] = np.roll(image[:rows], (dy, dx), axis=(0, 1))
    return out


POOLS = ("lse", "mean")


class GlyphHeads:
    """Linear heads on the encoder's output tokens, each pooled over a frame (``pool``: log-sum-exp
    of the token scores, or their mean)."""

    def __init__(self, width: int, pool: str = "lse") -> None:
        import torch

        if pool not in POOLS:
            raise ValueError(f"pool {pool!r} is not one of {POOLS}")
        self.pool = pool
        self.heads = torch.nn.ModuleDict({k: torch.nn.Linear(width, len(v)) for k, v in LABELS.items()})

    def __call__(self, visual: Any, pixel_values: Any, grid_thw: Any) -> dict[str, Any]:
        import torch

        tokens = visual(pixel_values, grid_thw=grid_thw).pooler_output
        per_frame = int(grid_thw[0].prod()) // visual.spatial_merge_unit
        tokens = tokens.reshape(grid_thw.shape[0], per_frame, -1)
        if self.pool == "mean":
            return {k: head(tokens).mean(dim=1) for k, head in self.heads.items()}
        return {k: torch.logsumexp(head(tokens), dim=1) for k, head in self.heads.items()}


def _pixels(processor: Any, images: list[np.ndarray]) -> tuple[Any, Any]:
    batch = processor.image_processor(images=images, return_tensors="pt")
    return batch["pixel_values"], batch["image_grid_thw"]


def accuracy(
    visual: Any, heads: GlyphHeads, processor: Any, frames: list[tuple[np.ndarray, dict[str, int]]]
) -> dict[str, Any]:
    """Each head's accuracy on ``frames`` as they are (no shift), over the frames that show its kind
    (every frame for the hue), with a 95% bootstrap CI and the number of frames."""
    import torch

    from omniagent.eval.intervals import bootstrap_ci

    hits: dict[str, list[int]] = {k: [] for k in LABELS}
    visual.eval()
    with torch.no_grad():
        for i in range(0, len(frames), 64):
            chunk = frames[i : i + 64]
            logits = heads(visual, *_pixels(processor, [image for image, _ in chunk]))
            for name, scores in logits.items():
                guess = scores.argmax(-1).tolist()
                hits[name] += [
                    int(g == lab[name])
                    for g, (_, lab) in zip(guess, chunk, strict=True)
                    if lab[name] or name == "hue"
                ]
    visual.train()
    res: dict[str, Any] = {k: round(float(np.mean(v)), 3) for k, v in hits.items() if v}
    res["ci95"] = {k: [round(bootstrap_ci(v)[e], 3) for e in ("lo", "hi")] for k, v in hits.items() if v}
    res["frames"] = {k: len(v) for k, v in hits.items()}
    return res


def train_glyphs(
    model: Any,
    processor: Any,
    frames: list[tuple[np.ndarray, dict[str, int]]],
    args: argparse.Namespace,
    held_out: list[tuple[np.ndarray, dict[str, int]]] | None = None,
) -> tuple[GlyphHeads, dict[str, Any]]:
    """``args.steps`` AdamW steps on batches of ``args.batch_size`` shifted frames, the summed
    cross-entropy of all heads; only the vision encoder (and the heads) change. With
    ``args.eval_every`` and ``held_out``, the held-out accuracy every that many steps."""
    import torch

    visual = model.visual
    heads = GlyphHeads(visual.merger.mlp[-1].out_features, args.pool)
    params = [*visual.parameters(), *heads.heads.parameters()]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    rng = np.random.default_rng(args.seed)
    targets = {k: torch.tensor([lab[k] for _, lab in frames]) for k in LABELS}
    visual.train()
    start, losses, curve = time.monotonic(), [], []
    for step in range(args.steps):
        idx = rng.choice(len(frames), size=min(args.batch_size, len(frames)), replace=False)
        logits = heads(visual, *_pixels(processor, [shifted(frames[i][0], rng) for i in idx]))
        loss = sum(torch.nn.functional.cross_entropy(logits[k], targets[k][idx]) for k in LABELS)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 250 == 0:
            print(json.dumps({"step": step + 1, "loss": round(float(np.mean(losses[-250:])), 4)}), flush=True)
        if held_out and args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < args.steps:
            curve.append({"step": step + 1, **accuracy(visual, heads, processor, held_out)})
            print(json.dumps(curve[-1]), flush=True)
    window = min(250, max(1, len(losses) // 5))  # the loss averaged over the first and last steps
    first, final = (
        round(float(np.mean(part)), 4) if losses else None for part in (losses[:window], losses[-window:])
    )
    return heads, {"curve": curve, "train_frames": len(frames), "first_loss": first, "final_loss": final,
                   "train_s": round(time.monotonic() - start)}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.tiny_agent.glyph_pretrain", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--model", required=True, help="an agent folder (e.g. recipes.tiny_agent.model's untrained init)"
    )
    p.add_argument("--media", nargs="+", required=True, help="synthetic video folders to train on")
    p.add_argument("--eval-dir", nargs="+", help="held-out synthetic video folders (accuracy by head)")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--pool", choices=POOLS, default="lse", help="how a head pools its token scores per frame")
    p.add_argument("--eval-every", type=int, default=0, help="held-out accuracy every N steps too")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="write the result here as JSON")
    p.add_argument(
        "--save", type=Path, help="save the agent with the trained encoder here (a complete folder)"
    )
    args = p.parse_args(argv)
    import torch
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration

    from recipes.tiny_agent.probes.reading import save_and_report
    from rl.sft.dataset import load_processor

    torch.manual_seed(args.seed)
    processor = load_processor(args.model)
    model = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32)
    frames = labelled_frames(args.media, args.seed)
    held_out = labelled_frames(args.eval_dir, args.seed + 1, per_event=1) if args.eval_dir else None
    heads, result = train_glyphs(model, processor, frames, args, held_out)
    result = {
        "model": args.model,
        "media": args.media,
        "steps": args.steps,
        "lr": args.lr,
        "pool": args.pool,
        **result,
    }
    if held_out:
        result.update(accuracy(model.visual, heads, processor, held_out))
    save_and_report(model, processor, result, args.save, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
