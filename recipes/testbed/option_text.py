"""The final turn of an agent trained to answer with the option's text (``--option-text 1``): which link holds.

A text answer's Thought ends ``: <option text>.`` and its action's content is an option's text, which the
environment scores as that option's letter. For each handover "last" row of a probe run
(:mod:`recipes.testbed.handover`, condition ``media``) this reads the agent's final turn and the question's options
and counts, by template:

- ``written``: the Thought ends with an option's text (``: green.``);
- ``answer copies``: of those, the action's content is that same text (the copy the format is for);
- ``value right``: of those, the text written is the right option's (the value chosen right);
- ``outcome``: the environment's reward, over every row.

``--kept LETTER TEXT`` instead checks that two syntheses of one seed differ in the answer's form only: the final
Thought's last words and the action's content name the option's text instead of its letter.

The plan is on docs/experiments/testbed-option-text.md.

    python -m recipes.testbed.option_text --rows runs/testbed/option_text/sft_s0/handover/rows.jsonl \\
        --set runs/testbed/data/handover5305
    python -m recipes.testbed.option_text --kept runs/testbed/attempt5/sft_s0/sft_data/kept.jsonl \\
        runs/testbed/option_text/sft_s0/sft_data/kept.jsonl   # do the syntheses differ in the answer's form only?
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from envs.tasks import choice_letter
from recipes.testbed.answer_form import chosen, form_main, last_rows, paired_episodes, same_but_last
from recipes.testbed.handover import rate

_END = re.compile(r": ([^,:]+?)\.?$")


def final_turn(turns: list[str]) -> tuple[str, str | None]:
    """The Thought and the answer's content of the agent's last turn (``""`` and None when they do not parse)."""
    try:
        turn = json.loads(turns[-1])
        action = turn.get("action") or {}
        content = str(action.get("content")) if action.get("type") == "answer" else None
        return str(turn.get("thought") or ""), content
    except (IndexError, json.JSONDecodeError, AttributeError):
        return "", None


def written_text(thought: str, choices: list[str]) -> str | None:
    """The option text the Thought ends with (``...: green.``), else None."""
    m = _END.search((thought or "").strip())
    return m.group(1) if m and m.group(1) in choices else None


def text_rates(rows: list[dict[str, Any]], tasks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The counts and rates above, by template and over all, of the media condition's "last" rows."""
    counts: dict[str, dict[str, int]] = {}
    for row in last_rows(rows):
        task = tasks[row["id"]]
        choices = [str(c) for c in task["choices"]]
        thought, content = final_turn(row["turns"])
        text = written_text(thought, choices)
        for key in (row["template"], "all"):
            c = counts.setdefault(key, {"n": 0, "written": 0, "copies": 0, "right": 0, "reward": 0})
            c["n"] += 1
            c["reward"] += int(float(row["reward"]) > 0)
            if text is not None:
                c["written"] += 1
                c["copies"] += int(content is not None and content.strip() == text)
                c["right"] += int(choice_letter(choices.index(text)) == str(task["answer"]))
    return {
        key: {
            "n": c["n"],
            "written": rate(c["written"], c["n"]),
            "answer copies": rate(c["copies"], c["written"]),
            "value right": rate(c["right"], c["written"]),
            "outcome": rate(c["reward"], c["n"]),
        }
        for key, c in sorted(counts.items())
    }


def form_only(plain: list[dict[str, Any]], text: list[dict[str, Any]]) -> dict[str, int]:
    """Two syntheses' kept episodes (``kept.jsonl``), letter and text answers: how many differ only in the answer's
    form (``form only``), in anything else (``other``), or exist in one of them alone (``unpaired``)."""
    pairs, unpaired = paired_episodes(plain, text)
    out = {"form only": 0, "other": 0, "unpaired": unpaired}
    for a, b in pairs:
        letter, value = chosen(b)
        want = str(a["turns"][-1]["thought"]).removesuffix(f": {letter}.") + f": {value}."
        last = b["turns"][-1]
        ok = (
            same_but_last(a, b)
            and last["thought"] == want
            and last["action"] == {"type": "answer", "content": value}
        )
        out["form only" if ok else "other"] += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return form_main(
        argv, "python -m recipes.testbed.option_text", __doc__, text_rates, form_only, ("LETTER", "TEXT")
    )


if __name__ == "__main__":
    raise SystemExit(main())
