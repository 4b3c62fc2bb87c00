"""What the reading credit paid for, from a local run's training rollouts (``<run_dir>/rollouts.jsonl``).

Two questions the run's ``reading`` column cannot answer. Which frames were read: every frame a look served, split
by whether it showed anything besides the background (an "event") and by half of the run, with the share read
exactly (:func:`rl.algo.reward.reading_rate` on that frame alone). And whom the update favoured: episodes grouped by
length, with the mean of their group-centred shaped reward, score and reading share (the Dr.GRPO advantage before
any turn weight), so a credit that pays long episodes shows as a positive centred reward for the long ones.

    python -m recipes.tiny_agent.probes.reading_breakdown runs/rl_read/grpo_read runs/rl_read/taura_read
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from omniagent.backends.synth_world import SynthWorld, WorldError
from rl.algo.reward import TurnText, reading_rate, shows_event

LENGTHS = ((1, 2, "1-2"), (3, 5, "3-5"), (6, 10**9, "6+"))  # episode turns, inclusive bounds


def _turns(row: dict[str, Any]) -> list[TurnText]:
    return [
        TurnText(t.get("observation"), t.get("action"), t.get("timestamps") or [], t.get("error"))
        for t in row["turns"]
    ]


def frames_read(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Served frames by content (``empty``: the background only; ``event``: anything else) and run half."""
    last = max(int(r["meta"]["iteration"]) for r in rows)
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # served, read
    worlds: dict[str, SynthWorld | None] = {}
    for row in rows:
        if row["media"] not in worlds:
            try:
                worlds[row["media"]] = SynthWorld.for_media(row["media"])
            except WorldError:
                worlds[row["media"]] = None
        world = worlds[row["media"]]
        if world is None:
            continue
        half = "first" if 2 * int(row["meta"]["iteration"]) <= last else "second"
        turns = _turns(row)
        for prev, nxt in zip(turns, turns[1:], strict=False):
            if (prev.action or {}).get("type") != "get_frames" or prev.error:
                continue
            for t in sorted({round(float(x), 2) for x in prev.timestamps}):
                content = "event" if shows_event(world.frame(t)) else "empty"
                read = (
                    reading_rate(row["media"], [TurnText(prev.observation, prev.action, [t], None), nxt])
                    or 0.0
                )
                for key in (content, f"{content}/{half}"):
                    tally[key][0] += 1
                    tally[key][1] += int(read)
    return {k: {"served": n, "read": round(r / n, 3)} for k, (n, r) in sorted(tally.items())}


def centred_by_length(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean group-centred shaped reward, score and reading share of the episodes of each length."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:  # a group: one task's episodes in one iteration (episode ids are g<group>-<i>)
        groups[int(row["meta"]["iteration"]), row["id"].split("-")[0]].append(row)
    # per length label: episodes, then the sums of centred shaped reward, score and reading share
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for group in groups.values():
        values = np.array(
            [[r["meta"]["shaped_reward"], r["reward"] or 0.0, r["meta"].get("reading") or 0.0] for r in group]
        )
        centred = values - values.mean(axis=0)
        for row, c in zip(group, centred, strict=True):
            n = len(row["turns"])
            label = next(name for lo, hi, name in LENGTHS if lo <= n <= hi)
            acc = sums[label]
            acc[0] += 1
            acc[1:] = [a + float(x) for a, x in zip(acc[1:], c, strict=True)]
    return {
        name: {"episodes": int(s[0]), "shaped": round(s[1] / s[0], 3), "score": round(s[2] / s[0], 3),
               "reading": round(s[3] / s[0], 3)}
        for _, _, name in LENGTHS
        if (s := sums.get(name)) and s[0]
    }  # fmt: skip


def load_rollouts(run_dir: str | Path) -> list[dict[str, Any]]:
    with open(Path(run_dir) / "rollouts.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def breakdown(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    rows = list(rows)
    return {"episodes": len(rows), "frames": frames_read(rows), "by_length": centred_by_length(rows)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.tiny_agent.probes.reading_breakdown", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("runs", nargs="+", help="local run folders (each with rollouts.jsonl)")
    args = p.parse_args(argv)
    for run in args.runs:
        print(json.dumps({"run": run, **breakdown(load_rollouts(run))}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
