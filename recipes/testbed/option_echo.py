"""The final turn of an agent trained on option-echo answers (``--option-echo 1``): which link of value -> letter holds.

An echo answer's Thought ends ``, <option text>: <letter>.``. For each handover "last" row of a probe run
(:mod:`recipes.testbed.handover`, condition ``media``) this reads the agent's final Thought and the question's
options and counts, by template:

- ``written``: the Thought ends with an option's text right before the letter;
- ``letter follows``: of those, the letter is the option holding that text (the lookup the echo is for);
- ``value right``: of those, the text written is the right option's (the value chosen right);
- ``outcome``: the environment's reward, over every row.

The plan is on docs/experiments/testbed-option-echo.md.

    python -m recipes.testbed.option_echo --rows runs/testbed/option_echo/sft_s0/handover/rows.jsonl \\
        --set runs/testbed/data/handover5305
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import read_jsonl
from envs.scoring import letters

_ECHO = re.compile(r", ([^,:]+): ([A-Z])\.?$")


def echo_of(thought: str, choices: list[str]) -> tuple[str, str] | None:
    """(option text, letter) when the Thought ends with one of ``choices`` right before a letter, else None."""
    m = _ECHO.search((thought or "").strip())
    if not m or m.group(1) not in choices:
        return None
    return m.group(1), m.group(2)


def final_thought(turns: list[str]) -> str:
    """The Thought of the agent's last turn (empty when it does not parse)."""
    try:
        return str(json.loads(turns[-1]).get("thought") or "")
    except (IndexError, json.JSONDecodeError, AttributeError):
        return ""


def echo_rates(rows: list[dict[str, Any]], tasks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The counts and rates above, by template and over all, of the media condition's "last" rows."""
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        if row.get("condition") != "media" or not row.get("last") or "reward" not in row:
            continue
        task = tasks[row["id"]]
        choices = [str(c) for c in task["choices"]]
        echo = echo_of(final_thought(row["turns"]), choices)
        for key in (row["template"], "all"):
            c = counts.setdefault(key, {"n": 0, "written": 0, "follows": 0, "right": 0, "reward": 0})
            c["n"] += 1
            c["reward"] += int(float(row["reward"]) > 0)
            if echo is not None:
                text, letter = echo
                c["written"] += 1
                c["follows"] += int(letters(len(choices))[choices.index(text)] == letter)
                c["right"] += int(letters(len(choices))[choices.index(text)] == str(task["answer"]))

    def rate(x: int, n: int) -> float | None:
        return round(x / n, 3) if n else None

    return {
        key: {
            "n": c["n"],
            "written": rate(c["written"], c["n"]),
            "letter follows": rate(c["follows"], c["written"]),
            "value right": rate(c["right"], c["written"]),
            "outcome": rate(c["reward"], c["n"]),
        }
        for key, c in sorted(counts.items())
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.option_echo", description=__doc__.split("\n")[0]
    )
    p.add_argument("--rows", type=Path, required=True, help="a handover probe's rows.jsonl")
    p.add_argument(
        "--set", type=Path, required=True, help="the set it ran on (its tasks.jsonl has the options)"
    )
    args = p.parse_args(argv)
    tasks = {t["id"]: t for t in read_jsonl(args.set / "tasks.jsonl")}
    print(json.dumps(echo_rates(read_jsonl(args.rows), tasks), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
