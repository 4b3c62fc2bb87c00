"""Ground-truth turn labels on synthetic tasks, and how well turn entropy ranks the discovery turns.

TAURA's premise is that a turn's mean token entropy marks the turns where the agent found what it needed (the
paper's Appendix C: 79.2% agreement with forks labelled by another model). Synthetic tasks know their evidence
intervals, so every turn can be labelled exactly:

- a turn's percept **overlaps** the evidence when a served frame's timestamp lies inside an evidence interval
  (``get_frames``: frames are instants), or when the served span ``[start, end]`` of a ``get_audio`` /
  ``get_clip`` intersects one (the span is the served timestamps' range when the environment reports them,
  else the request's ``start``/``end``); turns without a percept (answers, rejected output) never overlap;
- the **discovery turn** of a trajectory is the first turn whose percept overlaps the evidence (at most one per
  trajectory; trajectories that never look at the evidence have none).

:func:`entropy_auroc` reports the AUROC of turn entropy as a score for "is the discovery turn" over every turn
with a percept, with a bootstrap CI that resamples whole trajectories (turns of one trajectory are not
independent); :func:`evidence_reach`, how often an episode looks at its evidence at all, and on its first turn;
:func:`score_by_reach`, the score of the episodes that did against those that did not, per task type;
and, for the rollouts of ``rl/train_local.py`` (their ``meta.turn_weights``), :func:`weights_by_discovery`: the
turn weights the trainer actually applied, on discovery turns against the other percept turns::

    python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/eval/trajectories.jsonl --tasks runs/synth_test/tasks.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from envs.tasks import load_tasks_jsonl
from omniagent.trajectory import Trajectory, TurnRecord, load_trajectories
from rl.local.evidence import overlaps_evidence, percept_spans, touched_evidence


def turn_action(turn: TurnRecord) -> str:
    """The turn's action for per-action tables: ``rejected`` when the environment refused the turn."""
    return "rejected" if turn.error else (turn.action_type or "none")


def discovery_labels(traj: Trajectory, evidence: Sequence[Sequence[float]]) -> list[int]:
    """1 on the trajectory's first turn whose percept overlaps the evidence, 0 on every other turn."""
    labels = [0] * len(traj.turns)
    for k, turn in enumerate(traj.turns):
        if overlaps_evidence(turn, evidence):
            labels[k] = 1
            break
    return labels


def auroc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve: P(score of a random positive > a random negative), ties counting 1/2.

    NaN when either class is empty.
    """
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


def cluster_bootstrap_auroc(
    scores: Sequence[float], labels: Sequence[int], clusters: Sequence[Any], n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """AUROC with a 95% percentile CI from resampling whole clusters (trajectories) with replacement."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    _, cl = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    members = [np.flatnonzero(cl == c) for c in range(cl.max() + 1)] if len(cl) else []
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(n_boot if members else 0):
        idx = np.concatenate([members[c] for c in rng.integers(len(members), size=len(members))])
        value = auroc(s[idx], y[idx])
        if not np.isnan(value):
            stats.append(value)
    point = auroc(s, y)
    if not stats:
        return point, float("nan"), float("nan")
    return point, float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def entropy_auroc(
    trajectories: Sequence[Trajectory], evidence_by_task: dict[str, Any], n_boot: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """How well turn entropy ranks discovery turns among all percept turns with an entropy.

    Two controls come with it: ``earliness`` is the AUROC of the turn's position alone (earlier turn,
    higher score), the baseline an entropy signal has to beat, since a question that names its time
    is found on turn 1; ``after_turn1`` is entropy's AUROC over turns 2 and later only.

    ``evidence_by_task`` maps ``(media, question)`` keys (:func:`task_key`) to evidence intervals; trajectories
    of tasks without evidence are skipped.
    """
    scores, labels, clusters, positions = [], [], [], []
    for j, traj in enumerate(trajectories):
        evidence = evidence_by_task.get(task_key(traj.media, traj.question))
        if not evidence:
            continue
        for turn, label in zip(traj.turns, discovery_labels(traj, evidence), strict=True):
            if turn.entropy is None or not percept_spans(turn):
                continue
            scores.append(float(turn.entropy))
            labels.append(label)
            clusters.append(f"{j}:{traj.id}")
            positions.append(turn.turn)

    def ranked(score: Sequence[float], keep: Sequence[bool]) -> dict[str, Any]:
        picked = [i for i, k in enumerate(keep) if k]
        point, low, high = cluster_bootstrap_auroc(
            [score[i] for i in picked],
            [labels[i] for i in picked],
            [clusters[i] for i in picked],
            n_boot,
            seed,
        )
        return {"auroc": point, "ci95": [low, high]}

    everything = [True] * len(labels)
    return {
        **ranked(scores, everything),
        "turns": len(labels),
        "discovery_turns": int(sum(labels)),
        "trajectories": len(set(clusters)),
        "earliness": ranked([-float(k) for k in positions], everything),
        "after_turn1": ranked(scores, [k > 1 for k in positions]),
    }


def evidence_reach(trajectories: Sequence[Trajectory], evidence_by_task: dict[str, Any]) -> dict[str, Any]:
    """How often a trajectory looks at its evidence at all (it has a discovery turn) and already on its
    first turn, over every task with evidence and over the tasks whose question names a time ("at about
    T s"), with bootstrap CIs. Why: an agent that never looks where the answer is scores the same
    with its media blanked, however well it reads; the teacher looks at a named time on its first turn."""
    from omniagent.backends.synth_goals import parse_goal
    from omniagent.eval.intervals import bootstrap_ci

    rows: dict[str, dict[str, list[float]]] = {
        "all": {"any": [], "first": []},
        "named": {"any": [], "first": []},
    }
    for traj in sorted(trajectories, key=lambda t: t.id):
        evidence = evidence_by_task.get(task_key(traj.media, traj.question))
        if not evidence:
            continue
        labels = discovery_labels(traj, evidence)
        groups = ["all", "named"] if parse_goal(traj.question).at is not None else ["all"]
        for group in groups:
            rows[group]["any"].append(float(any(labels)))
            rows[group]["first"].append(float(bool(labels) and labels[0] == 1))

    def ci(values: list[float]) -> dict[str, Any]:
        res = bootstrap_ci(values)
        return {k: None if res[k] is None else round(res[k], 3) for k in ("mean", "lo", "hi")} | {
            "n": len(values)
        }

    return {group: {k: ci(v) for k, v in by.items()} for group, by in rows.items()}


def score_by_reach(trajectories: Sequence[Trajectory], evidence_by_task: dict[str, Any]) -> dict[str, Any]:
    """Mean score of the episodes that touched their evidence and of those that missed it, per task type.
    Why: where the two differ, looking where the answer is pays; where they do not, the answers are priors
    (what an evidence-gated reward, ``env.reward.evidence_gate``, would stop paying)."""
    out: dict[str, dict[str, list[float]]] = {}
    for traj in trajectories:
        evidence = evidence_by_task.get(task_key(traj.media, traj.question))
        if not evidence:
            continue
        side = "touched" if touched_evidence(traj, evidence) else "missed"
        for kind in ("all", traj.task_type or "unknown"):
            out.setdefault(kind, {"touched": [], "missed": []})[side].append(float(traj.reward or 0.0))
    return {
        kind: {
            side: {"mean": round(float(np.mean(v)), 3) if v else None, "n": len(v)} for side, v in by.items()
        }
        for kind, by in out.items()
    }


def weights_by_discovery(
    trajectories: Sequence[Trajectory], evidence_by_task: dict[str, Any], n_boot: int = 2000, seed: int = 0
) -> dict[str, Any] | None:
    """What a turn-weighting trainer actually did to discovery turns: the mean weight it gave them and the
    other percept turns, the AUROC of the weight as a discovery score (CI over whole trajectories), and the
    mean weight (and count) of every turn by its action (``rejected``: the environment refused the turn).

    Why beside :func:`entropy_auroc`: TAURA divides each turn's entropy by its *group's* mean, so the weight
    ranks turns across groups differently from raw entropy; this is the quantity that scaled the gradient.
    Reads ``meta.turn_weights`` (one per turn, ``rl/train_local.py``'s ``rollouts.jsonl``); ``None`` when no
    trajectory carries them.
    """
    weights, labels, clusters = [], [], []
    by_action: dict[str, list[float]] = {}
    for j, traj in enumerate(trajectories):
        evidence = evidence_by_task.get(task_key(traj.media, traj.question))
        turn_weights = (traj.meta or {}).get("turn_weights")
        if not evidence or not turn_weights or len(turn_weights) != len(traj.turns):
            continue
        for turn, label, w in zip(traj.turns, discovery_labels(traj, evidence), turn_weights, strict=True):
            by_action.setdefault(turn_action(turn), []).append(float(w))
            if percept_spans(turn):
                weights.append(float(w))
                labels.append(label)
                clusters.append(f"{j}:{traj.id}")
    if not weights:
        return None
    w, y = np.asarray(weights), np.asarray(labels, dtype=bool)
    point, low, high = cluster_bootstrap_auroc(weights, labels, clusters, n_boot, seed)

    def mean(values: np.ndarray) -> float | None:
        return round(float(values.mean()), 3) if values.size else None

    return {
        "turns": len(weights),
        "discovery_turns": int(y.sum()),
        "mean_weight_discovery": mean(w[y]),
        "mean_weight_other": mean(w[~y]),
        "auroc": point,
        "ci95": [low, high],
        "mean_weight_by_action": {a: [mean(np.asarray(v)), len(v)] for a, v in sorted(by_action.items())},
    }


def task_key(media: str, question: str) -> str:
    return f"{media}\x00{question}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m recipes.tiny_agent.probes.turn_labels", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--trajectories", required=True, nargs="+", help="trajectory JSONL file(s)")
    parser.add_argument(
        "--tasks", required=True, nargs="+", help="the tasks JSONL(s) with evidence intervals"
    )
    parser.add_argument("--n-boot", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    evidence = {task_key(t.media, t.question): t.evidence for p in args.tasks for t in load_tasks_jsonl(p)}
    trajs = [t for p in args.trajectories for t in load_trajectories(p)]
    print(
        json.dumps(
            {
                **entropy_auroc(trajs, evidence, args.n_boot, args.seed),
                "evidence": evidence_reach(trajs, evidence),
                "score_by_reach": score_by_reach(trajs, evidence),
                "weights": weights_by_discovery(trajs, evidence, args.n_boot, args.seed),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
