"""A one-minute offline demo: ``omniagent-demo`` (or ``python -m omniagent.demo``).

It builds a 60 s synthetic video whose content is known by construction (``envs.synth``: coloured
shapes, digits, words, flashes, beeps and spoken words at known times), asks the agent shipped in the
package (``--model tiny``, about 1 M parameters, CPU only) one question about it, and writes the
trajectory and a self-contained HTML report. The right answer comes from the generator and is printed
beside the agent's, and the report shows every frame the agent asked for at its timestamp, with the
question's evidence marked on the timeline, so the answer can be checked by eye.

The default question asks for a shape's width, the question type the tiny agent answers best; ``--list``
prints the video's other questions and ``--task`` asks one of them. The tiny agent is a demo of the
machinery, not a capable model: on held-out synthetic sets it scores about 0.13.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from envs.limits import EnvLimits
from envs.tasks import Task
from omniagent.tiny_agent import shipped_recipe_args

DEFAULT_SEED = 11
DEFAULT_TASK = "shape_width_size-01"
# the recipe arguments that are the per-call caps the tiny agent was trained and evaluated under
LIMIT_ARGS = ("max_frames", "max_clip_s", "max_audio_s", "max_answer_chars")


def tiny_limits() -> EnvLimits:
    """The shipped tiny agent's per-call caps, read from its manifest; larger looks are lowered or refused."""
    return EnvLimits(**shipped_recipe_args(LIMIT_ARGS))


def tiny_max_new_tokens() -> int:
    """The tiny agent's tokens per turn, from its manifest (its held-out evaluations use the same budget)."""
    return int(shipped_recipe_args(["max_new_tokens"])["max_new_tokens"])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="omniagent-demo",
        description="Make a 60 s synthetic video, ask the shipped tiny agent one question about it on the "
        "CPU, and write an HTML report you can check the answer in.",
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="output folder")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the synthetic video")
    p.add_argument(
        "--task",
        default=DEFAULT_TASK,
        help="which question: the end of a task id as --list prints it (e.g. digit_mcq-00)",
    )
    p.add_argument("--list", action="store_true", help="print the video's questions and stop")
    return p


def make_video(out: Path, seed: int) -> list[Task]:
    """One 60 s synthetic video with its tasks (reused when it was already built with this seed)."""
    from envs.synth import generate_benchmark

    return generate_benchmark(out / "media", seed=seed, n_videos=1, durations=[60.0])


def pick_task(tasks: list[Task], key: str) -> Task:
    """The task whose id ends with ``key``; a key that matches none or several is an error naming them."""
    found = [t for t in tasks if t.id == key or t.id.endswith("-" + key)]
    if len(found) != 1:
        names = ", ".join(t.id.split("-", 1)[1] for t in tasks)
        what = "no question" if not found else f"{len(found)} questions"
        raise ValueError(f"--task {key!r} matches {what}; this video has: {names}")
    return found[0]


def answer_text(task: Task) -> str:
    """The ground truth as the command line takes it (``--answer``)."""
    if isinstance(task.answer, str):
        return task.answer
    return json.dumps(task.answer)


def run_argv(task: Task, out: Path) -> list[str]:
    """The ``python -m omniagent.run`` arguments that ask the shipped tiny agent ``task``."""
    argv = [task.media, task.question, "--task-type", task.task_type, "--answer", answer_text(task)]
    if task.choices:
        argv += ["--choices", "|".join(task.choices)]
    argv += ["--model", "tiny", "--backend", "transformers", "--device", "cpu", "--constrained"]
    argv += ["--max-new-tokens", str(tiny_max_new_tokens())]
    limits = tiny_limits()
    argv += ["--max-frames", str(limits.max_frames), "--max-clip-s", str(limits.max_clip_s)]
    argv += ["--max-audio-s", str(limits.max_audio_s)]
    argv += ["--max-answer-chars", str(limits.max_answer_chars)]
    argv += ["--out", str(out / "trajectory.json"), "--report", str(out / "report.html")]
    return argv


def print_questions(tasks: list[Task]) -> None:
    for t in tasks:
        choices = f"  options: {' | '.join(t.choices)}" if t.choices else ""
        print(f"{t.id.split('-', 1)[1]:28s} {t.question}{choices}")


def redraw_report(out: Path, task: Task) -> None:
    """Rewrite the report with the question's evidence interval drawn on its timeline."""
    from omniagent.report import write_report

    traj = out / "trajectory.json"
    if traj.exists() and task.evidence:
        write_report(traj, out / "report.html", media_path=task.media, evidence=task.evidence,
                     limits=tiny_limits())  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tasks = make_video(args.out, args.seed)
    if args.list:
        print_questions(tasks)
        return 0
    try:
        task = pick_task(tasks, args.task)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"video: {task.media} (60 s, synthetic, seed {args.seed})")
    print(f"right answer, from the generator: {answer_text(task)}  (evidence at {task.evidence} s)")
    from omniagent.run import main as run_main

    code = run_main(run_argv(task, args.out))
    redraw_report(args.out, task)
    print(f"open {args.out / 'report.html'} in a browser: the frames the agent saw, turn by turn")
    return code


if __name__ == "__main__":
    sys.exit(main())
