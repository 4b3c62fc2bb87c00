"""The command line: ``python -m envs.synth --out DIR --seed 0 --n 4 --durations 60,600``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import envs.synth
from envs.synth.generate import generate_benchmark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m envs.synth", description=envs.synth.__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=4, help="number of media files")
    parser.add_argument("--durations", default="60,600", help="comma-separated seconds, cycled over files")
    parser.add_argument("--mode", choices=["video", "audio"], default="video")
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--height", type=int, default=90)
    parser.add_argument("--fps", type=int, default=5)
    parser.add_argument("--no-audio", action="store_true", help="video without a soundtrack")
    parser.add_argument("--audio-format", choices=["wav", "flac", "mp3"], default="wav")
    parser.add_argument("--n-events", type=int, default=None)
    parser.add_argument(
        "--level",
        choices=["benchmark", "search"],
        default="benchmark",
        help="benchmark: every event kind and template; search: the RL testbed level (envs/synth/search.py)",
    )
    parser.add_argument(
        "--search-fields",
        choices=["random", "grid"],
        default="random",
        help="search level: colour fields of random lengths, or four equal ones",
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = parser.parse_args(argv)
    durations = [float(d) for d in args.durations.split(",") if d.strip()]
    config = {
        "width": args.width,
        "height": args.height,
        "fps": args.fps,
        "audio": not args.no_audio,
        "audio_format": args.audio_format,
        "n_events": args.n_events,
    }
    if args.level != "benchmark":
        config["level"] = args.level
        config["search_fields"] = args.search_fields
    elif args.search_fields != "random":
        parser.error("--search-fields is a setting of --level search")
    t0 = time.perf_counter()
    tasks = generate_benchmark(
        args.out,
        seed=args.seed,
        n_videos=args.n,
        durations=durations,
        mode=args.mode,
        config=config,
        split=args.split,
        force=args.force,
        verbose=True,
    )
    by_type: dict[str, int] = {}
    for task in tasks:
        by_type[task.task_type] = by_type.get(task.task_type, 0) + 1
    print(
        f"{len(tasks)} tasks {by_type} -> {Path(args.out) / 'tasks.jsonl'} ({time.perf_counter() - t0:.1f} s)"
    )
    return 0
