"""Terminal output of ``python -m omniagent.run``: each turn as it happens, then a summary table.

:class:`TurnPrinter` is the ``on_turn`` callback of :func:`omniagent.episode.run_episode`;
:func:`print_episode_summary` prints the final table. The command line itself lives in :mod:`omniagent.run`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omniagent.trajectory import TurnRecord

__all__ = ["TurnPrinter", "clip_line", "describe_action", "print_episode_summary", "print_error"]


def print_error(console: Any, message: str) -> None:
    """One ``error: ...`` line on stderr; the message is printed as is (no rich markup)."""
    from rich.text import Text

    console.print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)


def _fmt_times(times: list[float], limit: int = 6) -> str:
    if len(times) <= limit:
        return ", ".join(f"{t:.2f}" for t in times)
    return ", ".join(f"{t:.2f}" for t in times[: limit - 2]) + f", … , {times[-1]:.2f}"


def describe_action(rec: TurnRecord) -> str:
    """What the turn looked at, in one line (e.g. ``get_frames 0.00-20.00 s num=8 → 8 frames at [...] s``)."""
    kind = rec.action_type
    if kind is None or kind == "answer":
        return rec.request()
    if rec.error:
        got = "nothing"
    elif kind == "get_frames":
        got = f"{len(rec.timestamps)} frames at [{_fmt_times(rec.timestamps)}] s"
    elif kind == "get_audio":
        got = f"audio {rec.timestamps[0]:.2f}-{rec.timestamps[1]:.2f} s" if rec.timestamps else "audio"
    else:
        got = f"clip of {len(rec.timestamps)} frames"
    return f"{rec.request()} → {got}"


class TurnPrinter:
    def __init__(self, console: Any, max_turns: int, quiet: bool = False) -> None:
        self.console = console
        self.max_turns = max_turns
        self.quiet = quiet

    def __call__(self, rec: Any, percept: list[dict[str, Any]]) -> None:
        if self.quiet:
            return
        from rich.text import Text

        c = self.console
        head = Text()
        head.append(f"Turn {rec.turn}/{self.max_turns}  ", style="bold cyan")
        head.append(describe_action(rec), style="red" if rec.error else "bold")
        head.append(f"   (model {rec.model_seconds:.2f} s, env {rec.env_seconds:.2f} s)", style="dim")
        c.print(head)
        for label, value, style in (
            ("observation", rec.observation, ""),
            ("thought", rec.thought, "italic"),
        ):
            if value:
                c.print(Text(f"  {label}: ", style="dim") + Text(clip_line(value, 600), style=style))
        if rec.error:
            c.print(Text(f"  error ({rec.error}): {clip_line(rec.error_message or '', 400)}", style="red"))
            if rec.action_type is None:
                c.print(Text("  raw output: ", style="dim") + Text(clip_line(rec.raw_text, 300) or "(empty)"))
        for note in rec.notes:
            c.print(Text(f"  note: {note}", style="yellow"))


def clip_line(text: str, n: int) -> str:
    """One line of at most ``n`` characters, control characters shown as U+FFFD."""
    text = " ".join(str(text).split())
    text = "".join(ch if ch.isprintable() else "\ufffd" for ch in text)
    return text if len(text) <= n else text[: n - 1] + "…"


def print_episode_summary(
    console: Any, traj: Any, out_path: Path, report: str | None, load_seconds: float
) -> None:
    from rich.table import Table
    from rich.text import Text

    t = Table(show_header=False, box=None, padding=(0, 2))
    t.add_column(style="dim")
    t.add_column()
    if traj.stop_reason == "answered":
        t.add_row("answer", Text(json.dumps(traj.answer), style="bold"))
    elif traj.stop_reason == "turn_budget":
        t.add_row(
            "answer", Text(f"no answer within the turn budget ({traj.max_turns} turns)", style="yellow")
        )
    elif traj.stop_reason == "policy_error":
        t.add_row("answer", Text("none: the policy failed", style="red"))
    else:
        t.add_row("answer", Text(f"none ({traj.stop_reason})"))
    if traj.ground_truth is not None:
        t.add_row("ground truth", Text(json.dumps(traj.ground_truth)))
        if traj.stop_reason == "answered" and traj.meta.get("reward_available", True):
            t.add_row("reward", f"{traj.reward:.3f}")
        elif traj.stop_reason == "answered":
            t.add_row("reward", "not scored (free-form answers need a judge)")
        else:
            t.add_row("reward", "0 (no answer)")
    t.add_row("turns", f"{traj.num_turns} of {traj.max_turns}")
    t.add_row("frames used", str(traj.frames_used))
    t.add_row("audio seconds", f"{traj.audio_seconds_used:.1f}")
    t.add_row(
        "time",
        f"model {traj.model_seconds:.2f} s, env {traj.env_seconds:.2f} s, wall {traj.wall_seconds:.2f} s "
        f"(+ {load_seconds:.1f} s loading the policy)",
    )
    t.add_row("trajectory", Text(str(out_path)))
    if report:
        t.add_row("report", Text(report))
    console.rule("summary")
    console.print(t)
