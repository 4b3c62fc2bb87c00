"""What the testbed's probes share (:mod:`recipes.testbed.digit_probe`, :mod:`recipes.testbed.handover`): their
fresh set and its blanked copy, the environment, teacher and agent they play with, and the command line around
their rows (run, then summarise ``OUT/rows.jsonl`` into ``OUT/summary.json``, a table and a figure)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import read_jsonl, write_atomic
from recipes.testbed.cli_args import labelled


def make_probe_set(set_dir: Path, seed: int, videos: int) -> None:
    """A search-level test set of ``videos`` videos in ``set_dir`` and its blanked copy beside it."""
    from recipes.testbed.options import parse_args as recipe_args
    from recipes.testbed.recipe import make_set
    from recipes.tiny_agent.sets import blank_media

    tasks = make_set(set_dir, seed, videos, recipe_args([]), "test")
    blank_media(tasks, set_dir.parent / f"{set_dir.name}_blind")


def unseen_subset(
    set_dir: Path, train_tasks: Path, out: Path, leave_out: Iterable[str] = ()
) -> tuple[Path, list[str]]:
    """The set's questions whose media the evaluation's overlap guard passes against ``train_tasks`` (its media and
    (media, question) checks, content fingerprint included) and that ``leave_out`` (media file names) does not
    name, with their media and sidecars linked into ``out`` (the evaluation reads no media outside a set's folder);
    returns the tasks file and the videos left out."""
    import os
    import shutil

    from envs.tasks import load_tasks_jsonl
    from omniagent.eval.overlap import check_overlap

    tasks = load_tasks_jsonl(set_dir / "tasks.jsonl")
    flagged = check_overlap(load_tasks_jsonl(train_tasks), tasks).eval_ids(("media", "pair"))
    named = set(leave_out)
    dropped = sorted({Path(t.media).name for t in tasks if t.id in flagged or Path(t.media).name in named})
    out.mkdir(parents=True, exist_ok=True)
    rows = [r for r in read_jsonl(set_dir / "tasks.jsonl") if Path(r["media"]).name not in dropped]
    for name in sorted({Path(r["media"]).name for r in rows}):
        for src in (set_dir / name, set_dir / f"{name}.meta.json"):
            if src.exists() and not (out / src.name).exists():
                try:
                    os.link(src, out / src.name)
                except OSError:
                    shutil.copy2(src, out / src.name)
    body = "".join(json.dumps({**r, "media": Path(r["media"]).name}) + "\n" for r in rows)
    return write_atomic(out / "tasks.jsonl", body), dropped


def blind_media(set_dir: Path) -> dict[str, str]:
    """Question id -> the blanked copy of its media file."""
    blind = set_dir.parent / f"{set_dir.name}_blind" / "tasks.jsonl"
    return {str(r["id"]): str(r["media"]) for r in read_jsonl(blind)}


def unseen_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.testbed.probe_cli", description=unseen_subset.__doc__)
    p.add_argument("--set", type=Path, required=True, help="a search-level tasks folder")
    p.add_argument("--train", type=Path, required=True, help="the training set's tasks.jsonl")
    p.add_argument("--out", type=Path, required=True, help="folder of the subset")
    p.add_argument(
        "--leave-out", nargs="+", default=[], metavar="NAME", help="media file names left out as well"
    )
    args = p.parse_args(argv)
    tasks, dropped = unseen_subset(args.set, args.train, args.out, args.leave_out)
    print(f"{tasks}: {len(dropped)} video(s) left out: {', '.join(dropped) or 'none'}")
    return 0


def probe_env(option_text: bool = False) -> Any:
    """The environment at the recipe's caps and turn budget, on one CPU thread (what the probes and the time-copy
    stage serve their looks from); ``option_text``: as the recipe's ``--option-text 1``."""
    import torch

    from envs.env import OmniVideoEnv
    from envs.limits import EnvLimits
    from recipes.testbed.options import limit_overrides
    from recipes.testbed.options import parse_args as recipe_args

    torch.set_num_threads(1)
    recipe = recipe_args(["--option-text", str(int(option_text))])
    return OmniVideoEnv(limits=EnvLimits(**limit_overrides(recipe), max_turns=recipe.turns))


def probe_players(model: Path, seed: int, option_text: bool = False) -> tuple[Any, Any, Any]:
    """The environment (:func:`probe_env`), the search teacher (compact language, strategy seed ``seed``) and the
    agent (greedy, constrained, the recipe's turn limit); with ``option_text`` the environment accepts an option's
    text as the answer and the teacher answers with it (the recipe's ``--option-text 1``)."""
    from omniagent.policy import make_policy
    from recipes.testbed.options import parse_args as recipe_args

    env = probe_env(option_text)
    teacher = make_policy(
        "synth_teacher", seed=seed, limits=env.limits, compact=True, answer_text=option_text
    )
    agent = make_policy(
        "transformers",
        model=str(model),
        max_new_tokens=recipe_args([]).max_new_tokens,
        device="cpu",
        constrained=True,
    )
    return env, teacher, agent


def new_axes() -> tuple[Any, Any]:
    """A figure and its axes for a probe's plot (a file-only backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(6.4, 3.8))


def interval_bars(ax: Any, xs: Sequence[float], rates: Sequence[dict[str, Any]], **style: Any) -> None:
    """Points at each rate's ``mean`` with bars to its ``lo`` and ``hi`` (95% interval), capped."""
    means = [r["mean"] for r in rates]
    bars = [
        [m - r["lo"] for m, r in zip(means, rates, strict=True)],
        [r["hi"] - m for m, r in zip(means, rates, strict=True)],
    ]
    ax.errorbar(xs, means, yerr=bars, marker="o", capsize=3, **style)


def save_figure(fig: Any, path: Path) -> None:
    """Lay out, write (creating the folder) and close a probe's figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def probe_parser(
    prog: str, doc: str, videos: int, videos_help: str, conditions: Sequence[str]
) -> argparse.ArgumentParser:
    """A probe's command line: its name and the first paragraph of ``doc``, the options every probe takes, and
    ``--conditions`` (default: all of ``conditions``)."""
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    add_probe_args(p, videos, videos_help)
    p.add_argument("--conditions", nargs="+", choices=list(conditions), default=list(conditions))
    return p


def add_probe_args(p: argparse.ArgumentParser, videos: int, videos_help: str) -> None:
    """The options every probe takes."""
    p.add_argument("--model", type=Path, help="the agent's checkpoint folder")
    p.add_argument(
        "--set", type=Path, required=True, help="a search-level tasks folder (its blanked copy beside it)"
    )
    p.add_argument("--out", type=Path, required=True, help="folder of rows.jsonl and summary.json")
    p.add_argument("--make-set", type=int, metavar="SEED", help="first make the set (and its blanked copy)")
    p.add_argument("--videos", type=int, default=videos, help=videos_help)
    p.add_argument("--summary", action="store_true", help="only summarise OUT/rows.jsonl")
    p.add_argument("--figure", type=Path, help="plot the rates here (with the runs of --with)")
    p.add_argument("--with", dest="others", type=labelled, nargs="*", default=[], metavar="LABEL=DIR",
                   help="other probe folders that join the figure")  # fmt: skip
    p.add_argument("--label", default="agent", help="this run's label in the figure")


def probe_main(
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace], None],
    summarise: Callable[[list[dict[str, Any]]], dict[str, Any]],
    table: Callable[[dict[str, Any]], str],
    figure: Callable[[dict[str, dict[str, Any]], Path], None],
) -> int:
    """Make the set if asked, play the rows unless ``--summary``, then write and print the summary and draw the
    figure with the runs of ``--with``."""
    if args.make_set is not None:
        make_probe_set(args.set, args.make_set, args.videos)
    if not args.summary:
        if args.model is None:
            raise SystemExit("--model is required unless --summary")
        args.out.mkdir(parents=True, exist_ok=True)
        run(args)
    res = summarise(list(read_jsonl(args.out / "rows.jsonl", missing_ok=True)))
    write_atomic(args.out / "summary.json", json.dumps(res, indent=2))
    print(table(res))
    if args.figure is not None:
        runs = {args.label: res}
        for label, folder in args.others:
            runs[label] = summarise(list(read_jsonl(folder / "rows.jsonl")))
        figure(runs, args.figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(unseen_main())
