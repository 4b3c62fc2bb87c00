"""The synthetic media sets of the tiny agent's recipe (``recipes/tiny_agent/recipe.py``): the training and
held-out sets, the "blind" copies of the held-out media, the caption pool, and the task set of an RL
run's ``local.task_pool``.

    python -m recipes.tiny_agent.sets pool runs/rl_pool/taura_pool runs/tiny_ship/synth_train/tasks.jsonl \
        --out runs/rl_pool/pool --blind runs/rl_pool/pool_blind

Why a module of their own: each is a pure function of its seed and sizes, and tests and the shipped
agent's provenance check (``tests/test_tiny_agent_shipped.py``) rebuild them without the recipe.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from envs.jsonl import read_jsonl, write_atomic


def make_synth_set(out: Path, seed: int, n_videos: int, durations: list[float], split: str) -> Path:
    from envs.synth import generate_benchmark

    generate_benchmark(out, seed=seed, n_videos=n_videos, durations=durations, split=split)
    return out / "tasks.jsonl"


def media_path(row: dict, tasks_file: Path) -> Path:
    """A task row's media file: a relative path is relative to the tasks file's folder."""
    media = Path(row["media"])
    return media if media.is_absolute() else tasks_file.parent / media


def blank_media(tasks_file: Path, out: Path) -> Path:
    """Copies of every task's media with black frames and digital silence (same streams, durations
    and timestamps), and a tasks file with the same ids pointing at them: the "blind" control."""
    out.mkdir(parents=True, exist_ok=True)
    rows = read_jsonl(tasks_file)
    done: dict[str, str] = {}
    for row in rows:
        src = media_path(row, tasks_file)
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


def pool_tasks(run_dir: Path, tasks_file: Path, out: Path) -> Path:
    """The tasks an ``rl/train_local.py`` run replayed (ids in its ``task_pool.json``), copied from
    ``tasks_file`` with absolute media paths into ``out/tasks.jsonl``: evaluating a policy on the tasks it
    trained on (with ``benchmark.dataset_kwargs.allow_outside_media_root=true``)."""
    ids = json.loads((run_dir / "task_pool.json").read_text())
    rows = {row["id"]: row for row in read_jsonl(tasks_file)}
    missing = [i for i in ids if i not in rows]
    if missing:
        raise SystemExit(f"{len(missing)} pool tasks are not in {tasks_file}: {', '.join(missing[:3])}")
    out.mkdir(parents=True, exist_ok=True)
    picked = [{**rows[i], "media": str(media_path(rows[i], tasks_file).resolve())} for i in ids]
    return write_atomic(out / "tasks.jsonl", "".join(json.dumps(r) + "\n" for r in picked))


POOL_EVENTS = 12  # event groups per 60 s pool video (the benchmark's default for 60 s is 4)


def make_caption_pool(args: argparse.Namespace) -> Path:
    """``--caption-pool`` extra 60 s videos for captions only (``recipes.tiny_agent.frame_captions.pool_chats``): no
    task of them is trained or evaluated, and their seed is neither the training nor a held-out one."""
    if args.caption_pool_seed in (args.train_seed, args.eval_seed):
        raise SystemExit(f"--caption-pool-seed {args.caption_pool_seed} is the training or the held-out seed")
    from envs.synth import generate_benchmark

    out = args.out / "caption_pool"
    config = {"n_events": POOL_EVENTS}
    generate_benchmark(out, seed=args.caption_pool_seed, n_videos=args.caption_pool, durations=[60.0],
                       config=config, split="train")  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m recipes.tiny_agent.sets", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    pool = sub.add_parser("pool", help="the task set of a run's local.task_pool (and its blind copy)")
    pool.add_argument("run_dir", type=Path, help="an rl/train_local.py run folder with task_pool.json")
    pool.add_argument("tasks", type=Path, help="the run's local.train_tasks file")
    pool.add_argument("--out", type=Path, required=True, help="folder for tasks.jsonl")
    pool.add_argument("--blind", type=Path, help="also write the blind copy (black frames, silence) here")
    args = parser.parse_args(argv)
    if not (args.run_dir / "task_pool.json").exists():
        raise SystemExit(f"no task_pool.json in {args.run_dir} (a run with local.task_pool expected)")
    written = pool_tasks(args.run_dir, args.tasks, args.out)
    print(written)
    if args.blind:
        print(blank_media(written, args.blind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
