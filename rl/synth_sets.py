"""The synthetic media sets of the tiny agent's recipe (``rl/tiny_recipe.py``): the training and
held-out sets, the "blind" copies of the held-out media, and the caption pool.

Why a module of their own: each is a pure function of its seed and sizes, and tests and the shipped
agent's provenance check (``tests/test_tiny_agent_shipped.py``) rebuild them without the recipe.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from envs.jsonl import write_atomic


def make_synth_set(out: Path, seed: int, n_videos: int, durations: list[float], split: str) -> Path:
    from envs.synth import generate_benchmark

    generate_benchmark(out, seed=seed, n_videos=n_videos, durations=durations, split=split)
    return out / "tasks.jsonl"


def blank_media(tasks_file: Path, out: Path) -> Path:
    """Copies of every task's media with black frames and digital silence (same streams, durations
    and timestamps), and a tasks file with the same ids pointing at them: the "blind" control."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in tasks_file.read_text().splitlines() if line.strip()]
    done: dict[str, str] = {}
    for row in rows:
        src = Path(row["media"]) if Path(row["media"]).is_absolute() else tasks_file.parent / row["media"]
        if str(src) not in done:
            dst = out / src.name
            if not dst.exists():
                tmp = dst.with_name(".tmp-" + dst.name)
                subprocess.run(
                    ["ffmpeg", "-y", "-v", "error", "-i", str(src), "-map", "0",
                     "-vf", "lutrgb=r=0:g=0:b=0", "-af", "volume=0", "-c:v", "libx264", "-c:a", "aac", str(tmp)],
                    check=True,
                )  # fmt: skip
                tmp.rename(dst)
            done[str(src)] = str(dst)
        row["media"] = done[str(src)]
    return write_atomic(out / "tasks.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


POOL_EVENTS = 12  # event groups per 60 s pool video (the benchmark's default for 60 s is 4)


def make_caption_pool(args: argparse.Namespace) -> Path:
    """``--caption-pool`` extra 60 s videos for captions only (``rl.frame_captions.pool_chats``): no
    task of them is trained or evaluated, and their seed is neither the training nor a held-out one."""
    if args.caption_pool_seed in (args.train_seed, args.eval_seed):
        raise SystemExit(f"--caption-pool-seed {args.caption_pool_seed} is the training or the held-out seed")
    from envs.synth import generate_benchmark

    out = args.out / "caption_pool"
    config = {"n_events": POOL_EVENTS}
    generate_benchmark(out, seed=args.caption_pool_seed, n_videos=args.caption_pool, durations=[60.0],
                       config=config, split="train")  # fmt: skip
    return out
