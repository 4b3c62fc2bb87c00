"""The final turn of an agent trained on option-echo answers (``--option-echo 1``): which link of value -> letter holds.

An echo answer's Thought ends ``, <option text>: <letter>.``. For each handover "last" row of a probe run
(:mod:`recipes.testbed.handover`, condition ``media``) this reads the agent's final Thought and the question's
options and counts, by template:

- ``written``: the Thought ends with an option's text right before the letter;
- ``letter follows``: of those, the letter is the option holding that text (the lookup the echo is for);
- ``value right``: of those, the text written is the right option's (the value chosen right);
- ``outcome``: the environment's reward, over every row.

``--kept PLAIN ECHO`` instead checks that two syntheses of one seed differ in the answer's echo only.

The plan is on docs/experiments/testbed-option-echo.md.

    python -m recipes.testbed.option_echo --rows runs/testbed/option_echo/sft_s0/handover/rows.jsonl \\
        --set runs/testbed/data/handover5305
    python -m recipes.testbed.option_echo --kept runs/testbed/attempt5/sft_s0/sft_data/kept.jsonl \\
        runs/testbed/option_echo/sft_s0/sft_data/kept.jsonl   # do the syntheses differ in the echo only?
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from envs.tasks import choice_letter
from recipes.testbed.answer_form import chosen, form_main, last_rows, paired_episodes, same_but_last
from recipes.testbed.handover import rate

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
    for row in last_rows(rows):
        task = tasks[row["id"]]
        choices = [str(c) for c in task["choices"]]
        echo = echo_of(final_thought(row["turns"]), choices)
        for key in (row["template"], "all"):
            c = counts.setdefault(key, {"n": 0, "written": 0, "follows": 0, "right": 0, "reward": 0})
            c["n"] += 1
            c["reward"] += int(float(row["reward"]) > 0)
            if echo is not None:
                text, letter = echo
                holder = choice_letter(choices.index(text))  # the option holding the text written
                c["written"] += 1
                c["follows"] += int(holder == letter)
                c["right"] += int(holder == str(task["answer"]))
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


def echo_only(plain: list[dict[str, Any]], echo: list[dict[str, Any]]) -> dict[str, int]:
    """Two syntheses' kept episodes (``kept.jsonl``), without and with the echo: how many differ only in the final
    Thought's echo (``echo only``), in anything else (``other``), or exist in one of them alone (``unpaired``)."""
    pairs, unpaired = paired_episodes(plain, echo)
    out = {"echo only": 0, "other": 0, "unpaired": unpaired}
    for a, b in pairs:
        letter, value = chosen(b)
        want = str(a["turns"][-1]["thought"]).removesuffix(f": {letter}.") + f", {value}: {letter}."
        out["echo only" if same_but_last(a, b) and b["turns"][-1]["thought"] == want else "other"] += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return form_main(
        argv, "python -m recipes.testbed.option_echo", __doc__, echo_rates, echo_only, ("PLAIN", "ECHO")
    )


if __name__ == "__main__":
    raise SystemExit(main())
