"""How true are an agent's own Observations? Each frame claim in its eval trajectories, checked
against the synthetic world at the time it names: the background hue, and whether a claimed event
(shape, digit, word, flash, static) is on screen then.

Why: a score only says whether answers were right, and the media probe (``recipes/tiny_agent/probes/media.py``) only
says whether the loss moves with the media. This says what the agent actually saw, turn by turn, on
held-out videos. Run it on the eval and on the blind eval (``--world-dir``: the original videos,
whose ``.meta.json`` sidecars the blank copies lack): a perceiving agent's claims are truer with
real media than blind; the blind rate is the prior (about 1/6 for the six background hues).

    python -m recipes.tiny_agent.probes.observations runs/tiny_agent/eval/agent runs/tiny_agent/eval/agent_blind \\
        --world-dir runs/tiny_agent/synth_eval
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omniagent.backends.synth_world import SynthWorld, parse_observation
from omniagent.trajectory import load_trajectories
from rl.algo.reward import reading_rate

VISUAL = ("get_frames", "get_clip")


def claim_accuracy(run_dir: str | Path, world_dir: str | Path | None = None) -> dict[str, Any]:
    """Counts and rates of true frame claims in ``run_dir/trajectories.jsonl``, over the turns that
    follow a served visual percept (a frame claim names its first frame's time); and, the other
    way round, how many served frames the Observation names at their served time (``frames_named``)
    and how many served frames that show an event it reports an event of that kind on
    (``event_recall``); and ``reading``, the mean per episode of the share of served frames and audio spans
    its Observations described exactly (:func:`rl.algo.reward.reading_rate`, what ``env.reward.reading_credit`` pays),
    and ``reading_events``, the same over frames with an event and audio spans with a sound only
    (``env.reward.reading_scope: events``)."""
    hue = [0, 0]  # claims, true
    event = [0, 0]
    served = [0, 0]  # frames served, named at their time
    recall = [0, 0]  # served frames showing an event, reported
    turns = 0
    worlds: dict[str, SynthWorld] = {}  # a run has many tasks per video: read each sidecar once
    readings: list[float] = []  # per episode: the share of what was served that it described exactly
    events_read: list[float] = []  # the same, counting only frames with an event and spans with a sound
    for traj in load_trajectories(Path(run_dir) / "trajectories.jsonl"):
        media = Path(traj.media)
        truth = str(Path(world_dir) / media.name if world_dir else media)
        if traj.media not in worlds:
            worlds[traj.media] = SynthWorld.for_media(truth)
        world = worlds[traj.media]
        if (rate := reading_rate(truth, traj.turns)) is not None:
            readings.append(rate)
        if (rate := reading_rate(truth, traj.turns, "events")) is not None:
            events_read.append(rate)
        for prev, turn in zip(traj.turns, traj.turns[1:], strict=False):
            if prev.error or prev.action_type not in VISUAL or not turn.observation:
                continue
            turns += 1
            claims = [c for c in parse_observation(turn.observation) if c.kind == "frames"]
            for claim in claims:
                truth = world.frame(claim.first)
                for item in claim.items:
                    if item.kind == "background":
                        hue[0] += 1
                        hue[1] += any(t.kind == "background" and t.value == item.value for t in truth)
                    else:
                        event[0] += 1
                        event[1] += any(t.kind == item.kind for t in truth)
            for t in prev.timestamps:
                named = [c for c in claims if c.first - 1e-6 <= t <= c.last + 1e-6]
                served[0] += 1
                served[1] += bool(named)
                shown = {i.kind for i in world.frame(t) if i.kind != "background"}
                if shown:
                    recall[0] += 1
                    recall[1] += any(i.kind in shown for c in named for i in c.items)
    return {
        "turns": turns,
        "hue_claims": hue[0],
        "hue_true": _rate(hue),
        "event_claims": event[0],
        "event_true": _rate(event),
        "frames_served": served[0],
        "frames_named": _rate(served),
        "event_frames": recall[0],
        "event_recall": _rate(recall),
        "episodes_read": len(readings),
        "reading": round(sum(readings) / len(readings), 3) if readings else None,
        "episodes_read_events": len(events_read),
        "reading_events": round(sum(events_read) / len(events_read), 3) if events_read else None,
    }


def _rate(pair: list[int]) -> float | None:
    return round(pair[1] / pair[0], 3) if pair[0] else None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.tiny_agent.probes.observations", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("runs", nargs="+", help="eval run folders (each with trajectories.jsonl)")
    p.add_argument("--world-dir", help="folder of the original synthetic media (for blind copies)")
    args = p.parse_args(argv)
    for run in args.runs:
        print(json.dumps({"run": run, **claim_accuracy(run, args.world_dir)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
